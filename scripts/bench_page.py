"""Speed benchmark of the page against a bare `loadPyodide` page, measured in the same run.

    python scripts/bench_page.py [--runs 7] [--updates 20] [--one-worker] [--pyscript] [--normal]   # needs _site/ (make site)
    python scripts/bench_page.py --repeat-only [--runs 3]      # only the bare page and the repeat visit, paired

Every figure is given in ms and as a ratio to the bare page's ready time in the same run (a slower machine
reads the same ratios): the median of the per-run ratios page/bare, each pair run back to back so that machine
noise (other jobs on a 2-core box) hits both alike.

Cold runs are a fresh Chromium with a fresh profile (nothing cached), offline through `--host-resolver-rules`
(not Playwright routing, which disables the HTTP cache; docs/page-runtime.md §3). The repeat visit is a
persistent profile: a first visit installs the service worker (and fills its cache, and V8's code cache), then
the server is stopped and the browser restarted, and the second visit is served by the service worker alone.
Figures (ms since navigation start):

  figures   first contentful paint, with the default plan's numbers already in it (pre-rendered; the
            script checks the on-screen bytes at DOMContentLoaded equal _site/default-estimate.json)
  ready     <html data-engine="ready">: the engine can answer (the default page's figures are pre-rendered)
  share     a non-default share link (SHARE_PLAN): its own figures, computed by the engine, on screen
            (<html data-first-answer-ms>; the script checks the bytes equal the CPython estimate)
  repeat    the second visit (service worker installed, server down): engine ready, and the share link's figures
  blocked   sum of main-thread long tasks (PerformanceObserver 'longtask') that start before ready
  update    input event -> DOM updated (in-page MutationObserver on the page's update counter), over
            --updates changes of micro_batch_size; p50 and p95. Measured from 3 s after navigation (the steady
            state: V8 still optimises the WebAssembly in the background right after ready); the same number
            of updates right after ready is printed as "early" (no budget)
  panel     the same edits while the "what fits" panel re-plans: before each edit the panel's Recompute is
            pressed, so a re-plan is in flight in the planner's worker when the edit is typed (the count of
            edits that met a busy planner is printed); also the longest piece of the panel's drawing
            (#fit[data-render-ms]). --one-worker measures the panel planning in the engine's own worker
            (index.html?planner=engine, the page before issue 25) in the same alternation. --panel-only also
            types the same edits with the panel idle, in the same page just before: the floor at this load.

Budgets (issues 3, 15, 25): ready <= 0.3 x bare ready, share link figures <= 0.35 x, repeat visit ready <= 0.2 x,
main thread blocked <= 300 ms, update p95 <= 16 ms, with the panel re-planning too; the default figures are in
the HTML (no script needed to show them).

--pyscript also measures the page with the engine run by PyScript's PyWorker (index.html?runtime=pyscript); --normal
the page booting Pyodide normally (index.html?boot=normal) instead of from the engine snapshot.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import json
import pathlib
import statistics
import sys
import tempfile
import threading
from urllib.parse import quote

ROOT = pathlib.Path(__file__).resolve().parent.parent
SITE = ROOT / "_site"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-dev-shm-usage",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"]
BARE = """<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>bare</title>
<script type="module">
import { loadPyodide } from "./site/assets/vendor/pyodide/pyodide.mjs";
const py = await loadPyodide();
py.runPython("import json; json.dumps({'ready': True})");
document.documentElement.dataset.readyMs = performance.now().toFixed(1);
document.documentElement.dataset.engine = "ready";
</script></head><body><p>bare loadPyodide page</p></body></html>"""
# Installed before any page script: records long tasks and first contentful paint.
INIT = """
window.__longtasks = [];
try { new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__longtasks.push([e.startTime, e.duration]); })
  .observe({ type: "longtask", buffered: true }); } catch (e) {}
document.addEventListener("DOMContentLoaded", () => {
  const el = document.querySelector('[data-out="per_gpu.device_used_bytes"]');
  window.__figureAtDCL = el ? el.dataset.bytes : null;
});
"""
UPDATES_JS = """async ({n, panel}) => {
  const html = document.documentElement, input = document.querySelector('[name="micro_batch_size"]');
  const fit = document.querySelector('#fit'), refresh = document.querySelector('#fit-refresh');
  const out = [], drawn = [], parts = [], long = [];
  let busy = 0, order = 0;
  const lo = new PerformanceObserver((l) => { for (const e of l.getEntries()) long.push(e.duration); });
  try { lo.observe({ type: "longtask" }); } catch (e) {}
  const when = (test) => new Promise((resolve) => {
    if (test()) { resolve(performance.now()); return; }
    const mo = new MutationObserver(() => { if (test()) { mo.disconnect(); resolve(performance.now()); } });
    mo.observe(html, { attributes: true, attributeFilter: ["data-updates", "data-drawn"] });
    setTimeout(() => { mo.disconnect(); resolve(NaN); }, 5000);
  });
  for (let i = 0; i < n; i++) {
    if (panel) {   // a re-plan in flight when the edit is typed
      refresh.click();
      await new Promise((r) => setTimeout(r, 8));
      if (fit.dataset.state === "busy") busy++;
    }
    const before = html.dataset.updates;
    const figures = when(() => html.dataset.updates !== before);
    const t0 = performance.now();
    input.value = String(1 + (i % 4));
    input.dispatchEvent(new Event("input", { bubbles: true }));
    const tf = await figures;
    const mine = html.dataset.updates;
    const early = html.dataset.drawn === mine;   // drawn before its figures were seen: never expected
    const td = await when(() => html.dataset.drawn === mine);
    if (early) order++;
    out.push(tf - t0); drawn.push(td - t0);
    parts.push([Number(html.dataset.pyMs), Number(html.dataset.applyMs), Number(html.dataset.drawPieceMs || 0)]);
    await new Promise((r) => setTimeout(r, 40));
  }
  lo.disconnect();
  input.value = "2"; input.dispatchEvent(new Event("input", { bubbles: true }));
  return { ms: out, drawn, parts, long, order, busy, render: Number(fit.dataset.renderMs || 0), worker: fit.dataset.worker || "" };
}"""
READ_JS = """() => { const d = document.documentElement.dataset;
  return { ready: Number(d.readyMs), boot: d.engineBoot, answer: d.firstAnswerMs ? Number(d.firstAnswerMs) : null,
           times: d.engineTimes ? JSON.parse(d.engineTimes) : null, timeOrigin: performance.timeOrigin,
           controlled: !!(navigator.serviceWorker && navigator.serviceWorker.controller),
           bytes: (document.querySelector('[data-out="per_gpu.device_used_bytes"]') || {dataset: {}}).dataset.bytes }; }"""


class Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".wasm": "application/wasm", ".mjs": "text/javascript", ".js": "text/javascript"}

    def log_message(self, *args):
        pass


def blocked_before(entries, ready_ms: float) -> float:
    return sum(min(d, ready_ms - s) for s, d in entries or [] if s < ready_ms)


SHARE_PLAN = {"schema": 1, "model": "qwen2.5-7b", "zero_stage": 3, "seq_len": 8192, "micro_batch_size": 1}


def launch(pw, profile=None):
    kwargs = {"args": ARGS}
    if pathlib.Path(CHROMIUM).exists():
        kwargs["executable_path"] = CHROMIUM
    if profile is None:
        return pw.chromium.launch(**kwargs)
    return pw.chromium.launch_persistent_context(profile, service_workers="allow",
                                                 viewport={"width": 1366, "height": 900}, **kwargs)


def wait_ready(page, url, answer):
    page.wait_for_selector("html[data-engine='ready'], html[data-engine='failed']", state="attached", timeout=120_000)
    if page.get_attribute("html", "data-engine") != "ready":
        raise SystemExit(f"bench_page.py: engine failed on {url}: {page.get_attribute('html', 'data-engine-error')}")
    if answer:
        page.wait_for_selector("html[data-first-answer-ms]", state="attached", timeout=120_000)
    return page.evaluate(READ_JS)


def one_run(pw, url: str, updates: int, answer: bool = False, panel: int = 0, idle: bool = False) -> dict:
    browser = launch(pw)
    try:
        page = browser.new_page(viewport={"width": 1366, "height": 900})
        page.add_init_script(INIT)
        page.goto(url)
        res = wait_ready(page, url, answer)
        page.wait_for_timeout(200)   # long-task entries arrive after the task ends
        res["blocked"] = blocked_before(page.evaluate("window.__longtasks"), res["ready"])
        res["fcp"] = page.evaluate("(performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime")
        res["figure_bytes"] = page.evaluate("window.__figureAtDCL")
        if updates:
            res["early"] = page.evaluate(UPDATES_JS, {"n": updates, "panel": False})["ms"]
            page.wait_for_function("() => performance.now() > 3000", polling=100)
            res["updates"] = page.evaluate(UPDATES_JS, {"n": updates, "panel": False})["ms"]
        if panel:
            page.wait_for_selector("#fit[data-state='ready']", state="attached", timeout=120_000)
            if idle:   # the same edits with the panel idle, in the same page just before: the floor at this load
                res["idle"] = page.evaluate(UPDATES_JS, {"n": panel, "panel": False})
                page.wait_for_selector("#fit[data-state='ready']", state="attached", timeout=120_000)
            res["panel"] = page.evaluate(UPDATES_JS, {"n": panel, "panel": True})
        return res
    finally:
        browser.close()


def repeat_run(pw, url_path: str, settle_ms: int = 3000) -> dict:
    """First visit (installs the service worker, fills its cache), browser closed, server stopped, browser
    restarted on the same profile: the second visit's figures (every file from the service worker)."""
    with tempfile.TemporaryDirectory() as profile:
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(SITE)))
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{httpd.server_address[1]}" + url_path
        ctx = launch(pw, profile)
        try:
            page = ctx.new_page()
            page.goto(url)
            first = wait_ready(page, url, True)
            page.wait_for_selector("html[data-offline='ready']", state="attached", timeout=120_000)
            page.wait_for_selector("#fit[data-state='ready']", state="attached", timeout=120_000)
            page.wait_for_timeout(settle_ms)   # V8 writes the code cache after the module has run a while
        finally:
            ctx.close()
        httpd.shutdown()
        httpd.server_close()
        ctx = launch(pw, profile)
        try:
            page = ctx.pages[0] if ctx.pages else ctx.new_page()
            page.goto(url)
            res = wait_ready(page, url, True)
            if not res["controlled"]:
                raise SystemExit("bench_page.py: the repeat visit was not served by the service worker")
            res["first"] = first
            return res
        finally:
            ctx.close()


def panel_summary(p: dict) -> str:
    """Edits typed while the panel re-plans: input -> figures, input -> every piece drawn, where the time went."""
    ms, drawn = p["ms"], [d for d in p["drawn"] if d == d]
    py = [x[0] for x in p["parts"]]
    apply_ms = [x[1] for x in p["parts"]]
    piece = [x[2] for x in p["parts"]]
    return (f"input -> figures p50 / p95 {pctl(ms, .5):.1f} / {pctl(ms, .95):.1f} ms over {len(ms)} edits "
            f"({p['busy']} met a busy planner); -> charts drawn p50 / p95 {pctl(drawn, .5):.1f} / {pctl(drawn, .95):.1f}; "
            f"of the figures: Python in the worker p50 {pctl(py, .5):.1f}, p95 {pctl(py, .95):.1f}, DOM writes p95 "
            f"{pctl(apply_ms, .95):.1f}; longest later piece p95 {pctl(piece, .95):.1f}; main-thread long tasks "
            f"{len(p['long'])} (longest {max(p['long'] or [0]):.0f} ms); charts drawn before their figures: {p['order']}")


def pctl(values, q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--updates", type=int, default=20)
    ap.add_argument("--one-worker", action="store_true", help="also measure the panel planning in the engine's worker")
    ap.add_argument("--pyscript", action="store_true", help="also measure the PyScript PyWorker variant")
    ap.add_argument("--normal", action="store_true", help="also measure the page without the engine snapshot")
    ap.add_argument("--repeat-only", action="store_true", help="only the bare page and the repeat visit (quicker)")
    ap.add_argument("--panel-edits", type=int, default=50, help="edits typed while the panel re-plans, per run")
    ap.add_argument("--panel-only", action="store_true",
                    help="only the edits while the panel re-plans (no bare page: ms, the split and the order)")
    a = ap.parse_args()
    if not (SITE / "index.html").exists():
        print("bench_page.py: build the site first (make site)", file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright
    expected = json.loads((SITE / "default-estimate.json").read_text())["per_gpu"]["device_used_bytes"]
    sys.path.insert(0, str(ROOT / "py"))
    from zerocalc import Plan, estimate
    share_expected = estimate(Plan.from_dict(SHARE_PLAN)).to_dict()["per_gpu"]["device_used_bytes"]
    fragment = "#plan=" + quote(json.dumps(SHARE_PLAN))
    runs = {k: [] for k in ("page", "bare", "share", "repeat", "one", "normal", "pyscript")}
    with tempfile.TemporaryDirectory() as tmp:
        (pathlib.Path(tmp) / "site").symlink_to(SITE)
        (pathlib.Path(tmp) / "bare.html").write_text(BARE)
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=tmp))
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{httpd.server_address[1]}"
        with sync_playwright() as pw:
            for i in range(a.runs if a.panel_only else 0):
                for key, url in (("page", "/site/index.html"), ("one", "/site/index.html?planner=engine")):
                    if key == "one" and not a.one_worker:
                        continue
                    runs[key].append(one_run(pw, base + url, 0, panel=a.panel_edits, idle=True))
                    print(f"run {i + 1} {key}: " + panel_summary(runs[key][-1]["panel"]), flush=True)
                    print(f"run {i + 1} {key}, the panel idle: " + panel_summary(runs[key][-1]["idle"]), flush=True)
            for i in range(a.runs if a.repeat_only else 0):
                runs["bare"].append(one_run(pw, base + "/bare.html", 0))
                runs["repeat"].append(repeat_run(pw, "/index.html" + fragment))
                b, r = runs["bare"][-1], runs["repeat"][-1]
                print(f"run {i + 1}: bare ready {b['ready']:.0f} ms | repeat visit ready {r['ready']:.0f} "
                      f"({r['ready'] / b['ready']:.2f}x), its figures {r['answer']:.0f} ({r['boot']} boot, "
                      f"{(r['times'] or {}).get('cached', 0)} files read from Cache Storage by the worker)", flush=True)
            for i in range(0 if a.repeat_only or a.panel_only else a.runs):
                runs["page"].append(one_run(pw, base + "/site/index.html", a.updates, panel=a.panel_edits))
                runs["bare"].append(one_run(pw, base + "/bare.html", 0))
                runs["share"].append(one_run(pw, base + "/site/index.html" + fragment, 0, answer=True))
                runs["repeat"].append(repeat_run(pw, "/index.html" + fragment))
                if a.one_worker:
                    runs["one"].append(one_run(pw, base + "/site/index.html?planner=engine", a.updates, panel=a.panel_edits))
                if a.normal:
                    runs["normal"].append(one_run(pw, base + "/site/index.html?boot=normal" + fragment, 0, answer=True))
                if a.pyscript:
                    runs["pyscript"].append(one_run(pw, base + "/site/index.html?runtime=pyscript", a.updates))
                p, b, q, r = runs["page"][-1], runs["bare"][-1], runs["share"][-1], runs["repeat"][-1]
                print(f"run {i + 1}: bare ready {b['ready']:.0f} ms | page figures {p['fcp']:.0f}, ready {p['ready']:.0f} "
                      f"({p['ready'] / b['ready']:.2f}x), blocked {p['blocked']:.0f}, update p95 {pctl(p['updates'], .95):.1f}, "
                      f"with the panel re-planning {pctl(p['panel']['ms'], .95):.1f} ms ({p['panel']['busy']}/{a.panel_edits} "
                      f"edits met a busy planner) | share link figures {q['answer']:.0f} ({q['answer'] / b['ready']:.2f}x) | "
                      f"repeat visit ready {r['ready']:.0f} ({r['ready'] / b['ready']:.2f}x), its figures {r['answer']:.0f} "
                      f"({r['boot']} boot)", flush=True)
                if a.one_worker:
                    o = runs["one"][-1]
                    print(f"       one worker (?planner=engine): update p95 with the panel re-planning "
                          f"{pctl(o['panel']['ms'], .95):.1f} ms", flush=True)
        httpd.shutdown()
    med = statistics.median
    if a.panel_only:
        for key in ("page", "one"):
            for part, name in (("panel", "the panel re-planning"), ("idle", "the panel idle")):
                if runs[key]:
                    rs = [r[part] for r in runs[key]]
                    merged = {k: [x for r in rs for x in r[k]] for k in ("ms", "drawn", "parts", "long")}
                    merged.update(order=sum(r["order"] for r in rs), busy=sum(r["busy"] for r in rs))
                    print(f"{key}, {a.runs} runs, {name}: " + panel_summary(merged))
        import os
        print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        return 0
    bare = [b["ready"] for b in runs["bare"]]
    if a.repeat_only:
        rs = sorted(r["ready"] / b for r, b in zip(runs["repeat"], bare))
        print(f"repeat visit ready: median {med(r['ready'] for r in runs['repeat']):,.0f} ms, bare {med(bare):,.0f} ms; "
              f"paired ratio {med(rs):.2f} (runs {' '.join(f'{x:.2f}' for x in rs)}); budget <= 0.2")
        return 0 if med(rs) <= 0.2 else 2

    def ratio(key, runs_of):   # median of the paired per-run ratios, and the sorted ratios
        rs = sorted(x[key] / b for x, b in zip(runs_of, bare))
        return med(rs), rs

    ups = [u for r in runs["page"] for u in r["updates"]]
    early = [u for r in runs["page"] for u in r["early"]]
    panel = [u for r in runs["page"] for u in r["panel"]["ms"]]
    busy = sum(r["panel"]["busy"] for r in runs["page"])
    correct = all(str(r["figure_bytes"]) == str(expected) for r in runs["page"])
    share_correct = all(str(q["bytes"]) == str(share_expected) for q in runs["share"] + runs["repeat"])
    boots = sorted({r["boot"] for r in runs["page"] + runs["share"] + runs["repeat"]})
    workers = sorted({r["panel"]["worker"] for r in runs["page"]})
    bare_med = med(bare)
    rows = []

    def row(name, key, runs_of, budget=None, extra_ok=True):
        m, rs = ratio(key, runs_of)
        ok = (m <= budget if budget is not None else True) and extra_ok
        rows.append((name, f"{med(x[key] for x in runs_of):,.0f} ms", f"{m:.2f}",
                     f"<= {budget}" if budget is not None else "-", ok, rs))

    row("default figures on screen (FCP, pre-rendered)", "fcp", runs["page"], extra_ok=correct)
    row("engine ready", "ready", runs["page"], 0.3)
    row("share link: its own figures on screen", "answer", runs["share"], 0.35, share_correct)
    row("repeat visit (service worker, offline): ready", "ready", runs["repeat"], 0.2)
    row("repeat visit: the share link's figures", "answer", runs["repeat"])
    blocked = med(r["blocked"] for r in runs["page"])
    p95, panel95 = pctl(ups, .95), pctl(panel, .95)
    fixed = [
        ("main thread blocked until ready", f"{blocked:,.0f} ms", f"{blocked / bare_med:.2f}", "<= 300 ms", blocked <= 300),
        ("input -> DOM, p50 / p95", f"{pctl(ups, .5):.1f} / {p95:.1f} ms", f"{p95 / bare_med:.4f}", "p95 <= 16 ms", p95 <= 16),
        ("input -> DOM while the panel re-plans, p50 / p95", f"{pctl(panel, .5):.1f} / {panel95:.1f} ms",
         f"{panel95 / bare_med:.4f}", "p95 <= 16 ms", panel95 <= 16),
    ]
    print(f"\nmedians of {a.runs} paired runs (fresh browser each, offline); bare loadPyodide page ready: "
          f"{bare_med:,.0f} ms (ratio = median of the per-run ratios to it); {len(ups)} updates, {len(panel)} with the "
          f"panel re-planning ({busy} met a busy planner; planner: {', '.join(workers)}); pre-rendered bytes equal the "
          f"CPython estimate at DOMContentLoaded in every run: {correct}; share link bytes equal the CPython estimate "
          f"in every run: {share_correct}; engine boot: {', '.join(str(b) for b in boots)}")
    print(f"{'figure':50} {'page':>16} {'x bare':>8}  {'budget':14} ok")
    for name, ours, rat, budget, ok, _ in rows:
        print(f"{name:50} {ours:>16} {rat:>8}  {budget:14} {'PASS' if ok else 'FAIL'}")
    for name, ours, rat, budget, ok in fixed:
        print(f"{name:50} {ours:>16} {rat:>8}  {budget:14} {'PASS' if ok else 'FAIL'}")
    for name, _, _, _, _, rs in rows:
        print(f"  {name}: per-run ratios {' '.join(f'{r:.2f}' for r in rs)}")
    print(f"input -> DOM right after ready (early, no budget): p50 / p95 {pctl(early, .5):.1f} / {pctl(early, .95):.1f} ms; "
          f"the panel's longest drawing piece: {max(r['panel']['render'] for r in runs['page']):.1f} ms")
    for key in ("page", "share", "repeat"):
        t = [r["times"] for r in runs[key] if r.get("times")]
        if t:
            keys = [k for k in t[0] if isinstance(t[0][k], (int, float)) and k != "origin"]
            lag = med(r["times"].get("origin", r["timeOrigin"]) - r["timeOrigin"] for r in runs[key] if r.get("times"))
            print(f"  worker milestones, {key} (ms since the worker started; it started {lag:.0f} ms after navigation): "
                  + ", ".join(f"{k} {med(x[k] for x in t if k in x):.0f}" for k in keys))
    if runs["one"]:
        one = [u for r in runs["one"] for u in r["panel"]["ms"]]
        print(f"one worker (?planner=engine, before issue 25): input -> DOM while the panel re-plans p50 / p95 "
              f"{pctl(one, .5):.1f} / {pctl(one, .95):.1f} ms")
    if runs["normal"]:
        m, rs = ratio("answer", runs["normal"])
        print(f"without the snapshot (?boot=normal): share link figures {med(q['answer'] for q in runs['normal']):,.0f} ms, "
              f"{m:.2f} x bare; ready {ratio('ready', runs['normal'])[0]:.2f} x bare")
    if runs["pyscript"]:
        pu = [u for r in runs["pyscript"] for u in r["updates"]]
        print(f"PyScript PyWorker variant: ready {ratio('ready', runs['pyscript'])[0]:.2f} x bare, update p50 / p95 "
              f"{pctl(pu, .5):.1f} / {pctl(pu, .95):.1f} ms")
    try:
        import os
        print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    except OSError:
        pass
    return 0 if all(r[4] for r in rows) and all(r[-1] for r in fixed) else 2


if __name__ == "__main__":
    sys.exit(main())
