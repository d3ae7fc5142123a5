"""The doctor's phase (doctor/phase.py) and the logs it reads since issue 19, on small hand-made logs in the shapes
real ones have, and the comparison of a log with the estimate of its run phase (plan-v1 Extension 5)."""
from __future__ import annotations

from zerocalc import Plan, estimate
from zerocalc.doctor import diagnose
from zerocalc.doctor import findings, phase
from zerocalc.doctor.oom import parse_oom
from zerocalc.doctor.sizes import format_gib, to_bytes

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "23.99 GiB of which 1.00 GiB is free. Including non-PyTorch memory, this process has 22.50 GiB memory in use. "
       "Of the allocated memory 20.00 GiB is allocated by PyTorch, and 2.00 GiB is reserved by PyTorch but "
       "unallocated.")


def tb(*frames):
    """A Python traceback: (function, source line) outermost first, then the OOM message."""
    lines = ["Traceback (most recent call last):"]
    for i, (fn, src) in enumerate(frames):
        lines += [f'  File "/x/m{i}.py", line {10 + i}, in {fn}', f"    {src}"]
    return "\n".join(lines + [OOM])


def ph(text):
    d = diagnose(text).to_dict()
    return d["phase"], d["run_phase"], d["phase_evidence"]


# ---------------------------------------------------------------------------------------------------- phases

def test_innermost_run_phase_decides_over_the_step_moments():
    # HF: train -> _maybe_log_save_evaluate -> evaluate -> evaluation_loop -> prediction_step -> forward -> loss
    t = tb(("train", "return inner_training_loop("), ("_maybe_log_save_evaluate", "metrics = self._evaluate("),
           ("_evaluate", "metrics = self.evaluate("), ("evaluate", "output = eval_loop("),
           ("evaluation_loop", "losses, logits, labels = self.prediction_step(model, inputs)"),
           ("prediction_step", "outputs = model(**inputs)"), ("forward", "loss = self.loss_function(logits)"),
           ("cross_entropy", "return torch._C._nn.cross_entropy_loss("))
    assert ph(t) == ("eval", "eval", "prediction_step")


def test_a_name_that_only_contains_a_phase_word_names_nothing():
    # _maybe_log_save_evaluate names neither save nor evaluate; a script called generate.py is no generation
    t = tb(("_maybe_log_save_evaluate", "self._save_checkpoint(model, trial)"),
           ("_save_checkpoint", "self.save_model(output_dir)"), ("save_model", "self._save(output_dir)"))
    assert ph(t)[:2] == ("save", "save")
    t = tb(("main", "x = torch.ones(1)")).replace("m0.py", "generate.py")
    assert ph(t)[0] == "unknown"


def test_steps_moments_and_recomputation():
    t = tb(("training_step", "self.accelerator.backward(loss)"), ("backward", "torch.autograd.backward("),
           ("_engine_run_backward", "return Variable._execution_engine.run_backward("),
           ("unpack_hook", "frame.recompute_fn(*args)"), ("forward", "hidden = self.mlp(x)"))
    assert ph(t) == ("backward", "step", "unpack_hook")         # forward below backward: recomputation
    t = tb(("training_step", "self.optimizer.step()"), ("step", "adamw("), ("_multi_tensor_adamw", "x"))
    assert ph(t) == ("step", "step", "_multi_tensor_adamw")
    t = tb(("forward", "return F.linear(x, self.weight)"))
    assert ph(t)[:2] == ("forward", "step")


def test_optimizer_state_load_is_a_resume_and_module_load_a_load():
    t = tb(("train", "self._load_optimizer_and_scheduler(resume_from_checkpoint)"),
           ("_load_optimizer_and_scheduler", "self.optimizer.load_state_dict(torch.load(path))"))
    assert ph(t)[:2] == ("resume", "resume")
    t = tb(("from_pretrained", "model.load_state_dict(state_dict)"), ("load_state_dict", "x"))
    assert ph(t)[:2] == ("load", "load")
    t = tb(("main", "model = model.merge_and_unload()"), ("merge_and_unload", "return self._unload_and_optionally_merge("))
    assert ph(t)[:2] == ("merge", "merge")
    t = tb(("main", "engine, *_ = deepspeed.initialize(model=model)"), ("initialize", "engine = DeepSpeedEngine("),
           ("__init__", "self._configure_optimizer(optimizer, params)"))
    assert ph(t)[:2] == ("init", "init")
    t = tb(("log_completions", "out = model.generate(**batch)"), ("generate", "return self._sample("),
           ("_sample", "outputs = self(**model_inputs)"), ("forward", "x"))
    assert ph(t) == ("generate", "generate", "_sample")


def test_frame_forms():
    # rich (box drawing, the ❱ line), IPython (File path:line, in Class.method(...) and ---->), rank prefixes,
    # a terminal-wrapped Python frame
    rich = ("│ /x/transformers/trainer.py:2830 in save_model                       │\n"
            "│ ❱ 2830 │   │   │   self._save(output_dir)                          │\n" + OOM)
    assert ph(rich)[0] == "save"
    ipy = ("File /x/deepspeed/runtime/engine.py:1184, in DeepSpeedEngine._configure_optimizer(self, opt)\n"
           "-> 1184     self.optimizer = self._configure_zero_optimizer(basic_optimizer)\n" + OOM)
    assert ph(ipy)[:2] == ("init", "init")
    ipy7 = ("/x/transformers/trainer.py in evaluation_loop(self, dataloader)\n"
            "-> 3140                 preds_host = nested_concat(preds_host, logits)\n" + OOM)
    assert ph(ipy7)[0] == "eval"
    ranked = "\n".join(f"[rank3]: {line}" for line in tb(("evaluate", "x")).splitlines())
    assert ph(ranked)[0] == "eval"
    wrapped = ('  File\n    "/x/fairseq2/optim/_dynamic_\n    loss_scaler.py", line 170, in run_optimizer_step\n' + OOM)
    assert ph(wrapped)[0] == "step"


def test_dumps_are_read_innermost_first_and_the_main_thread_decides():
    spy = ('Thread 42 (idle): "MainThread"\n'
           "    backward (torch/autograd/__init__.py:266)\n"
           "    backward (deepspeed/runtime/engine.py:1976)\n"
           "    training_loop (train.py:410)\n"
           "Thread 4079 (active)\n"
           "    all_gather_into_tensor (torch/distributed/distributed_c10d.py:2709)\n")
    [main, other] = phase.blocks(spy)
    assert main.thread == "MainThread" and main.names == ("training_loop", "backward", "backward")
    d = diagnose(spy).to_dict()
    assert (d["kind"], d["subkind"], d["phase"]) == ("nccl_timeout", "hang_dump", "backward")
    fh = ("Thread 0x00007ff406132180 (most recent call first):\n"
          '  File "torch/distributed/distributed_c10d.py", line 2477 in barrier\n'
          '  File "train.py", line 80 in evaluate\n')
    d = diagnose(fh).to_dict()
    assert (d["kind"], d["subkind"], d["phase"]) == ("nccl_timeout", "hang_dump", "eval")
    idle = 'Thread 7 (idle): "MainThread"\n    read (socket.py:10)\n    main (serve.py:3)\n'
    assert diagnose(idle).to_dict()["subkind"] == "hang_dump" and diagnose(idle).kind == "other"


def test_see_memory_usage_names_the_moment():
    line = "[2023-04-07 13:08:55,468] [INFO] [utils.py:829:see_memory_usage] {}"
    kill = ("[2023-04-07 13:09:33,201] [INFO] [launch.py:318:sigkill_handler] Killing subprocess 80\n"
            "[2023-04-07 13:09:33,220] [ERROR] [launch.py:324:sigkill_handler] ['python', 'train.py'] exits with "
            "return code = -9")
    for label, want in (("Before initializing optimizer states", "init"), ("Engine before forward", "forward"),
                        ("In backward checkpointing code before forward", "backward"),
                        ("In step before checking overflow", "step"), ("DeepSpeedZeRoOffload initialize [end]", "init")):
        log = "\n".join([line.format(label), line.format("MA 11.76 GB  Max_MA 11.76 GB  CA 11.77 GB  Max_CA 12 GB"),
                         line.format("CPU Virtual Memory:  used = 28.43 GB, percent = 22.6%"), kill])
        d = diagnose(log).to_dict()
        assert (d["kind"], d["phase"]) == ("host_oom", want), label
    # the launcher's kill line without its "-9", right after the memory report, no Python error: still killed
    cut = line.format("Before initializing optimizer states") + "\n" + kill.splitlines()[0]
    assert diagnose(cut).kind == "host_oom"
    # the memory report alone is no failure
    assert diagnose(line.format("After creating fp32 partitions")).kind == "none"


# ---------------------------------------------------------------------------------------------------- kinds

def test_newer_nccl_watchdog_wordings():
    stuck = ("[rank2]:[E704 13:48:58.260494728 ProcessGroupNCCL.cpp:1746] [PG ID 0 PG GUID 0(default_pg) Rank 2] "
             "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued "
             "collectives.")
    d = diagnose(stuck).to_dict()
    assert (d["kind"], d["subkind"], d["nccl"]["stuck_s"], d["device"]) == ("nccl_timeout", "watchdog_stuck", 480,
                                                                         "rank 2")
    fr = ("[rank0]:[E1213 17:24:49.082111648 ProcessGroupNCCL.cpp:2241] [PG ID 0 PG GUID 0(default_pg) Rank 0]  "
          "failure detected by watchdog at work sequence id: 716 PG status: last enqueued work: 747, last completed "
          "work: 715")
    d = diagnose(fr).to_dict()
    assert (d["kind"], d["subkind"]) == ("nccl_timeout", "flight_recorder")
    assert (d["nccl"]["seq"], d["nccl"]["last_enqueued"], d["nccl"]["last_completed"]) == (716, 747, 715)
    # collective 715 + 1 = 716 of 747 enqueued never completed
    assert "collective 716 of 747 enqueued never completed" in d["findings"][0]["message"]
    wrapped = ("[Rank 2]\n Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, OpType=BROADCAST, "
               "NumelIn=112, NumelOut=112, Timeout(ms)=1800000) ran f\nor 1800010 milliseconds before timing out.")
    d = diagnose(wrapped).to_dict()
    assert (d["kind"], d["subkind"], d["nccl"]["ran_for_ms"], d["nccl"]["op"]) == ("nccl_timeout", None, 1800010,
                                                                                 "BROADCAST")


def test_bitsandbytes_setup_and_the_oom_class_alone():
    for line in ("CUDA Setup failed despite GPU being available. Please run the following command",
                 "CUDA SETUP: Defaulting to libbitsandbytes_cpu.so...",
                 "The installed version of bitsandbytes was compiled without GPU support. 8-bit optimizers, 8-bit "
                 "multiplication, and GPU quantization are unavailable."):
        d = diagnose(line).to_dict()
        assert (d["kind"], d["subkind"]) == ("other", "bitsandbytes_setup"), line
        assert "pip install -U bitsandbytes" in d["findings"][0]["message"]
    d = diagnose("OutOfMemoryError                          Traceback (most recent call last)").to_dict()
    assert (d["kind"], d["message_wording"], d["tried_to_allocate_bytes"]) == ("cuda_oom", "oom_error_class", None)
    assert diagnose("Qwen 27B LoRA 微调时128步报错oom").to_dict()["message_wording"] == "oom_mentioned"
    assert diagnose("the OOM killer took it").kind == "none"          # the kernel's killer is no CUDA OOM


# ---------------------------------------------------------------------------------------------------- vs plan

PLAN_EVAL = {"gpu": "rtx-4090", "gpus_per_node": 1, "framework": "single", "model": "llama-3.2-1b",
             "method": "lora", "micro_batch_size": 1, "run": {"eval": {"batch_size": 8}}}
EVAL_LOG = tb(("evaluate", "output = eval_loop("), ("prediction_step", "outputs = model(**inputs)"))


def test_an_eval_crash_is_read_against_the_eval_phase():
    """The log (20.00 GiB allocated + 2.00 GiB asked, 20.00 + 2.00 GiB reserved) beside run.phases.eval: the
    message quotes the eval phase's allocated and reserved, not the step's; ratios by hand."""
    plan = Plan.from_dict(PLAN_EVAL)
    est = estimate(plan, search_min_gpus=False).to_dict()
    ev, st = est["run"]["phases"]["eval"], est["run"]["phases"]["step"]
    assert ev["peak_allocated_bytes"] != st["peak_allocated_bytes"]
    d = diagnose(EVAL_LOG, plan).to_dict()
    msg = next(f["message"] for f in d["findings"] if f["id"] == "estimate_vs_log")
    logged = 22 * 2 ** 30                        # 20.00 GiB + 2.00 GiB
    held = 22 * 2 ** 30                          # allocated 20.00 + reserved-unallocated 2.00
    assert msg.startswith("at the eval phase")
    assert f"{format_gib(ev['peak_allocated_bytes'])} allocated, {format_gib(ev['peak_reserved_bytes'])} reserved" in msg
    assert f"{logged / ev['peak_allocated_bytes']:.0%} of the estimate" in msg
    assert f"{held / ev['peak_reserved_bytes']:.0%} of the estimate's reserved" in msg
    assert not any(f["id"] == "phase_estimate_fallback" for f in d["findings"])
    # the step fits a 24 GiB card at micro batch 1, the eval at batch 8 does not: the run's fix is quoted, and the change the
    # doctor proposes is a smaller eval batch whose eval phase fits
    assert any(f["id"] == "run_fix" and "per_device_eval_batch_size" in f["message"] for f in d["findings"])
    b = d["plan_changes"]["run"]["eval"]["batch_size"]
    assert b < 8
    fixed = estimate(Plan.from_dict({**PLAN_EVAL, "run": d["plan_changes"]["run"]}), search_min_gpus=False).to_dict()
    assert fixed["run"]["phases"]["eval"]["device_used_bytes"] <= fixed["capacity_bytes"]


def test_falls_back_to_the_step_with_a_note():
    o = parse_oom(OOM)
    # the plan has no evaluation: eval is compared with the step, and the note names the key to set
    plan = {k: v for k, v in PLAN_EVAL.items() if k != "run"}
    est = estimate(Plan.from_dict(plan), search_min_gpus=False).to_dict()
    out = findings.plan_findings(o, "eval", est)
    note = next(f["message"] for f in out if f["id"] == "phase_estimate_fallback")
    assert "the plan's run does not have (set run.eval" in note
    peak = est["per_gpu"]["peak_allocated_bytes"]
    assert f"{format_gib(peak)} allocated" in next(f["message"] for f in out if f["id"] == "estimate_vs_log")
    # an estimate without run phases at all (an engine before Extension 5)
    old = {k: v for k, v in est.items() if k != "run"}
    out = findings.plan_findings(o, "save", old)
    assert "this estimate has no run phases" in next(f["message"] for f in out if f["id"] == "phase_estimate_fallback")
    # the step's moments keep reading per_gpu.phases: no note
    assert not any(f["id"] == "phase_estimate_fallback" for f in findings.plan_findings(o, "backward", est))
    assert to_bytes("2.00", "GiB") == 2 * 2 ** 30


# ---------------------------------------------------------------------------------------------------- properties

from hypothesis import given, settings, strategies as st  # noqa: E402

NEUTRAL = st.sampled_from(["main", "train", "_inner_training_loop", "training_step", "wrapper", "decorate_context",
                           "_maybe_log_save_evaluate", "run_exp", "<module>"])
RUN = st.sampled_from([("evaluation_loop", "eval"), ("generate", "generate"), ("save_model", "save"),
                       ("merge_and_unload", "merge"), ("from_pretrained", "load"), ("_configure_optimizer", "init"),
                       ("_load_optimizer_and_scheduler", "resume")])
ANY = st.one_of(NEUTRAL, RUN.map(lambda r: r[0]),
                st.sampled_from(["forward", "backward", "step", "cross_entropy", "_call_impl"]))


@settings(max_examples=150, deadline=None)
@given(outer=st.lists(ANY, max_size=6), inner=RUN, below=st.lists(NEUTRAL | st.sampled_from(
    ["forward", "backward", "step", "cross_entropy"]), max_size=4))
def test_the_innermost_run_phase_decides(outer, inner, below):
    """Whatever frames lie outside it, and any step moments or neutral frames inside it, the innermost frame that
    names a run phase decides."""
    names = tuple(outer) + (inner[0],) + tuple(below)
    assert phase.read_block(phase.Block(names, 0, len(names))).phase == inner[1]


@settings(max_examples=150, deadline=None)
@given(frames=st.lists(ANY, min_size=1, max_size=8), noise=st.lists(NEUTRAL, max_size=4))
def test_neutral_frames_change_nothing(frames, noise):
    """Frames that name no phase, put outermost, leave the reading as it was."""
    a = phase.read_block(phase.Block(tuple(frames), 0, 1)).phase
    b = phase.read_block(phase.Block(tuple(noise) + tuple(frames), 0, 1)).phase
    assert a == b
