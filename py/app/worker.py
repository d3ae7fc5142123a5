"""Pyodide worker entry of the page: assets/worker.js imports it and calls ``compute`` for every request
(with ``?runtime=pyscript`` PyScript's PyWorker runs it instead and exposes ``compute`` via __export__).

Runs the engine off the main thread, so the page stays responsive while Pyodide boots and every
input costs the main thread only a JSON parse and a few DOM writes. Requests and answers cross the
worker boundary as JSON strings (structured clone of plain text is the cheapest path).
No DOM access here: this file must also import under CPython (tests/test_page_view.py does).
"""
import json
import time
import traceback

from app.view import compute as _compute


def compute(request_json):
    """'{"plan": {...form values...}, "good": {...last good plan...}|null}' -> view JSON (py/app/view.py)."""
    t0 = time.perf_counter()
    try:
        v = _compute(json.loads(request_json))
        del v["estimate"]   # the page shows the view; the raw estimate is for CPython callers
        v["py_ms"] = round((time.perf_counter() - t0) * 1000, 2)   # engine + view time, for the benchmark
        return json.dumps(v)
    except Exception as e:   # an engine bug must reach the page as a message, not a hung promise
        return json.dumps({"fatal": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-2000:]})


__export__ = ["compute"]
