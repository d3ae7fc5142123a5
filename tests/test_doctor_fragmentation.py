"""The doctor on fragmentation over a run (issue 21 item 4): an OOM whose message shows more reserved-but-unallocated
memory than the request, after the run has done steps, is diagnosed as the allocator's ratchet, with the remedies
(expandable_segments, packing, max_split_size_mb last) and the log's own figures; with a plan, beside the plan's
predicted reserve after as many steps (run.reserved_after_steps). Figures below are read off each log by hand."""
import pathlib

import pytest

from zerocalc import Plan
from zerocalc.doctor import diagnose
from zerocalc.doctor.fragmentation import is_late, progress
from zerocalc.estimate import estimate

REAL = pathlib.Path(__file__).parent / "data" / "logs" / "real"
GR00T = (REAL / "isaac-gr00t-162.txt").read_text(encoding="utf-8")
LLAVA = (REAL / "llava-1152.txt").read_text(encoding="utf-8")


def _find(d, fid):
    return [f["message"] for f in d["findings"] if f["id"] == fid]


def test_a_real_late_oom_is_fragmentation_with_its_numbers():
    """Isaac-GR00T#162: 25 of 20,000 steps done; 2.41 GiB unallocated against 426 MiB asked:
    2.41 x 1024 / 426 = 5.79x; reserved 73.91 + 2.41 = 76.32 GiB, of which 2.41 / 76.32 = 3 %."""
    assert progress(GR00T, 3) == (25, 20000, 0)
    d = diagnose(GR00T).to_dict()
    assert d["kind"] == "cuda_oom" and d["fragmentation"] is True
    (msg,) = _find(d, "fragmentation")
    for s in ("2.41 GiB", "5.8x the 426.00 MiB", "3% of the 76.32 GiB", "after 25 steps of 20,000",
              "expandable_segments:True", "pack the samples", "max_split_size_mb"):
        assert s in msg, s
    assert msg.index("expandable_segments") < msg.index("pack") < msg.index("max_split_size_mb")   # the order


def test_a_bar_after_the_message_and_the_old_wording():
    """LLaVA#1152 (PyTorch 1.4-2.0 wording): 30.44 reserved - 27.12 allocated = 3.32 GiB cached against 284 MiB:
    3.32 x 1024 / 284 = 11.97x; 3.32 / 30.44 = 11 %; the bar printed after the traceback reads 10 %."""
    assert progress(LLAVA) == (None, None, 10) and is_late(progress(LLAVA))
    (msg,) = _find(diagnose(LLAVA).to_dict(), "fragmentation")
    assert "12.0x the 284.00 MiB" in msg and "11% of the 30.44 GiB" in msg and "10 % into the run" in msg


@pytest.mark.parametrize("text, want", [
    ("Loading checkpoint shards: 100%|####| 4/4 [00:08<00:00,  2.08s/it]\n", None),
    ("Tokenizing:  62%|#####     | 125/200 [00:03<00:02, 36.97 examples/s]\n", None),
    ("Training Epoch: 1/3, step 12/104 completed (loss: 1.38): 12%|#  | 12/104 [00:30<03:00, 2.0s/it]\n", (12, 104, 12)),
    ("{'loss': 1.2, 'learning_rate': 1e-05}\nstep 340 | loss 1.02\n", (340, None, None)),
    ("global_step=77 loss=0.9\n", (77, None, None)),
    ("  File \"trainer.py\", line 3572, in training_step\n    optimizer.step()\n", None),
])
def test_progress_reads_training_steps_only(text, want):
    assert progress(text) == want


MSG = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of "
       "79.15 GiB of which 512.00 MiB is free. Including non-PyTorch memory, this process has 78.64 GiB memory in use. "
       "Of the allocated memory 70.00 GiB is allocated by PyTorch, and 8.00 GiB is reserved by PyTorch but "
       "unallocated.\n")
PLAN = {"model": "llama-3.1-8b", "gpu": "a100-sxm4-80gb", "gpus_per_node": 4, "zero_stage": 2, "micro_batch_size": 1,
        "seq_len": 4096}


def test_with_a_plan_the_log_meets_the_predicted_growth():
    """A late fragmentation OOM (step 340) of a padded-longest plan: the log's 70 + 8 = 78 GiB reserved beside the
    plan's run.reserved_after_steps at 1000 steps (the first count at or past 340), read from the estimate; the
    allocator, not the plan, is the change."""
    plan = Plan.from_dict({**PLAN, "data": {"lengths": "padded-longest", "mean_len": 900, "p99_len": 4096}})
    est = estimate(plan).to_dict()
    pred = est["run"]["reserved_after_steps"]["1000"]
    d = diagnose("step 340 | loss 1.02\n" + MSG, plan).to_dict()
    (msg,) = _find(d, "fragmentation_vs_plan")
    assert f"predicts {pred / 2**30:,.2f} GiB reserved after 1,000 steps" in msg
    assert f"the log had 78.00 GiB reserved ({78 * 2**30 / pred:.0%} of the prediction), after 340 steps" in msg
    assert "with allocator.expandable_segments true it predicts" in msg
    assert "after 340 steps" in _find(d, "fragmentation")[0]
    assert d["plan_changes"] == {"allocator": {"expandable_segments": True}}
    assert Plan.from_dict({**plan.to_dict(), **d["plan_changes"]}).allocator.expandable_segments is True


def test_a_fixed_length_plan_is_told_to_describe_its_lengths():
    d = diagnose("step 340 | loss 1.02\n" + MSG, Plan.from_dict(PLAN)).to_dict()
    (msg,) = _find(d, "fragmentation_vs_plan")
    assert "data.lengths fixed" in msg and "data.mean_len" in msg and "8.00 GiB of it unallocated" in msg


def test_an_early_oom_is_not_called_a_ratchet():
    """At step 2 the cache has not seen the run's batches: the finding stays the message's arithmetic, and the
    plan's own levers remain the change."""
    plan = Plan.from_dict({**PLAN, "data": {"lengths": "padded-longest", "mean_len": 900, "p99_len": 4096}})
    d = diagnose("step 2 | loss 1.9\n" + MSG, plan).to_dict()
    (msg,) = _find(d, "fragmentation")
    assert "the same step ran before" not in msg and "8.00 GiB" in msg
    assert d["plan_changes"] != {"allocator": {"expandable_segments": True}}


def test_the_page_shows_the_allocator_change():
    from app.doctor import view
    plan = {**PLAN, "data": {"lengths": "padded-longest", "mean_len": 900, "p99_len": 4096}}
    out = view({"log": "step 340 | loss 1.02\n" + MSG, "plan": plan})
    assert out["display"]["changes"] == ["allocator.expandable_segments = True"]
    assert any(f["id"] == "fragmentation_vs_plan" for f in out["display"]["findings"])
