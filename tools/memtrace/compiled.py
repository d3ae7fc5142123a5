"""What torch.compile keeps for backward: the partitioner's saved set, read on CPU.

torch.compile (inductor) splits the joint forward/backward graph with
`torch/_functorch/partitioners.py min_cut_rematerialization_partition(compiler="inductor")`; the tensors the
forward graph hands to the backward graph are what a compiled region keeps alive. This module runs that
partition through AOTAutograd on one real Hugging Face decoder layer (small dimensions, real CPU tensors,
no kernel compiled: the forward and backward graphs run eagerly) and returns the bytes of every saved
activation, the layer's input included and the parameters, the rotary cos/sin and the incoming gradient
left out. Per-layer bytes scale with the dimensions, so the engine's compiled-block rule is checked
against them exactly (tests/test_tracer_compile.py).

Where it cannot be read here: inductor's own codegen may still drop or add buffers after the partition
(not in the saved set, transient), CUDA-only kernels (FlashAttention-2's custom op, fused RMSNorm) partition
as their CPU stand-ins do, and `torch._functorch.config.activation_memory_budget` below 1 changes the
partition (the default, 1.0, is what is read).
"""
from __future__ import annotations

import functools


def layer_saved_bytes(hidden=256, intermediate=688, heads=8, kv_heads=2, seq=96, compiled=True,
                      lora_rank=0, attention="sdpa") -> dict:
    """Saved activation bytes of one middle decoder layer (its input requires grad) in bf16, full
    fine-tuning or LoRA (PEFT on every linear, adapters in bf16). Returns {"bytes": int, "tensors": [...]}."""
    import torch  # noqa: PLC0415
    from functorch.compile import min_cut_rematerialization_partition  # noqa: PLC0415
    from torch._functorch.aot_autograd import aot_module_simplified  # noqa: PLC0415
    from transformers import LlamaConfig  # noqa: PLC0415
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding  # noqa: PLC0415

    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=hidden, intermediate_size=intermediate, num_attention_heads=heads,
                      num_key_value_heads=kv_heads, num_hidden_layers=1, vocab_size=1000,
                      attn_implementation=attention)
    layer = LlamaDecoderLayer(cfg, 0).to(torch.bfloat16)
    if lora_rank:
        from peft import LoraConfig, inject_adapter_in_model  # noqa: PLC0415
        targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
        layer = inject_adapter_in_model(LoraConfig(r=lora_rank, lora_alpha=2 * lora_rank, lora_dropout=0.0,
                                                   target_modules=targets), layer).to(torch.bfloat16)
        for n, p in layer.named_parameters():
            p.requires_grad_("lora_" in n)
    cos, sin = LlamaRotaryEmbedding(cfg)(torch.zeros(1, dtype=torch.bfloat16), torch.arange(seq)[None])
    x = torch.randn(1, seq, hidden, dtype=torch.bfloat16, requires_grad=True)
    # the backward graph sees fake tensors: parameters, buffers and cos/sin are told apart by shape and dtype
    # (seq must differ from every weight dimension, checked here)
    not_acts = {(tuple(t.shape), t.dtype) for t in [*layer.parameters(), *layer.buffers(), cos, sin]}
    dims = {d for t in layer.parameters() for d in t.shape}
    if seq in dims:
        raise ValueError(f"seq={seq} equals a weight dimension; pick another")
    seen: dict = {}

    def fw_compiler(gm, example_inputs):
        return gm

    def bw_compiler(gm, example_inputs):
        names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        seen["saved"] = [(name, t) for name, t in zip(names, example_inputs)
                         if isinstance(t, torch.Tensor) and not name.startswith("tangents")]
        return gm

    def backend(gm, example_inputs):
        part = (functools.partial(min_cut_rematerialization_partition, compiler="inductor") if compiled
                else None)
        kw = {"partition_fn": part} if part else {}
        return aot_module_simplified(gm, example_inputs, fw_compiler=fw_compiler, bw_compiler=bw_compiler, **kw)

    def run(x, c, s):
        out = layer(x, position_embeddings=(c, s), attention_mask=None)
        return out[0] if isinstance(out, tuple) else out

    torch._dynamo.reset()
    y = torch.compile(run, backend=backend)(x, cos, sin)
    y.float().sum().backward()
    tensors, total = [], 0
    for name, t in seen["saved"]:
        if (tuple(t.shape), t.dtype) in not_acts:
            continue
        nbytes = t.numel() * t.element_size()
        total += nbytes
        tensors.append((name, tuple(t.shape), str(t.dtype).replace("torch.", ""), nbytes))
    return {"bytes": total, "tensors": tensors}


def chunked_ce_compiled(rows=96, vocab=1000) -> dict:
    """torchtune's compiled chunk loss, as inductor builds it on CPU: `CEWithChunkedOutputLoss.compute_cross_entropy`
    (torchtune @1814feb17 torchtune/modules/loss/ce_chunked_output_loss.py: `F.cross_entropy(logits.float(), labels,
    ignore_index=-100, reduction="sum")`), compiled whole as `training.compile_loss` does for this loss
    (torchtune/training/_compile.py: `loss.compute_cross_entropy = torch.compile(loss.compute_cross_entropy)`), on
    one bf16 chunk of `rows` x `vocab`. Returns what the forward keeps for backward (autograd's saved tensors, read
    with `saved_tensors_hooks`, the chunk's own input included) and every buffer the generated forward and backward
    code allocates (`empty_strided_cpu(shape, stride, dtype)` in inductor's output code): each as (shape, dtype,
    bytes). The CUDA backend's split reductions add per-row partials only; the kernels' fusion is the same."""
    import re  # noqa: PLC0415

    import torch  # noqa: PLC0415
    import torch.nn.functional as F  # noqa: PLC0415
    from torch._inductor.utils import run_and_get_code  # noqa: PLC0415

    def cce(logits, labels):
        return F.cross_entropy(logits.float(), labels, ignore_index=-100, reduction="sum")

    torch._dynamo.reset()
    torch.manual_seed(0)
    x = torch.randn(rows, vocab, dtype=torch.bfloat16, requires_grad=True)
    y = torch.randint(0, vocab, (rows,))
    saved: list = []

    def pack(t):
        saved.append((tuple(t.shape), str(t.dtype).replace("torch.", ""), t.numel() * t.element_size()))
        return t

    fn = torch.compile(cce)

    def step():
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = fn(x, y)
        loss.backward()
        return loss

    with torch._inductor.config.patch(fx_graph_cache=False):
        _, codes = run_and_get_code(step)
    sizes = {"float32": 4, "bfloat16": 2, "int64": 8}
    buffers = []
    for code in codes:
        graph = []
        for shape, dtype in re.findall(r"empty_strided_cpu\(\(([^)]*)\), \([^)]*\), torch\.(\w+)\)", code):
            dims = tuple(int(d) for d in shape.replace(" ", "").split(",") if d)
            n = 1
            for d in dims:
                n *= d
            graph.append((dims, dtype, n * sizes[dtype]))
        buffers.append(graph)
    if len(buffers) != 2:
        raise RuntimeError(f"expected a forward and a backward graph, got {len(buffers)}")
    return {"saved": saved, "forward_buffers": buffers[0], "backward_buffers": buffers[1],
            "grad": (tuple(x.grad.shape), str(x.grad.dtype).replace("torch.", ""))}


def chunked_head_backward(tokens=8192, hidden=3072, vocab=128256, chunks=8, tied=True) -> dict:
    """The backward of a chunked output projection with a trainable weight (torchtune TransformerDecoder with
    `set_num_output_chunks`: `[self.output(chunk) for chunk in h.chunk(num_output_chunks, dim=1)]`, TiedLinear for
    tied embeddings) under the compiled chunk loss, on FakeTensors with the storage tracker. The compiled kernel is
    stood in for by an autograd Function that allocates exactly the buffers `chunked_ce_compiled` reads from
    inductor's code (its 16-bit input and two fp32 values a row kept, one 16-bit gradient written). Returns the bytes
    live at the end of forward and the backward's peak, with the op at that peak."""
    import torch  # noqa: PLC0415
    from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: PLC0415

    from .tracker import StorageTracker  # noqa: PLC0415

    class CompiledChunkCE(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            rowwise = [x.new_empty((x.shape[0], 1), dtype=torch.float32) for _ in range(2)]
            ctx.save_for_backward(x, y, *rowwise)
            return x.new_empty((), dtype=torch.float32)

        @staticmethod
        def backward(ctx, g):
            return torch.empty_like(ctx.saved_tensors[0]), None

    fm = FakeTensorMode()
    with fm:
        emb = torch.empty(vocab, hidden, dtype=torch.bfloat16).requires_grad_()
        out_w = emb if tied else torch.empty(vocab, hidden, dtype=torch.bfloat16).requires_grad_()
        tok = torch.zeros(tokens, dtype=torch.long)
        labels = torch.zeros(tokens, dtype=torch.long)
    tr = StorageTracker(logits_numel=tokens * vocab // chunks, vocab=vocab)
    with fm, tr:
        for w in {id(emb): emb, id(out_w): out_w}.values():
            tr.register(w, "weight")
        h = torch.nn.functional.embedding(tok, emb) * 1.0
        outs = [torch.nn.functional.linear(c, out_w) for c in h.chunk(chunks, dim=0)]
        loss = sum(CompiledChunkCE.apply(c, y) for c, y in zip(outs, labels.chunk(chunks)))
        del outs, h
        forward_end = tr.total
        tr.set_phase("backward")
        tr.peak = type(tr.peak)()
        loss.backward()
    return {"forward_end": forward_end, "backward_peak": tr.peak.total, "op": tr.peak.op}


__all__ = ["layer_saved_bytes", "chunked_ce_compiled", "chunked_head_backward"]
