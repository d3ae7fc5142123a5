"""What a Qwen2-VL / Qwen2.5-VL / Qwen3-VL vision tower keeps for backward, traced on CPU tensors.

The tower alone (``model.visual``: modeling_qwen2_vl.py Qwen2VisionTransformerPretrainedModel,
modeling_qwen2_5_vl.py Qwen2_5_VisionTransformerPretrainedModel, modeling_qwen3_vl.py Qwen3VLVisionModel,
modeling_qwen3_5.py Qwen3_5VisionModel, modeling_exaone4_5.py Exaone4_5_VisionModel; transformers 5.24) runs one forward, attn_implementation "sdpa", bf16 weights, trainable, on the flattened
patches of `images` images of `h` x `w` pixels (pixel_values (patches, 3 * temporal_patch_size * patch^2), as
Qwen2VLImageProcessor emits them, and image_grid_thw). Its outputs are what the language model reads
(pooler_output, and Qwen3-VL's deepstack features); their sum stands for the loss (sum saves no tensor), the
outputs are dropped, and the activation storages still alive are what autograd saved. The language model
receives the merged tokens through masked_scatter, which saves only its mask, so the tower's share of a
step's saved activations is this number.

The window / cu_seqlens indexes are data-dependent (``.tolist()``), so the tower runs on real CPU tensors
(tiny widths, a few hundred patches: milliseconds); the ops dispatch as on FakeTensors (CPU SDPA is
aten._scaled_dot_product_flash_attention_for_cpu: q, k, v, the output and an fp32 logsumexp saved).

  python -m tools.memtrace.vision_qwen > tests/data/vision_qwen_trace.json      (a few seconds)
"""
from __future__ import annotations

import contextlib
import json
import sys

import torch

from .tracker import StorageTracker

TOWERS = {
    "2": {"depth": 4, "embed_dim": 128, "num_heads": 4, "mlp_ratio": 4, "hidden_size": 256, "patch_size": 14,
          "spatial_merge_size": 2, "temporal_patch_size": 2, "hidden_act": "quick_gelu"},
    "2.5": {"depth": 4, "hidden_size": 128, "num_heads": 4, "intermediate_size": 344, "out_hidden_size": 256,
            "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "window_size": 56,
            "fullatt_block_indexes": [1, 3], "hidden_act": "silu"},
    "3": {"depth": 4, "hidden_size": 128, "num_heads": 4, "intermediate_size": 344, "out_hidden_size": 256,
          "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2, "num_position_embeddings": 64,
          "deepstack_visual_indexes": [1, 2], "hidden_act": "gelu_pytorch_tanh"},
    "3.5": {"depth": 4, "hidden_size": 128, "num_heads": 4, "intermediate_size": 344, "out_hidden_size": 256,
            "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2, "num_position_embeddings": 64,
            "hidden_act": "gelu_pytorch_tanh"},
    # EXAONE 4.5 (modeling_exaone4_5.py Exaone4_5_VisionModel): Qwen2.5-VL's tower with grouped k/v in the qkv
    "exaone4.5": {"depth": 4, "hidden_size": 128, "num_heads": 4, "num_key_value_heads": 2, "intermediate_size": 344,
                  "out_hidden_size": 256, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
                  "window_size": 56, "fullatt_block_indexes": [1, 3], "hidden_act": "silu"},
}
# (version, images, (h, w) in pixels): patches = (h / patch) * (w / patch) per image
CASES = [("2", 1, (112, 112)), ("2", 2, (112, 168)),
         ("2.5", 1, (112, 112)), ("2.5", 2, (112, 168)), ("2.5", 1, (224, 224)),
         ("3", 1, (128, 128)), ("3", 2, (128, 192)), ("3.5", 1, (128, 128)), ("3.5", 2, (128, 192)),
         # gradient checkpointing (model.gradient_checkpointing_enable(): every VisionBlock is a
         # GradientCheckpointingLayer, use_reentrant False as Trainer sets it)
         ("2", 2, (112, 168), True), ("2.5", 2, (112, 168), True), ("3", 2, (128, 192), True),
         # attn_implementation flash_attention_2 (HF's varlen glue; the kernel's saves stood in for on CPU)
         ("2", 2, (112, 168), False, "flash_attention_2"), ("2.5", 2, (112, 168), False, "flash_attention_2"),
         ("3", 2, (128, 192), False, "flash_attention_2"), ("3.5", 1, (128, 128), False, "flash_attention_2"),
         ("exaone4.5", 2, (112, 168)), ("exaone4.5", 2, (112, 168), False, "flash_attention_2")]


def build(version: str):
    from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as m25  # noqa: PLC0415
    from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig  # noqa: PLC0415
    from transformers.models.qwen2_vl import modeling_qwen2_vl as m2  # noqa: PLC0415
    from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLVisionConfig  # noqa: PLC0415
    from transformers.models.qwen3_vl import modeling_qwen3_vl as m3  # noqa: PLC0415
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLVisionConfig  # noqa: PLC0415
    from transformers.models.qwen3_5 import modeling_qwen3_5 as m35  # noqa: PLC0415
    from transformers.models.exaone4_5 import modeling_exaone4_5 as mex  # noqa: PLC0415
    from transformers.models.exaone4_5.configuration_exaone4_5 import Exaone4_5_VisionConfig  # noqa: PLC0415
    from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5VisionConfig  # noqa: PLC0415
    cls, cfg_cls = {"2": (m2.Qwen2VisionTransformerPretrainedModel, Qwen2VLVisionConfig),
                    "2.5": (m25.Qwen2_5_VisionTransformerPretrainedModel, Qwen2_5_VLVisionConfig),
                    "3": (m3.Qwen3VLVisionModel, Qwen3VLVisionConfig),
                    "3.5": (m35.Qwen3_5VisionModel, Qwen3_5VisionConfig),
                    "exaone4.5": (mex.Exaone4_5_VisionModel, Exaone4_5_VisionConfig)}[version]
    cfg = cfg_cls(**TOWERS[version])
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = cls._from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa")
    model.train()
    return model, cfg


class _FlashVarlenSaves(torch.autograd.Function):
    """flash-attn 2's FlashAttnVarlenFunc as far as memory goes (flash_attn_interface.py: forward makes q, k, v
    contiguous only where their last stride is not 1, and ctx.save_for_backward(q, k, v, out_padded,
    softmax_lse, cu_seqlens_q, cu_seqlens_k, rng_state); out (total, heads, head_dim) in the input dtype,
    softmax_lse (heads, total) fp32). The values are not computed: only what is kept is traced."""

    @staticmethod
    def forward(ctx, q, k, v, cu_q, cu_k):
        out = torch.empty_like(q)
        # varlen (total, heads, d): lse (heads, total); flash_attn_func (b, s, heads, d): lse (b, heads, s)
        lse = torch.empty(*q.shape[:-3], q.shape[-2], q.shape[-3], dtype=torch.float32)
        ctx.save_for_backward(*(t for t in (q, k, v, out, lse, cu_q, cu_k) if t is not None))
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v = ctx.saved_tensors[:3]
        return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v), None, None


def _flash_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None, dropout_p=0.0,
                  softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                  deterministic=False, return_attn_probs=False, block_table=None):
    """flash_attn_varlen_func's signature (flash-attn 2.x), so HF's kwargs processing treats it as FA2's."""
    q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))
    return _FlashVarlenSaves.apply(q, k, v, cu_seqlens_q, cu_seqlens_k)


def _flash(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
           alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """flash_attn_func's signature (flash-attn 2.x): FlashAttnFunc saves q, k, v, out_padded, softmax_lse."""
    q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))
    return _FlashVarlenSaves.apply(q, k, v, None, None)


@contextlib.contextmanager
def flash_attention_2():
    """attn_implementation "flash_attention_2" without the flash-attn package: HF's own glue runs
    (integrations/flash_attention.py flash_attention_forward, modeling_flash_attention_utils.py
    _flash_attention_forward with the vision tower's cu_seqlens: the varlen branch, q/k/v reshaped as views),
    and only the kernel is _flash_varlen (_flash without cu_seqlens)."""
    import transformers.modeling_flash_attention_utils as fau  # noqa: PLC0415
    orig = fau.lazy_import_flash_attention
    fns = ((_flash, _flash_varlen, None, fau._pad_input, fau._unpad_input),
           (fau._lazy_define_process_function(_flash_varlen), dict))
    fau.lazy_import_flash_attention = lambda *a, **k: fns
    try:
        yield
    finally:
        fau.lazy_import_flash_attention = orig


def saved_after_forward(model, inputs: tuple, forward) -> int:
    """Activation bytes autograd still holds once ``forward()``'s outputs are dropped and only the loss (the
    sum of pooler_output, or of its per-image pieces, and of any deepstack features) is kept; weights, buffers
    and inputs left out."""
    tr = StorageTracker()
    for prm in model.parameters():
        tr.register(prm, "weight", "")
    for bf in model.buffers():
        tr.register(bf, "weight", "buffer")
    for t in inputs:
        tr.register(t, "act", "input")
    with tr:
        tr.set_phase("forward")
        out = forward()
        pooled = out.pooler_output      # one tensor, or one per image (Mistral 3's torch.split)
        loss = sum(t.float().sum() for t in pooled) if isinstance(pooled, (tuple, list)) else pooled.float().sum()
        for feat in getattr(out, "deepstack_features", None) or ():
            loss = loss + feat.float().sum()
        del out
        feat = pooled = None
        snap = tr.snapshot()
    del loss
    return sum(v for (c, sub), v in snap.by_key.items() if c == "act" and sub != "input")


def print_trace(generator: str, cases: list, trace, **extra) -> int:
    """Writes one trace fixture to stdout: the generator, the versions, ``extra`` and every traced case."""
    import transformers  # noqa: PLC0415
    out = {"generator": generator, "transformers": transformers.__version__,
           "torch": torch.__version__.split("+")[0], **extra, "cases": [trace(c) for c in cases]}
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


def trace_case(version: str, images: int, hw: tuple[int, int], checkpointing: bool = False,
               attention: str = "sdpa") -> dict:
    model, cfg = build(version)
    if attention == "flash_attention_2":
        model.config._attn_implementation = "flash_attention_2"
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    p, t = cfg.patch_size, cfg.temporal_patch_size
    gh, gw = hw[0] // p, hw[1] // p
    grid = torch.tensor([[1, gh, gw]] * images)
    n = images * gh * gw
    pix = torch.randn(n, 3 * t * p * p, dtype=torch.bfloat16)
    with flash_attention_2() if attention == "flash_attention_2" else contextlib.nullcontext():
        saved = saved_after_forward(model, (pix, grid), lambda: model(pix, grid_thw=grid))
    name = version if version.startswith("exaone") else f"qwen{version}-vl"
    return {"id": f"{name}-tower-i{images}-{hw[0]}x{hw[1]}" + ("-ac" if checkpointing else "")
            + ("-fa2" if attention == "flash_attention_2" else ""), "attention": attention,
            "version": version, "images": images, "checkpointing": checkpointing,
            "height": hw[0], "width": hw[1], "patches": n, "tokens": n // cfg.spatial_merge_size ** 2,
            "saved_bytes_forward_end": saved, "params": sum(q.numel() for q in model.parameters())}


def main() -> int:
    return print_trace("python -m tools.memtrace.vision_qwen", CASES, lambda c: trace_case(*c), towers=TOWERS)


if __name__ == "__main__":
    raise SystemExit(main())
