"""The engine against the BERT-lineage causal LMs: one small config per block variant (post-LayerNorm RoBERTa,
ERNIE, BertGeneration; ELECTRA's projected embeddings; BigBird's and RoFormer's own eager attention; the pre-LayerNorm
RoBERTa-PreLayerNorm, XLM-RoBERTa-XL and Megatron-BERT; RemBERT's mapped embeddings and wider head, RoCBert's
concatenated input embeddings; XLM's own MultiHeadAttention; X-MOD's language adapters), their transformers 5.24 *ForCausalLM training step
(is_decoder) traced on fake tensors (tools/memtrace/bert.py; fixtures in tools/memtrace/golden/bert/, `python -m
tools.memtrace.bert` re-traces them). Issue 20, item 3: saved activations, every component and the peak within 3 %
(memory/blocks_bert.py)."""
import json
import pathlib

import pytest

from tools.memtrace.compare import check_fixture
from zerocalc import Plan, estimate

GRID = pathlib.Path(__file__).resolve().parents[1] / "tools" / "memtrace" / "golden" / "bert"
ROWS = sorted(GRID.glob("*.json"))


def test_every_variant_has_its_four_rows():
    ids = {p.stem for p in ROWS}
    assert {"xlm-full-pure-flash-s512-b2", "xlm-lora-mixed-flash-s512-b2-drop", "xlm-full-mixed-eager-s256-b2"} <= ids
    for fam in ("roberta", "camembert", "xlmr", "data2vec", "prelayernorm", "roformer", "electra", "ernie", "bertgen",
                "bigbird", "megatron", "xlmrxl", "rembert", "rocbert", "xmod"):
        assert {f"{fam}-full-pure-flash-s512-b2", f"{fam}-lora-mixed-flash-s512-b2-drop",
                f"{fam}-full-mixed-eager-s256-b2", f"{fam}-full-pure-flash-gc-s512-b2"} <= ids, fam
    assert "roberta-lora-mixed-flash-gc-s512-b2" in ids


@pytest.mark.parametrize("path", ROWS, ids=[p.stem for p in ROWS])
def test_saved_activations_within_3_percent(path):
    """The trace's saved bytes at forward end (less the loss's fp32 log-softmax, b·s·V·4, which the engine books
    under logits; XLM's XLMPredLayer keeps it in the logits' 16 bits without autocast, b·s·V·2) against the engine's
    saved activations, head activations and autocast's weight copies."""
    row = json.loads(path.read_text())
    plan = row["plan"]
    lsm = 2 if plan["model"]["model_type"] == "xlm" and plan["precision"] == "bf16-pure" else 4
    t = plan["seq_len"] * plan["micro_batch_size"]
    traced = row["saved_activations_forward_end"] - lsm * t * plan["model"]["vocab_size"]
    detail = estimate(Plan.from_dict(plan)).to_dict()["per_gpu"]["detail"]
    engine = detail["saved_activations"] + detail.get("head_activations", 0) + detail.get("autocast_weight_copies", 0)
    assert abs(engine - traced) <= 0.03 * traced, (engine / 2**20, traced / 2**20)


@pytest.mark.parametrize("path", ROWS, ids=[p.stem for p in ROWS])
def test_components_and_peak_within_3_percent(path):
    ok, table = check_fixture(json.loads(path.read_text()))
    assert ok, "\n" + table


def _layers(row_id):
    from tools.memtrace.bert import rows  # noqa: PLC0415
    from zerocalc.memory.activations import activations  # noqa: PLC0415
    from zerocalc.memory.precision import dtypes_for  # noqa: PLC0415
    from zerocalc.model import model_from_config  # noqa: PLC0415
    row = next(r for r in rows() if r["id"] == row_id)
    plan = Plan.from_dict({k: v for k, v in row.items() if k not in ("id", "quick")})
    return activations(plan, model_from_config(row["model"]), dtypes_for(plan)).layers


def test_roberta_layer_by_hand():
    """modeling_roberta.py RobertaLayer (the BertLayer) on the roberta row (h 768, I 3072, 12 heads), bf16 full training
    with FlashAttention-2's profile, b 2 x s 512 = 1024 tokens, dropout 0.1. Per token, 16-bit: the layer input read
    by query/key/value 768, q k v 3 x 768, the attention output read by dense 768, attention.output.LayerNorm's input
    768 and output (intermediate.dense's input) 768, GELU's input and output 2 x 3072, output.LayerNorm's input 768:
    (8 x 768 + 2 x 3072) x 2 = 24,576 bytes; two dropout masks 2 x 768 = 1,536; the fp32 logsumexp 4 x 12 = 48;
    two LayerNorms' fp32 mean and rstd 16: 26,176 bytes per token = 26,804,224."""
    assert _layers("roberta-full-pure-flash-s512-b2")[1] == 1024 * 26_176


def test_roformer_runs_its_own_eager_attention():
    """modeling_roformer.py RoFormerSelfAttention computes matmul / softmax / dropout whatever attn_implementation
    says: on the roformer row (as roberta's, 12 heads, s 512, b 2) the flash plan keeps a·s²·b = 6,291,456 scores
    in bf16 softmax, bf16 dropout output and a bool mask: 5 bytes each = 31,457,280 over the BERT layer's flash
    set, without the logsumexp (49,152): 26,804,224 - 49,152 + 31,457,280 = 58,212,352."""
    assert _layers("roformer-full-pure-flash-s512-b2")[1] == 58_212_352


def test_xlm_layer_by_hand():
    """modeling_xlm.py on the xlm row (emb_dim 1024, 8 heads, FFN 4096, causal), bf16 full training, b 2 x s 512 =
    1024 tokens: per token (8 x 1024 + 2 x 4096) x 2 = 32,768 bytes of 16-bit tensors (the layer input, q / sqrt(d),
    the cache's k and v, the context, layer_norm1's input and output, GELU in/out, layer_norm2's input) + two
    dropout masks 2,048 + two LayerNorms' mean / rstd 16 = 34,832 x 1024 = 35,667,968; the scores a·s²·b = 4,194,304
    x (4 fp32 softmax + 2 dropout output + 1 mask) = 29,360,128; the (b, 1, s, s) bool mask 524,288: 65,552,384."""
    assert _layers("xlm-full-pure-flash-s512-b2")[1] == 65_552_384


def test_xmod_layer_by_hand():
    """modeling_xmod.py XmodLayer on the xmod row (RoBERTa's layer, h 768, I 3072, 12 heads, adapter bottleneck
    768 // 2 = 384), bf16 full training with FlashAttention-2's profile, b 2 x s 512 = 1024 tokens, dropout 0.1:
    the RoBERTa layer's 26,176 bytes per token (test_roberta_layer_by_hand) and XmodOutput.lang_adapter's: the
    language's rows copied by the index and read by dense1 768, GELU's input and output 2 x 384, all 16-bit:
    (768 + 768) x 2 = 3,072; the adapter dropout's mask 768; the second output.LayerNorm's input 768 x 2 = 1,536
    and its mean / rstd 8: 5,384 more, 31,560 per token = 32,317,440."""
    assert _layers("xmod-full-pure-flash-s512-b2")[1] == 1024 * 31_560
