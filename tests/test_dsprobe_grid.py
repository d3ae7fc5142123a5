"""The real DeepSpeed engine on CPU ranks vs zerocalc, buffer by buffer (issue 6).

One session-scoped run of the grid (tools/dsprobe/grid.py, ~19 configs, ~6-8 min on 2 cores). Two checks:
1. the probe itself against hand arithmetic for the small Llama (P = 6,965,504, L = 2,097,152), so a
   broken tracker or label walk fails here and not silently in the comparison;
2. zerocalc's per_gpu.deepspeed_buffers for the same plan against the probe's busiest rank, exactly,
   for every name in tools.dsprobe.check.EXACT.
Probe results are kept only in this session's tmp dir (never across runs or commits).
"""
from __future__ import annotations

import pytest

pytestmark = [pytest.mark.tools, pytest.mark.slow]

pytest.importorskip("torch")
pytest.importorskip("deepspeed")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from tools.dsprobe.check import EXACT, compare, engine_buffers, probe_cached  # noqa: E402
from tools.dsprobe.grid import GRID, plans  # noqa: E402
from tools.dsprobe.report import busiest  # noqa: E402

P = 6_965_504
L = 8192 * 256                                # 2,097,152: embed_tokens and lm_head
LAYER = 692_736                               # q,o 65,536; k,v 16,384; gate,up,down 176,128; 2 norms of 256
PERSIST = 4 * (2 * 65536 + 2 * 16384 + 512) + 256   # numel <= 1e5: q,k,v,o and norms = 657,664


class _Grid(dict):
    """Runs a grid entry on first use; results live in this session's tmp dir only."""

    def __init__(self, cache):
        super().__init__()
        self.cache = cache

    def __missing__(self, name):
        self[name] = probe_cached(name, plans([name])[0][1], self.cache)
        return self[name]


@pytest.fixture(scope="session")
def grid(tmp_path_factory):
    return _Grid(tmp_path_factory.mktemp("dsprobe"))


def per_rank(res, name):
    return [r["buffers"].get(name, {}).get("bytes", 0) for r in res["ranks"]]


def test_probe_stage2_world2_by_hand(grid):
    res = grid["s2w2"]
    s = P // 2                                                  # 3,482,752
    assert per_rank(res, "flat_16bit_params") == [2 * P] * 2    # 13,931,008
    assert per_rank(res, "fp32_master") == [4 * s] * 2          # 13,931,008
    assert per_rank(res, "optimizer_states") == [8 * s] * 2     # 27,862,016 (exp_avg + exp_avg_sq)
    # straddling rule: layers.2.q_proj (65,536) starts 128 elements before the boundary -> both ranks hold it
    assert per_rank(res, "grad_partition") == [2 * (L + 2 * LAYER + 65536), 2 * (P - L - 2 * LAYER)]
    assert per_rank(res, "ipg_bucket") == [2 * 500_000] * 2
    assert per_rank(res, "fp64_norm_copy") == [8 * L] * 2       # get_grad_norm_direct: largest slice = L
    assert per_rank(res, "step_transient") == [6 * s] * 2       # flat 16-bit copy 2S + fp32 cast 4S


def test_probe_stage1_world4_by_hand(grid):
    res = grid["s1w4"]
    s = P // 4                                                  # 1,741,376
    # ranks 0 and 3 hold one slice each (embedding / lm_head): flatten returns a view, only the 4S fp32 cast
    assert per_rank(res, "step_transient") == [4 * s, 6 * s, 6 * s, 4 * s]
    assert per_rank(res, "fp64_norm_copy") == [8 * s, 8 * (L - s), 8 * (L - s), 8 * s]


def test_probe_stage3_world2_by_hand(grid):
    res = grid["s3w2"]
    s = P // 2                                                  # every tensor is divisible by 2
    assert per_rank(res, "param_partition_16bit") == [2 * s] * 2
    assert per_rank(res, "persistent_params") == [2 * PERSIST] * 2          # 1,315,328
    # default stage3_max_reuse_distance 1e9 > P: every non-persistent param stays gathered at the turn
    assert per_rank(res, "gathered_params") == [2 * (P - PERSIST)] * 2      # 12,615,680
    assert per_rank(res, "grad_partition") == [2 * s] * 2
    assert per_rank(res, "ipg_bucket") == [2 * 500_000] * 2                 # one buffer, from init
    assert per_rank(res, "step_transient") == [6 * s] * 2
    assert per_rank(res, "fp64_norm_copy") == [8 * (L // 2)] * 2            # largest grad partition


def test_probe_stage3_reuse0_keeps_only_the_current_module(grid):
    res = grid["s3w2_reuse0"]
    assert per_rank(res, "gathered_params") == [2 * L] * 2      # embedding or lm_head, while in use
    assert per_rank(res, "persistent_params") == [0, 0]


def test_probe_offload_by_hand(grid):
    res = grid["s2w2_off"]
    s = P // 2
    assert per_rank(res, "fp32_master") == [4 * s] * 2
    assert per_rank(res, "fp32_grad_partition") == [4 * s] * 2
    assert per_rank(res, "offload_16bit_staging") == [2 * s] * 2
    assert per_rank(res, "offload_temp_grad_buffers") == [2 * 2 * L] * 2   # one on the GPU, one on the host
    assert per_rank(res, "grad_partition") == [0] * 2                      # no grads_in_partition with offload
    assert per_rank(res, "fp64_norm_copy") == [8 * L] * 2                  # backward: set_norm_for_param_grad_in_gpu
    assert per_rank(res, "offload_fp32_grad_slice") == [4 * L] * 2         # .float() of the largest slice


def test_probe_lora_frozen_base(grid):
    lora = 4 * (2 * (8 * 256 + 256 * 8) - 256 * 8 + 64 * 8)   # q: A 8x256 + B 256x8; v: A 8x256 + B 64x8 -> 26,624
    assert lora == 26_624
    assert per_rank(grid["s2w2_lora"], "frozen_params") == [2 * P] * 2
    assert per_rank(grid["s2w2_lora"], "flat_16bit_params") == [2 * lora] * 2
    assert per_rank(grid["s3w2_lora"], "frozen_partition_16bit") == [P] * 2  # 2 B x P / 2


@pytest.mark.parametrize("name", [n for n, _ in GRID])
def test_engine_matches_probe(grid, name):
    plan = dict(plans([name])[0][1])
    eng = engine_buffers(plan)
    assert eng is not None, "estimate(plan).to_dict()['per_gpu']['deepspeed_buffers'] is missing"
    rows = compare(busiest(grid[name]), eng, name)
    bad = [f"{r['name']}: probe {r['probe']:,} engine {r['engine']:,}" for r in rows if r["exact"] and r["dev"]]
    assert not bad, f"{name}: " + "; ".join(bad)
    assert {r["name"] for r in rows if r["exact"]} <= set(EXACT)


# The whole step, activations included: the probe's largest tracked total in any steady phase against the
# engine's largest phase (allocated minus the cuBLAS workspace, which a CPU rank has not). Offload plans
# are left out: on CPU ranks the host buffers are tracked with everything else. The engine may sit above
# the probe (its transients are upper bounds), not below.
WHOLE_STEP_BELOW, WHOLE_STEP_ABOVE = 0.02, 0.08


@pytest.mark.parametrize("name", [n for n, o in GRID if "offload_optimizer" not in o and "offload_params" not in o])
def test_engine_whole_step_peak_matches_probe(grid, name):
    from zerocalc import Plan, estimate

    res = grid[name]
    probe = max(r["phases"][k]["total"] for r in res["ranks"] for k in r["phases"] if k != "init")
    pg = estimate(Plan.from_dict(dict(plans([name])[0][1]))).per_gpu
    engine = pg.peak_allocated - pg.detail.get("cublas_workspace", 0)
    assert -WHOLE_STEP_BELOW <= (engine - probe) / probe <= WHOLE_STEP_ABOVE, (name, probe, engine)
