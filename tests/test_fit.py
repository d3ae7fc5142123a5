"""The planner: exact maxima, min GPUs per stage, options that equal the estimate of the changed plan."""
from __future__ import annotations

import importlib
import io
import json
from contextlib import redirect_stdout

from hypothesis import given, settings, strategies as st

from zerocalc import Plan, PlanError, estimate, fit
from zerocalc.cli import main

SEED = json.load(open("examples/default-plan.json"))
fit_module = importlib.import_module("zerocalc.fit")   # the package's `fit` is the function


def _cli(*args) -> tuple[int, str]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(list(args))
    return rc, buf.getvalue()


def test_seed_example_options_equal_their_estimates():
    rc, out = _cli("fit", "--plan", "examples/default-plan.json", "--format", "json")
    assert rc == 0
    d = json.loads(out)
    assert d == fit(Plan.from_dict(SEED)).to_dict()                  # CLI and Python agree
    opts = d["options"]
    assert len(opts) >= 3 and any(o["fits"] for o in opts)
    base = Plan.from_dict(SEED)
    for o in opts:
        e = estimate(base.with_changes(**o["changes"])).to_dict()      # what `zerocalc estimate` prints
        assert o["device_used_bytes"] == e["per_gpu"]["device_used_bytes"]
        assert o["fits"] == e["fits"]
        assert o["step_time_s"] == e["step"]["time_s"]
        assert o["tokens_per_s_per_gpu"] == e["step"]["tokens_per_s_per_gpu"]
    # fitting options first, then by tokens/s
    keys = [(not o["fits"], -o["tokens_per_s_per_gpu"]) for o in opts]
    assert keys == sorted(keys)
    # the seed is 30 GiB out of memory; full checkpointing is one of the ways out: about 56 GiB of tensors, and
    # reserved beyond them the ZeRO-2 step's own segments (memory/deepspeed.py zero12_step_reserved, from the
    # replays in tests/data/dsprobe_step_reserve.json): the fp32 cast of the gradient partition, 8,030,261,248 / 4
    # ranks = 2,007,565,312 elements x 4 B, fits no cached block and opens a segment, and the gradient partition
    # takes a second of that size on a rank without the embedding (its fp64 norm slice is smaller): 2 x 8.03 GB
    ck = [o for o in opts if o["changes"] == {"activation_checkpointing": "full"}]
    assert ck and ck[0]["fits"] and ck[0]["device_used_bytes"] <= ck[0]["capacity_bytes"]
    pg = estimate(base.with_changes(activation_checkpointing="full")).to_dict()["per_gpu"]
    assert pg["peak_reserved_bytes"] - pg["peak_allocated_bytes"] >= 2 * 4 * 2_007_565_312


def test_fit_steps_asks_for_each_distinct_estimate_once_and_a_driver_gets_fits_answer():
    """fit_steps yields its estimate requests; a driver that answers them one at a time (as the page's planner worker
    does, a few per slice) gets fit()'s answer, after exactly `estimate_calls` requests, none of them twice."""
    p = Plan.from_dict(SEED)
    steps = fit_module.fit_steps(p)
    asked = []
    try:
        need = next(steps)
        while True:
            plan, search = need
            asked.append((json.dumps(plan.to_dict(), sort_keys=True), search))
            need = steps.send(estimate(plan, search_min_gpus=search))
    except StopIteration as done:
        f = done.value
    assert f.to_dict() == fit(p).to_dict()
    assert len(asked) == len(set(asked)) == f.estimates
    # the deepspeed seed asks for the min_gpus search at each of its 4 stages, and for nothing else with it
    assert sorted(json.loads(k)["zero_stage"] for k, s in asked if s) == [0, 1, 2, 3]


def test_an_estimate_error_is_raised_where_the_planner_asked(monkeypatch):
    """answer() raises estimate's PlanError inside the generator: min_gpus_by_stage catches it for that stage only,
    exactly as when fit called estimate itself."""
    p = Plan.from_dict(SEED)
    real = fit_module.estimate

    def refuses_stage_3(plan, search_min_gpus=False):
        if search_min_gpus and plan.zero_stage == 3:
            raise PlanError("zero_stage", "refused by the test")
        return real(plan, search_min_gpus=search_min_gpus)

    want = fit(p).min_gpus
    monkeypatch.setattr(fit_module, "estimate", refuses_stage_3)
    got = fit(p).min_gpus
    assert want["3"] is not None and got == {**want, "3": None}


def test_micro_batch_option_keeps_the_global_batch():
    d = fit(Plan.from_dict(SEED)).to_dict()
    for o in d["options"]:
        ch = o["changes"]
        if "micro_batch_size" in ch:
            assert ch["micro_batch_size"] * ch["gradient_accumulation_steps"] == 2 * 4


def test_seed_maxima_are_exact_and_min_gpus_per_stage():
    f = fit(Plan.from_dict(SEED))
    p = Plan.from_dict(SEED)
    m = f.max_micro_batch_size
    assert estimate(p.with_changes(micro_batch_size=m)).fits
    assert not estimate(p.with_changes(micro_batch_size=m + 1)).fits
    s = f.max_seq_len
    assert estimate(p.with_changes(seq_len=s)).fits and not estimate(p.with_changes(seq_len=s + 1)).fits
    assert set(f.min_gpus) == {"0", "1", "2", "3"}
    assert f.min_gpus["3"] == estimate(p.with_changes(zero_stage=3)).min_gpus
    assert f.estimates <= 100


def test_nothing_fits_gives_null_maxima():
    p = Plan.from_dict({"model": "llama-3.1-70b", "gpu": "rtx-4090", "gpus_per_node": 1, "framework": "single",
                        "zero_stage": 0})
    f = fit(p)
    assert f.max_micro_batch_size is None and f.max_seq_len is None
    assert f.min_gpus == {"0": None}


def test_fsdp_min_gpus_keys_and_table_output():
    f = fit(Plan.from_dict({"framework": "fsdp", "zero_stage": 3}))
    assert set(f.min_gpus) == {"2", "3"}
    rc, out = _cli("fit")
    assert rc == 0 and "max micro-batch" in out and "tokens/s/GPU" in out


def test_fit_bad_plan_is_one_line():
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "zerocalc", "fit", "--set", "network.kind=smoke"],
                       capture_output=True, text=True, env={"PYTHONPATH": "py"})
    assert r.returncode == 2 and r.stderr.startswith("zerocalc: network.kind:") and r.stderr.count("\n") == 1


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(["llama-3.2-1b", "llama-3.1-8b", "qwen2.5-7b"]),
       st.sampled_from(["a100-sxm4-40gb", "rtx-4090", "h100-sxm-80gb"]),
       st.sampled_from([1, 2, 4]), st.sampled_from([0, 2, 3]), st.sampled_from(["none", "full"]),
       st.sampled_from(["full", "lora"]))
def test_maxima_are_exact(model, gpu, gpus, stage, ckpt, method):
    p = Plan.from_dict({"model": model, "gpu": gpu, "gpus_per_node": gpus, "zero_stage": stage,
                        "activation_checkpointing": ckpt, "method": method, "seq_len": 2048})
    f = fit(p)
    for key, m in (("micro_batch_size", f.max_micro_batch_size), ("seq_len", f.max_seq_len)):
        if m is None:
            assert not estimate(p.with_changes(**{key: 1}), search_min_gpus=False).fits
        else:
            assert estimate(p.with_changes(**{key: m}), search_min_gpus=False).fits
            assert not estimate(p.with_changes(**{key: m + 1}), search_min_gpus=False).fits


def test_estimate_cli_step_block_and_training_cost():
    rc, out = _cli("estimate")
    assert rc == 0 and "step:" in out and "tokens/s per GPU" in out and "reduce_scatter" in out
    rc, out = _cli("estimate", "--train-tokens", "1e9", "--price-per-gpu-hour", "2", "--format", "json")
    d = json.loads(out)
    t = d["step"]["train"]
    assert t["tokens"] == 1e9 and abs(t["cost"] - 2 * t["gpu_hours"]) < 1e-9
    assert list(d)[-2:] == ["step", "communication"]
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "zerocalc", "estimate", "--price-per-gpu-hour", "-1",
                        "--train-tokens", "5"], capture_output=True, text=True, env={"PYTHONPATH": "py"})
    assert r.returncode == 2 and r.stderr == "zerocalc: price_per_gpu_hour: must be a number >= 0, got -1.0\n"
