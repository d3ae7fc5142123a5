"""The engine against the BERT-decoder composites: transformers 5.24's EncoderDecoderModel with BERT on both sides
(model_type "encoder-decoder", bert2bert), VisionEncoderDecoderModel with a frozen ViT encoder and a BERT decoder
("vision-encoder-decoder"), BlipForConditionalGeneration (a frozen BLIP vision model, BlipTextLMHeadModel's decoder
with its own eager attention: "blip") and GitForCausalLM (a frozen CLIP tower whose 197 image tokens are prefixed to
the text inside BERT post-LayerNorm layers, eager only: "git"), their training step traced on fake tensors
(tools/memtrace/bert_cross_trace.py: 2 + 2 layers, h 256, I 1024, 4 heads, dropout 0.1, s 256, b 2; full bf16-pure
with FA2's profile with and without checkpointing, LoRA on query / value (PEFT's BERT default, which also adapts the
crossattention's query and value) bf16-mixed with and without checkpointing (not BLIP / GIT: PEFT + checkpointing
raises there), full bf16-mixed eager; GIT's rows eager; fixtures in tools/memtrace/golden/bert_cross/).
Issue 20, item 3: saved activations, every component and the peak within 3 % (memory/blocks_bert_cross.py,
memory/blocks_git.py)."""
import json
import pathlib

import pytest

from tools.memtrace.compare import check_fixture
from zerocalc import Plan, estimate

GRID = pathlib.Path(__file__).resolve().parents[1] / "tools" / "memtrace" / "golden" / "bert_cross"
ROWS = sorted(GRID.glob("*.json"))
# rows the rule does not close, with their pinned saved-activation error (none today)
GAPS: dict = {}


def test_every_composite_has_its_rows():
    ids = {p.stem for p in ROWS}
    for fam in ("encdec", "vised", "blip"):
        assert {f"{fam}-full-pure-flash-s256-b2", f"{fam}-full-pure-flash-gc-s256-b2",
                f"{fam}-lora-mixed-flash-s256-b2-drop", f"{fam}-full-mixed-eager-s256-b2"} <= ids, fam
    assert {"git-full-pure-eager-s256-b2", "git-full-pure-eager-gc-s256-b2", "git-lora-mixed-eager-s256-b2-drop",
            "git-full-mixed-eager-s256-b2"} <= ids
    # BLIP and GIT under PEFT with checkpointing raise in transformers 5.24 (bert_cross_trace.rows): no such rows
    assert {"encdec-lora-mixed-flash-gc-s256-b2-drop", "vised-lora-mixed-flash-gc-s256-b2-drop"} <= ids


def _saved(path):
    """(engine, trace) saved bytes at forward end: the trace's less the loss's log-softmax (the composite's own
    CrossEntropyLoss on the logits' dtype: b·s·V·2 in bf16-pure, ·4 under autocast), which the engine books under
    logits, against the engine's saved activations, head activations and autocast's weight copies."""
    row = json.loads(path.read_text())
    plan = row["plan"]
    # GIT's loss is ForCausalLMLoss (upcast): fp32 whatever the precision
    lsm = 2 if plan["precision"] == "bf16-pure" and plan["model"]["model_type"] != "git" else 4
    t = plan["seq_len"] * plan["micro_batch_size"]
    vocab = (plan["model"].get("decoder") or plan["model"].get("text_config") or plan["model"])["vocab_size"]
    traced = row["saved_activations_forward_end"] - lsm * t * vocab
    detail = estimate(Plan.from_dict(plan)).to_dict()["per_gpu"]["detail"]
    engine = detail["saved_activations"] + detail.get("head_activations", 0) + detail.get("autocast_weight_copies", 0)
    return engine, traced


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
    from tools.memtrace.bert_cross_trace import rows  # noqa: PLC0415
    from zerocalc.memory.activations import activations  # noqa: PLC0415
    from zerocalc.memory.precision import dtypes_for  # noqa: PLC0415
    from zerocalc.model import model_from_config  # noqa: PLC0415
    row = next(r for r in rows() if r["id"] == row_id)
    plan = Plan.from_dict({k: v for k, v in row.items() if k not in ("id", "quick")})
    return activations(plan, model_from_config(row["model"]), dtypes_for(plan)).layers


def test_encoder_and_decoder_layers_by_hand():
    """modeling_bert.py BertLayer on the encdec row (h 256, I 1024, 4 heads), bf16 full training with FlashAttention-2's
    profile, b 2 x s 256 = 512 tokens, dropout 0.1. An encoder layer, per token, 16-bit: the layer input read by
    query/key/value 256, q k v 3 x 256, the attention output read by dense 256, attention.output.LayerNorm's input
    and output 2 x 256, output.LayerNorm's input 256: 8 x 256 x 2 = 4,096; GELU's input and output 2 x 1024 x 2 =
    4,096; two dropout masks 512; the fp32 logsumexp 4 x 4 = 16; two LayerNorms' mean / rstd 16: 8,736 a token =
    4,472,832. A decoder layer adds its crossattention: its query reads the attention LayerNorm's output (counted
    above: intermediate.dense's input without cross-attention), q, k, v (512 encoder states a micro-batch, as many as
    tokens) and FA2's output 4 x 256, its LayerNorm's input and output (intermediate.dense's input now) 2 x 256, all
    16-bit: 6 x 256 x 2 = 3,072; its dropout mask 256, logsumexp 16, LayerNorm stats 8: 3,352 more, 12,088 a token =
    6,189,056. The encoder states key / value read are one tensor for all decoder layers, counted outside the
    layers."""
    layers = _layers("encdec-full-pure-flash-s256-b2")
    assert layers[:2] == (512 * 8_736,) * 2
    assert layers[2:] == (512 * 12_088,) * 2


def test_vit_states_set_the_cross_attention_width():
    """vised: the ViT (224 px, patch 16) hands 197 states a sample to the crossattention: its k and v hold 2 x 197 =
    394 rows, not the decoder's 512 tokens: the decoder layer's 6,189,056 less 2 x (512 - 394) x 256 x 2 =
    120,832 bytes: 6,068,224; no encoder layers (the frozen tower keeps nothing)."""
    assert _layers("vised-full-pure-flash-s256-b2") == (6_068_224,) * 2


def test_cross_attention_adapters_counted():
    """PEFT's targets query / value hit the crossattention's too: the encdec LoRA row's adapters are (2 encoder
    layers x 2 + 2 decoder layers x 4) x r 16 x (256 + 256) = 196,608 parameters."""
    from zerocalc.memory.lora import adapter_params  # noqa: PLC0415
    from zerocalc.model import model_from_config  # noqa: PLC0415
    from tools.memtrace.bert_cross_trace import rows  # noqa: PLC0415
    row = next(r for r in rows() if r["id"] == "encdec-lora-mixed-flash-s256-b2-drop")
    plan = Plan.from_dict({k: v for k, v in row.items() if k not in ("id", "quick")})
    assert adapter_params(model_from_config(row["model"]), plan) == 12 * 16 * 512


def test_blip_layer_by_hand():
    """blip: BlipTextSelfAttention runs its own matmul / softmax / dropout whatever the plan asks, over the 577
    states of a 384 px, patch 16 image a sample (1,154 a micro-batch of 2). On the full bf16-pure flash row (h 256,
    4 heads, s 256, b 2): the encdec decoder layer's 6,189,056 bytes less its two FA2 logsumexps (2 x 4 x 4 x 512 =
    16,384; the contiguous context the dense reads stays), the cross k / v over 1,154 states, not 512: + 2 x 642 x
    256 x 2 = 657,408; the self-attention's scores 4 x 256 x 256 x 2 = 524,288 and the cross's 4 x 256 x 577 x 2 =
    1,181,696, each kept as the bf16 softmax, the dropout's bool mask and its bf16 output: 5 x 1,705,984 =
    8,529,920. 6,189,056 - 16,384 + 657,408 + 8,529,920 = 15,360,000."""
    assert _layers("blip-full-pure-flash-s256-b2") == (15_360_000,) * 2


def test_pixel_values_are_an_input():
    """The batch's pixel_values (3 x 384 x 384 an image, bf16 in bf16-pure) are alive the whole step, as input_ids
    are: 2 x 442,368 x 2 = 1,769,472 bytes outside the layers."""
    from zerocalc.memory.blocks_bert_cross import pixel_numel  # noqa: PLC0415
    from zerocalc.model import model_from_config  # noqa: PLC0415
    from tools.memtrace.bert_cross_trace import CONFIGS  # noqa: PLC0415
    assert pixel_numel(model_from_config(CONFIGS["blip"])) == 3 * 384 * 384
    assert pixel_numel(model_from_config(CONFIGS["vised"])) == 3 * 224 * 224


def test_git_layer_by_hand():
    """git: every GitLayer runs on T = 197 image tokens + 256 text tokens = 453 positions a sample (906 a micro-batch
    of 2), GitSelfAttention's own eager attention. On the full bf16-pure row (h 256, I 1024, 4 heads): per position
    the 16-bit layer input, q, k, v, the context read by dense, attention.output.LayerNorm's input and output,
    output.LayerNorm's input 8 x 256 x 2 = 4,096, GELU's input and output 2 x 1024 x 2 = 4,096, two dropout masks
    512, two LayerNorms' mean / rstd 16: 8,720 x 906 = 7,900,320; the scores 4 x 453 x 453 x 2 = 1,641,672, kept as
    the bf16 softmax, the dropout's bool mask and its bf16 output, 5 bytes each: 8,208,360. 16,108,680."""
    assert _layers("git-full-pure-eager-s256-b2") == (16_108_680,) * 2


def test_git_logits_cover_the_image_rows():
    """GitForCausalLM's output Linear runs on all 453 positions and its loss copies the text's 255 before
    ForCausalLMLoss: the forward-end logits are the bf16 (2, 453, 8000) output and the bf16 (2, 255, 8000) copy over
    what a text-only head keeps: 2 x 8000 x (2 x 197 + 2 x 255) = 14,464,000 bytes more."""
    from zerocalc.memory.logits import logits  # noqa: PLC0415
    from zerocalc.memory.inputs import effective_stack  # noqa: PLC0415
    from zerocalc.model import model_from_config  # noqa: PLC0415
    from tools.memtrace.bert_cross_trace import rows  # noqa: PLC0415
    from dataclasses import replace  # noqa: PLC0415
    row = next(r for r in rows() if r["id"] == "git-full-pure-eager-s256-b2")
    plan = Plan.from_dict({k: v for k, v in row.items() if k not in ("id", "quick")})
    arch = model_from_config(row["model"])
    git, text = (logits(plan, a, 2, effective_stack(plan)) for a in (arch, replace(arch, model_type="git-text")))
    assert git.forward_peak - text.forward_peak == 14_464_000


def test_git_tower_graph_under_checkpointing():
    """gradient_checkpointing_enable hooks GitVisionModel's patch_embedding (main_input_name "input_ids"), so the
    frozen CLIP tower (h 256, 2 layers, 197 states a sample, b 2) keeps, in bf16: the hooked patches 2 x 196 x 256,
    pre_layrnorm's input, both layers' inputs and post_layernorm's input 4 x 2 x 197 x 256, visual_projection's
    LayerNorm input 2 x 197 x 256 (x 2 bytes: 200,704 + 806,912 + 201,728) and three LayerNorms' mean / rstd
    3 x 8 x 394 = 9,456: 1,218,800 bytes."""
    from zerocalc.memory.activations import context  # noqa: PLC0415
    from zerocalc.memory.blocks_git import image_tokens, tower_graph  # noqa: PLC0415
    from zerocalc.memory.inputs import effective_stack  # noqa: PLC0415
    from zerocalc.memory.precision import dtypes_for  # noqa: PLC0415
    from zerocalc.model import model_from_config  # noqa: PLC0415
    from tools.memtrace.bert_cross_trace import rows  # noqa: PLC0415
    row = next(r for r in rows() if r["id"] == "git-full-pure-eager-gc-s256-b2")
    plan = Plan.from_dict({k: v for k, v in row.items() if k not in ("id", "quick")})
    arch = model_from_config(row["model"])
    c = context(plan, arch, dtypes_for(plan), False, effective_stack(plan))
    assert tower_graph(arch, c, image_tokens(arch)) == 1_218_800
