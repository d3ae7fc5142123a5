"""The engine against NLLB-MoE (transformers 5.24 modeling_nllb_moe.py NllbMoeForConditionalGeneration), its training
step traced on fake tensors (tools/memtrace/nllb_moe_trace.py: 2 + 2 layers, d 256, ffn 1024, 4 heads, E 4, sparse
step 2 (layer 1 of each stack sparse), dropouts 0.1, moe_token_dropout 0.2, s 256, b 2, eager: the model has neither
FA2 nor SDPA; full bf16-pure with and without checkpointing, LoRA (attention projections) bf16-mixed with and
without, full bf16-mixed at expert_capacity 128 and 64; fixtures in tools/memtrace/golden/nllb_moe/). Issue 20,
item 3: saved activations, every component and the peak within 3 % (memory/blocks_nllb_moe.py)."""
import json
import pathlib

import pytest

from tools.memtrace.compare import check_fixture
from zerocalc import Plan
from zerocalc.memory.inputs import step_inputs

GRID = pathlib.Path(__file__).resolve().parents[1] / "tools" / "memtrace" / "golden" / "nllb_moe"
ROWS = sorted(GRID.glob("*.json"))
# rows the rule does not close, with their pinned saved-activation error (none today)
GAPS: dict = {}


def _rows():
    from tools.memtrace.nllb_moe_trace import rows  # noqa: PLC0415
    return rows()


def test_every_row_is_there():
    assert {p.stem for p in ROWS} == {r["id"] for r in _rows()}


def _saved(path):
    """(engine, trace) saved bytes at forward end: the trace's less the loss's log-softmax
    (NllbMoeForConditionalGeneration.forward: `CrossEntropyLoss()(lm_logits.view(-1, V), labels.view(-1))` on the
    logits' own dtype: bf16 without autocast, fp32 under it), which the engine books under logits."""
    row = json.loads(path.read_text())
    plan = row["plan"]
    t = plan["seq_len"] * plan["micro_batch_size"]
    lsm = 2 if plan["precision"] == "bf16-pure" else 4
    traced = row["saved_activations_forward_end"] - lsm * t * plan["model"]["vocab_size"]
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
    """Also the optimizer states: experts 2 and 3 never run in 5.24, take no gradient and get no AdamW state."""
    ok, table = check_fixture(json.loads(path.read_text()))
    assert ok, "\n" + table


def _layers(row_id):
    from zerocalc.memory.activations import activations  # noqa: PLC0415
    from zerocalc.memory.precision import dtypes_for  # noqa: PLC0415
    from zerocalc.model import model_from_config  # noqa: PLC0415
    row = next(r for r in _rows() if r["id"] == row_id)
    plan = Plan.from_dict({k: v for k, v in row.items() if k not in ("id", "quick")})
    return activations(plan, model_from_config(row["model"]), dtypes_for(plan)).layers


def test_sparse_layer_by_hand():
    """The full bf16-pure row (t = 2 x 256 = 512 tokens, d 256, ffn 1024, E 4). A dense NllbMoeDenseActDense keeps
    fc1's input 2 x 512 x 256 and ReLU's output (fc2's input) 2 x 512 x 1024: 1,310,720. The sparse layer's router:
    the fp32 copy the classifier reads 4 x 512 x 256 (524,288), the fp32 softmax 4 x 512 x 4 (8,192), the two int64
    one-hots 2 x 8 x 512 x 4 (32,768), the gate sums / sum / clamp 4 x 2 x 512 (4,096). Its experts run over
    n = t x E = 2,048 rows (expert_0 1,536, expert_1 512: NllbMoeExperts.forward one-hot encodes the 0/1 dispatch
    mask): torch.where's indices 2 x 8 x n (32,768), fc1's input 2 x n x 256 (1,048,576), ReLU's output
    2 x n x 1024 (4,194,304), fc2's output 2 x n x 256 (1,048,576) and the gathered weight 2 x n (4,096), the token
    dropout's mask n x 256 (524,288) and output 2 x n x 256 (1,048,576): 8,470,528 in all, 7,159,808 more than the
    dense feed-forward, in each stack's layer 1."""
    enc0, enc1, dec0, dec1 = _layers("nllb-moe-full-pure-eager-s256-b2")
    assert enc1 - enc0 == dec1 - dec0 == 8_470_528 - 1_310_720


def test_capacity_moves_rows_only():
    """expert_capacity 64 keeps half the top-1 tokens: expert_0 gets the dropped ones, the t x E rows stay."""
    assert _layers("nllb-moe-full-mixed-eager-cap64-s256-b2") == _layers("nllb-moe-full-mixed-eager-s256-b2")
