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
