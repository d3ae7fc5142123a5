"""Hand-computed cases: every term's arithmetic written out here, not read from the engine.

Sources of the rules: docs/deepspeed.md §2 (allocation sites), docs/deepspeed-cpu.md §3-4
(byte-exact on the real engine), docs/tracer.md §3 (saved tensors of the HF step).
"""
import pytest

from zerocalc import Plan, estimate
from zerocalc.memory import deepspeed as ds
from zerocalc.memory.runtime import MIB

GIB = 2**30

# Llama 3.1 8B
P = 8_030_261_248
H, KV, I, A, V, HD, LAYERS = 4096, 1024, 14336, 32, 128_256, 128, 32
L = V * H                                   # largest tensor: embedding / lm_head, 525,336,576


def _grad_partition_by_hand(sizes, world):
    """Rank by rank: params overlapping the rank's partition (padded to 2*world), max over ranks."""
    total = sum(sizes)
    padded = -(-total // (2 * world)) * (2 * world)
    part = padded // world
    best = 0
    for r in range(world):
        lo, hi = r * part, (r + 1) * part
        start, acc = 0, 0
        for n in sizes:
            if start < hi and start + n > lo:
                acc += n
            start += n
        best = max(best, acc)
    return best


def seed_plan(**changes):
    base = {"model": "llama-3.1-8b", "gpu": "a100-sxm4-80gb", "gpus_per_node": 4, "nodes": 1,
            "framework": "deepspeed", "zero_stage": 2, "precision": "bf16-mixed", "optimizer": "adamw",
            "micro_batch_size": 2, "gradient_accumulation_steps": 4, "seq_len": 4096,
            "activation_checkpointing": "none", "attention": "flash", "method": "full"}
    base.update(changes)
    return Plan.from_dict(base)


def test_seed_example_every_term():
    """The seed page's case. A popular calculator prints weights 16.00, gradients 4.00, optimizer 24.00,
    activations 36.82, total 80.82 GB (fits). What DeepSpeed and HF really allocate:"""
    est = estimate(seed_plan())
    d = est.to_dict()["per_gpu"]
    N = 4
    t = 2 * 4096                                            # tokens per micro-batch
    # model states, ZeRO-2 (stage_1_and_2.py)
    flat16 = 2 * P                                          # bit16_groups_flat       16,060,522,496
    part = P // N                                           # P is a multiple of 2N   2,007,565,312
    master = 4 * part                                       # fp32 partition          8,030,261,248
    adam = 8 * part                                         # exp_avg + exp_avg_sq   16,060,522,496
    ipg = 2 * 500_000_000                                   # reduce bucket, overlap_comm off at stage 2
    from zerocalc.model import resolve_model
    sizes = [tt.numel for tt in resolve_model("llama-3.1-8b").tensors]
    gradpart = 2 * _grad_partition_by_hand(sizes, N)        # kept across the 4 micro-steps
    assert 2 * part <= gradpart <= 2 * (part + 2 * L)
    # activations per layer (flash, unfused HF RMSNorm, SwiGLU), bytes:
    per_layer = (20 * t * H          # norms 2*(4+2) + their outputs 2*2 + q and attention output 2*2... = 20·t·h
                 + 4 * t * KV        # k and v after RoPE, kv heads only
                 + 8 * t * I         # gate, up, silu(gate), silu·up
                 + 4 * A * t         # fp32 logsumexp per head
                 + 8 * t)            # two fp32 rsqrt (b, s, 1)
    assert per_layer == 1_645_281_280
    head = (4 * t * H + 4 * t + 2 * t * H   # final norm: fp32 input, rsqrt, normalised
            + 2 * t * H                     # lm_head input
            + 2 * 2 * 4096 * HD             # rotary cos and sin, (1, s, head_dim) bf16 each
            + 16 * t)                       # input ids and labels, int64
    saved = LAYERS * per_layer + head
    logits = 12 * t * V                     # saved fp32 log-softmax + nll grad + log-softmax grad
    cublas = 12 * MIB                       # sm80 workspace through the caching allocator
    allocated = flat16 + master + adam + ipg + gradpart + saved + logits + cublas
    assert d["peak_phase"] == "loss_bwd"
    assert d["peak_allocated_bytes"] == allocated
    assert d["components"]["weights"] == flat16
    assert d["components"]["optimizer_states"] == master + adam
    assert d["components"]["gradients"] == gradpart
    assert d["components"]["activations"] == saved
    assert d["components"]["logits"] == logits
    assert d["components"]["buffers"] == ipg
    # the allocator's cache: 0.087 B per byte of activations and logits at the peak when the forward saves
    # them (the replayed tracer grid's median, scripts/allocator_cache.py); ~110 GiB leaves no room on an
    # 80 GB GPU, yet the pinned share (0.187, its upper decile) is above it, so all of it stays
    reserved = allocated + int((saved + logits) * 0.087)
    assert d["peak_reserved_bytes"] == reserved
    assert d["device_used_bytes"] == reserved + 512 * MIB + 256 * MIB   # CUDA context + NCCL
    # ~110 GiB against the popular calculator's 80.82 GB: it does not fit on 80 GB.
    assert not est.fits
    assert est.primary_driver == "activations"


def test_seed_example_fits_with_checkpointing():
    est = estimate(seed_plan(activation_checkpointing="full"))
    t = 8192
    # each layer keeps only its bf16 input (32 * 2·t·h = 2 GiB instead of ~49 GiB), plus the head
    head = 4 * t * H + 4 * t + 2 * t * H + 2 * t * H + 2 * 2 * 4096 * HD + 16 * t
    acts = est.per_gpu.components["activations"]
    if est.per_gpu.phase in ("fwd", "loss_bwd"):
        assert acts == 32 * 2 * t * H + head
    assert est.fits


def test_deepspeed_zero2_estimator_reproduced():
    """estimate_zero2_model_states_mem_needs (no offload): GPU 2P + 18P/N, for total_params 8.03e9:
    52,195,000,000 B on 4 GPUs and 34,127,500,000 B on 8 (docs/deepspeed.md §4.1)."""
    p = 8_030_000_000
    for n, expected in ((4, 52_195_000_000), (8, 34_127_500_000)):
        sizes = (p // (n * 1000),) * (n * 1000)              # partitions fall on parameter boundaries
        plan = seed_plan(gpus_per_node=n)
        tr = ds.Trainable(sizes, "weights", "gradients", "optimizer_states")
        terms = {t.name: t.nbytes for t in ds.zero_terms(plan, None_arch(), tr, 0, sizes, 2, 1)}
        # 2 (16-bit params) + 4 (fp32 master) + 8 (Adam) + 2 (16-bit grad partition) + 4 (fp32 grads)
        ours_states = (terms["flat_16bit_params"] + terms["fp32_master"] + terms["optimizer_states"]
                       + terms["grad_partition"] + 4 * p // n)
        assert ours_states == expected
        # Deliberate difference: the step also flattens the 16-bit grads before the fp32 cast
        # (measured: step peak 2P + 20P/N, docs/deepspeed-cpu.md §3.2).
        assert terms["step_transient"] == 2 * p // n + 4 * p // n


def None_arch():
    from zerocalc.model import resolve_model
    return resolve_model("llama-3.1-8b")


def test_deepspeed_zero3_estimator_reproduced():
    """estimate_zero3_model_states_mem_needs (no offload, zero_init): 4*largest_layer + 18P/N
    = 38,236,346,304 B on 4 GPUs. Ours: 16P/N resident (2 + 2 + 4 + 8) plus the gathered working
    set and the sub-group step transient, which replace the estimator's 4L + 2P/N."""
    est = estimate(seed_plan(zero_stage=3))
    b = est.per_gpu.deepspeed_buffers
    n = 4
    resident = b["param_partition_16bit"] + b["grad_partition"] + b["fp32_master"] + b["optimizer_states"]
    # each tensor is padded to a multiple of N; for Llama 8B every tensor already is
    assert resident == 16 * P // n
    assert 4 * L + 18 * 8_030_000_000 // n == 38_236_346_304
    assert b["ipg_bucket"] == 2 * 500_000_000                 # one bucket, from init, stage 3
    assert b["step_transient"] == 6 * min(1_000_000_000, P // n)


def test_zero2_offload_host_by_hand():
    est = estimate(seed_plan(offload_optimizer="cpu", activation_checkpointing="full"))
    h = est.per_gpu.host_detail
    part = P // 4

    def pow2(x):
        return 1 << (x - 1).bit_length()
    assert h["fp32_master"] == pow2(4 * part)                  # pinned: 7.48 GiB -> 8 GiB
    assert h["fp32_grad_partition"] == pow2(4 * part)
    assert h["offload_16bit_staging"] == pow2(2 * part)
    assert h["optimizer_states"] == 8 * part                  # DeepSpeedCPUAdam states are pageable
    assert h["accumulated_grads"] == pow2(2 * part)           # GAS 4
    # GPU: no master, no states
    assert "fp32_master" not in est.per_gpu.deepspeed_buffers
    assert est.per_gpu.deepspeed_buffers["offload_temp_grad_buffers"] == 2 * L


def test_single_gpu_llama_1b_tracer_case():
    """docs/tracer.md §2, 1B s2048 b1 sdpa, pure bf16 + fused AdamW with bf16 moments:
    peak 13.19 GiB at the start of backward = weights 2P + moments 4P + saved 4.33 GiB + 8·s·b·V."""
    p1 = 1_235_814_400
    plan = Plan.from_dict({"model": "llama-3.2-1b", "gpu": "h100-sxm-80gb", "gpus_per_node": 1,
                           "framework": "single", "precision": "bf16-pure", "micro_batch_size": 1,
                           "gradient_accumulation_steps": 1, "seq_len": 2048, "attention": "sdpa"})
    est = estimate(plan)
    allocated = est.per_gpu.peak_allocated - 32 * MIB    # minus the sm90 cuBLAS workspace
    assert abs(allocated / GIB - 13.19) < 0.01
    assert est.per_gpu.components["weights"] == 2 * p1
    assert est.per_gpu.components["optimizer_states"] == 4 * p1


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_more_gpus_shrink_model_states(stage):
    small = estimate(seed_plan(zero_stage=stage, gpus_per_node=2, activation_checkpointing="full"))
    large = estimate(seed_plan(zero_stage=stage, gpus_per_node=8, activation_checkpointing="full"))
    assert large.per_gpu.device_used < small.per_gpu.device_used


def test_bad_plan_is_a_message_not_a_traceback():
    from zerocalc import PlanError
    with pytest.raises(PlanError) as e:
        Plan.from_dict({"micro_batch_size": 0})
    assert e.value.key == "micro_batch_size"
    assert "1" in str(e.value)


def test_paged_optimizer_states_page_out_instead_of_running_out_of_memory():
    """bitsandbytes paged optimizers put their states in CUDA managed memory (cudaMallocManaged,
    bitsandbytes functional.get_paged): when the GPU is full the driver evicts pages to host RAM,
    so they never cause an out-of-memory. torchtune's llama3_1/8B_full_single_device on a 24 GiB
    RTX 4090: pure bf16, paged 8-bit AdamW stepped inside backward, checkpointing, chunked loss."""
    from zerocalc.model import resolve_model
    sizes = [t.numel for t in resolve_model("llama-3.1-8b").tensors]
    assert min(sizes) >= 4096                          # every tensor gets 8-bit states (min_8bit_size)
    # per tensor: two uint8 states + one fp32 absmax per 256-element block for each
    states = sum(2 * (n + 4 * -(-n // 256)) for n in sizes)
    assert states == 2 * P + 8 * sum(-(-n // 256) for n in sizes)
    d = {"model": "llama-3.1-8b", "gpu": "rtx-4090", "gpus_per_node": 1, "framework": "single",
         "precision": "bf16-pure", "optimizer": "paged-adamw-8bit", "optimizer_in_backward": True,
         "gradient_accumulation_steps": 1, "micro_batch_size": 2, "seq_len": 2048,
         "activation_checkpointing": "full", "attention": "sdpa", "loss": "chunked", "method": "full"}
    est = estimate(Plan.from_dict(d))
    pg = est.per_gpu
    weights = 2 * P
    assert pg.peak_allocated > weights and pg.peak_allocated + pg.detail["cuda_context"] < est.capacity_bytes
    resident = pg.detail.get("paged_optimizer_states", 0)
    evicted = pg.host_detail["paged_evicted"]
    assert resident + evicted == states
    # the managed pages fill exactly what the allocator and the context leave
    assert resident == est.capacity_bytes - pg.peak_reserved - pg.detail["cuda_context"]
    assert pg.device_used == est.capacity_bytes and est.fits
    assert any(w.id == "paged-optimizer" and "host RAM" in w.message for w in est.warnings)
    # on an 80 GB part every page stays resident and nothing goes to the host
    big = estimate(Plan.from_dict({**d, "gpu": "h100-sxm-80gb"})).per_gpu
    assert big.detail["paged_optimizer_states"] == states and "paged_evicted" not in big.host_detail
    # the same states without paging sit in the allocator, and then the plan does not fit
    unpaged = estimate(Plan.from_dict({**d, "optimizer": "adamw-8bit"}))
    assert unpaged.per_gpu.peak_allocated >= pg.peak_allocated + states and not unpaged.fits


@pytest.mark.parametrize("impl, temps_per_tensor", [("foreach", 1), ("single-tensor", 2)])
def test_optimizer_in_backward_steps_one_parameter_at_a_time(impl, temps_per_tensor):
    """torchtune's optimizer_in_bwd (training.register_optim_in_bwd_hooks): one torch AdamW per parameter,
    stepped as its gradient lands. A foreach step's temporary (`_foreach_sqrt(exp_avg_sqs)`) then covers one
    parameter, the largest (embedding / lm_head, V x H), not all P; single-tensor makes two of the one it
    steps, as in the usual step. Both live at the end of backward beside that parameter's gradient; the step
    phase holds weights and states only. Traced: tools/memtrace/golden/stacks/tt-l1b-*-inbwd*."""
    d = {"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb", "gpus_per_node": 1, "framework": "single",
         "precision": "bf16-pure", "optimizer": "adamw", "micro_batch_size": 1, "seq_len": 1024,
         "gradient_accumulation_steps": 1, "activation_checkpointing": "full", "method": "full",
         "stack": {"trainer": "torchtune", "optimizer_impl": impl}}
    in_bwd = estimate(Plan.from_dict({**d, "optimizer_in_backward": True})).per_gpu
    after = estimate(Plan.from_dict(d)).per_gpu
    # bf16 temporaries: 2 B per element
    assert in_bwd.detail["optimizer_step_temps"] == temps_per_tensor * 2 * L
    assert after.detail["optimizer_step_temps"] == (2 * P if impl == "foreach" else 2 * 2 * L)
    # the step phase loses the whole gradient set (2 B x P) and the step's temporaries
    drop = after.phase_allocated["step"] - in_bwd.phase_allocated["step"]
    assert drop == 2 * P + after.detail["optimizer_step_temps"]
    # the end of backward: one gradient (the largest, 2 B x L) and its step's temporaries, not all P, beside the
    # hidden-state gradient in flight through layer 0 (b x s x H in bf16)
    in_flight = 2 * 1 * 1024 * H
    assert in_bwd.phase_allocated["bwd_end"] - in_bwd.phase_allocated["step"] == (
        2 * L + temps_per_tensor * 2 * L + in_flight)


def test_fsdp2_embedding_units_leave_the_root_before_the_layers_backward():
    """torchtune's custom_sharded_layers ['tok_embeddings', 'output'] (llama3_1/70B_full): FSDP2 units of their own,
    so the root keeps the final norm (H) only. Through the layer-by-layer backward the root-held run holds the
    gathered root (embedding + lm_head + norm in bf16) and lm_head's unsharded gradient; the split run holds lm_head's
    reduce-scatter input (bf16, the gathered dtype: no policy) until the top layer's post-backward, then nothing of
    either. The embedding unit is gathered for the last backward. Measured on CPU ranks: tools/fsdpprobe."""
    H70, V70 = 8192, 128_256
    d = {"model": "llama-3.1-70b", "gpu": "a100-sxm4-80gb", "gpus_per_node": 8, "framework": "fsdp",
         "zero_stage": 3, "precision": "bf16-pure", "optimizer": "adamw", "micro_batch_size": 2, "seq_len": 2048,
         "gradient_accumulation_steps": 1, "activation_checkpointing": "full", "loss": "chunked", "method": "full",
         "stack": {"trainer": "torchtune"}}
    from zerocalc.estimate import terms
    from zerocalc.memory.inputs import step_inputs

    def named(plan):
        return {t.name: t for t in terms(plan, step_inputs(plan))}

    units = {**d, "stack": {"trainer": "torchtune", "fsdp_embedding_units": True}}
    held, split = estimate(Plan.from_dict(d)).per_gpu, estimate(Plan.from_dict(units)).per_gpu
    th, ts = named(Plan.from_dict(d)), named(Plan.from_dict(units))
    vh = V70 * H70
    assert th["gathered_root"].nbytes == 2 * (2 * vh + H70)
    assert ts["gathered_root"].nbytes == 2 * H70
    # the last backward: the embedding's unit and the norm gathered, their gradients, and layer 0's reduce-scatter
    # input (FSDP2 drops it only at their post-backward)
    layer = 2 * H70 * H70 + 2 * H70 * 1024 + 3 * H70 * 28_672 + 2 * H70     # q, o; k, v; gate, up, down; norms
    assert ts["gathered_root_end"].nbytes == 2 * (vh + H70) and ts["gathered_root_end"].phases == {"bwd_end"}
    assert ts["fsdp_root_grads"].nbytes == 2 * (vh + H70)
    assert ts["previous_unit_reduce_input"].nbytes == 2 * layer
    assert "gathered_output_unit" not in ts        # torchtune's loss runs outside the model: resharded by then
    assert ts["lm_head_reduce_input"].nbytes == 2 * vh and "lm_head_grad" not in ts
    # the top layer's recompute: 2 B x (2VH) of gathered root and 2 B x VH of lm_head gradient become 2 B x VH of
    # reduce-scatter input
    drop = held.phase_allocated["recompute_top"] - split.phase_allocated["recompute_top"]
    assert drop == 2 * 2 * vh + 2 * vh - 2 * vh
    # the forward and the loss gradient do not change (the root is not gathered there for torchtune either)
    assert held.phase_allocated["fwd"] == split.phase_allocated["fwd"]
    assert held.phase_allocated["loss_bwd"] == split.phase_allocated["loss_bwd"]


def test_fsdp_embedding_units_need_fsdp2():
    d = {"framework": "fsdp", "zero_stage": 3, "gpus_per_node": 8, "stack": {"fsdp_embedding_units": True}}
    with pytest.raises(Exception, match="stack.fsdp_embedding_units"):
        Plan.from_dict(d)
    with pytest.raises(Exception, match="stack.fsdp_embedding_units"):
        Plan.from_dict({**d, "stack": {"fsdp_version": 2, "fsdp_embedding_units": "yes"}})
    assert Plan.from_dict({**d, "stack": {"fsdp_version": 2, "fsdp_embedding_units": True}}).stack.fsdp_embedding_units


def test_allocator_cache_shrinks_to_the_room_a_full_gpu_leaves():
    """On a failed cudaMalloc the allocator frees its wholly free segments and retries: the cache shrinks to
    the room left, never below its pinned part (memory/runtime.py allocator_reserve)."""
    from zerocalc.memory.runtime import allocator_reserve

    t = 1000 * MIB                                   # activations + logits at the peak
    assert allocator_reserve(t, True, 10 * GIB).nbytes == 370 * MIB          # checkpointed: 0.37 per byte
    assert allocator_reserve(t, True, 300 * MIB).nbytes == 300 * MIB         # what the capacity leaves
    assert allocator_reserve(t, True, 100 * MIB).nbytes == 187 * MIB         # pinned: 0.187 per byte
    assert allocator_reserve(t, True, -5 * GIB).nbytes == 187 * MIB
    assert allocator_reserve(t, False, 10 * GIB).nbytes == 87 * MIB          # saved activations: 0.087
    assert allocator_reserve(t, False, 0).nbytes == 87 * MIB                 # pinned never above the cache


def test_a_plan_at_the_edge_reserves_exactly_the_capacity():
    """QLoRA with checkpointing on a 24 GB card, the micro-batch raised until the cache no longer fits beside
    the tensors: nvidia-smi then shows the whole card (the allocator gave cached segments back) and it fits."""
    base = dict(model="llama-3.1-8b", gpu="rtx-4090", framework="single", gpus_per_node=1, nodes=1,
                method="qlora", activation_checkpointing="full", zero_stage=0,
                seq_len=2048, precision="bf16-mixed", optimizer="adamw")
    capped = []
    for mb in range(1, 64):
        est = estimate(Plan.from_dict({"schema": 1, **base, "micro_batch_size": mb}))
        pg = est.per_gpu
        outside = pg.detail["cuda_context"]
        tr = pg.components["activations"] + pg.components["logits"]
        free_cache = pg.peak_allocated + int(tr * 0.37)            # what a roomy GPU would reserve
        if est.fits and free_cache + outside > est.capacity_bytes:
            capped.append(mb)
            assert pg.device_used == est.capacity_bytes
            assert pg.peak_reserved == est.capacity_bytes - outside
        if not est.fits:
            assert pg.peak_reserved >= pg.peak_allocated + int(tr * 0.187)  # at least the pinned part
            break
    assert capped, "no micro-batch put this plan at the edge"
