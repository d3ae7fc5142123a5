"""The engine against the BART-lineage causal decoders (BartForCausalLM, MBart-, Marian-, PegasusForCausalLM, and
Whisper-, BioGpt-, XGLM-, Blenderbot(Small)-, PLBart-, Mvp-, TrOCRForCausalLM: model/decoders.py), their real transformers 5.24 training step traced on fake tensors as AutoModelForCausalLM
(tools/memtrace/bart.py; the results in tools/memtrace/golden/bart/, `python -m tools.memtrace.bart` re-traces
them). Issue 20, item 3: the saved activations within 3 % (memory/blocks_bart.py), and every component at the peak
(tools/memtrace/compare.py) where the engine's peak is the trace's moment; misses outside the activations are
strict xfails naming why (a fix shows as XPASS)."""
import json
import pathlib

import pytest

from tools.memtrace.compare import check_fixture
from zerocalc import Plan, estimate
from zerocalc.memory.inputs import step_inputs

GRID = pathlib.Path(__file__).resolve().parents[1] / "tools" / "memtrace" / "golden" / "bart"
ROWS = sorted(GRID.glob("*.json"))
FAMILIES = ("bart", "mbart", "marian", "pegasus")
# traced beside them (issue 20): the same rows; MVP's, TrOCR's and XGLM's attention is their own eager code, so
# their rows run eager where the others run FA2 (tools/memtrace/bart.py OWN_ATTENTION)
MORE = ("whisper", "biogpt", "xglm", "blenderbot", "blenderbot-small", "plbart", "mvp", "trocr", "bigbird_pegasus")
OWN_ATTENTION = ("xglm", "mvp", "trocr")
# the causal LMs without a kept cross-attention call `self.loss_function` (modeling_biogpt.py BioGptForCausalLM,
# modeling_xglm.py XGLMForCausalLM: loss_utils.py ForCausalLMLoss, `logits = logits.float()`), so their
# log-softmax is fp32 in every precision; the others call CrossEntropyLoss on the logits as they are
UPCAST_LOSS = ("biogpt", "xglm")

_CROSS_LORA = ("PEFT's target names (q_proj ...) also match each layer's never-run encoder_attn projections "
               "(modeling_bart.py BartDecoderLayer.encoder_attn): those adapters exist (weights only: no gradient, "
               "so no optimizer state, in the trace as in a real run) and the engine does not count them (memory/"
               "lora.py adapters from the block's self-attention and fc1/fc2; model/decoders.py SUPPORT says so): "
               "4 layers x 4 x r (2 d_model) fp32 = 2 MiB at d_model 1024, over compare.py's 2 MiB floor (at d_model "
               "768 and 512, bart and marian, under it)")
KNOWN_PEAK = {f"{fam}-{row}": _CROSS_LORA for fam in ("mbart", "pegasus", "blenderbot", "bigbird_pegasus")
              for row in ("lora-mixed-flash-s1024-b2", "lora-mixed-eager-gc-s256-b2")}
KNOWN_PEAK.update({f"{fam}-{row}": _CROSS_LORA for fam in ("mvp", "trocr")
                   for row in ("lora-mixed-eager-s1024-b2", "lora-mixed-eager-gc-s256-b2")})
KNOWN_SAVED: dict[str, str] = {}
# blenderbot-400M's layer (d_model 1280, I 5120, 32 heads): the saved activations hold, but the peak is inside a
# layer's backward (the eager softmax backward; under checkpointing the recomputed layer with its fc1 gradient),
# a moment memory/phases.py does not place above the loss's backward / its recompute estimate for this width
_LAYER_BWD = ("the trace's peak is a layer-backward moment the engine does not model at blenderbot's width "
              "(saved activations within 3 %)")
KNOWN_PEAK.update({f"blenderbot-{row}": _LAYER_BWD for row in ("full-mixed-eager-s256-b2",
                                                                "full-pure-flash-gc-s1024-b2")})
KNOWN_PEAK["blenderbot-lora-mixed-eager-gc-s256-b2"] = _LAYER_BWD + "; and " + _CROSS_LORA


def test_every_family_has_its_rows():
    ids = {p.stem for p in ROWS}
    for fam in FAMILIES + MORE:
        a = "eager" if fam in OWN_ATTENTION else "flash"
        assert {f"{fam}-full-pure-{a}-s512-b2", f"{fam}-lora-mixed-{a}-s1024-b2",
                f"{fam}-full-mixed-eager-s256-b2", f"{fam}-full-pure-{a}-gc-s1024-b2",
                f"{fam}-lora-mixed-eager-gc-s256-b2"} <= ids, fam


@pytest.mark.parametrize("path", ROWS, ids=[p.stem for p in ROWS])
def test_saved_activations_within_3_percent(path, request):
    """What forward leaves for backward (the layers, around them, autocast's weight copies) against the trace's
    saved bytes at forward end, less the loss's log-softmax: *ForCausalLM.forward calls CrossEntropyLoss on the
    logits as they are (modeling_bart.py BartForCausalLM.forward, no upcast), so it is 16-bit without autocast
    and fp32 under it (cross_entropy is on autocast's fp32 list); memory/logits.py books it."""
    row = json.loads(path.read_text())
    if row["id"] in KNOWN_SAVED:
        request.applymarker(pytest.mark.xfail(strict=True, reason=KNOWN_SAVED[row["id"]]))
    plan = row["plan"]
    t = plan["seq_len"] * plan["micro_batch_size"]
    traced = row["saved_activations_forward_end"]
    upcast = plan["model"]["model_type"] in UPCAST_LOSS
    traced -= (2 if plan["precision"] == "bf16-pure" and not upcast else 4) * t * plan["model"]["vocab_size"]
    engine = step_inputs(Plan.from_dict(plan)).acts.saved_total
    assert abs(engine - traced) <= 0.03 * traced, (engine / 2**20, traced / 2**20)


MARKED = [pytest.param(p, id=p.stem, marks=[pytest.mark.xfail(strict=True, reason=KNOWN_PEAK[p.stem])]
                       if p.stem in KNOWN_PEAK else []) for p in ROWS]


@pytest.mark.parametrize("path", MARKED)
def test_components_and_peak_within_3_percent(path):
    ok, table = check_fixture(json.loads(path.read_text()))
    assert ok, "\n" + table


def _layer(fam: str, **ctx):
    from zerocalc.memory.blocks import Ctx
    from zerocalc.memory.blocks_bart import bart_layer
    from zerocalc.model import model_from_config
    from tools.memtrace.bart import CONFIGS
    arch = model_from_config(CONFIGS[fam])
    kw = dict(tokens=1024, seq=512, batch=2, e=2, res=2, autocast=False, train_base=True, adapter_bytes=2,
              dropout=0.0, attention="flash", first_layer=False)
    kw.update(ctx)
    return arch, bart_layer(arch, Ctx(**kw), arch.block_linears, ())


def test_bart_layer_by_hand():
    """facebook/bart-base's layer (post-LN, GELU, dropout 0.1), full bf16 (2 bytes), FA2, s 512, b 2: t = 1024,
    h = 768, I = 3072, 12 heads. Eight t·h tensors (q/k/v's input, q, k, v, the attention output, both norms'
    inputs, fc1's input), GELU's input and output (fc2's input), two bool dropout masks, the fp32 logsumexp and
    each LayerNorm's fp32 mean / rstd. The cross-attention is registered but never runs: nothing of it."""
    arch, got = _layer("bart")
    t, h, inner, a = 1024, 768, 3072, 12
    assert got == 8 * 2 * t * h + 2 * 2 * t * inner + 2 * t * h + 4 * a * t + 2 * 8 * t


def test_pegasus_layer_by_hand():
    """google/pegasus-large's layer (pre-LN, ReLU, activation_dropout 0.1), h = 1024, I = 4096, 16 heads, eager
    in bf16 without autocast: the ReLU keeps its output, activation_dropout a bool mask and its output (fc2's
    input); eager keeps q, K^T, V, the 16-bit softmax, attention_dropout's mask and output (2 + 1 + 2 bytes a
    score) and out_proj's contiguous input."""
    arch, got = _layer("pegasus", attention="eager", tokens=512, seq=256)
    t, h, inner, a, s, b = 512, 1024, 4096, 16, 256, 2
    scores = a * s * s * b
    # ln_sa in, q/k/v in (norm out), q, K^T, V, attention out, ln_ff in, fc1 in: 8 t·h; two residual masks
    per_h = 8 * 2 * t * h + 2 * t * h
    assert got == per_h + 5 * scores + (2 + 1 + 2) * t * inner + 2 * 8 * t


def test_cross_attention_gets_no_gradient_nor_state():
    """bart-base's layout at 4 layers, full bf16 (AdamW's two states in bf16: 4 bytes a parameter): each layer's
    never-run encoder_attn (four 768 x 768 biased projections) and its LayerNorm (768 weights and biases) get no
    gradient, so no state: 4 x (4 x (768 x 768 + 768) + 2 x 768) = 9,455,616 parameters fewer in the states."""
    from tools.memtrace.bart import rows
    plan = next(r for r in rows() if r["id"] == "bart-full-pure-flash-s512-b2")
    plan = {k: v for k, v in plan.items() if k != "id"}
    est = estimate(Plan.from_dict(plan)).to_dict()
    idle = 4 * (4 * (768 * 768 + 768) + 2 * 768)
    assert est["per_gpu"]["components"]["optimizer_states"] == 4 * (est["model"]["total_params"] - idle)


def test_xglm_layer_by_hand():
    """facebook/xglm-564M's layer (pre-LN, GELU, dropout and attention_dropout 0.1), h 1024, I 4096, 16 heads, bf16
    without autocast, s 256, b 2 (t = 512), and a plan asking FA2: XGLMAttention is its own bmm code (no attention
    interface), so it runs eager whatever the plan says. Eight t·h tensors (the norm's input and output, q, K^T, V,
    the attention output, ln_ff's input, fc1's input), two bool t·h dropout masks, GELU's input and fc2's input
    (2 t·I), the norms' fp32 mean / rstd; per score: the masked scores torch.max keeps (2), the softmax (2), the
    attention dropout's mask (1) and output (2)."""
    arch, got = _layer("xglm", tokens=512, seq=256)
    t, h, inner, a, s, b = 512, 1024, 4096, 16, 256, 2
    scores = a * s * s * b
    assert got == 8 * 2 * t * h + 2 * t * h + 2 * 2 * t * inner + 7 * scores + 2 * 8 * t


def test_bigbird_pegasus_layer_by_hand():
    """google/bigbird-pegasus-large-arxiv's decoder layer (pre-LN, gelu_new, dropout 0.1), h 1024, I 4096, 16 heads,
    full bf16, FA2, s 512, b 2 (t = 1024): eight t·h tensors (ln_sa's input, q/k/v's input, q, k, v, the output,
    ln_ff's input, fc1's input), two bool dropout masks, the fp32 logsumexp, the norms' fp32 mean / rstd; the python
    gelu_new keeps x, tanh, 1 + tanh and 0.5·x (4 x 2 bytes an element) and fc2 its output (2 bytes)."""
    arch, got = _layer("bigbird_pegasus")
    t, h, inner, a = 1024, 1024, 4096, 16
    assert got == 8 * 2 * t * h + 2 * t * h + (4 * 2 + 2) * t * inner + 4 * a * t + 2 * 8 * t
