"""The BERT-lineage causal LMs traced on FakeTensors (issue 20, item 3): the *ForCausalLM classes of transformers
5.24 (RobertaForCausalLM, RobertaPreLayerNormForCausalLM, RoFormerForCausalLM, ElectraForCausalLM, ...) built
with is_decoder=True, one small config per block variant. The fixtures (tools/memtrace/golden/bert/<id>.json: the
plan, the component bytes at the peak, the saved activations at forward end) are what tests/test_bert_grid.py holds
the engine to (memory/blocks_bert.py), within 3 %, without torch.

Variants (4 layers, the real checkpoints' field names and dropout 0.1):
- roberta: FacebookAI/roberta-base's post-LayerNorm BertLayer, learned absolute positions, one token type;
- prelayernorm: andreasmadsen/efficient_mlm_m0.40's roberta-prelayernorm (LayerNorm before each sublayer, a final
  LayerNorm);
- roformer: junnyu/roformer_chinese_base's rotary self-attention (embedding_size = hidden_size);
- electra: google/electra-small-generator's embeddings of embedding_size 128 projected to hidden_size 256, and the
  generator head back to embedding_size;
- ernie, bertgen (bert-generation): the BertLayer with other embeddings; bigbird: BigBird's own self-attention in
  its "original_full" mode (block_sparse: own_attention_trace.py big_bird); megatron (megatron-bert), xlmrxl
  (xlm-roberta-xl): pre-LayerNorm
  layers without an embedding LayerNorm; rembert: embeddings of input_embedding_size mapped to hidden_size, a head of
  output_embedding_size, its own eager attention; rocbert (roc_bert): map_inputs_layer over the concatenated word,
  shape and pronunciation embeddings; xmod: XLM-RoBERTa's layer with a bottleneck adapter per language after
  output.LayerNorm (XmodOutput.lang_adapter's boolean row masks run as long indices: tools/memtrace/xmod_lang.py).

    python -m tools.memtrace.bert            # trace all rows and (re)write the fixtures
    python -m tools.memtrace.bert roberta-   # only the ids starting with this
"""
from __future__ import annotations

import os
import sys

from .grid import _p, run_grid, write_fixtures

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "bert")

_DROP = {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "is_decoder": True, "hidden_act": "gelu"}
CONFIGS = {
    # FacebookAI/roberta-base's layout, 4 layers
    "roberta": {"model_type": "roberta", "hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12,
                "num_hidden_layers": 4, "vocab_size": 50265, "max_position_embeddings": 514, "type_vocab_size": 1,
                "pad_token_id": 1, "tie_word_embeddings": True, **_DROP},
    # almanach/camembert-base, FacebookAI/xlm-roberta-base, facebook/data2vec-text-base: modelling files that copy
    # RoBERTa's (4 layers; xlm-roberta-base's 250002-word vocabulary cut to 50000 to keep the logits small)
    "camembert": {"model_type": "camembert", "hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12,
                  "num_hidden_layers": 4, "vocab_size": 32005, "max_position_embeddings": 514, "type_vocab_size": 1,
                  "pad_token_id": 1, "tie_word_embeddings": True, **_DROP},
    "xlmr": {"model_type": "xlm-roberta", "hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12,
             "num_hidden_layers": 4, "vocab_size": 50000, "max_position_embeddings": 514, "type_vocab_size": 1,
             "pad_token_id": 1, "tie_word_embeddings": True, **_DROP},
    "data2vec": {"model_type": "data2vec-text", "hidden_size": 768, "intermediate_size": 3072,
                 "num_attention_heads": 12, "num_hidden_layers": 4, "vocab_size": 50265,
                 "max_position_embeddings": 514, "type_vocab_size": 1, "pad_token_id": 1, "tie_word_embeddings": True,
                 **_DROP},
    # andreasmadsen/efficient_mlm_m0.40's layout (roberta-prelayernorm), 4 layers
    "prelayernorm": {"model_type": "roberta-prelayernorm", "hidden_size": 768, "intermediate_size": 3072,
                     "num_attention_heads": 12, "num_hidden_layers": 4, "vocab_size": 50265,
                     "max_position_embeddings": 514, "type_vocab_size": 1, "pad_token_id": 1,
                     "tie_word_embeddings": True, **_DROP},
    # junnyu/roformer_chinese_base's layout: rotary attention, 4 layers
    "roformer": {"model_type": "roformer", "hidden_size": 768, "embedding_size": 768, "intermediate_size": 3072,
                 "num_attention_heads": 12, "num_hidden_layers": 4, "vocab_size": 50000,
                 "max_position_embeddings": 1536, "type_vocab_size": 2, "rotary_value": False,
                 "tie_word_embeddings": True, **_DROP},
    # google/electra-small-generator's layout: embedding_size 128 < hidden_size 256, 4 heads, 4 layers
    "electra": {"model_type": "electra", "hidden_size": 256, "embedding_size": 128, "intermediate_size": 1024,
                "num_attention_heads": 4, "num_hidden_layers": 4, "vocab_size": 30522,
                "max_position_embeddings": 512, "type_vocab_size": 2, "tie_word_embeddings": True, **_DROP},
    # nghuyong/ernie-3.0-base-zh's layout (ErnieForCausalLM; use_task_id off), 4 layers
    "ernie": {"model_type": "ernie", "hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12,
              "num_hidden_layers": 4, "vocab_size": 40000, "max_position_embeddings": 2048, "type_vocab_size": 4,
              "use_task_id": False, "tie_word_embeddings": True, **_DROP},
    # google/bert_for_seq_generation_L-24_bbc_encoder's layout (BertGenerationDecoder): no token types, 4 layers
    "bertgen": {"model_type": "bert-generation", "hidden_size": 768, "intermediate_size": 3072,
                "num_attention_heads": 12, "num_hidden_layers": 4, "vocab_size": 50358,
                "max_position_embeddings": 512, "tie_word_embeddings": True, **_DROP},
    # google/bigbird-roberta-base's layout in attention_type "original_full" (full causal attention; BigBirdModel.forward
    # also switches block_sparse to it up to (5 + 2·num_random_blocks)·block_size tokens), 4 layers
    "bigbird": {"model_type": "big_bird", "hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12,
                "num_hidden_layers": 4, "vocab_size": 50358, "max_position_embeddings": 4096, "type_vocab_size": 2,
                "attention_type": "original_full", "tie_word_embeddings": True, **_DROP},
    # nvidia/megatron-bert-cased-345m's layout: pre-LayerNorm layers, no embedding LayerNorm, encoder.ln, 4 layers
    "megatron": {"model_type": "megatron-bert", "hidden_size": 1024, "intermediate_size": 4096,
                 "num_attention_heads": 16, "num_hidden_layers": 4, "vocab_size": 29056,
                 "max_position_embeddings": 512, "type_vocab_size": 2, "tie_word_embeddings": True, **_DROP},
    # facebook/xlm-roberta-xl's layout (h 2560 there): pre-LayerNorm layers, no embedding LayerNorm, 4 layers
    "xlmrxl": {"model_type": "xlm-roberta-xl", "hidden_size": 1024, "intermediate_size": 4096,
               "num_attention_heads": 16, "num_hidden_layers": 4, "vocab_size": 50000,
               "max_position_embeddings": 514, "type_vocab_size": 1, "pad_token_id": 1, "tie_word_embeddings": True,
               **_DROP},
    # google/rembert's layout (h 1152, 18 heads, embeddings 256, head 1664 there): input_embedding_size embeddings
    # mapped to hidden_size, an output_embedding_size head, its own eager attention; 4 layers
    "rembert": {"model_type": "rembert", "hidden_size": 576, "intermediate_size": 2304, "num_attention_heads": 9,
                "num_hidden_layers": 4, "input_embedding_size": 128, "output_embedding_size": 832,
                "vocab_size": 50000, "max_position_embeddings": 512, "type_vocab_size": 2,
                "tie_word_embeddings": False, **_DROP},
    # weiweishi/roc-bert-base-zh's layout: pronunciation and shape embeddings concatenated with the words through
    # map_inputs_layer (concat_input), 4 layers
    "rocbert": {"model_type": "roc_bert", "hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12,
                "num_hidden_layers": 4, "vocab_size": 30522, "max_position_embeddings": 512, "type_vocab_size": 2,
                "pronunciation_vocab_size": 910, "pronunciation_embed_dim": 768, "shape_vocab_size": 24858,
                "shape_embed_dim": 512, "concat_input": True, "enable_pronunciation": True, "enable_shape": True,
                "tie_word_embeddings": True, **_DROP},
    # facebook/xmod-base's layout (81 languages there; two here, en_XX the default_language XmodModel.forward
    # turns into lang_ids): RoBERTa's post-LayerNorm layer with a bottleneck adapter per language after
    # output.LayerNorm (adapter_reuse_layer_norm, ln_before_adapter), 4 layers, the vocabulary cut to 50000
    "xmod": {"model_type": "xmod", "hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12,
             "num_hidden_layers": 4, "vocab_size": 50000, "max_position_embeddings": 514, "type_vocab_size": 1,
             "pad_token_id": 1, "tie_word_embeddings": True, "languages": ["en_XX", "de_DE"],
             "default_language": "en_XX", "adapter_reduction_factor": 2, **_DROP},
    # FacebookAI/xlm-mlm-en-2048's layout (emb_dim 1024 here): XLMWithLMHeadModel, its own MultiHeadAttention (fp32
    # softmax), run causal as a causal LM; XLMPreTrainedModel does not support gradient checkpointing (no -gc- row)
    "xlm": {"model_type": "xlm", "emb_dim": 1024, "n_layers": 4, "n_heads": 8, "vocab_size": 30145,
            "max_position_embeddings": 512, "n_langs": 1, "causal": True, "dropout": 0.1, "attention_dropout": 0.1,
            "gelu_activation": True, "tie_word_embeddings": True},
}
# PEFT's default LoRA targets for the BERT lineage (peft/utils/constants.py
# TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING: roberta, electra, ... ["query", "value"])
TARGETS = ["query", "value"]
XLM_TARGETS = ["q_lin", "v_lin"]          # the same projections in XLM's MultiHeadAttention


def _plan(fam: str, suffix: str, method: str, precision: str, attention: str, seq: int, ckpt: str = "none") -> dict:
    """grid.py's plan-v1 row at micro-batch 2 (LoRA: rank 16, adapter dropout 0.05 on TARGETS)."""
    return _p(f"{fam}-{suffix}", dict(CONFIGS[fam]), method, precision, attention, ckpt, mb=2, seq=seq,
              lora={"targets": XLM_TARGETS if fam == "xlm" else TARGETS, "dropout": 0.05})


def rows() -> list[dict]:
    out = []
    for fam in CONFIGS:
        out.append(_plan(fam, "full-pure-flash-s512-b2", "full", "bf16-pure", "flash", 512))
        out.append(_plan(fam, "lora-mixed-flash-s512-b2-drop", "lora", "bf16-mixed", "flash", 512))
        out.append(_plan(fam, "full-mixed-eager-s256-b2", "full", "bf16-mixed", "eager", 256))
        if fam != "xlm":
            out.append(_plan(fam, "full-pure-flash-gc-s512-b2", "full", "bf16-pure", "flash", 512, "full"))
    # PEFT under checkpointing (enable_input_require_grads: the embedding output requires grad)
    out.append(_plan("roberta", "lora-mixed-flash-gc-s512-b2", "lora", "bf16-mixed", "flash", 512, "full"))
    return out


if __name__ == "__main__":
    prefix = sys.argv[1] if len(sys.argv) > 1 else ""
    todo = [{**p, "quick": False} for p in rows() if p["id"].startswith(prefix)]
    write_fixtures(run_grid(todo, jobs=2), OUT)
