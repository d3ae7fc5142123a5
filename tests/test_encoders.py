"""BERT-lineage encoders as causal LMs (model/encoders.py): counted by hand, and planned end to end."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from zerocalc.errors import PlanError
from zerocalc.estimate import estimate
from zerocalc.model import model_from_config
from zerocalc.model.encoders import ENCODERS, TRACED
from zerocalc.plan import Plan

ROWS = {r["id"]: r for r in json.loads((Path(__file__).parent / "data" / "architectures.json").read_text())["rows"]}


def test_roberta_by_hand():
    """RobertaForCausalLM, RobertaConfig's defaults (vocab 50265, h 768, 12 layers, I 3072, 512 positions,
    2 token types): embeddings 50265*768 + 512*768 + 2*768 + LayerNorm 2*768 = 38,999,808; a layer
    4*(768*768 + 768) + 2*(768*3072) + 3072 + 768 + 2 LayerNorms 2*1536 = 7,087,872, x12 = 85,054,464;
    the head's bias 50265, dense 768*768 + 768, LayerNorm 1536 = 642,393 (decoder tied): 124,696,665."""
    arch = model_from_config(ROWS["default:roberta"]["config"])
    assert 50265 * 768 + 512 * 768 + 2 * 768 + 2 * 768 == 38_999_808
    assert 4 * (768 * 768 + 768) + 2 * (768 * 3072) + 3072 + 768 + 2 * 1536 == 7_087_872
    assert arch.total_params == 38_999_808 + 12 * 7_087_872 + 50265 + 768 * 768 + 768 + 1536 == 124_696_665
    # untied: the decoder matrix and the decoder's own nn.Linear bias (tied to the head's bias only with the
    # weight; the meta build of RobertaForCausalLM untied holds 163,350,450)
    untied = model_from_config({**ROWS["default:roberta"]["config"], "tie_word_embeddings": False})
    assert untied.total_params - arch.total_params == 50265 * 768 + 50265
    assert untied.total_params == 163_350_450


@pytest.mark.parametrize("model_type", sorted(ENCODERS))
def test_every_encoder_plans(model_type):
    cfg = ROWS[f"default:{model_type}"]["config"]
    for method in ("full", "lora"):
        est = estimate(Plan.from_dict({"model": cfg, "seq_len": 512, "method": method,
                                       "lora": {"targets": ["query", "value"]}})).to_dict()
        # memory/blocks_bert.py's layers, traced on these (tests/test_bert_grid.py); the others keep the BERT block
        if model_type in TRACED:
            assert est["model_support"] == "exact"
            assert "model-approximate" not in {w["id"] for w in est["warnings"]}
        else:
            assert est["model_support"].startswith("exact parameter count; activations approximate")
        # the weights (and under full fine-tuning their gradients and states) and some activations are there
        assert est["per_gpu"]["components"]["activations"] > 0
        assert est["per_gpu"]["peak_allocated_bytes"] > est["per_gpu"]["components"]["weights"] > 0


def test_cross_attention_is_counted():
    """With add_cross_attention each RobertaLayer registers a crossattention like its attention: query/key/value
    and output.dense 4*(768*768 + 768) and output.LayerNorm 2*768 = 2,363,904 per layer, x12."""
    plain = model_from_config(ROWS["default:roberta"]["config"])
    cross = model_from_config({**ROWS["default:roberta"]["config"], "add_cross_attention": True, "is_decoder": True})
    assert cross.total_params - plain.total_params == 12 * (4 * (768 * 768 + 768) + 2 * 768) == 12 * 2_363_904
    assert "crossattention" in cross.support


def test_encoder_decoder_by_hand():
    """EncoderDecoderModel of two BertConfig defaults: the encoder is BertModel, embeddings 30522*768 + 512*768
    + 2*768 + 1536 = 23,837,184, 12 layers of 7,087,872 and the pooler 768*768 + 768; the decoder is
    BertLMHeadModel with cross-attention: the same embeddings, 12 layers of 7,087,872 + 2,363,904, no pooler,
    the head's bias 30522, transform 768*768 + 768 and LayerNorm 1536 (decoder tied to its own words)."""
    arch = model_from_config(ROWS["default:encoder-decoder"]["config"])
    encoder = 23_837_184 + 12 * 7_087_872 + 768 * 768 + 768
    decoder = 23_837_184 + 12 * (7_087_872 + 2_363_904) + 30522 + 768 * 768 + 768 + 1536
    assert arch.total_params == encoder + decoder == 247_363_386
    assert arch.num_layers == 24 and len(arch.layer_sizes) == 24
    assert any(t.name == "encoder.pooler.dense.weight" for t in arch.tensors)
    assert any(t.name.startswith("decoder.bert.encoder.layer.0.crossattention.") for t in arch.tensors)
    # a 1024-wide encoder feeding a 768-wide decoder adds enc_to_dec_proj 1024*768 + 768
    wide = {**arch_cfg(), "encoder": {**arch_cfg()["encoder"], "hidden_size": 1024, "num_attention_heads": 16}}
    assert any(t.name == "enc_to_dec_proj.weight" and t.shape == (768, 1024) for t in model_from_config(wide).tensors)
    with pytest.raises(PlanError, match="'encoder-decoder'"):
        model_from_config({**arch_cfg(), "decoder": {**arch_cfg()["decoder"], "model_type": "gpt2"}})


def arch_cfg() -> dict:
    return ROWS["default:encoder-decoder"]["config"]


def test_bart_decoder_by_hand():
    """BartForCausalLM, BartConfig's defaults (vocab 50265, d 1024, 12 decoder layers, ffn 4096): embed_tokens
    50265*1024 = 51,471,360; learned positions (1024 + 2)*1024 = 1,050,624; a layer: self-attention and the
    cross-attention it keeps, each 4*(1024*1024 + 1024) + LayerNorm 2048 = 4,200,448, fc1/fc2
    2*1024*4096 + 4096 + 1024 = 8,393,728, final LayerNorm 2048: 16,796,672, x12 = 201,560,064;
    layernorm_embedding 2048: 254,084,096 (lm_head tied)."""
    from zerocalc.model.decoders import DECODERS  # noqa: F401
    arch = model_from_config(ROWS["default:bart"]["config"])
    assert 2 * 4_200_448 + 8_393_728 + 2048 == 16_796_672
    assert arch.total_params == 51_471_360 + 1_050_624 + 12 * 16_796_672 + 2048 == 254_084_096


@pytest.mark.parametrize("model_type", ["bart", "opt", "xglm", "marian"])
def test_decoders_plan(model_type):
    est = estimate(Plan.from_dict({"model": ROWS[f"default:{model_type}"]["config"], "seq_len": 512,
                                   "method": "lora", "lora": {"targets": ["q_proj", "v_proj"]}})).to_dict()
    # OPT's layer is traced (memory/blocks_families.py opt_block): "exact"; the others note what they are costed as
    assert est["model_support"].startswith("exact") and est["per_gpu"]["components"]["lora_adapters"] > 0
    assert (est["model_support"] == "exact") == (model_type == "opt")


def test_gptj_by_hand():
    """GPTJForCausalLM, GPTJConfig's defaults (vocab 50400, h 4096, 28 layers, 4h MLP): wte 50400*4096 =
    206,438,400; a layer: ln_1 8192, q/k/v/out 4*4096*4096 = 67,108,864, fc_in/fc_out 2*4096*16384 + 16384 +
    4096 = 134,238,208: 201,355,264, x28 = 5,637,947,392; ln_f 8192; lm_head 50400*4096 + 50400 =
    206,488,800 (untied, biased): 6,050,882,784. CodeGen fuses q/k/v into qkv_proj: the same count."""
    assert 8192 + 4 * 4096 * 4096 + 2 * 4096 * 16384 + 16384 + 4096 == 201_355_264
    want = 206_438_400 + 28 * 201_355_264 + 8192 + 206_488_800
    assert want == 6_050_882_784
    for mt in ("gptj", "codegen"):
        assert model_from_config(ROWS[f"default:{mt}"]["config"]).total_params == want


def test_umt5_has_a_relative_bias_in_every_self_attention():
    """UMT5 (8 + 8 layers, 6 heads, 32 buckets): 16 relative_attention_bias tables of 32 x 6 = 192, where T5's
    layout would have 2 (the first encoder and decoder blocks): 14 x 192 = 2,688 more."""
    cfg = ROWS["default:umt5"]["config"]
    as_mt5 = model_from_config({**cfg, "model_type": "mt5"}).total_params
    assert model_from_config(cfg).total_params - as_mt5 == 14 * 32 * 6 == 2_688
    with pytest.raises(PlanError) as e:
        model_from_config({**ROWS["default:longt5"]["config"], "encoder_attention_type": "transient-global"})
    assert e.value.key == "model.encoder_attention_type"


def test_m2m_100_by_hand():
    """M2M100ForConditionalGeneration, defaults (vocab 128112, d 1024, 12 + 12 layers, ffn 4096): shared
    128112*1024 = 131,186,688; an encoder layer 4*(1024*1024 + 1024) + 2048 + 2*1024*4096 + 4096 + 1024 + 2048
    = 12,596,224; a decoder layer adds the cross-attention 4,198,400 + 2048: 16,796,672; the two final
    LayerNorms 4096 (positions are sinusoidal buffers, the head tied):
    131,186,688 + 12*12,596,224 + 12*16,796,672 + 4096 = 483,905,536."""
    arch = model_from_config(ROWS["default:m2m_100"]["config"])
    assert arch.total_params == 131_186_688 + 12 * 12_596_224 + 12 * 16_796_672 + 4096 == 483_905_536
    est = estimate(Plan.from_dict({"model": ROWS["default:m2m_100"]["config"], "seq_len": 256,
                                   "method": "lora", "lora": {"targets": ["q_proj", "v_proj"]}})).to_dict()
    assert est["per_gpu"]["components"]["lora_adapters"] > 0


def test_untied_seq2seq_has_its_own_embed_tokens():
    """transformers 5 ties encoder/decoder embed_tokens to model.shared only under tie_word_embeddings
    (M2M100Model._tied_weights_keys): untied, the meta build holds shared + two embed_tokens + lm_head,
    4 x 128112*1024 = 524,746,752 against 131,186,688 tied: 877,465,600 = 483,905,536 + 3*131,186,688."""
    cfg = {**ROWS["default:m2m_100"]["config"], "tie_word_embeddings": False}
    assert model_from_config(cfg).total_params == 483_905_536 + 3 * 131_186_688 == 877_465_600


def test_led_pegasus_x_nllb_moe_by_hand():
    """LED (defaults: vocab 50265, d 1024, 12 + 12 layers, ffn 4096): an encoder layer's Longformer attention
    is 6 biased projections + the biased output, 7*(1024*1024 + 1024) = 7,347,200, + fc1/fc2 4096*1024*2 + 4096
    + 1024 and two LayerNorms 4096: 15,745,024. PEGASUS-X: an encoder layer's four projections have no bias,
    4*1024*1024 + three LayerNorms 6144 + the same MLP 8,393,728: 12,594,176. NLLB-MoE: every 4th layer's MLP
    is a router 1024*128 and 128 experts of 4096*1024*2 + 4096 + 1024 = 8,393,728 each."""
    led = model_from_config(ROWS["default:led"]["config"])
    enc0 = sum(t.numel for t in led.tensors if t.block == "led.encoder.layers.0")
    assert enc0 == 7 * (1024 * 1024 + 1024) + 2 * 4096 * 1024 + 4096 + 1024 + 4096 == 15_745_024
    px = model_from_config(ROWS["default:pegasus_x"]["config"])
    assert sum(t.numel for t in px.tensors if t.block == "model.encoder.layers.0") \
        == 4 * 1024 * 1024 + 6144 + 8_393_728 == 12_594_176
    nllb = model_from_config(ROWS["default:nllb-moe"]["config"])
    sparse = sum(t.numel for t in nllb.tensors if t.block == "model.encoder.layers.3")
    dense = sum(t.numel for t in nllb.tensors if t.block == "model.encoder.layers.2")
    assert sparse - dense == 1024 * 128 + 127 * 8_393_728


def test_switch_transformers_by_hand():
    """SwitchTransformers defaults (vocab 32128, d 768, d_kv 64 x 12 heads, d_ff 2048, 12 + 12 blocks, 3 + 3
    sparse, 8 experts): sparse_step 12 // 3 = 4, blocks 1, 5, 9 sparse in each stack. A dense encoder block:
    4*768*768 + 2*768*2048 + two norms 1536 = 5,506,560 (block 0 adds the relative bias 32*12 = 384); a sparse
    block's feed-forward is a router 768*8 and 8 experts of 2*768*2048 instead of one: 7 * 3,145,728 + 6144
    more. Encoder: 12*5,506,560 + 384 + 3*(7*3,145,728 + 6144) = 132,157,824 (the meta build's encoder.block)."""
    arch = model_from_config(ROWS["default:switch_transformers"]["config"])
    enc = sum(t.numel for t in arch.tensors if t.block.startswith("encoder.block."))
    assert enc == 12 * 5_506_560 + 384 + 3 * (7 * 3_145_728 + 6144) == 132_157_824
    sparse = sorted({t.layer for t in arch.tensors if t.component == "routed_experts" and t.block.startswith("encoder")})
    assert sparse == [1, 5, 9]


def test_seamless_m4t_text_to_text_by_hand():
    """SeamlessM4TForTextToText defaults (vocab 256102, hidden 1024, 24 + 24 layers, ffn 8192): shared
    256102*1024 = 262,248,448; an encoder layer 4*(1024*1024 + 1024) + 2048 + 8192*1024 + 8192 + 1024*8192
    + 1024 + 2048 = 20,988,928; a decoder layer adds cross_attention 4,198,400 + 2048; two final LayerNorms
    4096; the speech encoder, text-to-unit model and vocoder are no part of the text-to-text class."""
    for mt in ("seamless_m4t", "seamless_m4t_v2"):
        arch = model_from_config(ROWS[f"default:{mt}"]["config"])
        assert arch.total_params == 262_248_448 + 24 * 20_988_928 + 24 * (20_988_928 + 4_200_448) + 4096 \
            == 1_370_531_840
        assert arch.tensors[0].name == "shared.weight"


def test_big_bird_is_exact_in_both_attention_types():
    """tools/memtrace/bert.py traced BigBird in attention_type original_full, tools/memtrace/own_attention_trace.py
    its default block_sparse (run by transformers above (5 + 2·num_random_blocks)·block_size tokens) and gelu_new
    (tests/test_big_bird_blocks.py)."""
    cfg = ROWS["default:big_bird"]["config"]
    assert model_from_config(cfg).support == "exact"
    assert model_from_config(cfg).own == {"block_sparse": True, "block_size": 64, "random_blocks": 3,
                                          "act": "gelu_new"}
    assert model_from_config({**cfg, "attention_type": "original_full"}).support == "exact"
