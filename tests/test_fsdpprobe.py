"""Real PyTorch FSDP on CPU ranks vs zerocalc's FSDP terms (tools/fsdpprobe).

The tracker's resize bookkeeping and replay are checked without any distributed run; the grid (FSDP1 and
FSDP2 plans, a few minutes on 2 cores) runs once per session. Checks: the probe against hand arithmetic for
the small Llama, then every plan of the grid within the tolerances stated in tools/fsdpprobe/check.py.
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tools.fsdpprobe.tracker import ResizeTracker, phase_stats  # noqa: E402

P = 6_965_504                     # the small Llama (tests/test_dsprobe_units.py): 2 * 8192 * 256 + 4 layers + norm


def test_resizes_are_tracked_and_a_freed_storage_returns_its_current_size():
    tr = ResizeTracker()
    with tr:
        t = torch.empty(1000, dtype=torch.float32)          # 4,000 B
        tr.mark("a")
        t.untyped_storage().resize_(0)                       # FSDP1 _free_storage
        tr.resync()
        tr.mark("b")
        t.untyped_storage().resize_(2000 * 4)                # _alloc_storage, larger than at creation
        tr.resync()
        u = torch.empty(250, dtype=torch.float32)            # 1,000 B on top
        tr.mark("c")
        del u
        del t
        tr.mark("d")
    s = phase_stats(tr)
    assert s["init"]["end"] == 4000
    assert s["a"]["end"] == 0
    assert s["b"]["peak"] == 8000 + 1000 and s["b"]["end"] == 9000
    assert s["c"]["end"] == 0                                # t freed at 8,000 B, not its creation size


def test_spec_refuses_what_the_probe_cannot_run():
    from tools.fsdpprobe.spec import SpecError, build_spec

    with pytest.raises(SpecError, match="framework"):
        build_spec({"framework": "deepspeed"})
    with pytest.raises(SpecError, match="model"):
        build_spec({"framework": "fsdp", "model": "llama-3.1-8b", "gradient_accumulation_steps": 1})




@pytest.fixture(scope="session")
def fsdp_grid():
    pytest.importorskip("transformers")
    pytest.importorskip("peft")
    from tools.fsdpprobe.check import plans
    from tools.fsdpprobe.runner import run_spec
    from tools.fsdpprobe.spec import build_spec

    return {name: (plan, run_spec(build_spec(plan))) for name, plan in plans()}


@pytest.mark.tools
@pytest.mark.slow
def test_probe_step_by_hand(fsdp_grid):
    """Optimizer step of FULL_SHARD over 2 ranks: every unit's flat parameter is even-sized, so each rank
    holds P/2 elements of parameters, gradients and two Adam moments. Fused AdamW adds one fp32 step
    counter per parameter tensor (a few hundred bytes)."""
    from tools.fsdpprobe.check import busiest

    shard = P // 2                                           # 3,482,752
    pure = busiest(fsdp_grid["s3w2_pure"][1])["step"]
    assert 4 * 2 * shard <= pure <= 4 * 2 * shard + 4096     # bf16: params, grads, exp_avg, exp_avg_sq
    mixed = busiest(fsdp_grid["s3w2_mixed"][1])["step"]
    assert 16 * shard <= mixed <= 16 * shard + 4096          # fp32 shards: 4 + 4 + 8 bytes per element


@pytest.mark.tools
@pytest.mark.slow
def test_engine_matches_fsdp_on_cpu_ranks(fsdp_grid):
    from tools.fsdpprobe.check import compare

    bad = {}
    for name, (plan, res) in fsdp_grid.items():
        c = compare(plan, res)
        if not c["ok"]:
            bad[name] = (round(c["step_dev"], 4), round(c["peak_dev"], 4), round(c["allowance"], 4))
    assert not bad, bad


@pytest.fixture(scope="session")
def lit_rows():
    pytest.importorskip("transformers")
    pytest.importorskip("peft")
    from tools.fsdpprobe.check import LIT, plans
    from tools.fsdpprobe.runner import run_spec
    from tools.fsdpprobe.spec import build_spec

    return {name: (plan, run_spec(build_spec(plan))) for name, plan in plans(grid=LIT)}


def _fwd(res):
    from tools.fsdpprobe.check import busiest
    return busiest(res)["fwd"]


@pytest.mark.tools
@pytest.mark.slow
@pytest.mark.parametrize("g2, g1, grads", [
    # no_sync keeps every unit's unsharded gradient (bf16, the gathered dtype) into the next forward
    ("s3w2_mixed_g2", "s3w2_mixed", 2 * P),
    ("s3w4_mixed_g2", "s3w4_mixed_ac", None),     # other checkpointing: compared with the engine only
    ("s3w2_mixed_lora_g2", "s3w2_mixed_lora", None),
])
def test_no_sync_keeps_unsharded_gradients_into_the_next_forward(fsdp_grid, g2, g1, grads):
    from tools.fsdpprobe.check import engine_view

    plan, res = fsdp_grid[g2]
    if grads is not None:
        # 2 B x P over the whole model, whatever the world size (not the sharded 4 B x P / world)
        assert _fwd(res) - _fwd(fsdp_grid[g1][1]) == grads
    one = {**plan, "gradient_accumulation_steps": 1}
    engine_delta = engine_view(plan)["phases"]["fwd"] - engine_view(one)["phases"]["fwd"]
    if g1 != "s3w4_mixed_ac":
        assert engine_delta == _fwd(res) - _fwd(fsdp_grid[g1][1])
    else:
        assert engine_delta == 2 * P                  # the full model's unsharded gradients, in bf16


@pytest.mark.tools
@pytest.mark.slow
def test_lora_inside_layer_units_grads_cover_the_frozen_weights(fsdp_grid, lit_rows):
    """LitGPT under Lightning's FSDP: a layer unit's flat parameter holds frozen weights and adapters, so its
    gradient covers the whole unit. Adapters: rank 16 on q,k,v,o (256x256, 256x64 twice, 256x256) and
    gate, up, down (256x688): 16 x (512 + 320 + 320 + 512 + 3 x 944) = 71,936 per layer, 287,744 in all."""
    from tools.fsdpprobe.check import busiest, engine_view

    adapters, layers = 287_744, 4 * 692_736
    lit = busiest(lit_rows["lit_s3w2_lora"][1])
    peft = busiest(fsdp_grid["s3w2_pure_lora_base"][1])
    # the step holds the reduce-scattered flat gradient: (layers + adapters) / 2 instead of adapters / 2
    extra = 2 * (layers + adapters) // 2 - 2 * adapters // 2            # 2,770,944 B in bf16
    assert extra <= lit["step"] - peft["step"] <= extra * 1.04           # FSDP pads each unit's flat parameter
    # accumulation keeps the layer units' whole unsharded gradients into the next forward
    kept = _fwd(lit_rows["lit_s3w2_lora_g2"][1]) - _fwd(lit_rows["lit_s3w2_lora"][1])
    assert kept == 2 * (layers + adapters)                               # 6,117,376 B
    plan = lit_rows["lit_s3w2_lora_g2"][0]
    one = {**plan, "gradient_accumulation_steps": 1}
    assert engine_view(plan)["phases"]["fwd"] - engine_view(one)["phases"]["fwd"] == kept


@pytest.mark.tools
@pytest.mark.slow
def test_fsdp2_step_by_hand(fsdp_grid):
    """FSDP2 shards each parameter on dim 0 (padded to a multiple of the world; every dim of the small Llama
    and of its LoRA matrices divides by 2 and 4): full fine-tuning holds P / world of each state, LoRA the
    adapters' shards (PEFT's fp32) beside the frozen bf16 base's shards."""
    from tools.fsdpprobe.check import busiest

    pure = busiest(fsdp_grid["v2_s3w2_pure"][1])["step"]
    assert 8 * (P // 2) <= pure <= 8 * (P // 2) + 4096             # bf16: params, grads, exp_avg, exp_avg_sq
    mixed = busiest(fsdp_grid["v2_s3w4_mixed_ac"][1])["step"]
    assert 16 * (P // 4) <= mixed <= 16 * (P // 4) + 4096          # fp32: 4 + 4 + 8 bytes, 4 ranks
    adapters = 287_744                                              # see the LitGPT test below
    lora = busiest(fsdp_grid["v2_s3w2_pure_lora_ac"][1])["step"]
    want = 16 * adapters // 2 + 2 * P // 2                          # 2,301,952 + 6,965,504 B
    assert want <= lora <= want + 4096


@pytest.fixture(scope="session")
def fp32_reduce():
    """v2_wide_s3w2_mixed with torchtitan's MixedPrecisionPolicy(reduce_dtype=fp32)."""
    pytest.importorskip("transformers")
    from tools.fsdpprobe.check import plans
    from tools.fsdpprobe.runner import run_spec
    from tools.fsdpprobe.spec import build_spec

    plan = dict(plans(["v2_wide_s3w2_mixed"]))["v2_wide_s3w2_mixed"]
    return plan, run_spec({**build_spec(plan), "reduce_dtype": "fp32"})


@pytest.mark.tools
@pytest.mark.slow
def test_fsdp2_fp32_reduce_keeps_the_previous_units_input_in_fp32(fsdp_grid, fp32_reduce, monkeypatch):
    """FSDP2's reduce-scatter input (the reduce dtype) of the unit just back-propagated stays referenced while
    the next unit's bf16 gradients are computed: an fp32 reduce adds 2 B per element of one layer unit.
    The wide layer: q, o 512x512, k, v 512x256, gate, up, down 512x1536, two norms of 512."""
    import zerocalc.memory.inputs as inputs
    from tools.fsdpprobe.check import busiest, engine_view

    unit = 2 * 512 * 512 + 2 * 512 * 256 + 3 * 512 * 1536 + 2 * 512  # 3,146,752
    bf16 = busiest(fsdp_grid["v2_wide_s3w2_mixed"][1])["bwd"]
    fp32 = busiest(fp32_reduce[1])["bwd"]
    assert fp32 - bf16 == 2 * unit                                    # 6,293,504 B
    plan = fp32_reduce[0]
    before = engine_view(plan)["phases"]["bwd_top"]
    monkeypatch.setattr(inputs, "fsdp2_reduce_bytes", lambda plan, trainer: 4)
    assert engine_view(plan)["phases"]["bwd_top"] - before == 2 * unit


def test_fsdp2_reduce_dtype_by_trainer():
    """torchtitan's mixed_precision_reduce defaults to fp32; accelerate's FSDP2 policy and torchtune reduce in
    bf16. At the end of backward the root's bf16 gradients sit beside either the gathered root and the previous
    unit's reduce-scatter input, or their own reduce-scatter input, whichever is larger (probe row
    v2_mid_s3w2_pure_ac, where the end of backward is the peak)."""
    from zerocalc import Plan
    from zerocalc.memory.inputs import model_state_terms, step_inputs

    base = {"schema": 1, "model": "llama-3.1-8b", "gpu": "h200-sxm-141gb", "framework": "fsdp", "nodes": 1,
            "gpus_per_node": 8, "zero_stage": 3, "micro_batch_size": 1, "gradient_accumulation_steps": 1,
            "seq_len": 4096, "optimizer": "adamw", "precision": "bf16-mixed", "method": "full"}

    def end_terms(stack):
        plan = Plan.from_dict({**base, "stack": stack})
        return {t.name: t.nbytes for t in model_state_terms(plan, step_inputs(plan)) if "bwd_end" in t.phases}
    root = 2 * 128_256 * 4096 + 4096                                 # embeddings, lm_head, final norm
    unit = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096   # one decoder layer, 218,112,000
    # FSDP2's post_backward reshards and drops the previous unit's reduce-scatter input before foreach_reduce
    # copies the root's gradients into their own input: the larger of 2 B x root + 2 B x root + (reduce) x unit
    # and 2 B x root + (reduce) x root. fp32 reduce (torchtitan): 4.2e9 + 0.87e9 < 6.3e9, the second
    titan = end_terms({"trainer": "torchtitan"})
    assert titan["fsdp_root_grads"] == (2 + 4) * root and "gathered_root_end" not in titan   # 6,304,063,488 B
    # bf16 reduce (accelerate's FSDP2 policy): the first
    acc = end_terms({"fsdp_version": 2})
    assert acc["fsdp_root_grads"] == 2 * root and acc["gathered_root_end"] == 2 * root
    assert acc["previous_unit_reduce_input"] == 2 * unit
    v1 = end_terms({"fsdp_version": 1})
    assert v1["fsdp_root_grads"] == 2 * 2 * root and v1["gathered_root"] == 2 * root   # view grads, their cat


@pytest.mark.tools
@pytest.mark.slow
def test_fsdp2_reshards_the_root_after_forward(fsdp_grid):
    """fully_shard(model, reshard_after_forward=True), as torchtune, torchtitan and accelerate pass it: only an
    unset (auto) flag keeps the root gathered (torch _fsdp_state.py FSDPState._lazy_init clears the root's
    post_forward_mesh_info only if _auto_reshard_after_forward). FSDP1 keeps the root from forward to backward.
    With the HF loss inside the model, the root is freed after the loss and gathered again at backward's
    start, so no phase peak moves here; the end of forward holds 2 B x root less (a loss computed outside the
    model, torchtune's and torchtitan's, runs without the root: next test). The root is the embeddings,
    lm_head and the final norm, 2 x 8192 x 256 + 256 elements."""
    def fwd_end(res):
        return max(r["phases"]["fwd"]["end"] for r in res["ranks"])
    root = 2 * 8192 * 256 + 256                                       # 4,194,560
    gap = fwd_end(fsdp_grid["s3w2_pure"][1]) - fwd_end(fsdp_grid["v2_s3w2_pure"][1])
    assert abs(gap - 2 * root) <= 1024                                # 8,389,120 B, within small buffers


@pytest.mark.tools
@pytest.mark.slow
def test_fsdp2_loss_outside_the_model_runs_without_the_root(fsdp_grid):
    """torchtune's and torchtitan's loops compute the loss outside the model: FSDP2 has freed the root by then and
    gathers it again only when backward reaches lm_head, so the forward's peak (the loss) holds at least the
    root's 2 B x 4,194,560 less than with HF's loss inside; the engine leaves gathered_root out of the forward
    and the loss backward for those trainers (memory/frameworks.py)."""
    from tools.fsdpprobe.check import V2_LOSS_OUTSIDE, busiest, plans
    from tools.fsdpprobe.runner import run_spec
    from tools.fsdpprobe.spec import build_spec
    from zerocalc import Plan
    from zerocalc.estimate import terms
    from zerocalc.memory.inputs import step_inputs

    root = 2 * 8192 * 256 + 256
    name, over = V2_LOSS_OUTSIDE
    plan = {**plans(["v2_s3w2_pure"])[0][1], **over}
    outside = busiest(run_spec(build_spec(plan)))["fwd"]
    inside = busiest(fsdp_grid["v2_s3w2_pure"][1])["fwd"]
    assert 2 * root <= inside - outside <= 2 * root + 0.03 * inside      # measured 10,036,736 B
    p = Plan.from_dict(plan)
    root_term = [t for t in terms(p, step_inputs(p)) if t.name == "gathered_root"]
    assert root_term and not root_term[0].phases & {"fwd", "loss_bwd"} and "bwd_top" in root_term[0].phases
    assert root_term[0].nbytes == 2 * root
    end = [t for t in terms(p, step_inputs(p)) if t.name == "gathered_root_end"]     # its last backward
    assert end and end[0].phases == {"bwd_end"} and end[0].nbytes == 2 * root


@pytest.mark.tools
@pytest.mark.slow
def test_fsdp2_embedding_units_with_the_loss_outside(fsdp_grid):
    """torchtune's custom_sharded_layers ['tok_embeddings', 'output'] with its loss outside the model: the output
    unit is resharded before the loss and gathered again only for lm_head's backward, so the forward and backward
    peaks (the loss and its gradient, at s 128) are those of the root-held run, to the byte as measured; the
    engine's are equal too. With HF's loss inside, the same units free the root at the loss (v2_s3w2_pure_emb,
    compared whole in the grid)."""
    from tools.fsdpprobe.check import V2_LOSS_OUTSIDE, busiest, engine_view, plans
    from tools.fsdpprobe.runner import run_spec
    from tools.fsdpprobe.spec import build_spec

    name, over = V2_LOSS_OUTSIDE
    plan = {**plans(["v2_s3w2_pure"])[0][1], **over}
    units = {**plan, "stack": {**plan["stack"], "fsdp_embedding_units": True}}
    held, split = busiest(run_spec(build_spec(plan))), busiest(run_spec(build_spec(units)))
    for ph in ("fwd", "bwd"):
        assert abs(split[ph] - held[ph]) <= 0.01 * held[ph], (ph, held, split)     # measured: equal
    e_held, e_split = engine_view(plan)["phases"], engine_view(units)["phases"]
    assert e_split["fwd"] == e_held["fwd"] and e_split["loss_bwd"] == e_held["loss_bwd"]
