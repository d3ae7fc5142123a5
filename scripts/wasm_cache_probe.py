"""When does this Chromium keep compiled WebAssembly between visits?  A minimal reproduction (issue 25).

    python scripts/wasm_cache_probe.py [--modes page-fetch,worker-cachematch,...] [--visits 3] [--js-flags=...]
    xvfb-run -a python scripts/wasm_cache_probe.py --headed ...     # the same in a headed browser

A synthetic module (--functions hot functions, each tiered up to TurboFan by a loop, plus a data segment to
--pad bytes) is served from a local http server with Content-Type application/wasm. Each mode compiles it with
WebAssembly.compileStreaming, runs it, keeps it alive, waits --settle ms, and reads the browser's own counters
from chrome://histograms (the renderer's included) before the browser is closed; the next visit is a new browser
on the same profile (launch_persistent_context). Per visit it prints:

  caching   V8.WasmCodeCaching: miss / HIT / invalid / NO HANDLER (Blink found no code-cache handler on the
            Response: V8 is never asked to cache it, nor given a cached copy)
  written   V8.WasmSerializationTimeMilliSeconds samples: how often V8 serialized the module for the cache
  Code Cache/wasm   bytes in the profile's wasm code cache

Modes: page-fetch / worker-fetch (fetch() from the network), page-cachematch / worker-cachematch (a Response from
caches.match()), sw-fetch (page fetch() answered by a service worker with its Cache Storage Response), sw-synth
(the service worker answers with a new Response of the same bytes). Not a test: it times nothing it asserts.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import os
import pathlib
import re
import tempfile
import threading

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
PAGE = """<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>p</title></head><body>
<script src="probe.js"></script></body></html>"""
# shared by the page and the worker: compile, run, keep alive, report {compile, run}
PROBE = """
const q = new URLSearchParams(location.search), mode = q.get("mode"), n = Number(q.get("n"));
const url = new URL("syn.wasm", location.href).href;
self.keep = [];
async function source() {
  if (!mode.includes("cachematch")) return fetch(url);
  const c = await caches.open("probe");
  if (!(await c.match(url))) await c.add(url);
  return c.match(url);
}
async function work() {
  const t0 = performance.now(), m = await WebAssembly.compileStreaming(source()), t1 = performance.now();
  keep.push(m);
  (await WebAssembly.instantiate(m)).exports.run(n);
  return { compile: Math.round(t1 - t0), run: Math.round(performance.now() - t1) };
}
if (typeof document === "undefined") work().then(postMessage, (e) => postMessage({ error: String(e) }));
else (async () => {
  const controlled = !!navigator.serviceWorker.controller;   // the service worker answers this visit's fetch
  if (mode.startsWith("sw")) await navigator.serviceWorker.register("sw.js?" + mode);
  let res;
  if (mode.startsWith("worker")) {
    const w = new Worker("probe.js" + location.search); keep.push(w);
    res = await new Promise((r) => { w.onmessage = (e) => r(e.data); });
  } else res = await work();
  if (mode.startsWith("sw")) await navigator.serviceWorker.ready;
  res.controlled = controlled;
  document.body.dataset.res = JSON.stringify(res);
})().catch((e) => { document.body.dataset.res = JSON.stringify({ error: String(e) }); });
"""
SW = """
const synth = location.search.includes("synth");
self.addEventListener("install", (e) => e.waitUntil(caches.open("sw").then((c) => c.add(new Request("syn.wasm", { cache: "reload" })))));
self.addEventListener("activate", (e) => e.waitUntil(self.clients.claim()));
self.addEventListener("fetch", (e) => {
  if (!e.request.url.endsWith("/syn.wasm")) return;
  e.respondWith(caches.match(e.request.url).then(async (r) => !r ? fetch(e.request)
    : synth ? new Response(await r.arrayBuffer(), { headers: { "content-type": "application/wasm" } }) : r));
});
"""


def leb(n: int, signed: bool = False) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        done = (n == 0 and not b & 0x40) or (n == -1 and b & 0x40) if signed else n == 0
        out.append(b if done else b | 0x80)
        if done:
            return bytes(out)


def synthetic_module(functions: int, ops: int, pad: int) -> bytes:
    """`functions` functions f(n) looping n times over `ops` multiply-adds, run(n) calling each once, a data segment."""
    def sec(i, body):
        return bytes([i]) + leb(len(body)) + body

    def vec(items):
        return leb(len(items)) + b"".join(items)
    bodies = []
    for k in range(functions):
        b = bytearray(b"\x02\x40\x03\x40\x20\x00\x45\x0d\x01")              # block loop; n == 0 -> out
        for j in range(ops):                                              # acc = acc * C + k + j
            b += b"\x20\x01\x41" + leb((k * 7919 + j * 104729) % 100000 + 3, True) + b"\x6c"
            b += b"\x41" + leb(k + j, True) + b"\x6a\x21\x01"
        b += b"\x20\x00\x41\x01\x6b\x21\x00\x0c\x00\x0b\x0b\x20\x01\x0b"    # n -= 1; loop; end; acc
        body = vec([b"\x01\x7f"]) + bytes(b)
        bodies.append(leb(len(body)) + body)
    run = b"".join(b"\x20\x00\x10" + leb(k) + b"\x1a" for k in range(functions)) + b"\x41\x00\x0b"
    bodies.append(leb(len(run) + 1) + b"\x00" + run)
    return (b"\x00asm\x01\x00\x00\x00" + sec(1, vec([b"\x60\x01\x7f\x01\x7f"])) + sec(3, vec([b"\x00"] * (functions + 1)))
            + sec(5, vec([b"\x00" + leb(pad // 65536 + 1)])) + sec(7, vec([b"\x03run\x00" + leb(functions)]))
            + sec(10, vec(bodies)) + sec(11, vec([b"\x00\x41\x00\x0b" + leb(pad) + os.urandom(pad)])))


class Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".wasm": "application/wasm", ".js": "text/javascript"}

    def log_message(self, *args):
        pass


def histograms(ctx) -> dict[str, str]:
    """The renderer's V8.Wasm* counters, as chrome://histograms shows them (subprocesses included)."""
    page = ctx.new_page()
    page.goto("chrome://histograms/")
    for box in page.query_selector_all("input[type=checkbox]"):
        if not box.is_checked():
            box.click()
    page.get_by_text("Refresh").first.click()
    page.wait_for_timeout(2000)
    text = page.inner_text("body")
    page.close()
    found = {}
    for name in ("V8.WasmCodeCaching", "V8.WasmSerializationTimeMilliSeconds", "V8.WasmDeserializationTimeMilliSeconds"):
        m = re.search(r"Histogram: " + re.escape(name) + r" recorded (\d+) samples(?:, mean = ([\d.]+))?", text)
        found[name] = (int(m.group(1)), float(m.group(2) or 0)) if m else (0, 0.0)
    return found


def du(path: pathlib.Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modes", default="page-fetch,worker-fetch,page-cachematch,worker-cachematch,sw-fetch,sw-synth")
    ap.add_argument("--visits", type=int, default=3)
    ap.add_argument("--functions", type=int, default=300)
    ap.add_argument("--ops", type=int, default=50)
    ap.add_argument("--pad", type=int, default=4_500_000)
    ap.add_argument("--n", type=int, default=50_000, help="loop count per function call (tier-up needs ~13 MB executed)")
    ap.add_argument("--settle", type=int, default=5000, help="ms the module stays alive after its run")
    ap.add_argument("--js-flags", default="", help="e.g. --wasm-caching-timeout-ms=0")
    ap.add_argument("--headed", action="store_true", help="a headed browser (needs a display: xvfb-run)")
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright
    kinds = {0: "miss", 1: "HIT", 2: "invalid", 3: "NO HANDLER"}
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "syn.wasm").write_bytes(synthetic_module(a.functions, a.ops, a.pad))
        (root / "p.html").write_text(PAGE)
        (root / "probe.js").write_text(PROBE)
        (root / "sw.js").write_text(SW)
        print(f"synthetic module {(root / 'syn.wasm').stat().st_size:,} bytes, {a.functions} hot functions; "
              f"js-flags: {a.js_flags or '(none)'}; {'headed' if a.headed else 'headless'}")
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=tmp))
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        args = ARGS + ([f"--js-flags={a.js_flags}"] if a.js_flags else [])
        with sync_playwright() as pw:
            for mode in a.modes.split(","):
                with tempfile.TemporaryDirectory() as profile:
                    for v in range(a.visits):
                        kw = {"executable_path": CHROMIUM} if pathlib.Path(CHROMIUM).exists() else {}
                        ctx = pw.chromium.launch_persistent_context(profile, args=args, service_workers="allow",
                                                                   headless=not a.headed, **kw)
                        page = ctx.new_page()
                        page.goto(f"http://127.0.0.1:{httpd.server_address[1]}/p.html?mode={mode}&n={a.n}")
                        page.wait_for_selector("body[data-res]", state="attached", timeout=120_000)
                        res = page.get_attribute("body", "data-res")
                        page.wait_for_timeout(a.settle)
                        h = histograms(ctx)
                        ctx.close()
                        caching = h["V8.WasmCodeCaching"]
                        print(f"{mode:18} visit {v + 1}: {res}  caching {kinds.get(round(caching[1]), caching) if caching[0] else '-'}"
                              f", written {h['V8.WasmSerializationTimeMilliSeconds'][0]}x, "
                              f"Code Cache/wasm {du(pathlib.Path(profile) / 'Default' / 'Code Cache' / 'wasm'):,} B", flush=True)
        httpd.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
