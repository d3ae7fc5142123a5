"""py/app/doctor.py under CPython (the code the page's worker runs): size limit, bad plan, display strings."""
import json
import pathlib

from app import doctor, worker

LOGS = pathlib.Path(__file__).parent / "data" / "logs"


def test_size_limit_is_200_kib_of_utf8():
    assert doctor.MAX_LOG_BYTES == 200 * 1024
    ok = doctor.view({"log": "a" * (200 * 1024), "plan": None})
    assert "error" not in ok and ok["result"]["kind"] == "none"
    big = doctor.view({"log": "é" * (100 * 1024 + 1), "plan": None})     # 2 bytes each: 204,802 bytes
    assert big["too_large"] and "paste at most 200 KB" in big["error"]


def test_bad_plan_is_reported_and_the_log_still_read():
    text = (LOGS / "deepspeed-3869.txt").read_text(encoding="utf-8")
    v = doctor.view({"log": text, "plan": {"micro_batch_size": 0}})
    assert v["plan_error"].startswith("The plan was not used:") and "micro_batch_size" in v["plan_error"]
    assert v["result"]["kind"] == "cuda_oom" and not v["display"]["with_plan"]
    assert doctor.view({"log": 12, "plan": None}) == {"error": "log: paste the crash log as text"}


def test_display_strings_and_worker_entry():
    text = (LOGS / "deepspeed-3869.txt").read_text(encoding="utf-8")
    out = json.loads(worker.call("doctor", json.dumps({"log": text, "plan": {}})))
    fields = {f["key"]: f["text"] for f in out["display"]["fields"]}
    # 978.00 MiB asked, 4.00 GiB total, 0 bytes free, as printed
    assert fields["tried_to_allocate_bytes"] == "978.00 MiB"
    assert fields["gpu_total_bytes"] == "4.00 GiB"
    assert fields["free_bytes"] == "0 bytes"
    assert out["display"]["fragmentation"].startswith("yes")    # 2.72 - 1.68 = 1.04 GiB >= 978 MiB
    assert out["display"]["with_plan"] and "py_ms" in out


def test_phase_and_nested_changes_as_text():
    """An eval crash under a plan whose eval at batch 8 does not fit: the phase reads as words with its run phase
    and the frame that decided; the proposed run.eval change is one dotted line, the unchanged run.eval keys left
    out."""
    text = ('  File "/x/trainer.py", line 10, in evaluate\n    output = eval_loop(\n'
            '  File "/x/trainer.py", line 11, in prediction_step\n    outputs = model(**inputs)\n'
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "23.99 GiB of which 1.00 GiB is free. Of the allocated memory 20.00 GiB is allocated by PyTorch, and "
            "20.00 MiB is reserved by PyTorch but unallocated.")
    plan = {"gpu": "rtx-4090", "gpus_per_node": 1, "framework": "single", "model": "llama-3.2-1b",
            "method": "lora", "micro_batch_size": 1, "run": {"eval": {"batch_size": 8}}}
    v = doctor.view({"log": text, "plan": plan})
    assert v["display"]["phase"] == "evaluation (run phase eval, from prediction_step)"
    assert v["result"]["run_phase"] == "eval"
    b = v["result"]["plan_changes"]["run"]["eval"]["batch_size"]
    assert v["display"]["changes"] == [f"run.eval.batch_size = {b}"]
    assert doctor.view({"log": "nothing here", "plan": None})["display"]["phase"] == "not shown in the log"
