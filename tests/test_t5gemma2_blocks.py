"""The engine against T5Gemma 2 (transformers 5.24 modeling_t5gemma2.py T5Gemma2ForConditionalGeneration), its
training step traced on fake tensors fed text only, the SigLIP tower frozen and never run
(tools/memtrace/t5gemma2_trace.py: 2 + 2 layers, h 256, I 1024, 4 heads (2 kv), head_dim 64, sliding / full
layers, s 256, b 2, eager: the model has no FA2 path; full bf16-pure with and without checkpointing, LoRA bf16-mixed
with and without, full bf16-mixed; fixtures in tools/memtrace/golden/t5gemma2/). Issue 20, item 3: saved
activations, every component and the peak within 3 % (memory/blocks_t5gemma2.py)."""
import json
import pathlib

import pytest

from tools.memtrace.compare import check_fixture
from zerocalc import Plan
from zerocalc.memory.inputs import step_inputs

GRID = pathlib.Path(__file__).resolve().parents[1] / "tools" / "memtrace" / "golden" / "t5gemma2"
ROWS = sorted(GRID.glob("*.json"))
# rows the rule does not close, with their pinned saved-activation error (none today)
GAPS: dict = {}


def test_every_row_is_there():
    assert {p.stem for p in ROWS} == {r["id"] for r in _rows()}


def _rows():
    from tools.memtrace.t5gemma2_trace import rows  # noqa: PLC0415
    return rows()


def _saved(path):
    """(engine, trace) saved bytes at forward end: the trace's less the loss's log-softmax, which the engine books
    under logits (T5Gemma2ForConditionalGeneration's loss_type ForMaskedLM: loss_utils.py ForMaskedLMLoss upcasts,
    `logits.float()`: an fp32 log-softmax b·s·V·4 in every precision; no final softcapping in T5Gemma 2's
    configs), against what forward leaves for backward in the engine."""
    row = json.loads(path.read_text())
    plan = row["plan"]
    t = plan["seq_len"] * plan["micro_batch_size"]
    traced = row["saved_activations_forward_end"] - 4 * t * plan["model"]["decoder"]["vocab_size"]
    return step_inputs(Plan.from_dict(plan)).acts.saved_total, traced


@pytest.mark.parametrize("path", ROWS, ids=[p.stem for p in ROWS])
def test_saved_activations_within_3_percent(path):
    engine, traced = _saved(path)
    if path.stem in GAPS:
        assert round((engine - traced) / traced, 3) == GAPS[path.stem]
        return
    assert abs(engine - traced) <= 0.03 * traced, (engine / 2**20, traced / 2**20)


@pytest.mark.parametrize("path", ROWS, ids=[p.stem for p in ROWS])
def test_components_and_peak_within_3_percent(path):
    ok, table = check_fixture(json.loads(path.read_text()))
    assert ok, "\n" + table


def _layers(row_id):
    from zerocalc.memory.activations import activations  # noqa: PLC0415
    from zerocalc.memory.precision import dtypes_for  # noqa: PLC0415
    from zerocalc.model import model_from_config  # noqa: PLC0415
    row = next(r for r in _rows() if r["id"] == row_id)
    plan = Plan.from_dict({k: v for k, v in row.items() if k not in ("id", "quick")})
    return activations(plan, model_from_config(row["model"]), dtypes_for(plan)).layers


def test_merged_attention_by_hand():
    """The full bf16-pure row (t = 2 x 256 = 512 tokens, h 256, I 1024, a 4, kv 2, head_dim 64, eager). An encoder
    layer, Gemma 3's: four sandwich RMSNorms, each the fp32 upcast and the fp32 product with 1 + weight 2 x 4 x 256
    and the rsqrt 4: 2,052 a token (8,208); q_proj / k_proj / v_proj's input and gate / up's 2 x 2 x 256 = 1,024;
    q_norm (fp32 upcast and product 2 x 4 x 256, rsqrt 4 x 4) and k_norm (2 x 4 x 128, 4 x 2) 3,096; q 2 x 256,
    repeat_kv's K and V copies 2 x 2 x 256 and o_proj's input 2 x 256: 2,048; the GeGLU's gate, up, act and product
    4 x 2 x 1024 = 8,192; the fp32 softmax and its bf16 copy 6 x 4 x 256 = 6,144 a token: 28,712 x 512 =
    14,700,544. A decoder layer's T5Gemma2MergedAttention adds the encoder's 256 keys a sample: repeat_kv's copies of
    the concatenated K and V 2 x 2 x 256 a token (524,288), the softmax and its copy over them 6 x 4 x 256 x 256 x 2
    (3,145,728), k_norm over the cross keys (fp32 upcast and product 2 x 4 x 128 x 512, rsqrt 4 x 2 x 512:
    528,384): 4,198,400 more, 18,898,944. The encoder output k_proj / v_proj read (2 x 512 x 256) is one tensor for
    both decoder layers, kept outside them."""
    assert _layers("t5gemma2-full-pure-eager-s256-b2") == (14_700_544,) * 2 + (18_898_944,) * 2
