"""LoRA / QLoRA: which tensors train, and what the frozen base costs.

- Adapters (PEFT `LoraLayer.update_layer`): for each targeted nn.Linear, `lora_A` (r x d_in) and
  `lora_B` (d_out x r): r*(d_in + d_out) parameters.
- 4-bit base (bitsandbytes `Linear4bit`, `QuantState`): every nn.Linear of the decoder blocks is
  quantized, not only the LoRA targets; embeddings, norms and the output head stay 16-bit
  (transformers keeps `lm_head` out: `get_keys_to_not_convert`). Storage: 0.5 B per weight
  (two 4-bit codes per byte) plus the absmax of each 64-element block: fp32 (4 B / 64) without
  double quantization; with it an 8-bit absmax per block plus an fp32 absmax per 256 blocks
  (bitsandbytes functional.quantize_4bit, compress_statistics=True).
- 8-bit base (LLM.int8, `Linear8bitLt`): 1 B per weight plus an fp32 scale per output row (SCB).
- transformers 5 stores MoE experts as fused 3-D parameters, not nn.Linear: bitsandbytes leaves them
  16-bit and PEFT cannot target them with `target_modules` (an advice warning says so).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..model import Linear, ModelArch
from ..units import ceil_div
from ..plan import Plan

NF4_BLOCK = 64          # bitsandbytes 4-bit blocksize (Linear4bit default)
DQ_GROUP = 256          # double quantization: absmax values per second-level fp32 scale


@dataclass(frozen=True)
class Adapter:
    name: str
    d_in: int
    d_out: int
    rank: int

    @property
    def numel(self) -> int:
        return self.rank * (self.d_in + self.d_out)


# Models whose fused 3-D expert parameters PEFT 0.21 adapts from the usual target names (ParamWrapper):
# gate_proj and up_proj each put an adapter on gate_up_proj, down_proj one on down_proj, r per expert
# (traced: qwen3-moe; Mixtral's experts are not matched by the same names).
ADAPTED_EXPERTS = ("qwen3_moe",)


def layer_adapters(arch: ModelArch, plan: Plan, linears: tuple[Linear, ...]) -> tuple[Adapter, ...]:
    """Adapters PEFT attaches to one block: every nn.Linear whose leaf name is a target."""
    return _adapters(linears, plan.lora.targets, plan.lora.rank, arch.model_type in ADAPTED_EXPERTS)


@lru_cache(maxsize=256)
def _adapters(linears: tuple[Linear, ...], targets: tuple[str, ...], rank: int,
              fused_experts: bool) -> tuple[Adapter, ...]:
    # PEFT matches a target against the module name's last segment: a scoped or dotted linear
    # ("gated_cross_attn.q_proj", model/vision_idefics.py; DeepSeek-V4's "compressor.kv_proj") by its leaf
    out = [Adapter(lin.name, lin.d_in, lin.d_out, rank) for lin in linears
           if lin.count == 1 and (lin.name in targets or lin.name.rpartition(".")[2] in targets)]
    if fused_experts:
        for lin in linears:
            if lin.count == 1:
                continue
            names = ("gate_proj", "up_proj") if lin.name == "gate_up_proj" else (lin.name,)
            for n in names:
                if n in targets:
                    out.append(Adapter(f"experts.{lin.name}.{n}", lin.d_in, lin.d_out, rank * lin.count))
    return tuple(out)


def block_linears_per_layer(arch: ModelArch) -> list[tuple[Linear, ...]]:
    if arch.ssm and "layers" in arch.ssm:
        return list(arch.ssm["layers"])            # hybrids: each layer's kind (model/ssm.py)
    if arch.layer_linears:
        return list(arch.layer_linears)            # layers of their own kind or shape (model/hybrid.py, model/gemma4.py)
    dense = arch.moe.dense_layers if arch.moe else arch.num_layers
    return [arch.dense_block_linears if i < dense else arch.block_linears for i in range(arch.num_layers)]


def adapters_per_layer(arch: ModelArch, plan: Plan) -> list[tuple[Adapter, ...]]:
    """``layer_adapters`` of every block in order; the blocks share two linears tuples (dense, MoE), each
    resolved once (the memo's key, a tuple of dataclasses, costs more to hash than the adapters to build)."""
    memo: dict[int, tuple[Adapter, ...]] = {}
    out = []
    for lins in block_linears_per_layer(arch):
        k = id(lins)
        if k not in memo:
            memo[k] = layer_adapters(arch, plan, lins)
        out.append(memo[k])
    return out


LOOPED = ("hrm_text", "dory", "inkling2_loop_text", "inkling2_loop")   # layer calls outnumber the blocks


def adapters_per_block(arch: ModelArch, plan: Plan) -> list[tuple[Adapter, ...]]:
    """The adapters PEFT builds: ``adapters_per_layer``, but a looped model's num_layers counts its layer calls
    (model/hrm_text.py, model/dory.py) and PEFT wraps each module once, so one adapter set per block (traced:
    tools/memtrace/golden/oneoff/hrm_text-lora-*, 4 blocks called 8 times)."""
    per_layer = adapters_per_layer(arch, plan)
    if arch.model_type in LOOPED:
        per_layer = per_layer[:len({t.block for t in arch.tensors if t.block})]
    return per_layer


def adapter_params(arch: ModelArch, plan: Plan) -> int:
    """Trainable LoRA parameters of the whole model (lm_head too when targeted)."""
    if plan.method == "full":
        return 0
    total = sum(sum(a.numel for a in ads) for ads in adapters_per_block(arch, plan))
    if "lm_head" in plan.lora.targets:
        total += plan.lora.rank * (arch.hidden_size + arch.vocab_size)
    return total


def largest_adapter(arch: ModelArch, plan: Plan) -> int:
    sizes = [a.numel // 2 for ads in adapters_per_block(arch, plan) for a in ads]
    return max(sizes + [0])


def matched_targets(arch: ModelArch, plan: Plan) -> tuple[str, ...]:
    names = set(arch.linear_names()) | {"lm_head"}
    return tuple(t for t in plan.lora.targets if t in names)


def quantized_linear_bytes(numel: int, d_out: int, plan: Plan) -> int:
    """Bytes of one quantized weight matrix (storage + statistics).

    GPTQ (auto-gptq / optimum `QuantLinear` buffers, d_in x d_out, g groups of group_size input rows, one
    group per column when group_size is -1): qweight int32 packing d_in·d_out·bits/8 bytes, qzeros packing
    g·d_out·bits/8, fp16 scales 2·g·d_out, int32 g_idx 4·d_in."""
    q = plan.quantization
    if q.type == "gptq":
        d_in = numel // d_out
        groups = 1 if q.group_size == -1 else ceil_div(d_in, q.group_size)
        return numel * q.bits // 8 + groups * d_out * q.bits // 8 + 2 * groups * d_out + 4 * d_in
    if q.type == "int8":
        return numel + 4 * d_out                                 # int8 codes + fp32 row scales (SCB)
    blocks = ceil_div(numel, NF4_BLOCK)
    packed = ceil_div(numel, 2)                                     # two 4-bit codes per byte
    if q.double_quant:
        return packed + blocks + 4 * ceil_div(blocks, DQ_GROUP)      # uint8 absmax + fp32 second level
    return packed + 4 * blocks                                  # fp32 absmax per 64-block


def quantized_base(arch: ModelArch) -> tuple[int, int, tuple[tuple[int, int], ...]]:
    """(numel quantized, numel kept 16-bit, (numel, d_out) of each quantized matrix)."""
    quant = arch.block_matrices_numel
    return quant, arch.total_params - quant, arch.block_matrices


def torchao_nf4_bytes(numel: int, dtype_bytes: int) -> int:
    """Bytes of one torchao 0.10.0 NF4Tensor (torchtune's QLoRA base weight: `LoRALinear(quantize_base=True)` /
    `FrozenNF4Linear` call `to_nf4(weight)`, block 64, scaler block 256; torchao/dtypes/nf4tensor.py
    `NF4Tensor.from_tensor` and `double_quantize_scalers`): quantized_data uint8 numel/2, quantized_scalers int8
    per 64-block, quantization_factor per 256 scalers and scaler_mean in the weight's dtype (`dtype_bytes`,
    bf16 under torchtune's `set_default_dtype`), and the 16-entry `nf4` table in that dtype, per weight.
    torchao asserts numel % 64 == 0 and blocks % 256 == 0. Traced: tools/memtrace/golden/stacks tt-l1b-qlora-*."""
    blocks = numel // NF4_BLOCK
    return numel // 2 + blocks + dtype_bytes * (blocks // DQ_GROUP) + dtype_bytes + 16 * dtype_bytes


def qlora_base_bytes(arch: ModelArch, plan: Plan, kept_dtype: int) -> int:
    """Frozen base of a QLoRA model: quantized linears + 16-bit embeddings, norms, head (torchtune: torchao's
    NF4Tensor layout, `torchao_nf4_bytes`; otherwise bitsandbytes' / GPTQ's, `quantized_linear_bytes`)."""
    _, kept, _ = quantized_base(arch)
    mats = arch.block_matrix_counts           # each distinct (numel, d_out) once, times its count
    if plan.stack.trainer == "torchtune" and plan.quantization.type == "nf4":
        return sum(c * torchao_nf4_bytes(n, kept_dtype) for (n, _), c in mats) + kept * kept_dtype
    return sum(c * quantized_linear_bytes(n, d_out, plan) for (n, d_out), c in mats) + kept * kept_dtype


TRL_BF16_NAMES = ("lm_head", "embed_tokens", "wte", "wpe")


def trl_bf16_numel(arch: ModelArch) -> int:
    """Elements TRL's ``peft_module_casting_to_bf16`` (trl/trainer/utils.py, 0.9-0.24) casts back to bf16 after
    ``prepare_model_for_kbit_training``: modules named ``lm_head``, ``embed_tokens``, ``wte`` or ``wpe`` (a
    module whose name holds ``norm`` is cast to fp32 first, by the function's own ``elif`` order). A tied head is
    the embedding's tensor, counted once."""
    return sum(t.numel for t in arch.tensors
               if "norm" not in t.module and any(x in t.module for x in TRL_BF16_NAMES))


def modules_to_save_numel(arch: ModelArch, plan: Plan) -> int:
    """PEFT `modules_to_save`: each named module gets a trainable copy beside the frozen original
    (peft/utils/other.py ModulesToSaveWrapper: copy.deepcopy(original_module)). A tied lm_head's copy is a
    new V x h matrix."""
    names = plan.lora.modules_to_save
    if not names:
        return 0
    total = sum(t.numel for t in arch.tensors if any(t.module == n or t.module.endswith("." + n) for n in names))
    if "lm_head" in names and arch.tied_embeddings and arch.causal_lm:
        total += arch.vocab_size * arch.hidden_size
    return total


def largest_quantized_matrix(arch: ModelArch) -> int:
    return max((n for (n, _), _ in arch.block_matrix_counts), default=0)
