"""Hybrid linear attention: the Gated DeltaNet layers of Qwen3-Next and Qwen3.5 (transformers 5.24
modeling_qwen3_next.py Qwen3NextGatedDeltaNet, modeling_qwen3_5.py Qwen3_5GatedDeltaNet), which replace
self-attention in the layers ``layer_types`` marks ``linear_attention`` (without layer_types: all but every
``full_attention_interval``-th, 4 by default). With nk / nv key / value heads of dk / dv dims
(linear_num_key_heads, linear_num_value_heads, linear_key_head_dim, linear_value_head_dim), key = nk·dk,
value = nv·dv, conv = 2·key + value:

- Qwen3-Next (fused): dt_bias (nv), A_log (nv), conv1d (conv, 1, linear_conv_kernel_dim), in_proj_qkvz
  (h -> 2·key + 2·value), in_proj_ba (h -> 2·nv), norm (dv, gated RMSNorm), out_proj (value -> h);
- Qwen3.5 (split): dt_bias, A_log, conv1d, norm, out_proj, in_proj_qkv (h -> conv), in_proj_z (h -> value),
  in_proj_b and in_proj_a (h -> nv each).

Their full-attention layers are gated: q_proj projects to 2 x heads x head_dim (query and its gate).
The parameters are exact (tests/test_architectures.py); the recurrent state's activations are not traced
(the layer is costed as an attention block of the same linears)."""
from __future__ import annotations

from .arch import Linear
from .config import ConfigReader, TensorList


def is_linear_layer(c: ConfigReader, i: int) -> bool:
    kinds = c.cfg.get("layer_types")
    if isinstance(kinds, list) and i < len(kinds):
        return kinds[i] == "linear_attention"
    return (i + 1) % c.int("full_attention_interval", default=4) != 0


def gated_deltanet(b: TensorList, p: str, h: int, c: ConfigReader, fused: bool, out: list[Linear]) -> None:
    nk, nv = c.int("linear_num_key_heads", default=16), c.int("linear_num_value_heads", default=32)
    dk, dv = c.int("linear_key_head_dim", default=128), c.int("linear_value_head_dim", default=128)
    kern = c.int("linear_conv_kernel_dim", default=4)
    key, value = nk * dk, nv * dv
    conv = 2 * key + value
    a = f"{p}.linear_attn"
    b.param(a, "dt_bias", nv, "attention")
    b.param(a, "A_log", nv, "attention")
    b.matrix(f"{a}.conv1d", "weight", (conv, 1, kern), "attention")
    if fused:
        for name, d_out in (("in_proj_qkvz", 2 * key + 2 * value), ("in_proj_ba", 2 * nv)):
            b.linear(f"{a}.{name}", h, d_out, "attention")
            out.append(Linear(name, h, d_out))
        b.norm(f"{a}.norm", dv)
        b.linear(f"{a}.out_proj", value, h, "attention")
    else:
        b.norm(f"{a}.norm", dv)
        b.linear(f"{a}.out_proj", value, h, "attention")
        for name, d_out in (("in_proj_qkv", conv), ("in_proj_z", value), ("in_proj_b", nv), ("in_proj_a", nv)):
            b.linear(f"{a}.{name}", h, d_out, "attention")
            out.append(Linear(name, h, d_out))
    out.append(Linear("out_proj", value, h))
