"""The ZeRO-1/2 step's own segments (memory/deepspeed.py zero12_step_reserved) against the allocator replays of
DeepSpeed 0.19.8's event log (tests/data/dsprobe_step_reserve.json, made by tools/dsprobe/steptrace.py)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from zerocalc.estimate import estimate
from zerocalc.memory.deepspeed import zero12_step_reserved
from zerocalc.memory.terms import ALL, ALLOCATOR, Term
from zerocalc.plan import Plan

MiB = 2**20
DATA = Path(__file__).parent / "data" / "dsprobe_step_reserve.json"
CUBLAS = 32 * MiB   # the engine's cuBLAS workspace on an H100 (memory/runtime.py); the CPU log has none


def _t(name, mib, phases):
    return Term(name, "buffers", mib * MiB, frozenset(phases), ALLOCATOR)


def test_zero12_step_reserved_by_hand():
    """Replay A's rank 0 in round figures (2 layers h 2048, P = 219 M, 2 ranks, partition 110 M):
    persistent = flat 418 + master 418 + Adam 836 + cuBLAS 32 = 1704; build = the flat buffer's 418 (the
    module's own params, freed by the flatten); clone = step_transient 627 - master 418 = 209;
    F = fp64 copy of the embedding's grad, 500; C = fp32 flat grad 418; G = grads_in_partition 217 <= F, so
    G sits in F's segment and F / C take a second max(F, C) one: 500 + 500. The forward / backward's
    2090 less persistent, build and clone is negative: nothing more. 1704 + 418 + 209 + 500 + 500 = 3331."""
    steps = {"step_norm", "step"}
    ts = [_t("flat_16bit_params", 418, ALL), _t("fp32_master", 418, ALL), _t("optimizer_states", 836, ALL),
          _t("cublas_workspace", 32, ALL), _t("grad_partition", 217, {"bwd_end"} | steps),
          _t("step_transient", 627, {"step"}), _t("fp64_norm_copy", 500, {"step_norm"}),
          _t("logits_forward", 62, {"fwd"})]
    assert zero12_step_reserved(ts, 2090 * MiB) == 3331 * MiB
    # G larger than F (the rank whose largest slice is small): G takes a C-sized step segment, F / C another
    ts2 = [t if t.name != "fp64_norm_copy" else _t("fp64_norm_copy", 100, {"step_norm"}) for t in ts]
    assert zero12_step_reserved(ts2, 2090 * MiB) == (1704 + 418 + 209 + 418 + 418) * MiB
    # forward / backward moments over persistent + build + clone: the excess opens its own segments
    assert zero12_step_reserved(ts, 2831 * MiB) == (3331 + 2831 - 1704 - 418 - 209) * MiB
    # replay E's buckets (overlap_comm: two of 2e8 x 2 B = 381 MiB, larger than the embedding's 125 MiB block)
    # open segments of their own: 763 MiB on top, the rest of the backward (2090 - 763) within build + clone
    ts3 = ts + [_t("ipg_bucket", 763, {"loss_bwd", "bwd_end"})]
    assert zero12_step_reserved(ts3, 2090 * MiB, 125 * MiB, 2) == (3331 + 763) * MiB
    # a bucket no larger than the largest parameter's block is served from the blocks the flatten freed, and
    # so is the 209 MiB clone: 3331 - 209
    assert zero12_step_reserved(ts3, 2090 * MiB, 400 * MiB, 2) == (3331 - 209) * MiB


def test_zero12_step_reserved_needs_the_wrapper_terms():
    """Without the fp32 master / fp64 norm copy (fp32 training, offload) the rule says nothing."""
    ts = [_t("flat_16bit_params", 418, ALL), _t("grad_partition", 217, {"step"})]
    assert zero12_step_reserved(ts, 0) == 0


def _runs():
    return json.loads(DATA.read_text())["runs"]


@pytest.mark.parametrize("run", _runs(), ids=lambda r: r["id"])
def test_engine_reserved_matches_the_replays(run):
    """Steady step (fwd3 / bwd3 / step3) of the busiest rank: the engine's reserved within 3 % of the replay's plus the
    cuBLAS workspace, and its allocated within 5 % (A-D within 0.1 %; E, ms-swift's zero2.json buckets with
    overlap_comm, -4.8 %: the engine has no term for allreduce_bucket's 293 MiB flat copy in the backward;
    F, 4 ranks: -0.1 % / -0.9 %, with the busiest rank's own grads_in_partition, test below).
    (allgather_bucket_size is a probe knob the engine does not model.)"""
    plan = copy.deepcopy(run["plan"])
    plan.get("deepspeed", {}).pop("allgather_bucket_size", None)
    pg = estimate(Plan.from_dict(plan), search_min_gpus=False).per_gpu
    alloc = max(r["phases"][ph][0] for r in run["ranks"] for ph in ("fwd3", "bwd3", "step3")) * MiB + CUBLAS
    reserved = max(r["phases"]["step3"][1] for r in run["ranks"]) * MiB + CUBLAS
    assert abs(pg.peak_allocated - alloc) <= 0.05 * alloc
    assert abs(pg.peak_reserved - reserved) <= 0.03 * reserved
    # the steady step no longer grows: step 2 and step 3 reserve the same
    assert all(r["phases"]["step2"][1] == r["phases"]["step3"][1] for r in run["ranks"])


def test_replay_f_ranks_by_hand():
    """Replay F's 4 ranks (get_partition_info / copy_grads_in_partition, DeepSpeed 0.19.8): embed 65,536,000;
    a layer q 4,194,304, k / v 524,288, o 4,194,304, gate / up / down 11,534,336, two norms 2,048 = 44,044,288;
    P = 2 x 65,536,000 + 2 x 44,044,288 + 2,048 = 219,162,624 = 4 x 54,790,656 (a multiple of 2 x 4: no pad).
    rank 0 [0, 54.8 M) lies in the embedding: G = 65,536,000 (125 MiB bf16), slice 54,790,656 (fp64 418 MiB);
    rank 1 holds the embedding's tail, layer 0 (ends 1,024 short of 109,581,312) and layer 1's q, which starts
    there: G = 65,536,000 + 44,044,288 + 4,194,304 = 113,774,592 (217 MiB), largest slice a gate, 11,534,336;
    rank 2 holds q (straddling), the rest of layer 1, the final norm and the lm_head's head:
    G = 44,044,288 + 2,048 + 65,536,000 = 109,582,336, slice 11,534,336; rank 3 = rank 0.
    The step of each (G + max(fp64, 6 x 54,790,656 = 328,743,936), bytes): 131,072,000 + 438,325,248 =
    569,397,248; 227,549,184 + 328,743,936 = 556,293,120; 219,164,672 + 328,743,936 = 547,908,608: rank 0's
    pair, and rank 1's larger G counted only in the backward: 2 x (113,774,592 - 65,536,000) = 96,477,184."""
    from zerocalc.memory import deepspeed as ds
    layer = (4_194_304, 524_288, 524_288, 4_194_304, 11_534_336, 11_534_336, 11_534_336, 2_048, 2_048)
    sizes = (65_536_000,) + layer + layer + (2_048, 65_536_000)
    assert sum(sizes) == 219_162_624 and ds.padded_partition(sum(sizes), 4) == 54_790_656
    assert ds.rank_partitions(sizes, 4) == ((65_536_000, 54_790_656), (113_774_592, 11_534_336),
                                            (109_582_336, 11_534_336))
    assert ds.partition_overlap(sizes, 4) == (113_774_592, 54_790_656)    # the two maxima: ranks 1 and 0
    run = next(r for r in _runs() if r["id"] == "F")
    plan = copy.deepcopy(run["plan"])
    plan["deepspeed"].pop("allgather_bucket_size", None)
    tr = ds.Trainable(sizes, "weights", "gradients", "optimizer_states")
    p = Plan.from_dict(plan)
    ts = {t.name: t for t in ds.zero_terms(p, p.arch, tr, 0, sizes, 2, 1)}
    assert ts["grad_partition"].nbytes == 131_072_000 and ts["fp64_norm_copy"].nbytes == 438_325_248
    assert ts["grad_partition_other_rank"].nbytes == 96_477_184
    assert not ts["grad_partition_other_rank"].phases & {"step", "step_norm"}
    # the replay's fresh segments: rank 1's 217 MiB grads_in_partition, on no other rank
    fresh = {x["rank"]: [f[1] for f in x["fresh"] if f[4] == "grad_partition"] for x in run["ranks"]}
    assert fresh == {0: [], 1: [217.0, 217.0], 2: [], 3: []}
    # the step segments counted per rank (zero12_rank_bytes), the largest kept: rank 0's
    assert ds.zero12_rank_bytes(sizes, 4, 2) == ((131_072_000, 438_325_248), (227_549_184, 92_274_688),
                                                 (219_164_672, 92_274_688))


def test_rule_on_replay_f_with_its_own_sizes():
    """Replay F (4 ranks, rank 0), the rule fed the sizes its log shows: flat 418 + master 209 + Adam 2 x 209 +
    cuBLAS 32 = 1077 persistent; build 418; the bf16 clone (104.5) fits the embedding's freed 125 MiB block: 0;
    F = fp64 copy of a 54.8 M slice 418, C = 209, G = 125: F >= G, and F - C = 209 leaves room for the second
    Adam state (209) and then G, so F's first segment is that state's: 418 + 418 - 209. 2122 MiB against the
    replay's 2110 + 32 = 2142 (-0.9 %)."""
    steps = {"step_norm", "step"}
    ts = [_t("flat_16bit_params", 418, ALL), _t("fp32_master", 209, ALL), _t("optimizer_states", 418, ALL),
          _t("cublas_workspace", 32, ALL), _t("grad_partition", 125, {"bwd_end"} | steps),
          _t("step_transient", 313, {"step"}), _t("fp64_norm_copy", 418, {"step_norm"})]
    assert zero12_step_reserved(ts, 1400 * MiB, 125 * MiB) == 2122 * MiB
    run = next(r for r in _runs() if r["id"] == "F")
    measured = max(r["phases"]["step3"][1] for r in run["ranks"]) + 32
    assert abs(2122 - measured) <= 0.03 * measured
