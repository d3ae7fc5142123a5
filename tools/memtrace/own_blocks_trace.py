"""Traced steps of three models whose blocks are their own (issue 20, item 3), for the CI checks that the engine
keeps what their layers save:

- ``cpmant``: CPM-Ant (modeling_cpmant.py CpmAntForCausalLM): the prompt_length prompt tokens the model prepends,
  weight-only fp32-variance LayerNorms, its own eager attention with the (b, heads, s, s) segment / relative
  position bias, the GELU-gated w_0 / w_1 / w_out feed-forward (tests/test_cpmant_blocks.py);
- ``voxtral_realtime``: Voxtral Realtime's language model (modeling_voxtral_realtime.py
  VoxtralRealtimeTextForCausalLM): Mistral's layer with the ada_rms_norm time conditioning of its
  post_attention_layernorm (tests/test_voxtral_realtime_blocks.py);
- ``doge``: Doge (modeling_doge.py DogeForCausalLM): the dynamic-mask attention (dt_proj over the values, the
  (b, heads, s, s) mask) under SDPA (no FlashAttention) and eager, the learned residual scales, the dense MLP and,
  in the -moe- rows, the CDMoE (tests/test_doge_blocks.py).

  python -m tools.memtrace.own_blocks_trace cpmant > tests/data/cpmant_trace.json
  python -m tools.memtrace.own_blocks_trace voxtral_realtime > tests/data/voxtral_realtime_trace.json
  python -m tools.memtrace.own_blocks_trace doge > tests/data/doge_trace.json

Each model's default config (tests/data/architectures.json), made small (SHRINK), gets the generic rows of
tools/memtrace/moe_trace.py: full bf16 with and without checkpointing, LoRA on the attention (fp32 adapters) with
and without, and a bf16-mixed full row (CPM-Ant has no gradient checkpointing: NO_CKPT). Each case keeps what
tools/memtrace/compare.py compares and the plan. About 10 s a model on 2 cores.
"""
from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from .trace import trace

ROOT = Path(__file__).resolve().parents[2]
LORA = {"rank": 16, "alpha": 32, "dropout": 0.0}
SHRINK = {
    # openbmb/cpm-ant-10b's layout (h 4096, 32 heads of 128, dim_ff 10240, 48 layers) at h 1024, 8 heads of 128,
    # dim_ff 2560, 2 layers; the 32 x 32 prompt embeddings and segment / position tables as they are
    "cpmant": {"hidden_size": 1024, "num_attention_heads": 8, "dim_head": 128, "dim_ff": 2560,
               "num_hidden_layers": 2},
    # mistralai/Voxtral-Mini-4B-Realtime's language model (h 3072, GQA 32/8 of 128, I 9216, 26 layers) at h 1024,
    # GQA 8/2 of 128, I 3072, 4 layers, the vocabulary cut to 32768; the audio tower and projector tiny (frozen,
    # never run: the rows feed text only, voxtral_text_only)
    "voxtral_realtime": {"text_config": {"model_type": "voxtral_realtime_text", "vocab_size": 32768,
                                         "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 4,
                                         "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128,
                                         "max_position_embeddings": 4096, "sliding_window": 8192,
                                         "tie_word_embeddings": True},
                         "audio_config": {"model_type": "voxtral_realtime_encoder", "hidden_size": 128,
                                          "intermediate_size": 256, "num_hidden_layers": 1, "num_attention_heads": 2,
                                          "head_dim": 64},
                         "hidden_size": 1024},
    # SmallDoge/Doge-320M's layout as the DogeConfig default (h 1024, 8 heads of 128, I 2048, 32 layers), 4 layers;
    # keep_window_size 2048 above seq_len (no top-k), the dense MLP (is_moe false)
    "doge": {"num_hidden_layers": 4},
}
# attention: modeling_doge.py DogePreTrainedModel._supports_flash_attn = False, SDPA with the dynamic mask
ATTENTION = {"doge": "sdpa"}
# no gradient checkpointing (modeling_cpmant.py: CpmAntPreTrainedModel has no supports_gradient_checkpointing)
NO_CKPT = ("cpmant",)
TARGETS = {"cpmant": ["project_q", "project_k", "project_v", "attention_out"],
           "voxtral_realtime": ["q_proj", "k_proj", "v_proj", "o_proj"],
           "doge": ["q_proj", "k_proj", "v_proj", "o_proj"]}


@contextlib.contextmanager
def voxtral_text_only():
    """Voxtral Realtime fed text only, its language model traced as the engine costs it: built as
    VoxtralRealtimeForConditionalGeneration (build.py model_class has no auto class for it) with audio_tower and
    multi_modal_projector frozen (build.py WHOLE_COMPOSITES: also PEFT's targets inside language_model only), and
    VoxtralRealtimeModel.forward without the audio branch (modeling_voxtral_realtime.py requires input_features or
    encoder_inputs_embeds): the embeddings, the time conditioning `time_embedding(full((1,), num_delay_tokens))`
    (default_num_delay_tokens) and the language model with t_cond, as written there."""
    import torch  # noqa: PLC0415
    from transformers.models.voxtral_realtime import modeling_voxtral_realtime as mv  # noqa: PLC0415
    from . import build  # noqa: PLC0415

    class _Auto:
        @staticmethod
        def from_config(cfg, **kw):
            return mv.VoxtralRealtimeForConditionalGeneration._from_config(cfg, **kw)

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, cache=None, inputs_embeds=None,
                use_cache=None, num_delay_tokens=None, **kwargs):
        if inputs_embeds is None:
            inputs_embeds = self.get_input_embeddings()(input_ids)
        if num_delay_tokens is None:
            num_delay_tokens = self.config.default_num_delay_tokens
        time_tensor = torch.full((1,), num_delay_tokens, device=inputs_embeds.device, dtype=inputs_embeds.dtype)
        t_cond = self.time_embedding(time_tensor)[None, ...]
        out = self.language_model(attention_mask=attention_mask, position_ids=position_ids, cache=cache,
                                  inputs_embeds=inputs_embeds, use_cache=use_cache, t_cond=t_cond, **kwargs)
        return mv.VoxtralRealtimeModelOutputWithPast(last_hidden_state=out.last_hidden_state, cache=out.cache)

    model_class, fwd = build.model_class, mv.VoxtralRealtimeModel.forward
    build.WHOLE_COMPOSITES["voxtral_realtime"] = ("audio_tower", "multi_modal_projector")
    build.model_class = lambda plan: _Auto if plan.model.get("model_type") == "voxtral_realtime" else model_class(plan)
    mv.VoxtralRealtimeModel.forward = forward
    try:
        yield
    finally:
        build.model_class, mv.VoxtralRealtimeModel.forward = model_class, fwd
        del build.WHOLE_COMPOSITES["voxtral_realtime"]


def plans(model_type: str) -> list[tuple[str, dict]]:
    rows = json.loads((ROOT / "tests" / "data" / "architectures.json").read_text())["rows"]
    cfg = dict(next(r for r in rows if r["id"] == f"default:{model_type}")["config"])
    for k, v in SHRINK[model_type].items():        # a sub-config's shrink merged into the default's
        cfg[k] = {**cfg[k], **v} if isinstance(v, dict) and isinstance(cfg.get(k), dict) else v
    layers = cfg.get("num_hidden_layers") or cfg["text_config"]["num_hidden_layers"]
    tag = f'{model_type.replace("_", "-")}-{layers}l'
    base = {"model": cfg, "framework": "single", "gpus_per_node": 1, "precision": "bf16-pure", "method": "full",
            "micro_batch_size": 1, "seq_len": 512, "attention": ATTENTION.get(model_type, "flash")}
    lora = {**base, "method": "lora", "lora": {**LORA, "targets": TARGETS[model_type]},
            "stack": {"peft_adapter_dtype": "fp32"}}
    out = [(f"{tag}-full-s512", base),
            (f"{tag}-full-s512-ckpt", {**base, "activation_checkpointing": "full"}),
            (f"{tag}-lora-attn-s512", lora),
            (f"{tag}-lora-attn-s512-ckpt", {**lora, "activation_checkpointing": "full"}),
            (f"{tag}-full-mixed-s512", {**base, "precision": "bf16-mixed"})]
    if model_type in ATTENTION:
        out.append((f"{tag}-full-s512-eager", {**base, "attention": "eager"}))
    if model_type == "doge":
        # DogeCDMoE (is_moe): the shared MLP and the retrieval experts (DogeConfig's 16384 of them, top-64)
        moe = {**base, "model": {**cfg, "is_moe": True}}
        moe_lora = {**lora, "model": moe["model"]}
        out += [(f"{tag}-moe-full-s512", moe),
                (f"{tag}-moe-full-s512-ckpt", {**moe, "activation_checkpointing": "full"}),
                (f"{tag}-moe-lora-attn-s512", moe_lora),
                (f"{tag}-moe-full-mixed-s512", {**moe, "precision": "bf16-mixed"})]
    return [row for row in out if model_type not in NO_CKPT or "ckpt" not in row[0]]


def main(argv: list[str] | None = None) -> int:
    import torch  # noqa: PLC0415
    import transformers  # noqa: PLC0415
    args = sys.argv[1:] if argv is None else argv
    model_type = args[0]
    cases = []
    for cid, plan in plans(model_type):
        if len(args) > 1 and not cid.startswith(args[1]):
            continue
        with voxtral_text_only() if model_type == "voxtral_realtime" else contextlib.nullcontext():
            r = trace(plan, steps=2)
        cases.append({"id": cid, "plan": plan, **{k: r[k] for k in ("peak", "peak_bytes", "peak_phase", "peak_op",
                                                                    "phase_peaks", "saved_activations_forward_end")}})
    json.dump({"generator": f"python -m tools.memtrace.own_blocks_trace {model_type}",
               "transformers": transformers.__version__, "torch": torch.__version__.split("+")[0], "cases": cases},
              sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
