"""The engine against the image-to-text encoder-decoders, their vision side frozen (vision.trainable's default):
transformers 5.24's Florence2ForConditionalGeneration (a DaViT tower and projector whose image features are
scattered into a BART encoder's input at the image_token_id placeholders: "florence2") and
Pix2StructForConditionalGeneration (a frozen vision encoder over flattened patches, a T5-style text decoder:
"pix2struct") and UdopForConditionalGeneration (T5 stacks, the encoder over the text tokens and the page image's
patch embeddings with 2-D layout embeddings and biases: "udop"), their training step traced on fake tensors
(tools/memtrace/vision_seq2seq_trace.py: 2 + 2 layers, h 256, ffn 1024, 4 heads, dropout 0.1, s 256, b 2; full
bf16-pure with FA2's profile with and without checkpointing, LoRA bf16-mixed with and without checkpointing, full
bf16-mixed eager; Pix2Struct and UDOP eager only, Pix2Struct without checkpointing (transformers refuses it), UDOP
without LoRA + checkpointing (it raises); fixtures in tools/memtrace/golden/vision_seq2seq/). Issue 20, item 3:
saved activations, every component and the peak within 3 % (memory/blocks_vision_seq2seq.py)."""
import json
import pathlib

import pytest

from tools.memtrace.compare import check_fixture, compare, engine_breakdown, fixture_result
from zerocalc import Plan

GRID = pathlib.Path(__file__).resolve().parents[1] / "tools" / "memtrace" / "golden" / "vision_seq2seq"
ROWS = sorted(GRID.glob("*.json"))
# rows the rules do not close, with their pinned saved-activation error (rounded to 0.001), and why
GAPS: dict = {}
SUFFIXES = {"florence2": ("full-pure-flash-s256-b2", "full-pure-flash-gc-s256-b2", "lora-mixed-flash-s256-b2-drop",
                          "lora-mixed-flash-gc-s256-b2-drop", "full-mixed-eager-s256-b2"),
            # Pix2StructPreTrainedModel has no gradient-checkpointing support (gradient_checkpointing_enable raises)
            "pix2struct": ("full-pure-eager-s256-b2", "lora-mixed-eager-s256-b2-drop", "full-mixed-eager-s256-b2"),
            # UDOP under PEFT with checkpointing raises in transformers 5.24 (vision_seq2seq_trace.NO_PEFT_CKPT)
            "udop": ("full-pure-eager-s256-b2", "full-pure-eager-gc-s256-b2", "lora-mixed-eager-s256-b2-drop",
                     "full-mixed-eager-s256-b2")}
# rows whose peak the engine does not close, with their pinned peak error (rounded to 0.001), and why
# (udop-full-pure-eager-gc: its peak, decoder layer 0's recompute beside layer 1's gradients, is held by memory/inputs.py
# decoder_bottom_terms: -4.5 % -> +1.7 %)
PEAK_GAPS: dict = {}
# rows whose peak the engine holds (within 3 %) but whose components it compares at another moment, and why
MOMENT: dict = {
    "pix2struct-full-mixed-eager-s256-b2": "the trace's forward peak (inside the loss, which Pix2StructTextModel runs "
    "before returning: its position biases and masks still alive) and its loss-backward peak are 0.3 % apart; the "
    "engine's loss_bwd moment holds the peak (-0.1 %) with the backward's logits, the trace's the forward's"}
# each family's loss: its log-softmax's bytes an element (ForCausalLMLoss upcasts; a CrossEntropyLoss on the
# logits keeps the logits' dtype without autocast)
UPCAST = {"florence2": True, "pix2struct": False, "udop": False}


def test_every_family_has_its_rows():
    ids = {p.stem for p in ROWS}
    for fam in UPCAST:
        assert {f"{fam}-{x}" for x in SUFFIXES[fam]} <= ids, fam


def _saved(path):
    """(engine, trace) saved bytes at forward end: the trace's less the loss's log-softmax (which the engine books
    under logits), against the engine's saved activations, head activations and autocast's weight copies."""
    row = json.loads(path.read_text())
    plan = row["plan"]
    fam = plan["model"]["model_type"]
    lsm = 4 if UPCAST[fam] or plan["precision"] != "bf16-pure" else 2
    t = plan["seq_len"] * plan["micro_batch_size"]
    vocab = (plan["model"].get("text_config") or plan["model"])["vocab_size"]
    traced = row["saved_activations_forward_end"] - lsm * t * vocab
    # the forward-end state (the estimate's detail is the peak phase's: a recompute top's less what it has consumed)
    from zerocalc.memory.activations import activations  # noqa: PLC0415
    from zerocalc.memory.precision import dtypes_for  # noqa: PLC0415
    from zerocalc.model import model_from_config  # noqa: PLC0415
    p = Plan.from_dict(plan)
    acts = activations(p, model_from_config(plan["model"]), dtypes_for(p))
    return acts.stack_saved + acts.head_saved + acts.autocast_weight_copies, traced


@pytest.mark.parametrize("path", ROWS, ids=[p.stem for p in ROWS])
def test_saved_activations_within_3_percent(path):
    engine, traced = _saved(path)
    if path.stem in GAPS:
        assert round((engine - traced) / traced, 3) == GAPS[path.stem]
        return
    assert abs(engine - traced) <= 0.03 * traced, (engine / 2**20, traced / 2**20)


@pytest.mark.parametrize("path", ROWS, ids=[p.stem for p in ROWS])
def test_components_and_peak_within_3_percent(path):
    if path.stem in GAPS:
        pytest.skip("pinned in GAPS")
    row = json.loads(path.read_text())
    if path.stem in PEAK_GAPS:
        res, eng = fixture_result(row), engine_breakdown(row["plan"])
        peak = next(r for r in compare(res, eng) if r["name"] == "peak")
        assert round(peak["rel"], 3) == PEAK_GAPS[path.stem][0], peak
        return
    if path.stem in MOMENT:
        res, eng = fixture_result(row), engine_breakdown(row["plan"])
        peak = next(r for r in compare(res, eng) if r["name"] == "peak")
        assert peak["ok"], peak
        return
    ok, table = check_fixture(row)
    assert ok, "\n" + table


def _row(row_id):
    from tools.memtrace.vision_seq2seq_trace import rows  # noqa: PLC0415
    from zerocalc.model import model_from_config  # noqa: PLC0415
    row = next(r for r in rows() if r["id"] == row_id)
    plan = Plan.from_dict({k: v for k, v in row.items() if k not in ("id", "quick")})
    return plan, model_from_config(row["model"])


def _layers(row_id):
    from zerocalc.memory.activations import activations  # noqa: PLC0415
    from zerocalc.memory.precision import dtypes_for  # noqa: PLC0415
    plan, arch = _row(row_id)
    return activations(plan, arch, dtypes_for(plan)).layers


def test_florence2_image_inputs_by_hand():
    """Florence-2's batch beyond the text: the pixel_values of a 384 px image (3 x 384 x 384, bf16 in bf16-pure) for
    b 2: 2 x 442,368 x 2 = 1,769,472 bytes, and masked_scatter's bool mask over the b x s = 512 embeddings (they
    train): 512 bytes; 1,769,984. The tower's grid after its 4-2-2-2 strided convs is 12 x 12: 145 image tokens a
    sample, placeholders inside the 256 of seq_len."""
    from zerocalc.memory.activations import context  # noqa: PLC0415
    from zerocalc.memory.blocks_vision_seq2seq import florence2_inputs  # noqa: PLC0415
    from zerocalc.memory.inputs import effective_stack  # noqa: PLC0415
    from zerocalc.memory.precision import dtypes_for  # noqa: PLC0415
    from tools.memtrace.vision_seq2seq_trace import image_tokens  # noqa: PLC0415
    plan, arch = _row("florence2-full-pure-flash-s256-b2")
    c = context(plan, arch, dtypes_for(plan), False, effective_stack(plan))
    assert florence2_inputs(arch, c, False) == 1_769_984
    assert image_tokens("florence2") == 145


def test_florence2_layers_are_bart_layers():
    """The BART encoder layer on the full bf16-pure FA2 row (h 256, ffn 1024, 4 heads, 512 tokens, dropout 0.1,
    post-LN: q/k/v read the layer input), per token, 16-bit: the layer input 256, q, k, v and FA2's output (read
    by out_proj) 4 x 256, self_attn_layer_norm's input and output (fc1's input) 2 x 256, GELU's input and fc2's
    input 2 x 1024, final_layer_norm's input 256: (8 x 256 + 2 x 1024) x 2 = 8,192; the fp32 logsumexp 4 x 4 = 16;
    two dropout masks 512; two LayerNorms' mean / rstd 16: 8,736 a token = 4,472,832. A decoder layer adds the
    encoder_attn block: its q_proj reads the LayerNorm output (kept above), k_proj / v_proj read the encoder output
    (one tensor for all layers, outside), q, k, v, output 4 x 256, its LayerNorm's input and output 2 x 256, all
    16-bit: 3,072; a dropout mask 256, logsumexp 16, LayerNorm stats 8: 12,088 a token = 6,189,056."""
    assert _layers("florence2-full-pure-flash-s256-b2") == (4_472_832,) * 2 + (6_189_056,) * 2


def test_pix2struct_decoder_layer_by_hand():
    """Pix2StructTextBlock on the full bf16-pure row (h 256, d_ff 1024, 4 heads, s 256, b 2 = 512 tokens, dropout
    0.1, eager): T5's decoder block (memory/blocks_seq2seq.py t5_block) plus its dropouts. Per token: three T5 norms
    each keep their input's fp32 copy 4 x 256, rsqrt 4, and 16-bit their input, the cast (kept by the weight's mul)
    and the product (read by the next linears) 3 x 256 x 2: 3 x 2,564 = 7,692; the two attentions' q, kᵀ, v (the
    cross's k / v over the 512 patch states) and the contiguous output read by `output` 2 x 4 x 256 x 2 = 4,096;
    gelu_new's x, tanh, 1 + tanh and 0.5·x 4 x 1024 x 2 = 8,192, its output, wi_1's output and the product (wo's
    input, after the dropout) 3 x 1024 x 2 = 6,144; the masks of three residual dropouts 3 x 256 and of the
    product's 1024: 1,792: 27,916 x 512 = 14,292,992. The scores, 4 heads x 256 x 256 a sample, 524,288 a
    micro-batch: each attention's softmax and dropout output (2 bytes each) and mask (1): 5 x 524,288 = 2,621,440
    for each of the two: 5,242,880. 19,535,872 a layer (the frozen encoder's output that the cross key / value read
    is one tensor, outside the layers)."""
    assert _layers("pix2struct-full-pure-eager-s256-b2") == (19_535_872,) * 2


def test_pix2struct_cross_attention_adapters_counted():
    """PEFT's targets query / value hit the encoder_decoder_attention's too: 2 layers x 4 adapters x r 16 x (256 +
    256) = 65,536 parameters."""
    from zerocalc.memory.lora import adapter_params  # noqa: PLC0415
    plan, arch = _row("pix2struct-lora-mixed-eager-s256-b2-drop")
    assert adapter_params(arch, plan) == 8 * 16 * 512


def test_udop_layers_by_hand():
    """UDOP on the full bf16-pure row (h 256, d_ff 1024, ReLU, 4 heads, dropout 0.1, eager, b 2): the encoder runs on
    T = 256 text tokens + 196 image patches (224 px / 16 px, squared) = 452 positions a sample, 904 a micro-batch.
    An encoder block, per position: two T5 norms (fp32 copy 4 x 256, rsqrt 4, 16-bit input, cast and product
    3 x 256 x 2) 2 x 2,564 = 5,128; q, kᵀ, v and the output read by o 4 x 256 x 2 = 2,048; ReLU's output and the
    dropout's (wo's input) 2 x 1024 x 2 = 4,096; the masks of two residual dropouts and the hidden one 512 + 1,024:
    12,808 x 904 = 11,578,432; the 4 x 452 x 452 scores a sample (1,634,432 a micro-batch) keep the softmax, the
    dropout's output (2 bytes each) and its mask: 8,172,160. 19,750,592. A decoder block at 512 tokens: three norms
    7,692, the self-attention's four 2,048, the cross's q and output 1,024, the MLP's 4,096, four masks 1,792:
    16,652 x 512 = 8,525,824; the cross's kᵀ and v over the 904 encoder states 2 x 904 x 256 x 2 = 925,696; the
    self scores 5 x 524,288 = 2,621,440 and the cross's 4 x 256 x 452 x 2 = 925,696 x 5 = 4,628,480: 16,701,440."""
    assert _layers("udop-full-pure-eager-s256-b2") == (19_750_592,) * 2 + (16_701_440,) * 2
