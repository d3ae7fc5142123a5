"""The encoder-decoder grid: T5, Switch Transformers, M2M100 (BART's layer), FSMT, LED and PEGASUS-X (issue 20, item 3), their real transformers 5.24 training step traced on
FakeTensors as AutoModelForSeq2SeqLM (build.py model_class). The fixtures (tools/memtrace/golden/seq2seq/<id>.json,
the same layout as tools/memtrace/families.py's) are what tests/test_seq2seq_grid.py holds the engine to.

Sequence lengths: the plan has one seq_len; the traced batch is input_ids (b, s) for the encoder and labels (b, s),
from which the model makes decoder_input_ids = shift_right(labels), so the decoder also runs at s (build.py
step_labels; the engine's convention: model/classic.py t5 counts encoder + decoder blocks, each at s·b tokens).

T5 is traced with eager attention only: T5 has no FlashAttention-2 path (modeling_t5.py T5PreTrainedModel
`_supports_flash_attn = False`; its relative position bias is an additive score term), and the tracer's FA2
profile (build.py flash_attention_forward) would drop the bias. M2M100 and PEGASUS-X (its decoder; the encoder's
global-local attention is its own matmuls) run the FA2 profile, LED eager (it has no attention interface; a fake
batch cannot answer LEDEncoder's `is_global_attn` .item(): build.py no_global_attention), FSMT eager (fairseq's own
bmm attention; make_padding_mask's `.any()` answered as the zero batch answers it: build.py fsmt_no_padding; no
checkpointing rows, the class has none; full also in fp32, where layer 0 copies its input). Rows: T5, M2M100, LED and
PEGASUS-X each full bf16-pure, LoRA (every block linear) bf16-mixed and full bf16-pure with checkpointing at s 512,
b 2; T5
v1.1's gated feed-forward full and LoRA (q, v) in fp32 at s 128, b 8 (PEFT's T0 / mT0 examples) and LoRA bf16-mixed.
T5 v1.0 and v1.1 (Flan-T5's layout) again with the shipped dropout_rate 0.1 (t5drop-, t5v11drop-: full bf16-pure with
and without checkpointing, LoRA (q, v: PEFT's default, key without an adapter) bf16-mixed with and without, full
bf16-mixed), mT5 and UMT5 (mt5drop-, umt5drop-: full bf16-pure with and without checkpointing, LoRA bf16-mixed),
Switch (switchdrop-: as the Switch rows), and t5-base's whole layout checkpointed at s 1024, b 4 (t5basedrop-: its
peak is decoder layer 0's recompute, memory/inputs.py decoder_bottom_terms).

    python -m tools.memtrace.seq2seq            # trace all rows and (re)write the fixtures
    python -m tools.memtrace.seq2seq t5-        # only the ids starting with this
"""
from __future__ import annotations

import os
import sys

from .grid import GPU, run_grid, write_fixtures

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "seq2seq")

CONFIGS = {
    # google-t5/t5-small's layout (ReLU DenseReluDense, 32 relative buckets, tied head), 2 + 2 blocks
    "t5": {"model_type": "t5", "d_model": 512, "d_kv": 64, "d_ff": 2048, "num_heads": 8, "num_layers": 2,
           "num_decoder_layers": 2, "vocab_size": 32128, "feed_forward_proj": "relu", "dropout_rate": 0.0,
           "relative_attention_num_buckets": 32, "relative_attention_max_distance": 128,
           "pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0, "tie_word_embeddings": True},
    # google/t5-v1_1-small's layout (gated-gelu: wi_0 / wi_1 and transformers' python gelu_new, untied head; the
    # T0 / mT0 / Flan-T5 lineage), 2 + 2 blocks
    "t5v11": {"model_type": "t5", "d_model": 512, "d_kv": 64, "d_ff": 1024, "num_heads": 6, "num_layers": 2,
              "num_decoder_layers": 2, "vocab_size": 32128, "feed_forward_proj": "gated-gelu", "dropout_rate": 0.0,
              "relative_attention_num_buckets": 32, "relative_attention_max_distance": 128,
              "pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0, "tie_word_embeddings": False},
    # facebook/m2m100_418M's layout (BART's pre-LN layer, ReLU, sinusoidal positions, scaled embedding, shared
    # table, encoder/decoder final LayerNorms) at 2 + 2 layers and a 32k vocabulary. Not "bart": the engine counts
    # model_type bart as BartForCausalLM (model/decoders.py), and the tracer builds what the engine counts
    "m2m": {"model_type": "m2m_100", "d_model": 512, "encoder_layers": 2, "decoder_layers": 2,
            "encoder_attention_heads": 8, "decoder_attention_heads": 8, "encoder_ffn_dim": 2048,
            "decoder_ffn_dim": 2048, "vocab_size": 32000, "max_position_embeddings": 1024, "dropout": 0.0,
            "attention_dropout": 0.0, "activation_dropout": 0.0, "activation_function": "relu",
            "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0, "scale_embedding": True,
            "pad_token_id": 1, "decoder_start_token_id": 2, "tie_word_embeddings": True},
    # allenai/led-base-16384's layout (BART's post-LN layer, GELU, layernorm_embedding, learned positions) at 2 + 2
    # layers: the encoder's LEDEncoderSelfAttention is Longformer's sliding window (attention_window 128 here, so
    # s 512 is 4 windows; no global_attention_mask in the batch, as run_summarization trains it without one)
    "led": {"model_type": "led", "d_model": 512, "encoder_layers": 2, "decoder_layers": 2,
            "encoder_attention_heads": 8, "decoder_attention_heads": 8, "encoder_ffn_dim": 2048,
            "decoder_ffn_dim": 2048, "vocab_size": 32000, "max_encoder_position_embeddings": 4096,
            "max_decoder_position_embeddings": 1024, "attention_window": [128, 128], "dropout": 0.0,
            "attention_dropout": 0.0, "activation_dropout": 0.0, "activation_function": "gelu",
            "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0, "pad_token_id": 1, "decoder_start_token_id": 2,
            "tie_word_embeddings": True},
    # google/pegasus-x-base's layout (pre-LN, GELU, sinusoidal positions, scaled embedding) at 2 + 2 layers: the
    # encoder's PegasusXGlobalLocalAttention over blocks of block_size 128 (s 512: 4 blocks, staggered every other
    # layer) beside num_global_tokens 32 global tokens
    "pegx": {"model_type": "pegasus_x", "d_model": 512, "encoder_layers": 2, "decoder_layers": 2,
             "encoder_attention_heads": 8, "decoder_attention_heads": 8, "encoder_ffn_dim": 2048,
             "decoder_ffn_dim": 2048, "vocab_size": 32000, "max_position_embeddings": 4096, "block_size": 128,
             "num_global_tokens": 32, "stagger_local_blocks": True, "dropout": 0.0, "attention_dropout": 0.0,
             "activation_dropout": 0.0, "activation_function": "gelu", "encoder_layerdrop": 0.0,
             "decoder_layerdrop": 0.0, "scale_embedding": True, "pad_token_id": 0, "decoder_start_token_id": 0,
             "tie_word_embeddings": True},
    # google/switch-base-8's layout (T5's ReLU block; every other feed-forward a SwitchTransformersSparseMLP of 8
    # experts, top-1, expert_capacity 64, router_jitter_noise 0.01, fp32 router) at 4 + 4 blocks (2 sparse a stack:
    # blocks 1 and 3), dropout_rate 0 as the T5 rows; its real router with the balanced assignment of
    # tools/memtrace/routing.py (s 512: 64 tokens an expert a sequence, all kept; s 1024: 128, half over capacity)
    "switch": {"model_type": "switch_transformers", "d_model": 512, "d_kv": 64, "d_ff": 2048, "num_heads": 8,
               "num_layers": 4, "num_decoder_layers": 4, "num_sparse_encoder_layers": 2,
               "num_sparse_decoder_layers": 2, "num_experts": 8, "expert_capacity": 64, "router_bias": False,
               "router_jitter_noise": 0.01, "router_dtype": "float32", "router_ignore_padding_tokens": False,
               "vocab_size": 32128, "feed_forward_proj": "relu", "dropout_rate": 0.0,
               "relative_attention_num_buckets": 32, "relative_attention_max_distance": 128,
               "pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0, "tie_word_embeddings": False},
    # google/t5gemma-2b-2b-ul2's layout (T5GemmaEncoderLayer / T5GemmaDecoderLayer: Gemma 2's sandwich RMSNorms,
    # GQA, GeGLU, attention and final logit softcapping, sliding / full layer_types) at 2 + 2 layers, d 512
    "t5gemma": {"model_type": "t5gemma", "tie_word_embeddings": True, "dropout_rate": 0.0, "attention_dropout": 0.0,
                "pad_token_id": 0, "eos_token_id": 1, "bos_token_id": 2,
                **{side: {"model_type": "t5_gemma_module", "vocab_size": 32000, "hidden_size": 512,
                          "intermediate_size": 2048, "num_hidden_layers": 2, "num_attention_heads": 8,
                          "num_key_value_heads": 4, "head_dim": 64, "hidden_activation": "gelu_pytorch_tanh",
                          "max_position_embeddings": 8192, "rms_norm_eps": 1e-6, "pad_token_id": 0,
                          "eos_token_id": 1, "bos_token_id": 2, "tie_word_embeddings": True,
                          "attention_bias": False, "attention_dropout": 0.0, "query_pre_attn_scalar": 64,
                          "sliding_window": 4096, "layer_types": ["sliding_attention", "full_attention"],
                          "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0, "dropout_rate": 0.0,
                          "is_decoder": side == "decoder"}
                   for side in ("encoder", "decoder")}},
    # facebook/hf-seamless-m4t-medium's text-to-text model (SeamlessM4TForTextToText: NLLB's pre-LN layer, ReLU,
    # sinusoidal positions, scaled embedding, dropout / attention_dropout 0.1 as shipped) at 2 + 2 layers, d 512;
    # layerdrop 0 (the shipped 0.05 skips layers at random)
    **{key: {"model_type": mt, "hidden_size": 512, "encoder_layers": 2, "decoder_layers": 2,
             "encoder_attention_heads": 8, "decoder_attention_heads": 8, "encoder_ffn_dim": 2048,
             "decoder_ffn_dim": 2048, "vocab_size": 32000, "max_position_embeddings": 1024, "dropout": 0.1,
             "attention_dropout": 0.1, "activation_dropout": 0.0, "activation_function": "relu",
             "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0, "scale_embedding": True, "pad_token_id": 0,
             "bos_token_id": 2, "eos_token_id": 3, "decoder_start_token_id": 3, "tie_word_embeddings": True}
       for key, mt in (("m4t", "seamless_m4t"), ("m4tv2", "seamless_m4t_v2"))},
    # facebook/wmt19-en-de's layout (fairseq's post-LN layer, ReLU, scaled embedding, sinusoidal tables as
    # nn.Embedding parameters, separate source / target vocabularies, untied output_projection) at 2 + 2 layers,
    # d_model 512 and its shipped dropouts (0.2 residual, 0.1 attention)
    "fsmt": {"model_type": "fsmt", "langs": ["en", "de"], "src_vocab_size": 32000, "tgt_vocab_size": 24000,
             "d_model": 512, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 8,
             "decoder_attention_heads": 8, "encoder_ffn_dim": 2048, "decoder_ffn_dim": 2048,
             "max_position_embeddings": 1024, "dropout": 0.2, "attention_dropout": 0.1, "activation_dropout": 0.0,
             "activation_function": "relu", "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0,
             "scale_embedding": True, "pad_token_id": 1, "eos_token_id": 2, "decoder_start_token_id": 2,
             "tie_word_embeddings": False},
}
# the same layouts with the shipped dropout_rate 0.1 (t5-base, google/t5-v1_1-*, google/flan-t5-*, google/mt5-*,
# google/umt5-* all ship it): every sub-layer's output, the feed-forward's hidden state, the attention probabilities,
# each stack's embedding and final outputs (modeling_t5.py T5LayerFF / T5LayerSelfAttention / T5DenseActDense /
# eager_attention_forward / T5Stack.forward); mT5 and UMT5 (a relative_attention_bias in every self-attention) on
# v1.1's gated layout
CONFIGS.update({"t5drop": {**CONFIGS["t5"], "dropout_rate": 0.1},
                "t5v11drop": {**CONFIGS["t5v11"], "dropout_rate": 0.1},
                "mt5drop": {**CONFIGS["t5v11"], "model_type": "mt5", "dropout_rate": 0.1},
                "umt5drop": {**CONFIGS["t5v11"], "model_type": "umt5", "dropout_rate": 0.1},
                # Switch's layout with dropout_rate 0.1 (google/switch-base-8 ships it): the experts' hidden dropout
                "switchdrop": {**CONFIGS["switch"], "dropout_rate": 0.1},
                # t5-base's layout whole (d_model 768, 12 heads, d_ff 3072, 12 + 12 blocks), dropout 0.1
                "t5basedrop": {**CONFIGS["t5"], "d_model": 768, "d_ff": 3072, "num_heads": 12, "num_layers": 12,
                               "num_decoder_layers": 12, "dropout_rate": 0.1}})
TARGETS = {"t5": ["q", "k", "v", "o", "wi", "wo"], "t5v11": ["q", "v"],
           "m2m": ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"],
           "led": ["query", "key", "value", "output", "q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"],
           "pegx": ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"],
           # q and v (PEFT's T0 / mT0 examples): PEFT's "wi" / "wo" would also match every expert's
           "switch": ["q", "v"],
           "m4t": ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"],
           "m4tv2": ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"],
           "t5gemma": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
           "fsmt": ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"],
           # PEFT's default for the T5 family (q, v): key has no adapter
           **{f: ["q", "v"] for f in ("t5drop", "t5v11drop", "mt5drop", "umt5drop", "switchdrop")}}
# LED has no attention interface (modeling_led.py: LEDEncoderSelfAttention's own chunked matmuls, LEDDecoderAttention
# eager); PEGASUS-X's decoder attention supports FA2 (`_supports_flash_attn = True`), its encoder's is its own
# FSMT's Attention is fairseq's own bmm / softmax / bmm (modeling_fsmt.py Attention.forward): eager only
ATTENTION = {"m4t": "flash", "m4tv2": "flash", "t5gemma": "flash", "switch": "eager", "t5": "eager", "t5v11": "eager", "t5drop": "eager",
             "t5v11drop": "eager", "mt5drop": "eager", "umt5drop": "eager", "t5basedrop": "eager", "switchdrop": "eager", "m2m": "flash", "led": "eager", "pegx": "flash", "fsmt": "eager"}


def _plan(fam: str, method: str, precision: str, mb: int, seq: int, ckpt: str = "none", lora_dropout: float = 0.0
          ) -> dict:
    d = {"schema": 1, "model": dict(CONFIGS[fam]), "gpu": GPU, "framework": "single", "gpus_per_node": 1,
         "nodes": 1, "zero_stage": 0, "precision": precision, "optimizer": "adamw", "micro_batch_size": mb,
         "gradient_accumulation_steps": 1, "seq_len": seq, "activation_checkpointing": ckpt,
         "attention": ATTENTION[fam], "loss": "standard", "method": method}
    if method == "lora":
        d["lora"] = {"rank": 16, "alpha": 32, "dropout": lora_dropout, "targets": TARGETS[fam]}
    return d


def rows() -> list[dict]:
    out = []
    for fam in ("t5", "m2m", "led", "pegx"):
        a = ATTENTION[fam]
        out.append({"id": f"{fam}-full-pure-{a}-s512-b2", **_plan(fam, "full", "bf16-pure", 2, 512)})
        out.append({"id": f"{fam}-lora-mixed-{a}-s512-b2", **_plan(fam, "lora", "bf16-mixed", 2, 512)})
        out.append({"id": f"{fam}-full-pure-{a}-gc-s512-b2", **_plan(fam, "full", "bf16-pure", 2, 512, ckpt="full")})
        # LoRA under checkpointing: PEFT's enable_input_require_grads makes the embedding outputs need a gradient
        out.append({"id": f"{fam}-lora-mixed-{a}-gc-s512-b2", **_plan(fam, "lora", "bf16-mixed", 2, 512, ckpt="full")})
    # FSMT: no checkpointing rows (PretrainedFSMTModel does not set supports_gradient_checkpointing, so
    # gradient_checkpointing_enable refuses it); full bf16, AMP and LoRA
    out.append({"id": "fsmt-full-pure-eager-s512-b2", **_plan("fsmt", "full", "bf16-pure", 2, 512)})
    out.append({"id": "fsmt-full-mixed-eager-s512-b2", **_plan("fsmt", "full", "bf16-mixed", 2, 512)})
    out.append({"id": "fsmt-lora-mixed-eager-s512-b2", **_plan("fsmt", "lora", "bf16-mixed", 2, 512)})
    # fp32: without autocast layer 0's projections each copy the transposed embedding output
    # LoRA on a bf16 base without autocast, fp32 adapters (PEFT >= 0.12 autocast_adapter_dtype, as the engine
    # assumes; the tracer's bf16-pure default builds bf16 adapters): each adapter casts its input to fp32
    out.append({"id": "fsmt-lora-pure-eager-s512-b2", **_plan("fsmt", "lora", "bf16-pure", 2, 512),
                "stack": {"peft_adapter_dtype": "fp32"}})
    out.append({"id": "fsmt-full-fp32-eager-s256-b2", **_plan("fsmt", "full", "fp32", 2, 256)})
    # T5 v1.1's gated feed-forward in fp32 (how PEFT's T0 / mT0 examples train: LoRA on q and v)
    out.append({"id": "t5v11-full-fp32-eager-s128-b8", **_plan("t5v11", "full", "fp32", 8, 128)})
    out.append({"id": "t5v11-lora-fp32-eager-s128-b8", **_plan("t5v11", "lora", "fp32", 8, 128)})
    out.append({"id": "t5v11-lora-mixed-eager-s512-b2", **_plan("t5v11", "lora", "bf16-mixed", 2, 512)})
    # Switch: full and LoRA at s 512 (every token routed), full at s 1024 (half over capacity), checkpointed; all
    # bf16-mixed: the router's `self.classifier = self.classifier.to(self.dtype)` (fp32 router_dtype) swaps a bf16
    # parameter for an fp32 one on the first forward of a bf16-pure model, which the tracer's registered (weakly
    # referenced) parameters refuse; with fp32 weights it is a no-op
    out.append({"id": "switch-full-mixed-eager-s512-b2", **_plan("switch", "full", "bf16-mixed", 2, 512)})
    out.append({"id": "switch-lora-mixed-eager-s512-b2", **_plan("switch", "lora", "bf16-mixed", 2, 512)})
    out.append({"id": "switch-full-mixed-eager-s1024-b1", **_plan("switch", "full", "bf16-mixed", 1, 1024)})
    # SeamlessM4T(v2) text-to-text: FA2 full bf16, LoRA bf16-mixed, full bf16 checkpointed
    for fam in ("m4t", "m4tv2"):
        out.append({"id": f"{fam}-full-pure-flash-s512-b2", **_plan(fam, "full", "bf16-pure", 2, 512)})
        out.append({"id": f"{fam}-lora-mixed-flash-s512-b2", **_plan(fam, "lora", "bf16-mixed", 2, 512)})
        out.append({"id": f"{fam}-full-pure-flash-gc-s512-b2", **_plan(fam, "full", "bf16-pure", 2, 512, ckpt="full")})
    # T5Gemma: FA2 full bf16 and LoRA bf16-mixed, eager full bf16-mixed, checkpointed full
    out.append({"id": "t5gemma-full-pure-flash-s512-b2", **_plan("t5gemma", "full", "bf16-pure", 2, 512)})
    out.append({"id": "t5gemma-lora-mixed-flash-s512-b2", **_plan("t5gemma", "lora", "bf16-mixed", 2, 512)})
    out.append({"id": "t5gemma-full-pure-flash-gc-s512-b2", **_plan("t5gemma", "full", "bf16-pure", 2, 512,
                                                                     ckpt="full")})
    out.append({"id": "switch-full-mixed-eager-gc-s512-b2", **_plan("switch", "full", "bf16-mixed", 2, 512,
                                                                     ckpt="full")})
    # T5 with dropout_rate 0.1 (eager: no FA2 path): full bf16 with and without checkpointing, LoRA (q, v; lora_dropout
    # 0.05) bf16-mixed with and without, full bf16-mixed; mT5 / UMT5 full bf16, LoRA, full bf16 checkpointed
    for fam in ("t5drop", "t5v11drop", "mt5drop", "umt5drop"):
        out.append({"id": f"{fam}-full-pure-eager-s512-b2", **_plan(fam, "full", "bf16-pure", 2, 512)})
        out.append({"id": f"{fam}-full-pure-eager-gc-s512-b2", **_plan(fam, "full", "bf16-pure", 2, 512, "full")})
        out.append({"id": f"{fam}-lora-mixed-eager-s512-b2", **_plan(fam, "lora", "bf16-mixed", 2, 512,
                                                                     lora_dropout=0.05)})
        if fam in ("t5drop", "t5v11drop"):
            out.append({"id": f"{fam}-lora-mixed-eager-gc-s512-b2", **_plan(fam, "lora", "bf16-mixed", 2, 512,
                                                                            "full", lora_dropout=0.05)})
            out.append({"id": f"{fam}-full-mixed-eager-s512-b2", **_plan(fam, "full", "bf16-mixed", 2, 512)})
    # Switch with dropout_rate 0.1: full and LoRA (q, v) bf16-mixed at s 512, full at s 1024 (half over capacity)
    out.append({"id": "switchdrop-full-mixed-eager-s512-b2", **_plan("switchdrop", "full", "bf16-mixed", 2, 512)})
    out.append({"id": "switchdrop-lora-mixed-eager-s512-b2", **_plan("switchdrop", "lora", "bf16-mixed", 2, 512,
                                                                      lora_dropout=0.05)})
    out.append({"id": "switchdrop-full-mixed-eager-s1024-b1", **_plan("switchdrop", "full", "bf16-mixed", 1, 1024)})
    # t5-base's layout checkpointed at s 1024, b 4: the peak is the recompute of decoder layer 0, beside the later
    # decoder layers' gradients (memory/inputs.py decoder_bottom_terms), not the loss
    out.append({"id": "t5basedrop-full-pure-eager-gc-s1024-b4", **_plan("t5basedrop", "full", "bf16-pure", 4, 1024,
                                                                         "full")})
    return out


if __name__ == "__main__":
    prefix = sys.argv[1] if len(sys.argv) > 1 else ""
    todo = [{**p, "quick": False} for p in rows() if p["id"].startswith(prefix)]
    write_fixtures(run_grid(todo, jobs=1), OUT)
