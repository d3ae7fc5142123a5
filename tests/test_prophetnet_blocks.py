"""The engine against ProphetNet as the engine counts it, ProphetNetForCausalLM (transformers 5.24
modeling_prophetnet.py), its training step traced on fake tensors (tools/memtrace/prophetnet_trace.py: 2 layers,
h 256, ffn 1024, 4 heads, ngram 2, 32 buckets, dropout / attention / activation dropout 0.1, vocab 8000, s 256, b 2,
eager: the model's own einsum attention; full bf16-pure with and without checkpointing, LoRA (query_proj /
value_proj) bf16-mixed with and without, full bf16-mixed; fixtures in tools/memtrace/golden/prophetnet/). Issue 20,
item 3: saved activations, every component and the peak within 3 % (memory/blocks_prophetnet.py, the ngram logits
of memory/logits.py)."""
import json
import pathlib

import pytest

from tools.memtrace.compare import check_fixture
from zerocalc import Plan
from zerocalc.memory.inputs import step_inputs

GRID = pathlib.Path(__file__).resolve().parents[1] / "tools" / "memtrace" / "golden" / "prophetnet"
ROWS = sorted(GRID.glob("*.json"))
# rows the rule does not close, with their pinned saved-activation error (none today)
GAPS: dict = {}


def _rows():
    from tools.memtrace.prophetnet_trace import rows  # noqa: PLC0415
    return rows()


def test_every_row_is_there():
    assert {p.stem for p in ROWS} == {r["id"] for r in _rows()}


def _saved(path):
    """(engine, trace) saved bytes at forward end: the trace's less the loss's fp32 log-softmax over the ngram
    predicting streams (ProphetNetForCausalLM._compute_loss: log_softmax(dtype=float32) of ngram·b·s rows), which the
    engine books under logits."""
    row = json.loads(path.read_text())
    plan = row["plan"]
    m = plan["model"]
    rows_ = m["ngram"] * plan["seq_len"] * plan["micro_batch_size"]
    traced = row["saved_activations_forward_end"] - 4 * rows_ * m["vocab_size"]
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
    """The peak is the loss's: the 16-bit ngram logits, their transposed contiguous copy, the fp32 upcast and the
    log-softmax (12 bytes a logit in bf16); the never-run cross_attn has no gradient and no optimizer state."""
    ok, table = check_fixture(json.loads(path.read_text()))
    assert ok, "\n" + table


def _layers(row_id):
    from zerocalc.memory.activations import activations  # noqa: PLC0415
    from zerocalc.memory.precision import dtypes_for  # noqa: PLC0415
    from zerocalc.model import model_from_config  # noqa: PLC0415
    row = next(r for r in _rows() if r["id"] == row_id)
    plan = Plan.from_dict({k: v for k, v in row.items() if k not in ("id", "quick")})
    return activations(plan, model_from_config(row["model"]), dtypes_for(plan)).layers


def test_ngram_layer_by_hand():
    """The full bf16-pure row: t = 512 tokens, 1 + ngram = 3 streams: T = 1,536 rows a layer, h 256, 4 heads,
    32 buckets, ffn 1024; main scores P = b·a·s·s = 524,288, predicting Q = ngram·b·a·s·2s = 2,097,152. 16-bit, per
    row of T (x 2 bytes x 256): the layer input, q / k / v's contiguous copies, relative_pos_embeddings' input
    copies, out_proj's inputs, self_attn_layer_norm's and feed_forward_layer_norm's inputs, intermediate's input:
    9 x 512 = 4,608 a row (7,077,888); the predicting streams' stacked queries (ngram·t rows), keys and values
    (2·ngram·t each): 5 x 1,024 x 2 x 256 = 2,621,440; the reshaped bucket logits 2 x 1,536 x 128 = 393,216; GELU's
    input and the activation dropout's output 2 x 2 x 1,536 x 1024 = 6,291,456 and its mask 1,572,864; the two
    output dropout masks 2 x 1,536 x 256 = 786,432; over the P + Q = 2,621,440 scores the int64 gather indices
    (8), the fp32 softmax (4), the dropout mask (1) and output (2): 15 x 2,621,440 = 39,321,600; the two
    LayerNorms' mean / rstd 2 x 8 x 1,536 = 24,576: 58,089,472 in all."""
    assert _layers("prophetnet-full-pure-eager-s256-b2") == (58_089_472,) * 2
