"""The tensors autograd saves between forward and backward in one decoder block, op by op.

Each block is written as the sequence of ops the Hugging Face modelling code runs
(transformers 5.x `modeling_llama.py` and relatives), and every op records what its backward needs
(`SavedSet.save`). A tensor saved by several ops (the norm output read by q, k and v) counts once:
keys name the storage. The per-op rules were read off traces of the real step on fake tensors
(docs/tracer.md §3, dump of saved tensors) and match them within 0.1 % for Llama 3.2 1B and
Llama 3.1 8B:

- HF RMSNorm is unfused: it keeps the fp32 upcast of its input and, when its weight trains, the
  normalised 16-bit tensor (8·s·b·h per norm in bf16, against 2·s·b·h in the Korthikanti paper).
- A trainable linear keeps its input; a frozen one keeps nothing (its weight is enough for the input
  gradient). Under autocast each linear casts a fp32 input to its own 16-bit copy.
- PEFT LoRA casts the input to the adapter dtype (a copy per adapter unless the dtypes match), keeps it
  for lora_A and keeps lora_A's output (r per token) for lora_B; dropout adds a 1-byte CUDA mask and its
  own output.
- Flash/SDPA attention keeps q, k, v (kv heads; every query head where the code expands them first:
  transformers 4.x sdpa, LitGPT, torchtune), the output and an fp32 logsumexp per head and token;
  eager attention keeps the repeated K/V, the fp32 softmax and its 16-bit copy (6·a·s²·b bytes); so do the
  GPT-2 / BERT-era blocks under CUDA autocast, with a 1-byte dropout mask (7·a·s²·b).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..model import Linear, ModelArch
from .lora import Adapter

MASK = 1  # CUDA dropout keeps a bool mask (aten::native_dropout), 1 byte per element


class SavedSet:
    """Bytes of distinct saved storages, keyed by name."""

    def __init__(self):
        self.items: dict[str, int] = {}

    def save(self, key: str, nbytes: int) -> None:
        self.items.setdefault(key, nbytes)

    @property
    def total(self) -> int:
        return sum(self.items.values())


@dataclass(frozen=True)
class Ctx:
    tokens: int          # s * b of one micro-batch
    seq: int
    batch: int
    e: int               # 16-bit or fp32 compute dtype of the block's activations
    res: int             # residual stream dtype (fp32 under AMP with fp32 weights)
    autocast: bool
    train_base: bool     # full fine-tuning: base weights require grad
    adapter_bytes: int
    dropout: float
    attention: str       # flash / sdpa / eager
    first_layer: bool    # nothing before layer 0 needs a gradient under LoRA
    quant_input: int = 0     # bitsandbytes < 0.43.2: each 4-bit linear keeps its input, in this many bytes
    quant_out_as_input: bool = False  # bnb Linear4bit bases: output cast back to the input's dtype (QLoRA)
    compiled: bool = False   # torch.compile'd blocks: pointwise ops fused and recomputed in backward
    kv_expanded: bool = False  # SDPA given K/V repeated to every query head (transformers 4.x sdpa, LitGPT)
    attn_out_copied: bool = False   # o_proj reads a contiguous copy of SDPA's (saved) output
    fused_gelu: bool = False  # one GELU kernel (LitGPT, torchtune) instead of transformers' python gelu_new
    fp32_norm_out: bool = False  # torchtune RMSNorm: the scale multiplies the fp32 normalised tensor and keeps it
    fused_norm: bool = False  # nn.RMSNorm with matching dtypes (torchtitan): CUDA's one-kernel _fused_rms_norm
    own_model: bool = False   # LitGPT / torchtune / torchtitan run their own model code, not transformers' blocks


# --- op rules -------------------------------------------------------------------------------------


def rmsnorm(ss: SavedSet, c: Ctx, key: str, x: str, d: int, gemma: bool = False, groups: int = 1,
            x_bytes: int = 0) -> str:
    """HF LlamaRMSNorm / Gemma RMSNorm over the last dim d, `groups` norms per token (per-head q/k
    norms). `x_bytes`: the input's dtype when it is not the residual stream's (a projection's output: the
    q/k norms). Returns the key of the output (dtype c.res)."""
    xb = x_bytes or c.res
    needs_grad = not (c.first_layer and not c.train_base)
    if c.compiled:
        # torch.compile: the partitioner (torch/_functorch/partitioners.py min_cut_rematerialization_partition)
        # keeps the fused region's input and the per-row rsqrt, and recomputes the upcast and the normalised
        # tensor in backward
        if needs_grad or c.train_base:
            ss.save(x, c.res * c.tokens * d)
            ss.save(f"{key}.rsqrt", 4 * c.tokens * groups)
        return f"{key}.out"
    if c.fused_norm:
        # torchtitan's RMSNorm is nn.RMSNorm: F.rms_norm -> torch 2.13 rms_norm_symint (layer_norm.cpp) calls
        # at::_fused_rms_norm when input and weight dtypes match, a CUDA kernel whose FusedRmsNormBackward0
        # saves the input and the fp32 rstd (derivatives.yaml _fused_rms_norm). Traced with the CUDA dispatch
        # emulated (tools/memtrace/titan.py cuda_fused_rms_norm; the CPU build decomposes it instead)
        ss.save(x, c.res * c.tokens * d)
        ss.save(f"{key}.rsqrt", 4 * c.tokens * groups)
        return f"{key}.out"
    if needs_grad:
        # hs = x.to(float32): a new fp32 tensor, or x itself when already fp32 (pow keeps it)
        ss.save(f"{key}.fp32" if xb != 4 else x, 4 * c.tokens * d)
        ss.save(f"{key}.rsqrt", 4 * c.tokens * groups)          # rsqrt(variance + eps), fp32 (b, s, 1)
    if c.train_base:
        # weight * hs.to(dtype): the normalised tensor is kept for the weight gradient.
        # Gemma multiplies in fp32: output * (1 + weight.float()). torchtune 0.6.1 (modules/rms_norm.py:38
        # RMSNorm.forward) calls F.rms_norm(x.float(), weight=scale) with a bf16 scale: the dtypes differ, so
        # torch's rms_norm_symint falls back to rms_norm_composite on every device (torch 2.13
        # aten/src/ATen/native/layer_norm.cpp:346, "Cannot dispatch to fused implementation"), whose
        # `upcasted_result.mul(weight)` keeps the fp32 normalised tensor (traced: 4·s·b·h bytes, not 2·s·b·h)
        # LlamaRMSNorm: `self.weight * hidden_states.to(input_dtype)` keeps the normalised tensor in the input's
        # dtype: 16-bit for a q/k norm under autocast (Qwen3RMSNorm; traced: golden/families/qwen3-full-mixed-*)
        ss.save(f"{key}.normed", (4 if gemma or c.fp32_norm_out else xb) * c.tokens * d)
    return f"{key}.out"


def linear(ss: SavedSet, c: Ctx, x: str, x_bytes: int, lin: Linear, adapter: Adapter | None) -> None:
    """A (possibly LoRA-wrapped) nn.Linear reading tensor `x` of x_bytes per element."""
    n_in = c.tokens * lin.d_in
    if c.train_base:
        if c.autocast and x_bytes == 4:
            ss.save(f"{x}.bf16.{lin.name}", 2 * n_in)          # autocast's own 16-bit copy
        else:
            ss.save(x, x_bytes * n_in)
    elif c.quant_input and lin.count == 1:
        # bitsandbytes < 0.43.2 MatMul4Bit.forward: ctx.tensors = (A, B), A = x.to(compute_dtype) (a copy when
        # the dtypes differ), kept until the graph is freed although the backward never reads it
        ss.save(x if x_bytes == c.quant_input else f"{x}.bnb.{lin.name}", c.quant_input * n_in)
    if adapter is None:
        return
    a = c.adapter_bytes
    cast_copy = a != x_bytes                                    # _cast_input_dtype makes a new tensor
    src, src_bytes = (f"{x}.lora.{lin.name}", a) if cast_copy else (x, x_bytes)
    if c.dropout > 0:
        if not (c.first_layer and not c.train_base):
            # native_dropout keeps its mask only for its input's gradient: none before layer 0's first
            # trainable op (traced: tools/memtrace/golden/families/*-lora-*, layer 0's q/k/v keep no mask)
            ss.save(f"{x}.mask.{lin.name}", MASK * n_in)
        src, src_bytes = f"{x}.drop.{lin.name}", a
    if c.autocast and src_bytes == 4:
        ss.save(f"{x}.lora16.{lin.name}", 2 * n_in)            # autocast copy kept by lora_A
        r_bytes = 2
    else:
        ss.save(src, src_bytes * n_in)
        r_bytes = src_bytes
    ss.save(f"{x}.loraA_out.{lin.name}", r_bytes * c.tokens * adapter.rank)


def attention_core(ss: SavedSet, c: Ctx, arch: ModelArch, key: str, q_dim: int, kv_dim: int) -> str:
    """Scaled dot-product attention. Returns the output key (the o_proj input)."""
    e = 2 if c.autocast else c.e
    if c.quant_out_as_input and not c.autocast:
        e = c.res      # 4-bit q/k/v outputs in the norm output's dtype: fp32 under kbit_prepare, fp32 SDPA (traced)
    t, a = c.tokens, arch.num_heads
    if c.attention == "eager":
        # matmul(q, repeat_kv(k)^T): q and the repeated K; softmax(fp32) and its copy in q's dtype;
        # matmul(probs, repeat_kv(v)): the repeated V; output transposed and made contiguous.
        ss.save(f"{key}.q", e * t * q_dim)
        # repeat_kv copies K and V to every query head; with one KV head (MQA) expand+reshape is a view
        rep = kv_dim if arch.num_kv_heads == 1 and arch.family in ("llama", "gemma", "bigcode") else q_dim
        ss.save(f"{key}.k_rep", e * t * rep)
        ss.save(f"{key}.v_rep", e * t * rep)
        scores = a * c.seq * c.seq * c.batch
        if arch.family in ("llama", "gemma"):
            if arch.attn_softcap:
                ss.save(f"{key}.softcap_tanh", e * scores)     # Gemma 2: tanh(scores / cap) * cap
            ss.save(f"{key}.softmax", 4 * scores)               # softmax(dtype=float32)
            if e != 4:
                ss.save(f"{key}.probs", e * scores)             # .to(query.dtype)
        elif c.autocast:
            # GPT-2 / BERT-era eager under CUDA autocast: softmax is on autocast's fp32 list, so the output it
            # saves is fp32; probs @ V runs in 16 bits and keeps a 16-bit copy of its input: GPT-2
            # (modeling_gpt2.py eager_attention_forward) casts `attn_weights.type(value.dtype)` before dropout,
            # BERT (modeling_bert.py) drops out the fp32 probabilities and autocast casts them for the matmul;
            # either way fp32 softmax + bool mask + 16-bit probs, 7 bytes per score (GPT-Neo/J, CodeGen, CTRL,
            # RoBERTa, BART, OPT: softmax without dtype; Bloom, NeoX, Phi, BigCode: softmax(dtype=float32) then
            # .to(16 bit): the same). Falcon asks `softmax(..., dtype=hidden_states.dtype)`, which autocast keeps:
            # fp32 with fp32 weights, 16 bits over a 16-bit base, read by the matmul as is. Traced:
            # tools/memtrace/golden/stacks/bert-large-*, gpt2-*-eager
            soft = c.res if arch.family == "falcon" else 4
            ss.save(f"{key}.softmax", soft * scores)
            if arch.dropout > 0:
                ss.save(f"{key}.attn_drop_mask", MASK * scores)
            if soft == 4:
                ss.save(f"{key}.probs", 2 * scores)
            elif arch.dropout > 0:
                ss.save(f"{key}.attn_drop", soft * scores)
        else:
            # GPT-2 / BERT eager without autocast: softmax in the input dtype, then attention dropout (mask + output)
            ss.save(f"{key}.softmax", e * scores)
            if arch.dropout > 0:
                ss.save(f"{key}.attn_drop_mask", MASK * scores)
                ss.save(f"{key}.attn_drop", e * scores)
        # the contiguous output is kept only by a trainable o_proj (linear() saves it under this key)
    else:
        # FlashAttention-2 / SDPA flash kernel: q, k, v, output, fp32 logsumexp (b, a, s). transformers 4.x's
        # LlamaSdpaAttention calls repeat_kv before SDPA, LitGPT expands k/v for grouped queries and torchtune
        # 0.6.1 (modules/attention.py:290-291 MultiHeadAttention.forward) does k.unsqueeze(2).expand().flatten(1, 2),
        # a copy: there SDPA saves K and V at every head's width (traced: tools/memtrace/golden/stacks,
        # +4·s·b·(h - kv)/layer)
        if c.kv_expanded and not (arch.num_kv_heads == 1 and arch.family == "bigcode"):
            kv_dim = q_dim
        ss.save(f"{key}.q", e * t * q_dim)
        ss.save(f"{key}.k", e * t * kv_dim)
        ss.save(f"{key}.v", e * t * kv_dim)
        ss.save(f"{key}.out", e * t * q_dim)
        ss.save(f"{key}.lse", 4 * a * t)
        if c.attn_out_copied:
            # transformers 4.48 integrations/sdpa_attention.py `attn_output.transpose(1, 2).contiguous()`, LitGPT
            # 0.5 model.py CausalSelfAttention.forward `y.reshape(B, T, ...)` of SDPA's transposed output: o_proj
            # reads (and, when it trains, saves) a copy while SDPA keeps its own output (traced: tf446, lit rows)
            return f"{key}.out_copy"
    return f"{key}.out"


def gated_mlp(ss: SavedSet, c: Ctx, key: str, x: str, x_bytes: int, linears: dict, adapters: dict,
              d_inter: int, count: int = 1) -> None:
    """SwiGLU / GeGLU: down(act(gate(x)) * up(x)). `count` > 1: MoE, tokens x top-k copies."""
    e = 2 if c.autocast else c.e
    if c.quant_out_as_input and count == 1:
        # bitsandbytes Linear4bit.forward returns matmul_4bit(x.to(compute_dtype), ...).to(inp_dtype) and PEFT's
        # lora Linear4bit adds its 16-bit output to that result: under kbit_prepare (fp32 residual stream, autocast)
        # gate/up outputs, the activation and the product are fp32 (silu and mul are not autocast ops; traced)
        e = x_bytes
    n = c.tokens * d_inter * count
    if "gate_up_proj" in linears:
        linear(ss, c, x, x_bytes, linears["gate_up_proj"], adapters.get("gate_up_proj"))
        ss.save(f"{key}.gate_up", e * 2 * n)                    # chunk() views of one output
    else:
        linear(ss, c, x, x_bytes, linears["gate_proj"], adapters.get("gate_proj"))
        linear(ss, c, x, x_bytes, linears["up_proj"], adapters.get("up_proj"))
        ss.save(f"{key}.gate", e * n)                           # act backward needs its input
        ss.save(f"{key}.up", e * n)                             # mul backward needs both factors
    down = linears["down_proj"]
    if not c.compiled:
        ss.save(f"{key}.act", e * n)
    # torch.compile fuses silu(gate) * up: the partitioner (torch/_functorch/partitioners.py
    # min_cut_rematerialization_partition, compiler="inductor") recomputes silu(gate) in backward but keeps
    # the product, down_proj's input (read on CPU: tools/memtrace/compiled.py)
    if c.train_base:
        ss.save(f"{key}.prod", e * n)
    elif adapters.get("down_proj"):
        linear(ss, _no_first(c), f"{key}.prod", e, Linear(down.name, down.d_in, down.d_out), adapters["down_proj"])


# --- blocks ---------------------------------------------------------------------------------------


POST_NORM = ("olmo2", "olmo3")
FP32_PRODUCT_NORMS = ("afmoe", "flint", "beam")   # modeling_afmoe.py / modeling_flint.py / modeling_beam.py RMSNorm


def llama_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """Saved bytes of one Llama-lineage decoder block (Llama, Mistral, Qwen, Gemma, OLMo 2, Phi-3, MoE)."""
    ss = SavedSet()
    h, gemma = arch.hidden_size, arch.family == "gemma"
    # the routed experts' fused linears (count = E) apart from the block's own: a shared expert's down_proj
    # (DeepSeek, Qwen2-MoE, GLM-4.5) has the routed one's name and must not hide it
    lins = {lin.name: lin for lin in linears if lin.count == 1}
    experts = {lin.name: lin for lin in linears if lin.count > 1}
    ads = {ad.name: ad for ad in adapters}
    e_lin = c.res                                            # norm outputs carry the residual dtype
    x = "resid"
    if arch.model_type not in POST_NORM:                     # OLMo 2/3 normalise after each sublayer
        y = rmsnorm(ss, c, "ln1", x, h, gemma)
    else:
        y = x
    q_dim, kv_dim = arch.q_dim, arch.kv_dim
    if arch.mla:
        # Multi-head latent attention: low-rank projections, then attention over full heads.
        mla = arch.mla
        for name in ("q_a_proj", "q_proj", "kv_a_proj_with_mqa"):
            if name in lins:
                linear(ss, c, y, e_lin, lins[name], ads.get(name))
        # in layer 0 under LoRA the latent norms need a gradient when their projection has an adapter
        if "q_b_proj" in lins:
            rmsnorm(ss, _no_first(c) if "q_a_proj" in ads else c, "q_a_norm", "q_a", mla["q_lora_rank"])
            linear(ss, c, "q_a.out", c.e, lins["q_b_proj"], ads.get("q_b_proj"))
        rmsnorm(ss, _no_first(c) if "kv_a_proj_with_mqa" in ads else c, "kv_a_norm", "kv_a", mla["kv_lora_rank"])
        linear(ss, c, "kv_a.out", c.e, lins["kv_b_proj"], ads.get("kv_b_proj"))
        q_dim = arch.num_heads * (mla["qk_nope"] + mla["qk_rope"])
        kv_dim = q_dim
        out = attention_core(ss, c, arch, "attn", q_dim, kv_dim)
        if c.attention == "flash" and mla["v_head"] != mla["qk_nope"] + mla["qk_rope"]:
            # transformers 5.24 integrations/flash_attention.py pads v to the query head dim and returns
            # attn_output[..., :v_head_dim], a strided view; DeepseekV3Attention.forward's
            # attn_output.reshape(b, s, -1) then copies it: o_proj reads (and keeps) a·v_head_dim per token
            # beside FA2's own padded output (traced: tests/data/mla_trace.json)
            out = f"{out}.cropped"
        o = lins["o_proj"]
    elif "qkv_proj" in lins:
        linear(ss, c, y, e_lin, lins["qkv_proj"], ads.get("qkv_proj"))
        out = attention_core(ss, c, arch, "attn", q_dim, kv_dim)
        o = lins["o_proj"]
    else:
        for name in ("q_proj", "k_proj", "v_proj"):
            linear(ss, c, y, e_lin, lins[name], ads.get(name))
        if arch.qk_norm:
            per_head = arch.qk_norm == "head"
            # per-head norms of Qwen3RMSNorm's formula read the projections' dtype; OLMo 2's full-width ones and
            # AFMoE's / Flint's multiply in fp32 before the cast (`(self.weight * hidden_states).to(input_dtype)`)
            qk = (2 if c.autocast else c.e) if per_head and arch.model_type not in FP32_PRODUCT_NORMS else 0
            rmsnorm(ss, _no_first(c), "q_norm", "q", q_dim, gemma, arch.num_heads if per_head else 1, qk)
            rmsnorm(ss, _no_first(c), "k_norm", "k", kv_dim, gemma, arch.num_kv_heads if per_head else 1, qk)
        out = attention_core(ss, c, arch, "attn", q_dim, kv_dim)
        o = lins["o_proj"]
    linear(ss, _no_first(c), out, 2 if c.autocast else (c.res if c.quant_out_as_input else c.e), o, ads.get("o_proj"))
    if arch.model_type in POST_NORM:
        rmsnorm(ss, _no_first(c), "post_attn_norm", "o_out", h)
        y2 = "resid2"
    elif gemma and arch.norms_per_layer == 4:
        rmsnorm(ss, _no_first(c), "post_attn_norm", "o_out", h, gemma)
        y2 = rmsnorm(ss, _no_first(c), "pre_ff_norm", "resid2", h, gemma)
    else:
        y2 = rmsnorm(ss, _no_first(c), "ln2", "resid2", h, gemma)
    if arch.moe and "down_proj" in experts:
        sparse_moe(ss, _no_first(c), arch, y2, e_lin, lins, ads)
    elif not arch.gated_mlp:
        # Starcoder2's c_fc -> GELU -> c_proj (not traced: counted as the classic blocks' fused GELU)
        up, down = linears[-2], linears[-1]
        linear(ss, _no_first(c), y2, e_lin, up, ads.get(up.name))
        ss.save("mlp.gelu", (2 if c.autocast else c.e) * c.tokens * up.d_out)
        linear(ss, _no_first(c), "mlp.gelu.out", 2 if c.autocast else c.e, down, ads.get(down.name))
    else:
        gated_mlp(ss, _no_first(c), "mlp", y2, e_lin, lins, ads, lins["down_proj"].d_in)
    if arch.model_type in POST_NORM or (gemma and arch.norms_per_layer == 4):
        rmsnorm(ss, _no_first(c), "post_ff_norm", "mlp_out", h, gemma)
    return ss.total


def sparse_moe(ss: SavedSet, c: Ctx, arch: ModelArch, x: str, x_bytes: int, lins: dict, ads: dict) -> None:
    """Router softmax (fp32) and top-k; each token's hidden state gathered per chosen expert; the
    expert MLP on tokens*k rows; the weighted expert outputs (transformers 5 MoE experts loop)."""
    moe = arch.moe
    # transformers' grouped_mm experts (integrations/moe.py _grouped_mm: `grouped_mm(input.to(weight.dtype), ...)`,
    # grouped_mm is not autocast-enabled) run in the experts' weight dtype: fp32 under bf16-mixed over fp32 master
    # weights (traced: tests/data/jamba_trace.json jamba-4l-mixed-b2-s512), 16-bit over 16-bit weights
    t, e = c.tokens, c.res
    k = moe.experts_per_token
    if c.train_base:
        # the router's F.linear keeps its input for the weight's gradient (autocast: its own 16-bit copy).
        # DeepseekV3TopkRouter.forward: F.linear(hidden_states.type(torch.float32), self.weight.type(torch.float32))
        # reads an fp32 copy unless the stream is fp32; with autocast off there (ERNIE 4.5: "forced") it keeps
        # that fp32 tensor. The weight is fp32 already (_keep_in_fp32_modules_strict "gate.weight"): no copy of
        # it (traced: tests/data/mla_trace.json)
        xr, xr_bytes = (f"{x}.fp32", 4) if moe.router_fp32 and x_bytes != 4 else (x, x_bytes)
        if moe.router_fp32 == "forced":
            ss.save(xr, 4 * t * arch.hidden_size)
        else:
            linear(ss, c, xr, xr_bytes, Linear("router", arch.hidden_size, moe.num_experts), None)
    ss.save("router.probs", 4 * t * moe.num_experts)
    expert_ads = [ad for name, ad in ads.items() if name.startswith("experts.")]
    # the grouped matmuls keep their inputs for the experts' weight gradients only: frozen experts keep
    # neither the gathered tokens nor the product (traced: tests/data/moe_families_trace.json lora-attn)
    trained = c.train_base or bool(expert_ads)
    n = t * k * moe.expert_intermediate
    if trained:
        ss.save("moe.gathered", e * t * k * arch.hidden_size)   # expert inputs (index_select copies)
    ss.save("moe.gate_up", e * 2 * n)
    # gpt-oss's _apply_gate (modeling_gpt_oss.py GptOssExperts): clamp(gate), sigmoid(gate * alpha), glu and
    # up + 1 are each kept for a backward; SwiGLU keeps act(gate) alone (traced: moe_families_trace.json)
    ss.save("moe.act", e * n * (4 if arch.model_type == "gpt_oss" else 1))
    if trained:
        ss.save("moe.prod", e * n)
    ss.save("moe.expert_out", e * t * k * arch.hidden_size)     # kept for the routing-weight product
    # top-k indices, the permutation/sort/inverse indices (int64) and routing weights (fp32):
    # 40 bytes per token and chosen expert, plus the router's fp32 row sums (traced, mixtral)
    ss.save("moe.routing_index", 40 * t * k + 4 * t)
    if expert_ads:
        # PEFT's ParamWrapper merges W + ΔW for all experts in forward (baddbmm) and the grouped matmul
        # keeps the merged 16-bit weights: a second copy of the layer's experts (traced, qwen3-moe)
        if any(".gate_up_proj." in ad.name for ad in expert_ads):
            ss.save("moe.merged_gate_up", e * moe.num_experts * 2 * moe.expert_intermediate * arch.hidden_size)
        if any(".down_proj." in ad.name for ad in expert_ads):
            ss.save("moe.merged_down", e * moe.num_experts * moe.expert_intermediate * arch.hidden_size)
    if moe.shared_intermediate:
        shared = {name: lins[name] for name in ("gate_proj", "up_proj") if name in lins}
        shared["down_proj"] = Linear("down_proj", moe.shared_intermediate, arch.hidden_size)
        gated_mlp(ss, c, "shared", x, x_bytes, shared, ads, moe.shared_intermediate)


def _no_first(c: Ctx) -> Ctx:
    if not c.first_layer:
        return c
    return replace(c, first_layer=False)


def classic_block(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    """GPT-2 / BERT / Falcon / BLOOM / GPT-NeoX / Phi-1 blocks: LayerNorm (fused kernel keeps its
    input and fp32 mean/rstd), GeLU MLP (python gelu_new keeps ~4 tensors of the width), dropout
    masks where the config has dropout (GPT-2, BERT: 0.1 on attention and residual)."""
    ss = SavedSet()
    h, t = arch.hidden_size, c.tokens
    e = 2 if c.autocast else c.e
    lins = list(linears)
    ads = {ad.name: ad for ad in adapters}
    ln_in = 4 if c.autocast else c.res                           # autocast runs layer_norm in fp32
    ss.save("ln1.in", ln_in * t * h)
    ss.save("ln1.stats", 4 * t)                                 # mean and rstd
    ln_out = 4 if c.autocast else c.res
    for lin in lins[: len(lins) - 2]:
        if lin.d_in == h and lin.d_out >= h and lin.name not in ("dense", "c_proj"):
            linear(ss, c, "ln1.out", ln_out, lin, ads.get(lin.name))
    # GPT-BigCode's multi-query attention keeps one K/V head (the other classic blocks are multi-head here)
    out = attention_core(ss, c, arch, "attn", arch.q_dim, arch.kv_dim if arch.family == "bigcode" else arch.q_dim)
    o = next((lin for lin in lins if lin.name in ("c_proj", "dense") and lin.d_in == h and lin.d_out == h), None)
    if o is not None:
        linear(ss, _no_first(c), out, e, o, ads.get(o.name))
    dropout = arch.dropout > 0
    if dropout:
        ss.save("resid_drop1", MASK * t * h)
    ss.save("ln2.in", ln_in * t * h)
    ss.save("ln2.stats", 4 * t)
    up, down = lins[-2], lins[-1]
    linear(ss, _no_first(c), "ln2.out", ln_out, up, ads.get(up.name))
    n = t * up.d_out
    if arch.family in ("gpt2", "phi") and not (c.fused_gelu or c.compiled):
        # gelu_new in python: 0.5·x·(1 + tanh(√(2/π)(x + 0.044715·x³))). Under CUDA autocast `pow` runs
        # in fp32, so its input copy, tanh and 1 + tanh are fp32 (14 bytes per element vs 8).
        gelu_bytes, out_bytes = (14, 4) if c.autocast else (4 * e, e)
        ss.save("gelu", gelu_bytes * n)
    else:
        ss.save("gelu", e * n)                                   # fused GeLU keeps its input
        out_bytes = e
    linear(ss, _no_first(c), "gelu.out", out_bytes, down, ads.get(down.name))
    if dropout:
        ss.save("resid_drop2", MASK * t * h)
    return ss.total


def block_saved_bytes(arch: ModelArch, c: Ctx, linears: tuple[Linear, ...], adapters: tuple[Adapter, ...]) -> int:
    if arch.family in ("llama", "gemma"):
        return llama_block(arch, c, linears, adapters)
    if arch.family == "t5":
        # Encoder-decoder blocks approximated by a decoder block with eager attention and T5's
        # RMS-style norm (position bias makes SDPA fall back to the math kernel).
        c2 = replace(c, attention="eager")
        return llama_block(_t5_as_llama(arch), c2, _t5_linears(linears), adapters)
    return classic_block(arch, c, linears, adapters)


def _t5_as_llama(arch: ModelArch) -> ModelArch:
    return replace(arch, family="llama", model_type="t5")


def _t5_linears(linears: tuple[Linear, ...]) -> tuple[Linear, ...]:
    names = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "wi_0": "gate_proj", "wi_1": "up_proj",
             "wo": "down_proj", "wi": "up_proj"}
    out = [Linear(names.get(lin.name, lin.name), lin.d_in, lin.d_out, lin.count) for lin in linears]
    if not any(lin.name == "gate_proj" for lin in out):
        up = next(lin for lin in out if lin.name == "up_proj")
        out.append(Linear("gate_proj", up.d_in, up.d_out))
    return tuple(out)
