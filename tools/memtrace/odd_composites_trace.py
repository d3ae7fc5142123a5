"""Three odd composites of transformers 5.24 traced on FakeTensors (issue 20, item 3), for the CI checks that the
engine keeps what their trainable parts save (tests/test_odd_composites_blocks.py):

- ``gemma4_unified_assistant`` (modeling_gemma4_unified_assistant.py Gemma4UnifiedAssistantForCausalLM): Gemma 4's
  multi-token-prediction drafter. Its forward takes no input_ids: ``inputs_embeds`` (b, s, 2 x
  backbone_hidden_size: the backbone's token embedding and last hidden state) and ``shared_kv_states``, the
  backbone's last full- and sliding-attention layers' K/V ((b, kv, s, head_dim) each, after k_norm / rotary /
  v_norm), which every assistant layer reuses (its config sets num_kv_shared_layers = num_hidden_layers: q_proj,
  q_norm, o_proj and the MLP only). It returns logits and no loss. A step here: the backbone is frozen and ran
  first (its outputs made fresh each forward, no gradient, in the weights' dtype), then the assistant and
  ``self.loss_function(logits, labels, vocab_size)`` (ForCausalLMLoss, upcast) on its logits.

- ``pi0`` (modeling_pi0.py PI0ForConditionalGeneration): π0's flow-matching step, the SigLIP tower and projector
  frozen (vision.trainable's default): the prompt (its first n_img tokens the image token), one camera's pixel
  values, the state, noise, a fixed time (PI0 samples it from a Beta, which fake tensors cannot) and target actions,
  made once and kept as the batch; PaliGemma's Gemma runs the prefix with use_cache=True, the action expert the
  chunk_size + 1 suffix tokens over the cache, F.mse_loss on the predicted velocity. PI0 has no FlashAttention
  (PI0Model._supports_flash_attn False): SDPA rows; no checkpointing rows (NO_CKPT says why).
- ``evolla`` (modeling_evolla.py EvollaForProteinText2Text): the text and a protein of PROTEIN_TOKENS
  structure-aware tokens a sample (an all-ones mask, kept as the batch), the SaProt encoder frozen, the resampler
  and the adapters trained in full fine-tuning (PEFT's q_proj / v_proj are the Llama's). The adapters' forward
  branches on `protein_kv_attn_mask.any()`, which fake tensors cannot: _aligner_always_on takes the branch.
  EvollaPreTrainedModel has no FlashAttention: SDPA rows.

Rows (small configs, s 256, b 2): full bf16-pure FA2 (pi0: SDPA) with and without checkpointing, LoRA bf16-mixed
with and without, full bf16-mixed eager.

    python -m tools.memtrace.odd_composites_trace            # trace all rows, (re)write the fixtures
    python -m tools.memtrace.odd_composites_trace g4a-       # only the ids starting with this
"""
from __future__ import annotations

import os

from .grid import _p, trace_main

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "odd_composites")

CONFIGS = {
    # google/gemma-4-e2b-it-assistant's layout (the default Gemma4UnifiedAssistantConfig: a Gemma4UnifiedTextModel
    # reusing the backbone's K/V in every layer), cut to h 512, 4 heads, 2 KV heads of 128 (the full-attention
    # layer's 256), I 1024, 2 layers (sliding, full), backbone h 768, vocabulary 8000
    "g4a": {"model_type": "gemma4_unified_assistant", "backbone_hidden_size": 768, "tie_word_embeddings": True,
            "text_config": {"model_type": "gemma4_unified_text", "vocab_size": 8000, "hidden_size": 512,
                            "intermediate_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 4,
                            "num_key_value_heads": 2, "head_dim": 128,
                            "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 128,
                            "per_layer_config": {"1": {"head_dim": 256}}, "max_position_embeddings": 4096,
                            "tie_word_embeddings": True, "attention_dropout": 0.0}},
    # lerobot/pi0_base's layout (PI0Config's defaults: PaliGemma's Gemma of 18 layers, h 2048, 8 heads, 1 KV head
    # of 256; a Gemma-300M action expert of h 1024 sharing the head layout; SigLIP 224 px / 14), cut to 2 + 2
    # layers, VLM h 512, expert h 256, 4 heads, 1 KV head of 128, a 112 px / 14 tower of h 256 (64 image tokens),
    # vocabulary 8000; chunk_size 50, 32-dim state / actions as the defaults
    "pi0": {"model_type": "pi0", "chunk_size": 50, "max_state_dim": 32, "max_action_dim": 32,
            "vlm_config": {"model_type": "paligemma", "image_token_index": 8000, "projection_dim": 512,
                           "hidden_size": 512, "vocab_size": 8000, "tie_word_embeddings": True,
                           "text_config": {"model_type": "gemma", "vocab_size": 8000, "hidden_size": 512,
                                           "intermediate_size": 1024, "num_hidden_layers": 2,
                                           "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 128,
                                           "hidden_act": "gelu_pytorch_tanh", "max_position_embeddings": 8192,
                                           "use_bidirectional_attention": True, "num_image_tokens": 64},
                           "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 256,
                                             "intermediate_size": 512, "num_hidden_layers": 2,
                                             "num_attention_heads": 4, "image_size": 112, "patch_size": 14,
                                             "vision_use_head": False, "projection_dim": 512}},
            "dit_config": {"model_type": "gemma", "vocab_size": 8000, "hidden_size": 256, "intermediate_size": 1024,
                           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1,
                           "head_dim": 128, "hidden_act": "gelu_pytorch_tanh", "max_position_embeddings": 8192,
                           "use_bidirectional_attention": True, "is_causal": True}},
    # westlake/Evolla-10B-hf's layout (EvollaConfig's defaults: a Llama 3 8B of 32 layers with an adapter every 4th,
    # a SaProt-650M protein encoder, a 6-deep resampler of 64 latents) cut to a Llama of h 512, GQA 4/2 of 128,
    # I 1024, 2 layers with the adapter in layer 1 (aligner_num_add_layers 1), a SaProt of h 256, 2 layers, 4 heads,
    # I 512, a 2-deep resampler of 4 heads of 64 and 64 latents, vocabulary 8000; proteins of 128 tokens
    "evolla": {"model_type": "evolla", "vocab_size": 8000, "hidden_size": 512, "intermediate_size": 1024,
               "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_act": "silu",
               "max_position_embeddings": 8192, "rms_norm_eps": 1e-05, "attention_bias": False,
               "attention_dropout": 0.0, "mlp_bias": False, "aligner_ffn_mult": 4, "aligner_enable_bias": True,
               "aligner_attention_probs_dropout_prob": 0.1, "aligner_num_add_layers": 1, "resampler_depth": 2,
               "resampler_dim_head": 64, "resampler_heads": 4, "resampler_num_latents": 64, "resampler_ff_mult": 4,
               "tie_word_embeddings": False, "pad_token_id": 0, "protein_max_length": 128,
               "protein_encoder_config": {"vocab_size": 446, "mask_token_id": 4, "pad_token_id": 1,
                                          "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
                                          "intermediate_size": 512, "hidden_dropout_prob": 0.1,
                                          "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 1026,
                                          "position_embedding_type": "rotary", "emb_layer_norm_before": False,
                                          "token_dropout": True}},
}
# the proteins' length a sample: EvollaProcessor's protein_max_length (1024 by default), which zerocalc reads from
# the config's protein_max_length (model/evolla.py)
PROTEIN_TOKENS = CONFIGS["evolla"]["protein_max_length"]
TARGETS = {"g4a": ["q_proj", "o_proj"], "pi0": ["q_proj", "v_proj"], "evolla": ["q_proj", "v_proj"]}
# PI0Model / PI0ForConditionalGeneration._supports_flash_attn = False (the bidirectional mask over the actions);
# EvollaPreTrainedModel._supports_flash_attn = False (the resampler)
ATTENTION = {"pi0": "sdpa", "evolla": "sdpa"}
# PI0 under gradient checkpointing fails in transformers 5.24: the checkpointed PaliGemma language model sets
# use_cache=False (GemmaModel: "`use_cache=True` is incompatible with gradient checkpointing"), so PI0Model.forward's
# `self.vlm(..., use_cache=True).cache` is None and `cache.get_seq_length()` raises (AttributeError)
NO_CKPT = ("pi0",)


def _plan(fam: str, suffix: str, method: str, precision: str, attention: str, ckpt: str = "none") -> dict:
    return _p(f"{fam}-{suffix}", dict(CONFIGS[fam]), method, precision, attention, ckpt, mb=2, seq=256,
              lora={"targets": TARGETS[fam]})


def rows() -> list[dict]:
    out = []
    for fam in CONFIGS:
        a = ATTENTION.get(fam, "flash")
        out.append(_plan(fam, f"full-pure-{a}", "full", "bf16-pure", a))
        out.append(_plan(fam, f"lora-mixed-{a}", "lora", "bf16-mixed", a))
        if fam in NO_CKPT:
            out.append(_plan(fam, "full-mixed-eager", "full", "bf16-mixed", "eager"))
            continue
        out.append(_plan(fam, f"full-pure-{a}-gc", "full", "bf16-pure", a, "full"))
        out.append(_plan(fam, f"lora-mixed-{a}-gc", "lora", "bf16-mixed", a, "full"))
        out.append(_plan(fam, "full-mixed-eager", "full", "bf16-mixed", "eager"))
    return out


_PATCHED: list = []


def _assistant_forward(model, cfg, dt):
    """Gemma4UnifiedAssistantForCausalLM fed as a drafter's training step (module docstring)."""
    import torch  # noqa: PLC0415
    fwd = model.forward
    text = cfg.get_text_config()
    e = dt["base"]            # the backbone's outputs in the weights' dtype (fp32 under a bf16-mixed full row)

    def forward(input_ids=None, labels=None, **kw):
        b, s = labels.shape
        kinds = {}
        for i, kind in enumerate(text.layer_types):
            lc = text.per_layer_config[i]
            kinds.setdefault(kind, (lc.num_key_value_heads, lc.head_dim))
        kv = {k: (torch.zeros(b, n, s, d, dtype=e), torch.zeros(b, n, s, d, dtype=e)) for k, (n, d) in kinds.items()}
        emb = torch.zeros(b, s, 2 * cfg.backbone_hidden_size, dtype=e)
        out = fwd(inputs_embeds=emb, shared_kv_states=kv)
        out.loss = model.loss_function(out.logits, labels, text.vocab_size)
        return out
    return forward


def _pi0_forward(model, cfg, dt):
    """PI0ForConditionalGeneration fed one training sample a row (module docstring)."""
    import torch  # noqa: PLC0415
    fwd = model.forward
    vlm, v = cfg.vlm_config, cfg.vlm_config.vision_config
    n_img = (v.image_size // v.patch_size) ** 2
    px = dt["base"]
    batch: dict = {}

    def forward(input_ids=None, labels=None, **kw):
        # the batch (made in the first step's forward, inside the fake mode, and kept for the whole step, as
        # input_ids are): the prompt with its n_img image tokens first, one camera, the state, the noise, a fixed
        # flow-matching time (PI0 samples it from a Beta, which fake tensors cannot), the target actions
        if not batch:
            b = labels.shape[0]
            ids = input_ids.clone()
            ids[:, :n_img] = vlm.image_token_id
            batch.update(state=torch.zeros(b, cfg.max_state_dim, dtype=px),
                         noise=torch.zeros(b, cfg.chunk_size, cfg.max_action_dim, dtype=px),
                         timestep=torch.full((b,), 0.5, dtype=torch.float32), input_ids=ids,
                         pixel_values=torch.zeros(b, 1, v.num_channels, v.image_size, v.image_size, dtype=px),
                         pixel_attention_mask=torch.ones(b, 1, dtype=torch.bool),
                         actions=torch.zeros(b, cfg.chunk_size, cfg.max_action_dim, dtype=px))
        return fwd(**batch)
    return forward


def _evolla_forward(model, cfg, dt):
    """EvollaForProteinText2Text fed a protein beside the text: PROTEIN_TOKENS structure-aware tokens a sample, an
    all-ones protein mask, kept as the batch."""
    import torch  # noqa: PLC0415
    fwd = model.forward
    batch: dict = {}

    def forward(input_ids=None, labels=None, **kw):
        if not batch:
            b = labels.shape[0]
            batch.update(protein_input_ids=torch.full((b, PROTEIN_TOKENS), 5, dtype=torch.long),
                         protein_attention_mask=torch.ones(b, PROTEIN_TOKENS, dtype=torch.long))
        kw = {k: x for k, x in kw.items() if x is not None and k != "inputs_embeds"}
        return fwd(input_ids=input_ids, labels=labels, **batch, **kw)
    return forward


def _aligner_always_on() -> None:
    """EvollaSequenceAlignerCrossAttention.forward runs its cross-attention only `if protein_kv_attn_mask.any()`, a
    data-dependent branch fake tensors cannot take: the same forward, protein states only, with the branch taken
    (a protein in every sample, as the batch has)."""
    import torch  # noqa: PLC0415
    from transformers.models.evolla import modeling_evolla as me  # noqa: PLC0415

    def forward(self, query_states, protein_kv_states, structure_kv_states, msa_kv_states, query_attn_mask,
                protein_kv_attn_mask=None, structure_kv_attn_mask=None, msa_kv_attn_mask=None,
                protein_batch_mask=None, structure_batch_mask=None, msa_batch_mask=None, cache=None):
        bs, protein_kv_seq_len, dim = protein_kv_states.shape
        if protein_kv_attn_mask is None:
            protein_kv_attn_mask = (torch.ones(bs, protein_kv_seq_len).to(protein_batch_mask.device)
                                    * protein_batch_mask.expand(size=(protein_kv_seq_len, bs)).T
                                    ).to(protein_kv_states.device)
        residual = query_states
        hidden_states = self.cross_attention(
            query_states=query_states, protein_key_value_states=protein_kv_states, structure_key_value_states=None,
            msa_key_value_states=None, query_attn_mask=query_attn_mask, protein_kv_attn_mask=protein_kv_attn_mask,
            structure_kv_attn_mask=None, msa_kv_attn_mask=None)
        hidden_states = torch.tanh(self.gate_attention) * hidden_states
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.ff(hidden_states) * torch.tanh(self.gate_ffw)
        return residual + hidden_states
    me.EvollaSequenceAlignerCrossAttention.forward = forward


CLASSES = {"pi0": "PI0ForConditionalGeneration", "evolla": "EvollaForProteinText2Text"}
# vision.trainable "frozen": the tower and its projector take no gradient (Evolla: the SaProt protein encoder)
TOWERS = {"pi0": ("model.vlm.vision_tower", "model.vlm.multi_modal_projector"),
          "evolla": ("model.protein_encoder.model",)}


def _patch() -> None:
    """Make the tracer build and feed the composites (in the worker process, once)."""
    if _PATCHED:
        return
    _PATCHED.append(True)
    from . import build, trace  # noqa: PLC0415
    orig_build, orig_class = trace.build_meta_model, build.model_class

    class Direct:
        """The class itself where no auto class maps the config for training from a config."""
        def __init__(self, name):
            self.name = name

        def from_config(self, cfg, **kw):
            import transformers  # noqa: PLC0415
            return getattr(transformers, self.name)._from_config(cfg, **kw)

    def model_class(p):
        if isinstance(p.model, dict) and p.model.get("model_type") in CLASSES:
            return Direct(CLASSES[p.model["model_type"]])
        return orig_class(p)
    build.model_class = model_class
    import transformers  # noqa: PLC0415
    # PEFT's CAUSAL_LM wrapper reads the base model's prepare_inputs_for_generation, which PI0 has none of
    transformers.PI0ForConditionalGeneration.prepare_inputs_for_generation = lambda self, *a, **k: {}
    _aligner_always_on()

    def build_meta(p, gc_context_fn=None):
        model, cfg, dt = orig_build(p, gc_context_fn=gc_context_fn)
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        for part in TOWERS.get(cfg.model_type, ()):
            base.get_submodule(part).requires_grad_(False)
        if cfg.model_type == "gemma4_unified_assistant":
            base.forward = _assistant_forward(base, cfg, dt)
        elif cfg.model_type == "pi0":
            base.forward = _pi0_forward(base, cfg, dt)
        elif cfg.model_type == "evolla":
            base.forward = _evolla_forward(base, cfg, dt)
        return model, cfg, dt
    trace.build_meta_model = build_meta


if __name__ == "__main__":
    trace_main(rows(), OUT, _patch)
