"""The engine against the encoder-decoder grid: T5, Switch Transformers, T5Gemma, SeamlessM4T(v2), M2M100 (BART's layer), FSMT, LED and PEGASUS-X, their real transformers 5.24 training step traced on
fake tensors as AutoModelForSeq2SeqLM (tools/memtrace/seq2seq.py; the results in tools/memtrace/golden/seq2seq/,
`python -m tools.memtrace.seq2seq` re-traces them; the T5 family also with the shipped dropout_rate 0.1: *drop-*). Issue 20, item 3: the saved activations and the peak within
3 %, as tests/test_family_grid.py holds the decoder families (memory/blocks_seq2seq.py). Peaks that miss for a
reason outside the activations are strict xfails naming it (a fix shows as XPASS)."""
import json
import pathlib

import pytest

from tools.memtrace.compare import check_fixture
from zerocalc import Plan
from zerocalc.memory.inputs import step_inputs

GRID = pathlib.Path(__file__).resolve().parents[1] / "tools" / "memtrace" / "golden" / "seq2seq"
ROWS = sorted(GRID.glob("*.json"))
KNOWN_SAVED: dict[str, str] = {}
# the peak's components that miss for a reason outside the blocks' activations (a strict xfail: a fix shows as XPASS)
_TIED = ("T5Config forces tie_word_embeddings = True in transformers 5.24 (configuration_t5.py __post_init__: "
         "`self.tie_word_embeddings = True`; the False of a v1.1 config only turns off the decoder-output scaling), so "
         "the tracer's model, built from the config, ties lm_head to shared; from_pretrained on a v1.1 / Flan-T5 / "
         "mT5 checkpoint, which holds both with different values, does not tie them (modeling_utils.py tie_weights: "
         "'both are present in the checkpoints with different values, so we will NOT tie them'), which is what "
         "model/classic.py t5 counts: the engine's untied lm_head, +vocab x d_model weights (and optimizer states), "
         "is the real run's")
_MOMENT = ("the peak's moment: the trace's at the loss (forward end, logits alive), the engine's at the end of "
           "backward (all gradients), 2.271 vs 2.294 GiB (+1 %): the totals hold, the components are two moments'")
KNOWN_PEAK: dict[str, str] = {
    "switch-full-mixed-eager-gc-s512-b2": _MOMENT,
    "t5v11-full-fp32-eager-s128-b8": _TIED, "t5v11-lora-fp32-eager-s128-b8": _TIED,
    "t5v11-lora-mixed-eager-s512-b2": _TIED,
    # the dropout rows on v1.1's layout (tie_word_embeddings False): the same forced tie (with the tie given to the
    # engine every one of their peaks is within 0.1 %)
    **{f"{fam}-{row}-s512-b2": _TIED for fam in ("t5v11drop", "mt5drop", "umt5drop")
       for row in ("full-pure-eager", "full-pure-eager-gc", "lora-mixed-eager", "lora-mixed-eager-gc",
                   "full-mixed-eager") if fam == "t5v11drop" or row in ("full-pure-eager", "full-pure-eager-gc",
                                                                        "lora-mixed-eager")},
}
# the peak held, its components at another attribution (test_t5_base_recompute_peak holds the peak)
KNOWN_PEAK["t5basedrop-full-pure-eager-gc-s1024-b4"] = (
    "at decoder layer 0's recompute the tied shared weight's gradient (lm_head's) waits in AccumulateGrad's input "
    "buffer, a temporary, until the encoder's embedding adds its part; the engine books it as a gradient: gradients "
    "+23.8 %, activations -2.2 %, peak +1.0 %")
DROPOUT_ROWS = {"t5basedrop-full-pure-eager-gc-s1024-b4", "switchdrop-full-mixed-eager-s512-b2",
                "switchdrop-lora-mixed-eager-s512-b2", "switchdrop-full-mixed-eager-s1024-b1"} | {f"{fam}-{row}-s512-b2" for fam in ("t5drop", "t5v11drop")
                for row in ("full-pure-eager", "full-pure-eager-gc", "lora-mixed-eager", "lora-mixed-eager-gc",
                            "full-mixed-eager")} | {f"{fam}-{row}-s512-b2" for fam in ("mt5drop", "umt5drop")
                                                    for row in ("full-pure-eager", "full-pure-eager-gc",
                                                                "lora-mixed-eager")}


def test_every_family_has_its_rows():
    ids = {p.stem for p in ROWS}
    assert {"t5-full-pure-eager-s512-b2", "t5-lora-mixed-eager-s512-b2", "t5-full-pure-eager-gc-s512-b2",
            "t5v11-full-fp32-eager-s128-b8", "t5v11-lora-fp32-eager-s128-b8", "t5v11-lora-mixed-eager-s512-b2",
            "m2m-full-pure-flash-s512-b2", "m2m-lora-mixed-flash-s512-b2", "m2m-full-pure-flash-gc-s512-b2",
            "led-full-pure-eager-s512-b2", "led-lora-mixed-eager-s512-b2", "led-full-pure-eager-gc-s512-b2",
            "pegx-full-pure-flash-s512-b2", "pegx-lora-mixed-flash-s512-b2", "pegx-full-pure-flash-gc-s512-b2",
            "t5-lora-mixed-eager-gc-s512-b2", "m2m-lora-mixed-flash-gc-s512-b2", "led-lora-mixed-eager-gc-s512-b2",
            "pegx-lora-mixed-flash-gc-s512-b2", "switch-full-mixed-eager-s512-b2", "switch-lora-mixed-eager-s512-b2",
            "switch-full-mixed-eager-s1024-b1", "switch-full-mixed-eager-gc-s512-b2",
            "t5gemma-full-pure-flash-s512-b2", "t5gemma-lora-mixed-flash-s512-b2",
            "t5gemma-full-pure-flash-gc-s512-b2", "m4t-full-pure-flash-s512-b2", "m4t-lora-mixed-flash-s512-b2",
            "m4t-full-pure-flash-gc-s512-b2", "m4tv2-full-pure-flash-s512-b2", "m4tv2-lora-mixed-flash-s512-b2",
            "m4tv2-full-pure-flash-gc-s512-b2", "fsmt-full-pure-eager-s512-b2", "fsmt-full-mixed-eager-s512-b2",
            "fsmt-lora-mixed-eager-s512-b2", "fsmt-full-fp32-eager-s256-b2", "fsmt-lora-pure-eager-s512-b2"} <= ids
    assert DROPOUT_ROWS <= ids


def _saved(row):
    traced = row["saved_activations_forward_end"]
    plan = row["plan"]
    t = plan["seq_len"] * plan["micro_batch_size"]
    # the loss's log-softmax, which the engine books under logits: the seq2seq heads call CrossEntropyLoss on the
    # 16-bit logits (modeling_t5.py T5ForConditionalGeneration.forward, modeling_bart.py
    # BartForConditionalGeneration.forward: `loss_fct(lm_logits.view(-1, ...), labels.view(-1))`, no upcast), so it is
    # bf16 without autocast and fp32 under autocast (cross_entropy is on autocast's fp32 list); FSMT's logits are
    # over its target vocabulary (modeling_fsmt.py FSMTForConditionalGeneration.forward: tgt_vocab_size)
    if plan["model"]["model_type"] == "t5gemma":
        # T5GemmaForConditionalGeneration.forward: `tanh(logits / cap) * cap` keeps the 16-bit tanh output, then
        # self.loss_function (loss_utils.py ForCausalLMLoss upcasts: an fp32 log-softmax in every precision)
        v = plan["model"]["decoder"]["vocab_size"]
        return _engine(plan), traced - (4 + (4 if plan["precision"] == "fp32" else 2)) * t * v
    m = plan["model"]
    traced -= (2 if plan["precision"] == "bf16-pure" else 4) * t * m.get("vocab_size", m.get("tgt_vocab_size"))
    return _engine(plan), traced


def _engine(plan):
    # what forward leaves for backward (the blocks, around them, autocast's weight copies), whatever the peak's moment
    return step_inputs(Plan.from_dict(plan)).acts.saved_total


@pytest.mark.parametrize("path", ROWS, ids=[p.stem for p in ROWS])
def test_saved_activations_within_3_percent(path, request):
    row = json.loads(path.read_text())
    if row["id"] in KNOWN_SAVED:
        request.applymarker(pytest.mark.xfail(strict=True, reason=KNOWN_SAVED[row["id"]]))
    engine, traced = _saved(row)
    assert abs(engine - traced) <= 0.03 * traced, (engine / 2**20, traced / 2**20)


@pytest.mark.parametrize("path", ROWS, ids=[p.stem for p in ROWS])
def test_components_and_peak_within_3_percent(path, request):
    row = json.loads(path.read_text())
    if row["id"] in KNOWN_PEAK:
        request.applymarker(pytest.mark.xfail(strict=True, reason=KNOWN_PEAK[row["id"]]))
    ok, table = check_fixture(row)
    assert ok, "\n" + table


def test_t5_blocks_by_hand():
    """t5-small's layout at 2 + 2 blocks, full bf16 (e = 2), eager, s 512, b 2: t = 1024 tokens, h = q = 512,
    I 2048, 8 heads. T5LayerNorm keeps an fp32 copy, the rsqrt, its 16-bit input and the cast: 8·t·h + 4·t;
    an attention keeps q, K^T, V and the output (4·2·t·q) and the 16-bit probabilities (2·a·s²·b); q/k/v and wi
    keep their (norm output) input 2·t·h; ReLU its output 2·t·I."""
    from zerocalc.memory.blocks import Ctx
    from zerocalc.memory.blocks_seq2seq import encoder_decoder
    from zerocalc.memory.lora import block_linears_per_layer
    from zerocalc.model import model_from_config
    from tools.memtrace.seq2seq import CONFIGS
    arch = model_from_config(CONFIGS["t5"])
    c = Ctx(tokens=1024, seq=512, batch=2, e=2, res=2, autocast=False, train_base=True, adapter_bytes=2,
            dropout=0.0, attention="eager", first_layer=False)
    ed = encoder_decoder(arch, c, c, block_linears_per_layer(arch)[0], ())
    t, h, inner, a, s, b = 1024, 512, 2048, 8, 512, 2
    norm = 8 * t * h + 4 * t
    attn = 4 * 2 * t * h + 2 * a * s * s * b
    enc = 2 * norm + 2 * 2 * t * h + attn + 2 * t * inner
    dec = 3 * norm + 3 * 2 * t * h + 2 * attn + 2 * t * inner
    assert ed.layers == (enc, enc, dec, dec)
    # the encoder's final norm, its output (read by every decoder layer), two stacks' int64 (s, s) bucket ids and
    # the decoder's input ids
    assert ed.extra == norm + 2 * t * h + 2 * 8 * s * s + 8 * t
    # the decoder's final norm and lm_head's (scaled) input
    assert ed.head == norm + 2 * t * h


def _enc_layer(fam, layer, last):
    from zerocalc.memory.blocks import Ctx
    from zerocalc.memory.blocks_seq2seq import bart_block
    from zerocalc.model import model_from_config
    from tools.memtrace.seq2seq import CONFIGS
    arch = model_from_config(CONFIGS[fam])
    c = Ctx(tokens=1024, seq=512, batch=2, e=2, res=2, autocast=False, train_base=True, adapter_bytes=2,
            dropout=0.0, attention="flash", first_layer=False)
    lins = {lin.name: lin for lin in arch.block_linears}
    return bart_block(arch, c, lins, {}, False, layer, last).total


def test_led_encoder_layer_by_hand():
    """LED's encoder layer (post-LN, GELU), full bf16 (2 bytes), s 512, b 2, h 512, 8 heads, I 2048, attention_window
    128 (w = 64 a side): query / key / value each copy the transposed input (3 t·h); the q and k chunk copies
    (s/w − 1 chunks of 2w: 2·b·(s − w)·h elements each); the fp32 softmax over (b, s, a, 2w + 1) and two bool
    (b, w, a, w + 1) masks; the padded probabilities (b·a, s/w, w, 3w + 2) and the value chunks (3·t·h); output's
    input, both norms' inputs, fc1's input (4 t·h), GELU's input and output (2 t·I), the norms' fp32 mean / rstd."""
    t, s, b, h, a, inner, w = 1024, 512, 2, 512, 8, 2048, 64
    want = (2 * 3 * t * h + 2 * 2 * 2 * b * (s - w) * h + 4 * b * s * a * (2 * w + 1) + 2 * b * w * a * (w + 1)
            + 2 * b * a * s * (3 * w + 2) + 2 * 3 * t * h + 2 * 4 * t * h + 2 * 2 * t * inner + 2 * 8 * t)
    assert _enc_layer("led", 0, False) == want


def test_pegasus_x_encoder_layers_by_hand():
    """PEGASUS-X's encoder layers (pre-LN, GELU), full bf16, s 512, b 2, h 512, 8 heads, I 2048, block B 128, G 32
    global tokens (g = G·b = 64 tokens). Tokens at sp (s, or s + B when staggered: layer 1): the norm's input and
    fc1 / final norm (3 t·h), q/k/v's input (the padded copy when staggered) and their q, k, v copies and out_proj's
    input (5 sp·b·h), GELU 2 t·I, the local softmax (b, a, sp/B, B, B + G) in 16 bits; the global tokens the same
    over g (8 g·h + 2 g·I), both cats (b, a, G + sp, d) and the global softmax (b, a, G, G + sp); LayerNorm stats
    8 bytes a token per norm. The last layer (1) keeps of its global tokens only the norm, q/k/v's input and the k
    and v copies."""
    s, b, h, a, inner, big, glob = 512, 2, 512, 8, 2048, 128, 32
    t, g = s * b, glob * b

    def tokens(sp):
        return 2 * (3 * t * h + 5 * sp * b * h + 2 * t * inner + a * b * sp * (big + glob)) + 2 * 8 * t

    full_global = 2 * (8 * g * h + 2 * g * inner + 2 * b * (glob + s) * h + a * b * glob * (glob + s)) + 2 * 8 * g
    assert _enc_layer("pegx", 0, False) == tokens(s) + full_global
    last_global = 2 * (g * h + g * h + 2 * g * h) + 8 * g
    assert _enc_layer("pegx", 1, True) == tokens(s + big) + last_global


def test_switch_rows_by_hand():
    """A balanced top-1 router over 8 experts, expert_capacity 64: s 512 gives each expert 64 tokens of a sequence,
    all kept (b 2: 1024 rows, every token); s 1024 gives 128, of which 64 are kept (b 1: 512 of 1024); s 500 gives
    experts 0-3 63 tokens and 4-7 62 (4 x 63 + 4 x 62 = 500, all under capacity)."""
    from zerocalc.memory.blocks_seq2seq import switch_rows
    assert switch_rows(512, 2, 8, 64) == 1024
    assert switch_rows(1024, 1, 8, 64) == 512
    assert switch_rows(500, 1, 8, 64) == 500
    assert switch_rows(500, 1, 8, 10) == 80


def test_switch_sparse_feed_forward_by_hand():
    """google/switch-base-8's sparse feed-forward at d_model 512, d_ff 2048, 8 experts, capacity 64, jitter 0.01,
    full bf16-mixed (fp32 weights and residual), s 1024, b 1: t = 1024 tokens, n = 512 routed rows. Router: the
    jitter's fp32 uniform (4 t·h), the classifier's 16-bit autocast input (2 t·h), fp32 softmax (4·t·8), int64
    argmax (8 t). Experts per row: two int64 indices (16), wi's 16-bit copy (2 h), ReLU's output and wo's 16-bit
    copy of its fp32 cast (2 + 2 bytes · I), wo's output (2 h), the fp32 routing weight (4) and the fp32 product
    (4 h)."""
    from zerocalc.memory.blocks import Ctx, SavedSet
    from zerocalc.memory.blocks_seq2seq import switch_sparse_mlp
    from zerocalc.model import model_from_config
    from tools.memtrace.seq2seq import CONFIGS
    arch = model_from_config(CONFIGS["switch"])
    c = Ctx(tokens=1024, seq=1024, batch=1, e=2, res=4, autocast=True, train_base=True, adapter_bytes=4,
            dropout=0.0, attention="eager", first_layer=False)
    ss = SavedSet()
    switch_sparse_mlp(ss, c, arch, "y", {lin.name: lin for lin in arch.block_linears})
    t, h, inner, n = 1024, 512, 2048, 512
    router = 4 * t * h + 2 * t * h + 4 * t * 8 + 8 * t
    rows = n * (16 + 2 * h + 4 * inner + 2 * h + 4 + 4 * h)
    assert ss.total == router + rows
    assert arch.switch["sparse"] == (False, True, False, True) * 2


def test_t5gemma_cross_attention_by_hand():
    """A T5Gemma decoder layer's cross-attention block at d 512, 8 heads, 4 KV heads, head_dim 64, full bf16 (e 2),
    FA2, s 512, b 2 (t = 1024): Gemma's RMSNorm keeps the fp32 upcast, the rsqrt and the fp32 product (8 t·h + 4 t)
    before and after; q_proj's input (2 t·h), the encoder output k_proj / v_proj read (2 t·h, one tensor), FA2's
    q (2 t·512), k and v (2 t·256 each), the output (2 t·512, o_proj's input) and the fp32 logsumexp (4·8·t)."""
    from zerocalc.memory.blocks import Ctx, SavedSet
    from zerocalc.memory.blocks_seq2seq import t5gemma_cross
    from zerocalc.model import model_from_config
    from tools.memtrace.seq2seq import CONFIGS
    arch = model_from_config(CONFIGS["t5gemma"])
    c = Ctx(tokens=1024, seq=512, batch=2, e=2, res=2, autocast=False, train_base=True, adapter_bytes=2,
            dropout=0.0, attention="flash", first_layer=False)
    ss = SavedSet()
    t5gemma_cross(ss, c, arch, {lin.name: lin for lin in arch.block_linears}, {})
    t, h = 1024, 512
    norm = 8 * t * h + 4 * t
    assert ss.items.pop("enc_out") == 2 * t * h
    assert ss.total == 2 * norm + 2 * t * h + 2 * t * 512 + 2 * 2 * t * 256 + 2 * t * 512 + 4 * 8 * t
    assert arch.t5gemma == {"encoder_layers": 2} and arch.final_softcap and arch.attn_softcap


def test_fsmt_encoder_layers_by_hand():
    """FSMT's encoder layer (facebook/wmt19-en-de's layout: post-LN, ReLU, dropout 0.2, attention_dropout 0.1) at
    h 512, 8 heads, I 2048, full bf16 (2 bytes), eager, s 512, b 2, t = 1024. Fairseq's own attention
    (modeling_fsmt.py Attention.forward) keeps q·scaling, k, v (3 t·h), the 16-bit softmax, the dropout's bool mask
    and its output (2 + 1 + 2 bytes a score), out_proj's contiguous input (t·h); the layer keeps both norms' inputs
    and fc1's input (3 t·h), ReLU's output (t·I), two bool residual-dropout masks and the norms' fp32 mean / rstd.
    q/k/v read the layer input: layer 1 one tensor (t·h), layer 0 the non-contiguous `x.transpose(0, 1)` of the
    embedding output, which each projection copies (3 t·h)."""
    t, s, b, h, a, inner = 1024, 512, 2, 512, 8, 2048
    common = 2 * 7 * t * h + 5 * a * s * s * b + 2 * t * inner + 2 * t * h + 2 * 8 * t

    def layer(i):
        from zerocalc.memory.blocks import Ctx
        from zerocalc.memory.blocks_seq2seq import bart_block
        from zerocalc.model import model_from_config
        from tools.memtrace.seq2seq import CONFIGS
        arch = model_from_config(CONFIGS["fsmt"])
        c = Ctx(tokens=t, seq=s, batch=b, e=2, res=2, autocast=False, train_base=True, adapter_bytes=2,
                dropout=0.0, attention="eager", first_layer=i == 0)
        return bart_block(arch, c, {lin.name: lin for lin in arch.block_linears}, {}, False, i, i == 1).total

    assert layer(1) == common + 2 * t * h
    assert layer(0) == common + 3 * 2 * t * h


def test_t5_dropouts_by_hand():
    """t5-small's layout with dropout_rate 0.1 (t5drop: 2 + 2 blocks, ReLU), full bf16 (e = 2), eager, s 512, b 2:
    t = 1024 tokens, h = 512, I 2048, 8 heads. Beyond the dropout-free block (test_t5_blocks_by_hand) each attention
    keeps the probabilities' bool mask and their dropped-out 16-bit copy, which matmul(probs, V) reads (1 + 2 bytes a
    score, a·s²·b scores), each sub-layer its output dropout's mask (t·h bytes; two in the encoder, three in the
    decoder), the feed-forward its hidden dropout's mask (t·I) and wo's input, now the dropout's output, a 16-bit
    tensor beside ReLU's (2·t·I). Around the blocks: each stack's embedding-dropout mask (2·t·h, the embeddings
    train), the encoder's final-dropout mask (t·h) and the decoder's (t·h, in the head)."""
    from zerocalc.memory.blocks import Ctx
    from zerocalc.memory.blocks_seq2seq import encoder_decoder
    from zerocalc.memory.lora import block_linears_per_layer
    from zerocalc.model import model_from_config
    from tools.memtrace.seq2seq import CONFIGS
    c = Ctx(tokens=1024, seq=512, batch=2, e=2, res=2, autocast=False, train_base=True, adapter_bytes=2,
            dropout=0.0, attention="eager", first_layer=False)

    def stacks(fam):
        arch = model_from_config(CONFIGS[fam])
        return encoder_decoder(arch, c, c, block_linears_per_layer(arch)[0], ())
    plain, drop = stacks("t5"), stacks("t5drop")
    t, h, inner, a, s, b = 1024, 512, 2048, 8, 512, 2
    attn = (1 + 2) * a * s * s * b
    ff = t * inner + 2 * t * inner
    assert [d - p for d, p in zip(drop.layers, plain.layers)] == [attn + 2 * t * h + ff] * 2 + \
        [2 * attn + 3 * t * h + ff] * 2
    assert drop.extra - plain.extra == 2 * t * h + t * h
    assert drop.head - plain.head == t * h


def test_t5_base_recompute_peak():
    """t5-base's layout (12 + 12 blocks, dropout 0.1) full bf16 checkpointed at s 1024, b 4: the traced peak is the
    recompute of decoder layer 0 (its last native_dropout), beside decoder layers 1-11's gradients, the encoder's
    checkpoint inputs and the position-bias recompute and gradients (memory/inputs.py decoder_bottom_terms); the
    engine's recompute_top holds it within 3 % (it was the top layer's moment, -7.1 %)."""
    from tools.memtrace.compare import compare, engine_breakdown, fixture_result
    row = json.loads((GRID / "t5basedrop-full-pure-eager-gc-s1024-b4.json").read_text())
    assert row["peak_phase"] == "recompute"
    peak = next(r for r in compare(fixture_result(row), engine_breakdown(row["plan"])) if r["name"] == "peak")
    assert peak["ok"] and abs(peak["rel"]) <= 0.03, peak


@pytest.mark.parametrize("row_id", sorted(k for k, v in KNOWN_PEAK.items() if v == _TIED))
def test_v11_rows_with_the_tracers_tie(row_id):
    """The _TIED rows given the tie the tracer's from_config model has (lm_head is shared): every component and the
    peak within 3 % (their blocks, dropouts and moments are the engine's; only the untied lm_head differs)."""
    row = json.loads((GRID / f"{row_id}.json").read_text())
    row["plan"]["model"]["tie_word_embeddings"] = True
    ok, table = check_fixture(row)
    assert ok, "\n" + table


def test_decoder_bottom_terms_by_hand():
    """t5basedrop-full-pure-eager-gc-s1024-b4 (d 768, 12 heads, d_ff 3072, 12 + 12 blocks, bf16, s 1024, b 4):
    a decoder block holds 4·768² twice (self- and cross-attention), 2·768·3072 and three norms, 9,439,488
    parameters; blocks 1-11's bf16 gradients are 11 x 2 x 9,439,488 = 207,668,736 bytes (the trace's 198.0 MiB);
    their freed checkpoint inputs 11 x 2·s·b·h = 69,206,016; layer 0's bias recompute and the bias gradients:
    8·s² + 2 x 2·a·s·2s + 2·s·b·h = 8,388,608 + 100,663,296 + 6,291,456."""
    from zerocalc.memory.inputs import decoder_bottom_terms
    row = json.loads((GRID / "t5basedrop-full-pure-eager-gc-s1024-b4.json").read_text())
    plan = Plan.from_dict(row["plan"])
    terms = {t.name: t.nbytes for t in decoder_bottom_terms(plan, step_inputs(plan))}
    assert terms == {"later_decoder_grads": 207_668_736,
                     "later_decoder_inputs_freed": 8_388_608 + 100_663_296 + 6_291_456 - 69_206_016}
