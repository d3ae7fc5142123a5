"""plan-v1 Extension 8 `vision.images_per_sample` for the Pixtral towers (Mistral 3, LightOnOCR), Cohere2
Vision's SigLIP tower with its pixel-shuffle SwiGLU projector and BLIP-2's ViT + Q-Former.

Ground truth: tests/data/vision_towers_trace.json (tools/memtrace/vision_towers.py: get_image_features on CPU
tensors, bf16, SDPA, transformers 5.24). Pixtral: h 128, I 344, 4 layers, 4 heads, 16 px patches, merge 2,
text width 256; 1-3 images of 128 x 128 (64 patches each), one of 96 x 160, vision_feature_layer -2, gradient
checkpointing, flash_attention_2 (HF's varlen glue, the kernel's saves stood in for). SigLIP: h 128, I 512,
4 layers, 4 heads, 128 px tiles of 16 px patches (64), downsample_factor 2, alignment_intermediate_size 512.
BLIP-2: a ViT of h 128, I 512, 4 layers, 4 heads, 112 px / 14 px (64 patches + the class token); a Q-Former of
H 96, I 256, 4 layers (cross-attention in layers 0 and 2), 4 heads, 8 query tokens, fp32, dropout 0; 1-3
images, gradient checkpointing. Fuyu: its patch linear (30 x 30 x 3 -> 256) over 100 patches, bf16, and fp32
under CPU autocast to bf16. GOT-OCR 2.0 (eager: it supports no SDPA): a SAM ViTDet of h 64, 4 heads, MLP 256,
4 layers (1 and 3 global), windows of 4 on a 10 x 10 grid (padded to 12), 32 neck channels, 1-2 tiles, AC, and
GOT's own widths (768, 12 heads, MLP 3072, windows of 14) on a 512 px tile. Idefics3 / SmolVLM: SigLIP layers
of h 128, I 512, 4 layers, 4 heads on 128 px crops of 16 px patches, scale_factor 2; 1-3 crops, AC. Florence-2:
DaViT of depths (1, 1, 2, 1), widths (32, 64, 96, 128), windows of 3, on 96 px (no padding) and 112 px images
(padded windows), with the attention kernels' saves stood in for as on CUDA (the cases held here), AC; its
plain-SDPA cases record CPU's fp32 math path for the channel attention and are held only as an upper bound.
Aya Vision: Cohere2 Vision's SigLIP tower (hidden_states[-1] / [-2], before post_layernorm) and its LayerNorm +
SwiGLU projector (downsample_factor 2, alignment_intermediate_size 512), 1-3 tiles, AC.
Idefics2: Idefics3's tower shape and its connector (modality_projection to a 256-wide text model of
intermediate 512; a perceiver of 8 latents, 2 layers, 4 heads of 32, 2 k/v heads), 1-3 crops, AC, flash.
Mistral Large 4: the Pixtral case's tower and projector beside a tiny MLA + MoE text model, 2 images, AC.
Video-LLaVA: a CLIP image tower (h 128, I 512, 4 layers, 4 heads, 112 px / 14 px: 64 patches + the class
token) read at layer -2 and LLaVA's projector to a 256-wide text model, 1-3 images, AC.
DeepSeek-VL: the SigLIP tower (with its attention-pooling head, whose output is replaced) and its aligner, 1-3
images, AC.
VipLLaVA: the CLIP tower of Video-LLaVA's case read at layers (-2, -4, 1) concatenated (a mix of signs, as the
default's) or at -2, its LayerNorm + GELU projector, 1-2 images, AC.
GLM-4.1V / 4.6V: Glm4vVisionModel of h 128, 4 heads, 2 blocks, out_hidden_size 256 (the blocks' MLP width),
intermediate_size 256 (the merger's), 112 px / 14 px position table, 1-2 images of 8 x 8 patches, AC, flash.
The engine must be within 3 % (the trace's LayerNorm statistics are bf16 on CPU, fp32 in the engine as on CUDA).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from zerocalc.errors import PlanError
from zerocalc.estimate import estimate
from zerocalc.memory.vision import tower_saved_bytes
from zerocalc.memory.vision_pixtral import pixtral_patches, pixtral_saved_bytes
from zerocalc.plan import Plan

TRACE = json.loads((Path(__file__).parent / "data" / "vision_towers_trace.json").read_text())
CASES = {c["id"]: c for c in TRACE["cases"]}


def tokens(case: dict) -> int:
    """The image tokens a sample's images take: (h / 32) rows of (w / 32) merged tokens, Mistral 3's processor
    ending each row with a break token; Cohere2 Vision 16 a 128 px tile (64 patches / 2^2)."""
    if case["model"] in ("cohere2_vision", "idefics3", "smolvlm", "aya_vision"):
        return 16 * case["tiles"]
    if case["model"] == "glm4v":          # each token spatial_merge_size^2 = 4 patches
        return case["tiles"] * case["grid"] ** 2 // 4
    if case["model"] in ("video_llava", "deepseek_vl", "vipllava"):
        return 64 * case["tiles"]         # the patches an image (Video-LLaVA: the class token dropped)
    if case["model"] in ("blip-2", "instructblip", "idefics2"):
        return 8 * case["tiles"]          # num_query_tokens / resampler_n_latents an image
    if case["model"] == "lfm2_vl":       # each token downsample_factor^2 = 4 patches
        return sum(r * c for r, c in case["grids"]) // 4
    if case["model"] == "qwen2_audio":   # avg_pooler halves the 64 positions of a clip
        return 32 * case["tiles"]
    if case["model"] == "voxtral":       # 4 frames stacked a token
        return 16 * case["tiles"]
    if case["model"] == "fuyu":
        return 10 * 11                    # 10 rows of 10 patches, each row ended by |NEWLINE|
    if case["model"] == "florence2":      # the last stage's grid (stride 4, then 2, 2, 2) plus the pooled token
        g = -(-case["image_size"] // 32)
        return case["tiles"] * (g * g + 1)
    if case["model"] == "got_ocr2":       # the projector's two stride-2 convs: ceil(ceil(G / 2) / 2)^2 a tile
        g = case["config"]["vision_config"]["image_size"] // 16
        return case["tiles"] * (-(-(-(-g // 2)) // 2)) ** 2
    return sum((h // 32) * (w // 32 + (case["model"] in ("mistral3", "mistral_large4"))) for h, w in case["images"])


def plan(case: dict, trainable: str = "full", **kw) -> Plan:
    images = case.get("tiles") or len(case.get("images", [None]))       # Fuyu: one image
    model = case["config"]
    if case["model"] == "florence2":     # the processor's resize, which the config does not carry
        model = {**model, "vision_config": {**model["vision_config"], "image_size": case["image_size"]}}
    return Plan.from_dict({"model": model, "framework": "single", "gpus_per_node": 1,
                           "precision": "bf16-pure", "method": "lora", "micro_batch_size": 1, "seq_len": 1024,
                           "activation_checkpointing": "full" if case.get("checkpointing") else "none",
                           "attention": "flash" if case.get("attention") == "flash_attention_2" else "sdpa",
                           "vision": {"trainable": trainable, "images_per_sample": images,
                                      "tokens_per_sample": tokens(case),
                                      **({"instruction_tokens": case["instruction"]} if "instruction" in case
                                         else {})}, **kw})


# the cases a plan can state: tiles, or images of one size (Fuyu's trace includes its weight copy: own test)
SQUARE = [cid for cid, c in CASES.items()
          if ("tiles" in c and (c["model"] != "florence2" or c.get("attention") == "flash_attention_2"))
          or (c["model"] not in ("fuyu", "florence2") and len({tuple(i) for i in c["images"]}) == 1)]


def off(got: int, case: dict) -> float:
    return abs(got / case["saved_bytes_forward_end"] - 1)


@pytest.mark.parametrize("cid", SQUARE)
def test_tower_activations_within_3_percent_of_the_trace_and_parameters_exact(cid):
    case, p = CASES[cid], plan(CASES[cid])
    assert off(tower_saved_bytes(p, p.arch, 2), case) <= 0.03, cid
    by_part = p.arch.params_by_component()
    assert by_part.get("vision", 0) + by_part["projector"] + by_part.get("audio", 0) \
        == case["tower_and_projector_params"]


def test_images_of_different_sizes_are_one_packed_sequence():
    """128 x 128 and 96 x 160: 64 + 60 = 124 patches in one sequence (the block mask 124^2, not 64^2 + 60^2)."""
    case = CASES["mistral3-i2-128x128-96x160"]
    p = plan(case)
    assert off(pixtral_saved_bytes(p.arch.tower, case["patches"], 2, False, False), case) <= 0.03


def test_pixtral_formula_by_hand():
    """One 128 x 128 image, N = 64 patches, e = 2, h 128, I 344. A layer: two RMSNorms 2 * (4*64*128 + 4*64 +
    2*2*64*128) = 131,584; rotated q, k, v and SDPA's output 4 * 2*64*128 = 65,536; logsumexp 4*4*64 = 1,024;
    the MLP 4 * 2*64*344 = 176,128: 374,272; 4 layers 1,497,088. ln_pre 4*64*128 + 4*64 + 2*64*128 = 49,408;
    cos, sin 2 * 2*64*32 = 8,192; the mask 2*64*64 = 8,192. The projector: its norm 49,408, the unfold
    2*64*128 = 16,384, the 16 merged tokens 2*16*128 = 4,096, linear_1's and GELU's outputs 2 * 2*16*256 =
    16,384. Sum 1,649,152 (traced: 1,649,156)."""
    p = plan(CASES["mistral3-i1-128x128"])
    assert tower_saved_bytes(p, p.arch, 2) == 1_649_152
    # vision_feature_layer -2: layer 4's graph dies, one layer less
    p2 = plan(CASES["mistral3-i1-128x128-layer-2"])
    assert tower_saved_bytes(p2, p2.arch, 2) == 1_649_152 - 374_272
    # flash_attention_2 keeps no mask: 2 images, N = 128, the mask 2*128*128 = 32,768 less than SDPA
    fa2 = CASES["mistral3-i2-128x128-fa2"]
    sdpa = {**fa2, "attention": "sdpa"}
    assert tower_saved_bytes(plan(sdpa), plan(sdpa).arch, 2) - tower_saved_bytes(plan(fa2), plan(fa2).arch, 2) \
        == 32_768


def test_patches_from_tokens():
    """Mistral 3: a 32 x 32 grid of merged tokens is 32 * 33 = 1,056 tokens -> 1,024 * 4 patches; two such
    images 2,112 tokens; LightOnOCR counts no breaks: 1,024 tokens -> 4,096 patches."""
    spec = {"breaks": True, "merge": 2}
    assert pixtral_patches(spec, 1_056, 1) == 4_096
    assert pixtral_patches(spec, 2_112, 2) == 4_096
    assert pixtral_patches({"breaks": False, "merge": 2}, 1_024, 1) == 4_096


def test_cohere2_vision_formula_by_hand():
    """One tile, n = 64, e = 2, h 128, I 512. A SigLIP layer 2*64*(8*128 + 2*512) + 4*4*64 + 16*64 = 264,192;
    4 layers 1,056,768; post_layernorm 2*2*64*128 + 8*64 = 33,280; the projector over 16 tokens:
    linear_1's output 2*16*512 and SiLU's output and the product 2 * 2*16*256: 32,768. 1,122,816 (traced
    1,120,516: bf16 LayerNorm statistics on CPU)."""
    p = plan(CASES["cohere2_vision-t1"])
    assert tower_saved_bytes(p, p.arch, 2) == 1_122_816


def test_frozen_keeps_nothing_and_trained_is_not_warned():
    for cid in ("mistral3-i1-128x128", "lighton_ocr-i2-128x128", "cohere2_vision-t1", "blip-2-i1", "fuyu-p100",
                "got_ocr2-t1", "idefics3-t1", "smolvlm-t2", "florence2-96px-kernel", "aya_vision-t1",
                "idefics2-t1", "mistral_large4-i2-128x128", "video_llava-i1",
                "deepseek_vl-i1", "vipllava-i1-layer-2", "glm4v-i1-8x8", "instructblip-i1-l16",
                "qwen2_audio-c1", "voxtral-c1", "lfm2_vl-i1-8x8"):
        case = CASES[cid]
        p = plan(case, trainable="frozen")
        assert tower_saved_bytes(p, p.arch, 2) == 0
        # (BLIP-2's OPT blocks are costed as the classic block: that warning stays, the tower's is gone)
        said = [w["message"] for w in estimate(plan(case)).to_dict()["warnings"] if w["id"] == "model-approximate"]
        assert not any("tower's activations" in m for m in said), (cid, said)


def test_pixtral_needs_the_image_tokens():
    case = CASES["mistral3-i1-128x128"]
    with pytest.raises(PlanError, match="tokens_per_sample"):
        Plan.from_dict({"model": case["config"], "framework": "single", "gpus_per_node": 1, "method": "lora",
                        "vision": {"trainable": "full", "images_per_sample": 1}})


def test_instructblip_formula_by_hand():
    """InstructBLIP, one image with 16 instruction tokens: the ViT as BLIP-2's (n = 65 tokens, h 128, I 512, 4
    layers: 4 * (2*65*(8*128 + 2*512) + 4*4*65 + 16*65) = 1,073,280; post_layernorm's input and statistics
    2*65*128 + 8*65 = 17,160; its output, which the cross-attentions read, 2*65*128 = 16,640). The Q-Former in bf16
    over r = 8 queries + 16 = 24 rows, H 96, I 256, 4 heads, 4 layers, cross-attention in layers 0 and 2: the
    embedding LayerNorm's input 2*24*96 + statistics 8*24 + ids 8*16 + 8*16 = 5,056; a layer's self-attention
    6*2*24*96 + 4*4*24 + 8*24 = 28,224 and FFNs 2*2*24*256 + 2*2*24*96 + 8*24 = 33,984; a cross-attention
    4*2*8*96 + 2*2*65*96 + 4*4*8 + 8*8 = 31,296; language_projection's view of the last output 2*24*96 = 4,608.
    1,073,280 + 17,160 + 16,640 + 5,056 + 4 * 62,208 + 2 * 31,296 + 4,608 = 1,428,168 (traced 1,424,776: bf16
    LayerNorm statistics on CPU). Without vision.instruction_tokens the Q-Former runs its 8 queries alone (less);
    the key on a model without InstructBLIP's Q-Former is refused naming it."""
    case = CASES["instructblip-i1-l16"]
    p = plan(case)
    assert tower_saved_bytes(p, p.arch, 2) == 1_428_168
    bare = Plan.from_dict({**p.to_dict(), "vision": {"trainable": "full", "images_per_sample": 1,
                                                      "tokens_per_sample": 8}})
    assert tower_saved_bytes(bare, bare.arch, 2) < 1_428_168
    with pytest.raises(PlanError, match="vision.instruction_tokens"):
        Plan.from_dict({**plan(CASES["blip-2-i1"]).to_dict(),
                        "vision": {"trainable": "full", "images_per_sample": 1, "instruction_tokens": 16}})


def test_qwen2_audio_and_voxtral_formula_by_hand():
    """One clip, P = 64 positions (T = 128 mel frames of 16 bins), d 128, ffn 512, 4 heads, 3 layers, e = 2. The
    front: the features' bf16 copy 2*16*128 = 4,096, conv1's and GELU's outputs 2 * 2*128*128 = 65,536, conv2's
    output 2*128*64 = 16,384. A layer 9 * 2*64*128 + 2 * 2*64*512 + 4*4*64 + 16*64 = 280,576, three 841,728.
    Qwen2-Audio's tail: avg_pooler's input 2*64*128 = 16,384, layer_norm's pooled input and the projector's input
    2 * 2*32*128 = 16,384, statistics 8*32 = 256: 960,768 (traced 959,108: bf16 LayerNorm statistics on CPU).
    Voxtral's: layer_norm's input and output 2 * 2*64*128 = 32,768, statistics 512, linear_1's and GELU's outputs
    over 16 stacked rows of the text width 256: 2 * 2*16*256 = 16,384: 977,408 (traced 975,620). Checkpointed, two
    clips: each layer keeps its input 2*128*128 = 32,768 (x 3), the front and tail as without: Qwen2-Audio
    2 * (86,016 + 33,024) + 98,304 = 336,384 (traced 336,132)."""
    for cid, want in (("qwen2_audio-c1", 960_768), ("voxtral-c1", 977_408), ("qwen2_audio-c2-ac", 336_384)):
        p = plan(CASES[cid])
        assert tower_saved_bytes(p, p.arch, 2) == want, cid


def test_lfm2_vl_formula_by_hand():
    """One 8 x 8-patch image, n = 64, e = 2, h 128, I 512, 4 heads, 3 layers, a 64-position table, factor 2 (16
    tokens), projector_hidden_size 192. The positions' fp32 interpolation weights 4*64*64 = 16,384; a SigLIP
    layer 2*64*(8*128 + 2*512) + 4*4*64 + 16*64 = 264,192, three 792,576; post_layernorm's input and statistics
    2*64*128 + 8*64 = 16,896; the gather's int64 index 8*64 = 512 and output 2*64*128 = 16,384; the projector's
    LayerNorm statistics 8*16 = 128 and output 16,384; linear_1's and GELU's outputs 2 * 2*16*192 = 12,288; the
    token mask 16: 871,568 (traced 869,716: bf16 LayerNorm statistics on CPU). Checkpointed, two images (n = 128):
    4*128*64 + 3 * 2*128*128 + (32,768 + 1,024) + 1,024 + 32,768 + 256 + 32,768 + 24,576 + 32 = 256,288 (traced
    255,652)."""
    for cid, want in (("lfm2_vl-i1-8x8", 871_568), ("lfm2_vl-i2-8x8-ac", 256_288)):
        p = plan(CASES[cid])
        assert tower_saved_bytes(p, p.arch, 2) == want, cid


def test_blip2_formula_by_hand():
    """One image: the ViT on n = 65 tokens, e = 2: a layer 2*65*(8*128 + 2*512) + 4*4*65 + 16*65 = 268,320, 4
    layers 1,073,280; post_layernorm 2*65*128 + 8*65 = 17,160; the fp32 copy 4*65*128 = 33,280. The Q-Former,
    m = 8 queries of H = 96 in fp32 (3,072 bytes a tensor): the embedding LayerNorm 64 + 3,072; a self-attention
    6*3,072 + 4*4*8 + 64 = 18,624; an FFN 2*4*8*256 + 2*3,072 + 64 = 22,592; a cross-attention 4*3,072 +
    2*4*65*96 + 128 + 64 = 62,400; 4 layers, 2 cross: 3,136 + 4*41,216 + 2*62,400 - 3,072 (the last output is
    cast, not kept) = 289,728; language_projection's bf16 input 2*8*96 = 1,536. Sum 1,414,984 (traced 1,412,648:
    bf16 LayerNorm statistics of the ViT on CPU)."""
    p = plan(CASES["blip-2-i1"])
    assert tower_saved_bytes(p, p.arch, 2) == 1_414_984
    # hidden dropout 0.1 (BLIP-2's default): a bool mask of 8*96 bytes after the embedding LayerNorm and in each
    # of the 4 self-attentions, 2 cross-attentions and 4 FFNs: 11 * 768 = 8,448 more (CUDA's native_dropout)
    case = CASES["blip-2-i1"]
    dropped = {**case, "config": {**case["config"], "qformer_config": {**case["config"]["qformer_config"],
                                                                       "hidden_dropout_prob": 0.1}}}
    assert tower_saved_bytes(plan(dropped), plan(dropped).arch, 2) == 1_414_984 + 8_448


def test_fuyu_keeps_its_patches_only_under_autocast():
    """bf16: the linear keeps the batch's own patches, no activation (traced 4 bytes). bf16-mixed: the fp32
    patches' bf16 copy, 2*100*2700 = 540,000 bytes; the trace's other 2*(256*2700 + 256) = 1,382,912 bytes are
    autocast's copies of the weight and bias, which activations.autocast_weight_copies counts."""
    pure = CASES["fuyu-p100"]
    assert tower_saved_bytes(plan(pure), plan(pure).arch, 2) == 0 and pure["saved_bytes_forward_end"] <= 16
    case = CASES["fuyu-p100-autocast"]
    p = plan(case, precision="bf16-mixed")
    assert tower_saved_bytes(p, p.arch, 2) == 540_000
    assert case["saved_bytes_forward_end"] - 2 * case["tower_and_projector_params"] - 540_000 <= 16


def test_got_ocr2_formula_by_hand():
    """One 160 px tile: a 10 x 10 grid (T = 100), h 64, 4 heads of 16, MLP 256, windows of 4 (the grid padded to
    12 x 12: Tp = 144 in 9 windows), layers 1 and 3 global, 32 neck channels, text width 128, e = 2.
    A windowed layer: layer_norm1 2*100*64 + 8*100 = 13,600; qkv's input, its output, query * scale and proj's
    input 6 * 2*144*64 = 110,592; the tables 2 * 2*4*4*16 + indices 2 * 8*16 = 1,280; one einsum copy 18,432;
    softmax fp32 + bf16 6 * 4*9*4^4 = 55,296; layer_norm2 and the MLP 2*2*100*64 + 800 + 2*2*100*256 = 128,800:
    328,000. A global layer: 13,600 + 6 * 2*100*64 = 76,800 + tables 2 * 2*10*10*16 + 2 * 8*100 = 8,000 + two
    einsum copies (a batch of one) 25,600 + 6 * 4*100^2 = 240,000 + 128,800: 492,800. The neck 2*100*64 +
    4 * 2*100*32 + 16*100 = 40,000; the projector 2*5*5*64 + 2*3*3*128 = 5,504.
    2 * 328,000 + 2 * 492,800 + 40,000 + 5,504 = 1,687,104 (traced 1,683,108: bf16 LayerNorm statistics)."""
    p = plan(CASES["got_ocr2-t1"])
    assert tower_saved_bytes(p, p.arch, 2) == 1_687_104
    # the plan's attention does not change it: GotOcr2Model has no SDPA, its attention is written out
    assert tower_saved_bytes(plan(CASES["got_ocr2-t1"], attention="flash"), p.arch, 2) == 1_687_104


def test_idefics3_formula_by_hand():
    """One 128 px crop, n = 64, e = 2, h 128, I 512: the SigLIP layers and post_layernorm as Cohere2 Vision's
    (4 * 264,192 + 33,280 = 1,090,048; the connector's pixel-shuffled copy stands where post_layernorm's output
    is counted), the crop's indexed pixels 2*3*128*128 = 98,304 and int64 position ids 8*64 = 512: 1,188,864
    (traced 1,186,564: bf16 LayerNorm statistics on CPU). SmolVLM registers the same tower and connector."""
    p = plan(CASES["idefics3-t1"])
    assert tower_saved_bytes(p, p.arch, 2) == 1_188_864
    s = plan(CASES["smolvlm-t2"])
    assert tower_saved_bytes(s, s.arch, 2) == 2 * 1_188_864


def test_florence2_formula_by_hand_and_its_cpu_sdpa_bound():
    """One 96 px image, e = 2: stage grids 24, 12, 6, 3 (T = 576, 144, 36, 9), widths 32, 64, 96, 128, heads 2, 4,
    6, 8, MLP 4x, windows of 3 (no padding). Stage 0: the LayerNorm after the conv 2*576*32 + 8*576 = 41,472; a
    spatial block 10 * 2*576*32 + 4*2*576 + 16*576 + 2 * 2*576*128 = 368,640 + 4,608 + 9,216 + 294,912 =
    677,376; a channel block 11 * 2*576*32 + 16*576 + 4*32 + 294,912 = 405,504 + 9,216 + 128 + 294,912 =
    709,760. Stage 1: the LayerNorm before the conv 2 * 2*576*32 + 8*576 = 78,336; spatial 10 * 2*144*64 +
    4*4*144 + 16*144 + 2 * 2*144*256 = 184,320 + 2,304 + 2,304 + 147,456 = 336,384; channel 11 * 2*144*64 +
    2,304 + 256 + 147,456 = 202,752 + 2,304 + 256 + 147,456 = 352,768. Stage 2 (two blocks): 2 * 2*144*64 +
    8*144 = 38,016; spatial 10 * 2*36*96 + 4*6*36 + 16*36 + 2 * 2*36*384 = 69,120 + 864 + 576 + 55,296 =
    125,856; channel 11 * 2*36*96 + 576 + 384 + 55,296 = 76,032 + 576 + 384 + 55,296 = 132,288. Stage 3:
    2 * 2*36*96 + 8*36 = 14,112; spatial 10 * 2*9*128 + 4*8*9 + 16*9 + 2 * 2*9*512 = 23,040 + 288 + 144 +
    18,432 = 41,904; channel 11 * 2*9*128 + 144 + 512 + 18,432 = 25,344 + 144 + 512 + 18,432 = 44,432. The
    projector over 10 tokens: 2*10*128 + 2*10*128 + 8*10 = 5,200. Sum 2,856,048 (traced with the kernels'
    saves 2,837,952: bf16 LayerNorm statistics on CPU)."""
    p = plan(CASES["florence2-96px-kernel"])
    assert tower_saved_bytes(p, p.arch, 2) == 2_856_048
    # gradient checkpointing changes nothing (DaViT's blocks are not GradientCheckpointingLayers: traced)
    ac = CASES["florence2-96px-kernel-ac"]
    assert ac["saved_bytes_forward_end"] == CASES["florence2-96px-kernel"]["saved_bytes_forward_end"]
    assert tower_saved_bytes(plan(ac), plan(ac).arch, 2) == 2_856_048
    # CPU's SDPA keeps the channel attention's q, k, v and scores in fp32: more than CUDA's kernels
    assert CASES["florence2-96px"]["saved_bytes_forward_end"] > 2_856_048


def test_aya_vision_formula_by_hand():
    """One 128 px tile, n = 64, e = 2, h 128, I 512: the SigLIP layers as Cohere2 Vision's, 4 * 264,192 =
    1,056,768; post_layernorm runs on hidden_states[-1] but its output is unused (nothing kept). The projector:
    pixel_shuffle's copy (the LayerNorm's input) and the LayerNorm's output (linear_1's input) 2 * 2*64*128 =
    32,768, its fp32 statistics over 16 shuffled rows 8*16 = 128, linear_1's output 2*16*512 and SiLU's output
    and the product 2 * 2*16*256: 32,768. Sum 1,122,432 (traced 1,120,324: bf16 LayerNorm statistics on CPU).
    vision_feature_layer -2 on two tiles: 3 layers run, 2 * (3 * 264,192 + 65,664) = 1,716,480. Checkpointed,
    each layer keeps its input 2*64*128: 2 * (4 * 16,384 + 65,664) = 262,400."""
    p = plan(CASES["aya_vision-t1"])
    assert tower_saved_bytes(p, p.arch, 2) == 1_122_432
    p2 = plan(CASES["aya_vision-t2-layer-2"])
    assert tower_saved_bytes(p2, p2.arch, 2) == 1_716_480
    ac = plan(CASES["aya_vision-t2-ac"])
    assert tower_saved_bytes(ac, ac.arch, 2) == 262_400


def test_idefics2_formula_by_hand():
    """One 128 px crop, n = 64, e = 2: the tower as Idefics3's, 1,188,864 (its layers, post_layernorm, the
    indexed pixels, the position ids). modality_projection (128 -> 512 -> 256): 4 * 2*64*512 = 262,144. A
    perceiver layer, H 256, L 8, 4 heads of 32, 2 k/v heads: the two latent RMSNorms 2 * (6*8*256 + 4*8) =
    24,640, the context's 6*64*256 + 4*64 = 98,560, the concatenation 2*72*256 = 36,864, q_proj's input 2*8*256
    = 4,096, q and the output 2 * 2*8*128 = 4,096, k and v 2 * 2*72*64 = 18,432, logsumexp 4*4*8 = 128, the MLP
    2*8*256 + 4 * 2*8*1024 = 69,632: 256,448; two layers 512,896; the final norm 12,320. Sum 1,976,224 (traced
    1,973,924: bf16 LayerNorm statistics on CPU). Checkpointed (two crops), only the tower's layers keep their
    inputs: 2 * (4 * 2*64*128 + 33,280 + 98,816) + 2 * (262,144 + 525,216) = 1,969,984."""
    p = plan(CASES["idefics2-t1"])
    assert tower_saved_bytes(p, p.arch, 2) == 1_976_224
    ac = plan(CASES["idefics2-t2-ac"])
    assert tower_saved_bytes(ac, ac.arch, 2) == 1_969_984


def test_mistral_large4_is_mistral3s_pixtral_tower():
    """Mistral Large 4's tower is Pixtral and its projector Mistral 3's (modeling_mistral_large4.py). Two 128 x 128
    images, N = 128 patches in one packed sequence, e = 2, h 128, I 344: a layer's RMSNorms 2 * (4*128*128 +
    4*128 + 2*2*128*128) = 263,168, q, k, v, SDPA's output 4 * 2*128*128 = 131,072, logsumexp 4*4*128 = 2,048,
    the MLP 4 * 2*128*344 = 352,256: 748,544, 4 layers 2,994,176; ln_pre 98,816, cos, sin 2 * 2*128*32 =
    16,384, the block mask 2*128*128 = 32,768; the projector's norm 98,816, the unfold 2*128*128 = 32,768, the 32
    merged tokens 2*32*128 = 8,192, linear_1's and GELU's outputs 2 * 2*32*256 = 32,768. Sum 3,314,688 (traced
    3,314,692)."""
    p = plan(CASES["mistral_large4-i2-128x128"])
    assert tower_saved_bytes(p, p.arch, 2) == 3_314_688
    assert p.arch.tower["breaks"]           # PixtralProcessor: a row-break token after each row


def test_video_llava_images_are_llavas():
    """Video-LLaVA's image path is LLaVA's (modeling_video_llava.py). One image, n = 65 tokens, e = 2, h 128,
    I 512, QuickGELU: a CLIP layer 2*65*(8*128 + 3*512) + 4*4*65 + 16*65 = 334,880; layer -2: 3 layers run,
    1,004,640; pre_layrnorm 2*65*128 + 8*65 = 17,160; the selected hidden state 2*65*128 = 16,640; GELU's and
    linear_2's inputs over the 64 patches 2 * 2*64*256 = 65,536. Sum 1,103,976 (traced 1,102,160)."""
    p = plan(CASES["video_llava-i1"])
    assert tower_saved_bytes(p, p.arch, 2) == 1_103_976


def test_deepseek_vl_formula_by_hand():
    """One image, n = 64, e = 2, h 128, I 512: the SigLIP layers 4 * 264,192 = 1,056,768; post_layernorm's input
    and output and statistics 2*2*64*128 + 8*64 = 33,280 (the head reads its output, but the head's own graph dies
    with the pooled output get_image_features replaces); DeepseekVLAligner's GELU and linear2 inputs 2 * 2*64*256
    = 65,536. Sum 1,155,584 (traced 1,153,284: bf16 LayerNorm statistics on CPU)."""
    p = plan(CASES["deepseek_vl-i1"])
    assert tower_saved_bytes(p, p.arch, 2) == 1_155_584


def test_vipllava_formula_by_hand():
    """One image, n = 65 tokens (64 patches + the class token), e = 2, h 128, I 512, QuickGELU. Layers -2, -4 and 1
    of 4: hidden_states[-2] is layer 2's output, so 3 layers run, 3 * 334,880 = 1,004,640 (a CLIP layer as
    Video-LLaVA's); pre_layrnorm 2*65*128 + 8*65 = 17,160; the projector: the concatenation of the three states
    without their class token 2*64*384 = 49,152, the LayerNorm's output as much, its statistics 8*64 = 512,
    GELU's and linear_2's inputs 2 * 2*64*256 = 65,536. Sum 1,186,152 (traced 1,184,080). At -2 alone the
    LayerNorm reads a view of the hidden state, which keeps all 65 tokens: 2*65*128 + 2*64*128 + 512 + 65,536
    after the same layers and pre_layrnorm: 1,120,872 (traced 1,118,800)."""
    p = plan(CASES["vipllava-i1-layers-2-4+1"])
    assert p.arch.tower["layers_run"] == 3 and p.arch.tower["features"] == 3
    assert tower_saved_bytes(p, p.arch, 2) == 1_186_152
    one = plan(CASES["vipllava-i1-layer-2"])
    assert tower_saved_bytes(one, one.arch, 2) == 1_120_872
    # VipLlavaConfig's default (-2, -5, -8, -11, 6) on a 24-layer CLIP: layer -2 is the deepest, 23 layers run
    cfg = {k: v for k, v in CASES["vipllava-i1-layer-2"]["config"].items() if k != "vision_feature_layer"}
    cfg["vision_config"] = {**cfg["vision_config"], "num_hidden_layers": 24}
    spec = plan({**CASES["vipllava-i1-layer-2"], "config": cfg}).arch.tower
    assert (spec["layers_run"], spec["features"]) == (23, 5)


def test_glm4v_formula_by_hand():
    """One image of 8 x 8 patches (n = 64, 16 tokens), e = 2, h 128, 4 heads, the blocks' MLP 256 wide
    (out_hidden_size), the merger's 256 (intermediate_size). A block: two RMSNorms 2 * (4*64*128 + 2*2*64*128 +
    4*64) = 131,584; qkv 2*64*384 = 49,152, rotated q and k 2 * 2*64*128 = 32,768, SDPA's output 16,384,
    logsumexp 4*4*64 = 1,024, proj's input (the per-image outputs' cat) 16,384; gate, up, product and SiLU
    4 * 2*64*256 = 131,072: 378,368; two blocks 756,736. post_conv_layernorm and post_layernorm 2 * 65,792; the
    position table's fp32 copy 4*64*128 = 32,768 and the grid 8*64 = 512; the merger over 16 tokens of 256:
    4 * 2*16*256 + 8*16 + 4 * 2*16*256 = 65,664. Sum 987,264 (traced 987,204). flash_attention_2 (two images):
    no cat copy, 2 blocks * 2*128*128 = 65,536 less than SDPA's."""
    p = plan(CASES["glm4v-i1-8x8"])
    assert tower_saved_bytes(p, p.arch, 2) == 987_264
    fa2, sdpa = plan(CASES["glm4v-i2-8x8-fa2"]), plan({**CASES["glm4v-i2-8x8-fa2"], "attention": "sdpa"})
    assert tower_saved_bytes(sdpa, sdpa.arch, 2) - tower_saved_bytes(fa2, fa2.arch, 2) == 65_536
