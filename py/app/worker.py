"""Pyodide worker entry of the page: assets/worker.js imports it and calls ``call(name, request_json)`` for
every request (with ``?runtime=pyscript`` PyScript's PyWorker runs it instead and exposes ``call`` via
__export__).

Runs the engine off the main thread, so the page stays responsive while Pyodide boots and every
input costs the main thread only a JSON parse and a few DOM writes. Requests and answers cross the
worker boundary as JSON strings (structured clone of plain text is the cheapest path).
Each page feature registers one function in CALLS: JSON-decoded request in, JSON-encodable answer out.
No DOM access here: this file must also import under CPython (tests/test_page_view.py does).
"""
import json
import time
import traceback

from app.fit_view import fit_call as _fit_call, fit_start as _fit_start, fit_step as _fit_step
from app.importer import import_view as _import_view
from app.embed import estimate_call as _estimate
from app.view import compute as _compute
from app.doctor import view as _doctor


def _view(request):
    v = _compute(request)
    del v["estimate"]   # the page shows the view; the raw estimate is for CPython callers
    return v


# name -> function(request: dict) -> dict; assets/engine.js `engine.call(name, text)` reaches them.
CALLS = {
    "compute": _view,
    "doctor": _doctor,
    "fit": _fit_call,        # the "What fits" panel (app/fit_view.py), in one call
    "fit_start": _fit_start,  # ... the same, a slice at a time (assets/fit.js: an edit pre-empts the next slice)
    "fit_step": _fit_step,
    "import_config": _import_view,
    "estimate": _estimate,   # the embed view's postMessage (py/app/embed.py)
}


def call(name, request_json):
    """(call name, request JSON) -> answer JSON, with ``py_ms`` (engine + view time, for the benchmark).
    An engine bug reaches the page as {"fatal": message}, never as a hung promise."""
    t0 = time.perf_counter()
    try:
        fn = CALLS.get(name)
        if fn is None:
            return json.dumps({"fatal": f"unknown engine call {name!r}"})
        out = fn(json.loads(request_json))
        out["py_ms"] = round((time.perf_counter() - t0) * 1000, 2)
        return json.dumps(out)
    except Exception as e:
        return json.dumps({"fatal": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-2000:]})


def compute(request_json):
    """'{"plan": {...form values...}, "good": {...last good plan...}|null}' -> view JSON (py/app/view.py)."""
    return call("compute", request_json)


__export__ = ["call", "compute"]
