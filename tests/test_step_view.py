"""The page's step bar (py/app/view.py step_parts): the breakdown as plain-text segments that add up."""
import math

from app.view import step_parts, view
from zerocalc import Plan


def test_step_bar_segments_add_up_and_read_out():
    v = view(Plan())
    parts = v["step_parts"]
    step = v["estimate"]["step"]
    assert [p["key"] for p in parts] == [k.removesuffix("_s") for k, s in step["breakdown"].items() if s > 0]
    assert math.isclose(sum(p["seconds"] for p in parts), step["time_s"], rel_tol=1e-9)
    assert math.isclose(sum(p["width"] for p in parts), 100, abs_tol=0.01)
    said = v["view"]["step.breakdown"]["text"]
    assert said.startswith("Step time ") and all(p["label"] in said for p in parts)


def test_step_bar_hand_case():
    """2 s of GEMMs and 1 s of exposed communication: two segments, 66.667 % and 33.333 %."""
    parts, said = step_parts({"time_s": 3.0, "breakdown": {"gemm_s": 2.0, "attention_s": 0.0, "exposed_comm_s": 1.0}})
    assert [(p["key"], p["width"]) for p in parts] == [("gemm", 66.667), ("exposed_comm", 33.333)]
    assert said == "Step time 3 s: GEMMs 2 s (66.7%); exposed communication 1 s (33.3%)."
