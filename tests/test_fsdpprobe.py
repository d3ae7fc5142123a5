"""Real PyTorch FSDP on CPU ranks vs zerocalc's FSDP terms (tools/fsdpprobe).

The tracker's resize bookkeeping and replay are checked without any distributed run; the grid (nine
plans, about a minute on 2 cores) runs once per session. Checks: the probe against hand arithmetic for
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
