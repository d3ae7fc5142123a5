"""The embed view's message (``?embed=1`` in an iframe): the estimate of a plan, as plan-v1's estimate dict
(``estimate(plan).to_dict()``, docs/plan-v1.md), posted by assets/app.js to the embedding page."""
from zerocalc import Plan, estimate


def estimate_call(request: dict) -> dict:
    """{"plan": plan-v1 dict} -> {"estimate": estimate dict}. The plan is the one the page shows (already
    validated by py/app/view.py), so a PlanError here is an engine bug and reaches the page as "fatal"."""
    return {"estimate": estimate(Plan.from_dict(request["plan"])).to_dict()}
