"""Image-to-text models with a cross-attending BERT-lineage decoder (model/vision_encdec.py), counted by hand from
transformers 5.24's modules."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from zerocalc.errors import PlanError
from zerocalc.estimate import estimate
from zerocalc.model import model_from_config
from zerocalc.plan import Plan

ROWS = {r["id"]: r for r in json.loads((Path(__file__).parent / "data" / "architectures.json").read_text())["rows"]}
# a ViT-B/16 layer: q/k/v/o (or fused qkv + projection) 4*(768*768 + 768), two LayerNorms 3072,
# fc1 768*3072 + 3072, fc2 3072*768 + 768
VIT_LAYER = 4 * (768 * 768 + 768) + 3072 + 768 * 3072 + 3072 + 3072 * 768 + 768
BERT_CROSS = 4 * (768 * 768 + 768) + 2 * 768            # a decoder layer's crossattention


def test_blip_by_hand():
    """BlipForConditionalGeneration defaults: the tower's class_embedding 768, patch conv 768*3*16*16 + 768,
    positions (384/16)² + 1 = 577 rows, 12 layers, post_layernorm 1536; the text decoder's words 30524*768,
    positions 512*768, LayerNorm 1536 (no token types), 12 layers with crossattention, head bias 30524,
    transform 768*768 + 768 + 1536; its decoder tied."""
    assert VIT_LAYER == 7_087_872
    arch = model_from_config(ROWS["default:blip"]["config"])
    tower = 768 + 768 * 768 + 768 + 577 * 768 + 12 * VIT_LAYER + 1536
    assert arch.params_by_component()["vision"] == tower == 86_090_496
    text = 30524 * 768 + 512 * 768 + 1536 + 12 * (VIT_LAYER + BERT_CROSS) + 30524 + 768 * 768 + 768 + 1536
    assert arch.total_params == tower + text == 223_971_644
    assert len(arch.layer_sizes) == 12            # the tower is outside the blocks, as composite towers are


def test_blip_ties_unless_both_configs_untie():
    """Meta builds: BlipForConditionalGeneration ties the text head unless the top-level and the text config's
    tie_word_embeddings are both false; untied adds the decoder matrix 30524*768 and its bias 30524."""
    cfg = ROWS["default:blip"]["config"]
    tied = model_from_config(cfg).total_params
    assert model_from_config({**cfg, "tie_word_embeddings": False}).total_params == tied
    both = {**cfg, "tie_word_embeddings": False, "text_config": {**cfg["text_config"], "tie_word_embeddings": False}}
    assert model_from_config(both).total_params - tied == 30524 * 768 + 30524


def test_vision_encoder_decoder_by_hand():
    """VisionEncoderDecoderConfig's defaults (no sub-configs: ViT-B/16 224 and a BERT decoder): ViTModel's
    cls_token 768, positions 197*768, patch conv 768*3*16*16 + 768, 12 layers, layernorm 1536, pooler 768*768 +
    768; BertLMHeadModel: words 30522*768, positions 512*768, token types 2*768, LayerNorm 1536, 12 layers with
    crossattention, head 30522 + 768*768 + 768 + 1536."""
    arch = model_from_config(ROWS["default:vision-encoder-decoder"]["config"])
    vit = 768 + 197 * 768 + 768 * 768 + 768 + 12 * VIT_LAYER + 1536 + 768 * 768 + 768
    bert = (30522 + 512 + 2) * 768 + 1536 + 12 * (VIT_LAYER + BERT_CROSS) + 30522 + 768 * 768 + 768 + 1536
    assert arch.total_params == vit + bert == 224_270_394
    with pytest.raises(PlanError, match="'vision-encoder-decoder'"):
        model_from_config({"model_type": "vision-encoder-decoder", "encoder": {"model_type": "donut-swin"}})


def test_vision_encoder_decoder_traced():
    """The frozen ViT + BERT decoder is traced (memory/blocks_bert_cross.py, tests/test_bert_cross_blocks.py), and
    PEFT's query / value adapters include the crossattention's (12 layers x 4 x r (768 + 768))."""
    from zerocalc.memory.lora import adapter_params  # noqa: PLC0415
    cfg = ROWS["default:vision-encoder-decoder"]["config"]
    plan = Plan.from_dict({"model": cfg, "seq_len": 256, "method": "lora", "lora": {"targets": ["query", "value"]}})
    assert "activations traced" in estimate(plan).to_dict()["model_support"]
    assert adapter_params(model_from_config(cfg), plan) == 12 * 4 * plan.lora.rank * 1536


def test_blip_traced():
    """BLIP's text decoder is traced too (tests/test_bert_cross_blocks.py), its crossattention adapters counted
    (12 layers x 4 x r x (768 + 768); BlipTextConfig's encoder_hidden_size 768)."""
    from zerocalc.memory.lora import adapter_params  # noqa: PLC0415
    cfg = ROWS["default:blip"]["config"]
    plan = Plan.from_dict({"model": cfg, "seq_len": 256, "method": "lora", "lora": {"targets": ["query", "value"]}})
    est = estimate(plan).to_dict()
    assert "activations traced" in est["model_support"]
    assert adapter_params(model_from_config(cfg), plan) == 12 * 4 * plan.lora.rank * 1536


def test_blip2_and_instructblip_by_hand():
    """Blip2Config defaults: a ViT-g tower (1408 wide, 39 layers, patch 14 at 224: 257 positions) of layers
    qkv 1408*4224 + 4224, projection 1408*1408 + 1408, two LayerNorms 5632, fc1 1408*6144 + 6144, fc2 6144*1408 +
    1408 = 25,250,176; query_tokens 32*768; the Q-Former's 12 layers each of attention 4*(768*768 + 768) + 1536 and
    the query feed-forward 768*3072 + 3072 + 3072*768 + 768 + 1536, and in layers 0, 2, ..., 10 a crossattention
    whose key/value read 1408: 2*(1408*768 + 768) + 2*(768*768 + 768) + 1536; language_projection 768*768 + 768;
    OPT-125m (tied) under language_model. InstructBLIP adds the Q-Former's word / position embeddings and
    layernorm in place of its LayerNorm, and the text feed-forward in every layer."""
    tower_layer = 1408 * 4224 + 4224 + 1408 * 1408 + 1408 + 5632 + 1408 * 6144 + 6144 + 6144 * 1408 + 1408
    assert tower_layer == 25_250_176
    ffn = 768 * 3072 + 3072 + 3072 * 768 + 768 + 1536
    cross = 2 * (1408 * 768 + 768) + 2 * (768 * 768 + 768) + 1536
    qformer = 1536 + 12 * (4 * (768 * 768 + 768) + 1536 + ffn) + 6 * cross
    assert qformer == 105_136_128 + 1536
    arch = model_from_config(ROWS["default:blip-2"]["config"])
    opt = model_from_config({**ROWS["default:blip-2"]["config"]["text_config"]}).total_params
    vision = 1408 + 1408 * 3 * 14 * 14 + 1408 + 257 * 1408 + 39 * tower_layer + 2816
    assert arch.params_by_component()["vision"] == vision
    assert arch.total_params == vision + 32 * 768 + qformer + 768 * 768 + 768 + opt == 1_216_944_384
    instruct = model_from_config(ROWS["default:instructblip"]["config"]).total_params
    assert instruct - arch.total_params == (30522 + 512) * 768 + 12 * ffn == 1_297_466_112 - 1_216_944_384


def test_git_by_hand():
    """GitForCausalLM defaults: words 30522*768, positions 1024*768, LayerNorm 1536; a CLIP ViT-B/16 tower
    (class 768, patch 768*768 without bias, 197 positions, pre/post LayerNorms, 12 layers); 6 BERT layers;
    visual_projection 768*768 + 768 + 1536; an untied output 30522*768 + 30522 (tie_word_embeddings False)."""
    arch = model_from_config(ROWS["default:git"]["config"])
    tower = 768 + 768 * 768 + 197 * 768 + 1536 + 12 * VIT_LAYER + 1536
    assert arch.params_by_component()["vision"] == tower == 85_799_424
    text = (30522 + 1024) * 768 + 1536 + 6 * VIT_LAYER
    assert arch.total_params == tower + text + 768 * 768 + 768 + 1536 + 30522 * 769 == 176_619_066
    assert len(arch.layer_sizes) == 6


def test_pix2struct_by_hand():
    """Pix2StructForConditionalGeneration defaults: the encoder's patch_projection 768*768 + 768, row and column
    embedders 2*4096*768, 12 layers of query/key/value/output 4*768*768, gated mlp 3*768*2048 and two
    weight-only norms 1536 = 7,079,424, a final norm 768; the decoder's embed_tokens 50244*768, 12 T5 blocks of
    self + cross attention 8*768*768, the gated mlp 3*768*2048 and three norms 2304 = 9,439,488 (block 0 adds
    the relative bias 32*12), final norm 768, an untied lm_head 50244*768."""
    arch = model_from_config(ROWS["default:pix2struct"]["config"])
    vision = 768 * 768 + 768 + 2 * 4096 * 768 + 12 * (4 * 768 * 768 + 3 * 768 * 2048 + 1536) + 768
    assert arch.params_by_component()["vision"] == vision
    text = 2 * 50244 * 768 + 12 * (8 * 768 * 768 + 3 * 768 * 2048 + 2304) + 384 + 768
    assert arch.total_params == vision + text == 282_285_696


def test_kosmos_2_and_2_5_by_hand():
    """Kosmos-2 defaults: a CLIP-L/14 tower (class 1024, patch 1024*3*14*14, 257 positions, pre/post norms, 24
    layers of 4*(1024*1024 + 1024) + 2*1024*4096 + 4096 + 1024 + 4096 = 12,596,224); the projection's latent_query
    64*2048, dense 1024*2048 + 2048, x_attn 4*(2048*2048 + 2048); the text decoder's embed_tokens 65037*2048 and 24
    sub-LN layers of 4*(2048*2048 + 2048) + inner / self-attention norms 8192 + fc1 2048*8192 + 8192 + fc2
    8192*2048 + 2048 + ffn_layernorm 16384 + final norm 4096 = 50,378,752, final layer_norm 4096, lm_head tied.
    Kosmos-2.5: the text layer has no inner_attn_ln (1536 wide, ffn 6144: 28,343,808) and a segment_emb 2*1536."""
    arch = model_from_config(ROWS["default:kosmos-2"]["config"])
    clip_l = 4 * (1024 * 1024 + 1024) + 2 * 1024 * 4096 + 4096 + 1024 + 4096
    assert clip_l == 12_596_224
    tower = 1024 + 1024 * 588 + 257 * 1024 + 2048 + 24 * clip_l + 2048
    projection = 64 * 2048 + 1024 * 2048 + 2048 + 4 * (2048 * 2048 + 2048)
    layer = 4 * (2048 * 2048 + 2048) + 8192 + 2048 * 8192 + 8192 + 8192 * 2048 + 2048 + 16384 + 4096
    assert layer == 50_378_752
    assert arch.total_params == tower + projection + 65037 * 2048 + 24 * layer + 4096 == 1_664_485_376
    k25 = model_from_config(ROWS["default:kosmos-2.5"]["config"])
    layer25 = 4 * (1536 * 1536 + 1536) + 3072 + 1536 * 6144 + 6144 + 6144 * 1536 + 1536 + 12288 + 3072
    assert layer25 == 28_343_808 and k25.layer_sizes[0] == layer25
    assert k25.numel_where(outside_blocks=True, components=("embedding",)) == 108481 * 1536 + 2 * 1536


def test_udop_by_hand():
    """UdopForConditionalGeneration defaults (vocab 33201, d 1024, 16 heads x 64, d_ff 4096 relu, 24 + 24 blocks):
    shared 33201*1024; patch_embed 1024*3*16*16 + 1024 = 787,456 and the decoder's own embed_patches (the encoder's
    is tied); an encoder block 4*1024*1024 + 1024*4096*2 + two norms 2048 = 12,584,960, a decoder block adds the
    EncDecAttention 4*1024*1024 + 1024; block 0 of each has a relative bias 32*16; the encoder's cell_2d_embedding
    2*1024*1024; each stack's relative_bias.biases 1 and 2 (0 is tied): 2*32*16; final norms 2*1024."""
    arch = model_from_config(ROWS["default:udop"]["config"])
    enc_block, dec_block = 4 * 1024 * 1024 + 2 * 1024 * 4096 + 2048, 8 * 1024 * 1024 + 2 * 1024 * 4096 + 3072
    assert enc_block == 12_584_960
    total = (33201 * 1024 + 2 * 787_456 + 24 * enc_block + 24 * dec_block + 2 * 512 + 2 * 1024 * 1024
             + 2 * 2 * 512 + 2 * 1024)
    assert arch.total_params == total == 742_440_960


def test_florence2_by_hand():
    """Florence-2 defaults: a DaViT block half of width e has two depthwise convs 2*(9e + e), two LayerNorms 4e,
    qkv 3e*e + 3e, proj e*e + e, fc1/fc2 8e*e + 5e = 12e² + 33e; a block is two halves; stages of widths 128, 256,
    512, 1024 and depths 1, 1, 9, 1; the conv embeddings 128*3*7*7 + 128 + LayerNorm 256, then per stage s > 0
    e_s*e_(s-1)*9 + e_s and a pre-norm over e_(s-1); the projector 1024*1024 + 2048 + 2*50*512; BART-large
    (shared 50265*1024, two position tables 1026*1024, 12 + 12 layers, two layernorm_embedding)."""
    arch = model_from_config(ROWS["default:florence2"]["config"])
    blocks = sum(depth * 2 * (12 * e * e + 33 * e) for e, depth in ((128, 1), (256, 1), (512, 9), (1024, 1)))
    convs = 128 * 3 * 49 + 128 + 256 + sum(e * p * 9 + e + 2 * p for p, e in ((128, 256), (256, 512), (512, 1024)))
    assert arch.params_by_component()["vision"] == blocks + convs == 90_368_000
    assert arch.params_by_component()["projector"] == 1024 * 1024 + 2048 + 2 * 50 * 512
    enc = 4 * (1024 * 1024 + 1024) + 2048 + 2 * 1024 * 4096 + 4096 + 1024 + 2048
    dec = enc + 4 * (1024 * 1024 + 1024) + 2048
    bart = 50265 * 1024 + 2 * 1026 * 1024 + 12 * enc + 12 * dec + 2 * 2048
    assert arch.total_params == blocks + convs + 1024 * 1024 + 2048 + 2 * 50 * 512 + bart == 497_761_280


def test_pi0_by_hand():
    """PI0Config defaults: the action embeddings 32*1024 + 1024 (action_in_proj), the same for state_proj,
    2048*1024 + 1024, 1024*1024 + 1024, action_out_proj 1024*32 + 32; the expert is a GemmaModel (embed_tokens
    257152*1024, 18 layers, a norm) and the VLM a PaliGemmaModel, neither with a head, no logits."""
    arch = model_from_config(ROWS["default:pi0"]["config"])
    actions = 2 * (32 * 1024 + 1024) + 2048 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 32 + 32
    assert arch.params_by_component()["other"] == actions == 33792 * 2 + 2_098_176 + 1_049_600 + 32_800
    assert not arch.causal_lm and "lm_head" not in arch.params_by_component()
    # an expert layer: q 1024*(8*256), k/v 1024*256 each, o (8*256)*1024, the GeGLU 3*1024*4096, two norms 2048
    layer = 1024 * 2048 + 2 * 1024 * 256 + 2048 * 1024 + 3 * 1024 * 4096 + 2048
    assert sum(t.numel for t in arch.tensors if t.name.startswith("model.dit.")) == 257152 * 1024 + 18 * layer + 1024
    assert arch.total_params == 3_501_372_176


def test_t5gemma2_by_hand():
    """T5Gemma2Config defaults (Gemma 3 4B-like stacks: hidden 2304, 26 + 26 layers, 8 heads / 4 KV heads x 256,
    intermediate 9216): a layer q 2304*2048, k/v 2304*1024 each, o 2048*2304, q/k norms 2*256, the GeGLU
    3*2304*9216 and four RMSNorms 4*2304 = 77,866,496, the same in the decoder (merged attention); embed_tokens
    262208*2304 + its eoi_embedding 2304, shared by the decoder and the head; two final norms; a SigLIP-B/16
    tower with its head and Gemma 3's projector 768*2304 + 768."""
    arch = model_from_config(ROWS["default:t5gemma2"]["config"])
    layer = 2304 * 2048 + 2 * 2304 * 1024 + 2048 * 2304 + 2 * 256 + 3 * 2304 * 9216 + 4 * 2304
    assert layer == 77_866_496 and arch.layer_sizes[0] == layer and len(arch.layer_sizes) == 52
    tower = arch.params_by_component()["vision"]
    assert arch.params_by_component()["projector"] == 768 * 2304 + 768
    assert arch.total_params == 262208 * 2304 + 2304 + 52 * layer + 2 * 2304 + tower + 768 * 2304 + 768 \
        == 4_747_846_400


def test_sam_towers_by_hand():
    """GOT-OCR2's SAM ViT-B at 1024/16: pos_embed 64*64*768, patch conv 768*3*16*16 + 768; a layer of two
    LayerNorms 3072, qkv 768*2304 + 2304, proj 768*768 + 768, lin1/lin2 2*768*3072 + 3072 + 768 = 7,087,872 plus
    rel_pos_h/w 2*(2*14 - 1)*64 in windowed layers and 2*(2*64 - 1)*64 in layers 2, 5, 8, 11; the neck
    256*768 + 512 + 256*256*9 + 512; the projector 512*256*9 + 1024*512*9 + 1024*1024 + 1024. PP-FormulaNet's
    tower is the same at 512 (32*32 positions, global rel_pos 2*63*64) with its own conv / linear projector."""
    got = model_from_config(ROWS["default:got_ocr2"]["config"])
    neck = 256 * 768 + 512 + 256 * 256 * 9 + 512
    tower = 64 * 64 * 768 + 768 * 768 + 768 + 12 * 7_087_872 + 8 * 2 * 27 * 64 + 4 * 2 * 127 * 64 + neck
    assert got.params_by_component()["vision"] == tower
    assert got.params_by_component()["projector"] == 512 * 256 * 9 + 1024 * 512 * 9 + 1024 * 1024 + 1024
    pp = model_from_config(ROWS["default:pp_formulanet"]["config"])
    tower = 32 * 32 * 768 + 768 * 768 + 768 + 12 * 7_087_872 + 8 * 2 * 27 * 64 + 4 * 2 * 63 * 64 + neck
    assert pp.params_by_component()["vision"] == tower
    assert pp.params_by_component()["projector"] == 512 * 256 * 9 + 1024 * 512 * 9 + 1024 * 1024 + 1024 + 1024 * 512 \
        + 512
    assert pp.total_params == 180_897_536 and got.total_params == 560_528_640


def test_evolla_by_hand():
    """EvollaConfig defaults: Llama-3-8B layers (q 4096², k/v 4096*1024, o 4096², gate/up/down 3*4096*14336, two
    norms 8192 = 218,112,000) with an adapter in layers 3, 7, ..., 31 (32 // 8): query / key_protein /
    value_protein / out_proj 4*(4096² + 4096), attention_norm 4096, ff LayerNorm 8192 and fc1 / fc2 2*4096*16384,
    two gates; SaProt-650M (446*1280 words, 33 layers of 4*(1280² + 1280) + 2*2560 + 1280*5120 + 5120 +
    5120*1280 + 1280 = 19,677,440, a final LayerNorm 2560); the resampler's latents 64*1280, 6 layers of two
    LayerNorms 5120, to_q 1280*512, to_kv 1280*1024, to_out 512*1280, ff 2560 + 2*1280*5120, its norm 8192 and
    projector 1280*4096 + 4096."""
    arch = model_from_config(ROWS["default:evolla"]["config"])
    llama = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 8192
    adapter = 4 * (4096 * 4096 + 4096) + 4096 + 8192 + 2 * 4096 * 16384 + 2
    assert llama == 218_112_000 and arch.layer_sizes[3] == llama + adapter and arch.layer_sizes[0] == llama
    saprot = 446 * 1280 + 33 * 19_677_440 + 2560
    resampler = 64 * 1280 + 6 * (5120 + 1280 * 512 + 1280 * 1024 + 512 * 1280 + 2560 + 2 * 1280 * 5120) + 8192 \
        + 1280 * 4096 + 4096
    assert arch.total_params == 2 * 128256 * 4096 + 32 * llama + 8 * adapter + 4096 + saprot + resampler \
        == 10_390_787_344


def test_blt_by_hand():
    """BltConfig defaults: a layer is q/k/v/o 4h² (heads x h / heads, no GQA here) + the gated MLP 3·h·I + two norms
    2h; the local encoder 1 layer (h 1024, I 2730), its patch projection 1024*2048, embed_tokens 260*1024 (untied),
    one cross-attention 4*1024² + 2*1024; the global 25 layers (h 2048, I 5632); the local decoder 9 layers (I 2816),
    its projection 2048*2048, a norm, 9 cross-attentions; the hash embedding 500002*6*1024; the patcher 14 layers
    (h 768, I 2048), embed_tokens / lm_head 260*768 each, a norm; lm_head 260*1024."""
    arch = model_from_config(ROWS["default:blt"]["config"])

    def layer(h, i):
        return 4 * h * h + 3 * h * i + 2 * h
    cross = 4 * 1024 * 1024 + 2048
    total = (layer(1024, 2730) + 1024 * 2048 + 260 * 1024 + cross + 25 * layer(2048, 5632)
             + 9 * layer(1024, 2816) + 2048 * 2048 + 1024 + 9 * cross + 500002 * 6 * 1024
             + 14 * layer(768, 2048) + 2 * 260 * 768 + 768 + 260 * 1024)
    assert arch.total_params == total == 4_633_127_680
    assert len(arch.layer_sizes) == 25 == arch.num_layers
