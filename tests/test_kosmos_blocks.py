"""The engine against Kosmos-2 (transformers 5.24 Kosmos2ForConditionalGeneration, model_type "kosmos-2": a frozen
CLIP-style tower and projection whose 64 latent queries overwrite the image placeholder positions of the text,
a Magneto decoder with inner_attn_ln and ffn_layernorm; eager only in its rows but one SDPA row, no FlashAttention-2)
and Kosmos-2.5 (Kosmos2_5ForConditionalGeneration, "kosmos-2.5", fed text only, and fed images (k25i rows: 64
flattened patches of a frozen tower, 64 latent queries written over positions 1 .. 64); FlashAttention-2), their
training step traced on fake tensors (tools/memtrace/kosmos_trace.py: 2 layers, h 256, ffn 1024, 4 heads, dropout 0.1,
s 256, b 2; full bf16-pure with and without checkpointing, LoRA on q/k/v/out_proj bf16-mixed with (not Kosmos-2:
PEFT + checkpointing raises there) and without checkpointing, full bf16-mixed eager; fixtures in
tools/memtrace/golden/kosmos/). Issue 20, item 3: saved activations, every component and the peak within 3 %
(memory/blocks_kosmos.py). Before the rule (the classic block of memory/blocks.py) Kosmos-2's rows were +13 % to
+32 % (full bf16-pure eager +13.2 %, SDPA +22.6 %, LoRA +32.1 %, bf16-mixed +18.0 %) and its checkpointed row
-16.6 % of the trace; Kosmos-2.5's +34.3 % (full bf16-pure flash), +10.3 % / +8.6 % (checkpointed flash / eager),
+63.3 % (LoRA), -8.3 % (LoRA checkpointed), +31.2 % (bf16-mixed eager). Fed images, before kosmos25_images (and
before Kosmos-2.5 had a tower spec, vision.images_per_sample was refused): costed as fed text, -1.6 % (full
bf16-pure flash), -1.4 % (LoRA), -1.3 % (bf16-mixed eager), and under checkpointing -43.2 % / -43.1 % (full flash /
eager), -38.8 % (LoRA) and -22.6 % (full bf16-mixed flash): the frozen tower's graph. After: every row within
+0.3 % (what remains is the text-only rows' own residual, the same bytes)."""
import json
import pathlib

import pytest

from tools.memtrace.compare import check_fixture
from zerocalc import Plan, estimate

GRID = pathlib.Path(__file__).resolve().parents[1] / "tools" / "memtrace" / "golden" / "kosmos"
ROWS = sorted(GRID.glob("*.json"))
# rows the rule does not close, with their pinned saved-activation error (none today)
GAPS: dict = {}


def test_every_model_has_its_rows():
    ids = {p.stem for p in ROWS}
    assert {"k2-full-pure-eager-s256-b2", "k2-full-pure-eager-gc-s256-b2", "k2-lora-mixed-eager-s256-b2-drop",
            "k2-full-mixed-eager-s256-b2", "k2-full-pure-sdpa-s256-b2"} <= ids
    assert {"k25-full-pure-flash-s256-b2", "k25-full-pure-flash-gc-s256-b2", "k25-lora-mixed-flash-s256-b2-drop",
            "k25-lora-mixed-flash-gc-s256-b2-drop", "k25-full-mixed-eager-s256-b2",
            "k25-full-pure-eager-gc-s256-b2"} <= ids
    assert {"k25i-full-pure-flash-s256-b2", "k25i-full-pure-flash-gc-s256-b2", "k25i-lora-mixed-flash-s256-b2-drop",
            "k25i-lora-mixed-flash-gc-s256-b2-drop", "k25i-full-mixed-eager-s256-b2",
            "k25i-full-pure-eager-gc-s256-b2", "k25i-full-mixed-flash-gc-s256-b2"} <= ids
    # Kosmos-2 under PEFT with checkpointing raises in transformers 5.24 (kosmos_trace.rows): no such row
    assert "k2-lora-mixed-eager-gc-s256-b2-drop" not in ids


def _saved(path):
    """(engine, trace) saved bytes at forward end: the trace's less the loss's fp32 log-softmax (ForCausalLMLoss
    upcasts: b·s·V·4 whatever the precision), which the engine books under logits, against the engine's saved
    activations, head activations, autocast's weight copies and (fed images) vision activations."""
    row = json.loads(path.read_text())
    plan = row["plan"]
    t = plan["seq_len"] * plan["micro_batch_size"]
    traced = row["saved_activations_forward_end"] - 4 * t * plan["model"]["text_config"]["vocab_size"]
    detail = estimate(Plan.from_dict(plan)).to_dict()["per_gpu"]["detail"]
    engine = (detail["saved_activations"] + detail.get("head_activations", 0) + detail.get("autocast_weight_copies", 0)
              + detail.get("vision_activations", 0))
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


def _row(row_id):
    from tools.memtrace.kosmos_trace import rows  # noqa: PLC0415
    row = next(r for r in rows() if r["id"] == row_id)
    return Plan.from_dict({k: v for k, v in row.items() if k not in ("id", "quick")}), row


def _layers(row_id):
    from zerocalc.memory.activations import activations  # noqa: PLC0415
    from zerocalc.memory.precision import dtypes_for  # noqa: PLC0415
    from zerocalc.model import model_from_config  # noqa: PLC0415
    plan, row = _row(row_id)
    return activations(plan, model_from_config(row["model"]), dtypes_for(plan)).layers


def test_kosmos2_layer_by_hand():
    """Kosmos2TextBlock on the k2 full bf16-pure eager row (h 256, ffn 1024, 4 heads, dropout and
    attention_dropout 0.1), b 2 x s 256 = 512 tokens. Per token, 16-bit: self_attn_layer_norm's input, its output
    (read by q/k/v_proj), eager's q, K^T and V, inner_attn_ln's input (the contiguous attention output) and output
    (read by out_proj), final_layer_norm's input and output (read by fc1): 9 x 256 x 2 = 4,608; GELU's input,
    ffn_layernorm's input (GELU's output) and output (read by fc2): 3 x 1024 x 2 = 6,144; two residual dropout
    masks 512; four LayerNorms' mean / rstd (fp32 on CUDA) 32: 11,296 x 512 = 5,783,552. The scores 4 x 256 x 256
    x 2 = 524,288, kept as the bf16 softmax, the attention dropout's bool mask and its bf16 output, 5 bytes each:
    2,621,440. 8,404,992 a layer."""
    assert 11_296 * 512 + 5 * 524_288 == 8_404_992
    assert _layers("k2-full-pure-eager-s256-b2") == (8_404_992,) * 2


def test_kosmos2_keeps_its_batch_and_mask():
    """Around the layers of the k2 full bf16-pure eager row: pixel_values (2 x 3 x 224 x 224, bf16) 602,112; the
    (2, 256) int64 image_embeds_position_mask 4,096 and index_put's bool copy 512; ids and labels 8,192; the two
    embedding dropout masks 2 x 131,072; the final layer_norm's input, stats and output (read by lm_head)
    262,144 + 4,096 + 262,144: 1,405,440 bytes. Checkpointed, every layer keeps its input and the (256, 256)
    bf16 causal mask (one tensor, expanded over the batch): 131,072."""
    from zerocalc.memory.activations import context  # noqa: PLC0415
    from zerocalc.memory.blocks_kosmos import kosmos_stacks  # noqa: PLC0415
    from zerocalc.memory.inputs import effective_stack  # noqa: PLC0415
    from zerocalc.memory.precision import dtypes_for  # noqa: PLC0415
    from zerocalc.model import model_from_config  # noqa: PLC0415
    plan, row = _row("k2-full-pure-eager-gc-s256-b2")
    arch, dt, st = model_from_config(row["model"]), dtypes_for(plan), effective_stack(plan)
    _, extra, ckpt, head = kosmos_stacks(arch, context(plan, arch, dt, True, st), context(plan, arch, dt, False, st),
                                         (), None, False)
    assert (extra, ckpt) == (0, 131_072)
    assert head == 602_112 + 4_096 + 512 + 8_192 + 2 * 131_072 + 262_144 + 4_096 + 262_144 == 1_405_440


def test_kosmos25_layer_by_hand():
    """Kosmos2_5TextBlock on the k25 full bf16-pure flash row (no inner_attn_ln; h 256, ffn 1024, 4 heads, dropout
    0.1), 512 tokens. Per token, 16-bit: self_attn_layer_norm's input and output, FA2's q, k, v and output (read by
    out_proj), final_layer_norm's input and output: 8 x 256 x 2 = 4,096; GELU's input, ffn_layernorm's input and
    output 3 x 1024 x 2 = 6,144; two dropout masks 512; three LayerNorms' mean / rstd 24; the fp32 logsumexp 4 x 4
    = 16: 10,792 x 512 = 5,525,504 a layer."""
    assert _layers("k25-full-pure-flash-s256-b2") == (10_792 * 512,) * 2 == (5_525_504,) * 2


def test_checkpointed_masks_and_hooked_embeddings():
    """Checkpointed, Kosmos-2.5 under eager keeps create_causal_mask's (2, 1, 256, 256) bf16 mask, 262,144 bytes (none
    under FA2); PEFT under checkpointing makes embed_tokens' output a leaf the graph holds (bf16, 512 x 256 x 2 =
    262,144 bytes) and keeps both embedding dropout masks (2 x 131,072): the LoRA row's head is 524,288 bytes over
    the no-checkpointing row's (whose final layer_norm keeps the same fp32 input copy and stats)."""
    from zerocalc.memory.activations import context  # noqa: PLC0415
    from zerocalc.memory.blocks_kosmos import kosmos_stacks  # noqa: PLC0415
    from zerocalc.memory.inputs import effective_stack  # noqa: PLC0415
    from zerocalc.memory.precision import dtypes_for  # noqa: PLC0415
    from zerocalc.model import model_from_config  # noqa: PLC0415

    def stacks(row_id, input_grads=False):
        plan, row = _row(row_id)
        arch, dt, st = model_from_config(row["model"]), dtypes_for(plan), effective_stack(plan)
        return kosmos_stacks(arch, context(plan, arch, dt, True, st), context(plan, arch, dt, False, st), (), None,
                             input_grads)
    assert stacks("k25-full-pure-eager-gc-s256-b2")[2] == 262_144
    assert stacks("k25-full-pure-flash-gc-s256-b2")[2] == 0
    assert stacks("k25-lora-mixed-flash-s256-b2-drop", True)[3] - stacks("k25-lora-mixed-flash-s256-b2-drop")[3] \
        == 262_144 + 2 * 131_072


def test_kosmos25_fed_images_by_hand():
    """What feeding images adds to the k25i rows (b 2, s 256: t 512; 64 patches of 2 + 768, the tower's hidden 256 and
    1 layer, 64 latent queries of e 256, 4 text heads), memory/blocks_kosmos.py kosmos25_images. Full bf16-pure
    flash: flattened_patches 2 x 64 x 770 x 2 = 197,120; the (2, 256) int64 image_embeds_position_mask 4,096;
    index_put's bool index 512; segment_emb's (2, 256) int64 index less the text-only (2, 1) one 4,096 - 16:
    205,808. LoRA bf16-mixed (nothing before the layers trains): the patches and the mask, 201,216. Checkpointed
    the frozen tower's graph, n = 128 patch rows: the hooked patch_projection output and the layer's input
    2 x 65,536, the (2, 1, 64, 64) bf16 mask 16,384, the final LayerNorm's fp32 upcast 131,072, rsqrt 512, input
    and output 2 x 65,536, normalize's norm and clamp 2 x 256; FA2 over 64 queries and 128 keys: q and the output
    2 x 65,536, k and v 2 x 131,072, logsumexp 2 x 4 x 64 x 4 = 2,048: 805,888; eager: q 65,536, V 131,072,
    the fp32 softmax 262,144 and its bf16 copy 131,072: 589,824 for the attention, 1,000,448."""
    from zerocalc.memory.blocks_kosmos import kosmos25_images  # noqa: PLC0415
    from zerocalc.model import model_from_config  # noqa: PLC0415

    def extra(row_id):
        plan, row = _row(row_id)
        return kosmos25_images(plan, model_from_config(row["model"]))
    assert extra("k25i-full-pure-flash-s256-b2") == 197_120 + 4_096 + 512 + 4_096 - 16 == 205_808
    assert extra("k25i-lora-mixed-flash-s256-b2-drop") == 197_120 + 4_096 == 201_216
    tower = 2 * 65_536 + 16_384 + 131_072 + 512 + 2 * 65_536 + 2 * 256
    assert extra("k25i-full-pure-flash-gc-s256-b2") - 205_808 == tower + 2 * 65_536 + 2 * 131_072 + 2_048 == 805_888
    assert extra("k25i-full-pure-eager-gc-s256-b2") - 205_808 == tower + 589_824 == 1_000_448
    # the LoRA row under checkpointing: PEFT's hooked embeddings make index_put keep its bool index too
    assert extra("k25i-lora-mixed-flash-gc-s256-b2-drop") == 201_216 + 512 + 805_888


def test_kosmos25_trained_tower_stays_approximate():
    """kosmos25_images models the frozen tower only: a trained one's activations are named as not modelled."""
    from zerocalc.memory.vision import plan_support  # noqa: PLC0415
    from zerocalc.model import model_from_config  # noqa: PLC0415
    plan, row = _row("k25i-full-pure-flash-s256-b2")
    arch = model_from_config(row["model"])
    assert "approximate" not in plan_support(arch, plan)
    trained = Plan.from_dict({**{k: v for k, v in row.items() if k not in ("id", "quick")},
                              "vision": {"images_per_sample": 1, "tokens_per_sample": 64, "trainable": "full"}})
    assert "activations approximate" in plan_support(arch, trained)
