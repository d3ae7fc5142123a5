// The engine's Web Worker: Pyodide straight from assets/vendor/ (no PyScript bootstrap in the way), the
// engine files (the `files` map of pyscript.json, PyScript's config format) in one archive, assets/engine.zip
// (scripts/build_site.py), fetched while Pyodide compiles. Then py/app/worker.py answers every request:
// {id, fn, text: request JSON} -> {id, text: answer JSON} (fn names an entry of py/app/worker.py CALLS;
// "compute" by default). The worker never touches the DOM.
//
// Boot from a snapshot: scripts/build_site.py saves Pyodide's memory after importing the engine and answering the
// default plan (assets/engine.snapshot, gzip); restoring it skips Python's start-up and every import. Pyodide's
// snapshot API is experimental (pinned version, package.json): if the snapshot is missing or fails to restore, the
// worker boots Pyodide normally and says which boot it was ({ready, boot: "snapshot" | "normal"}).
// ?boot=normal skips the snapshot (tests compare both boots; scripts/bench_page.py measures both).
//
// Compiled at once: Pyodide's loadPyodide awaits the snapshot before it creates the module, and only then hands the
// .wasm to WebAssembly.instantiateStreaming, so its 9.6 MB of WebAssembly would compile after the snapshot has
// arrived and been inflated. This worker starts WebAssembly.compileStreaming on pyodide.asm.wasm in its first
// line (streaming: compiled while it downloads), beside the snapshot's fetch, from fetch() (on a repeat visit the
// service worker answers it from its cache), never from a caches.match() Response: Chromium attaches its WebAssembly
// code cache only to a Response that fetch() made (a caches.match() one has none: V8.WasmCodeCaching "no cache
// handler", scripts/wasm_cache_probe.py); on a repeat visit here it was no slower (faster under load: README).
// Whether V8 writes that cache at all is the browser's affair (Chromium 156 here writes it only after 1 MB of
// optimised code at once, which a visit does not reach: README). Pyodide's own fetch of the .wasm gets an empty
// stand-in and its instantiateStreaming the compiled module. A page that already holds the compiled module (the planner
// worker, assets/engine.js) posts it as the first message {module} and nothing is compiled twice.
//
// Roles: ?role=planner (or the name "zerocalc-planner") is the "what fits" planner (assets/fit.js): the same boot from the same snapshot, its own
// thread, so a re-plan never queues an edit's request behind it.
//
// Faults say so: a runtime file that cannot be fetched (the .wasm, python_stdlib.zip, pyodide-lock.json,
// pyscript.json, an engine file) is reported to the page at once as {error}, instead of leaving Pyodide's
// emscripten loader waiting forever (its own "Failed to fetch" reaches only the console).

// ms since the worker started, sent with {ready} (benchmark); origin lines them up with the page's clock
const times = { worker_start: performance.now(), origin: performance.timeOrigin };
// a dynamic import: the .wasm and the snapshot are on their way before Pyodide's loader has arrived
const pyodideLoader = import("./vendor/pyodide/pyodide.mjs");
pyodideLoader.then(() => { times.loader = performance.now(); }, () => {});

const site = new URL("../", import.meta.url);
let reported = false;

function fail(message) {
  if (reported) return;
  reported = true;
  self.postMessage({ error: message });
}

const rawFetch = self.fetch.bind(self);
const short = (input) => String(input && input.url ? input.url : input).replace(site.href, "");
const checkedFetch = async (input, init) => {
  let r;
  try { r = await rawFetch(input, init); } catch (err) {
    fail(`could not fetch ${short(input)}: ${err && err.message ? err.message : err}`);
    throw err;
  }
  if (!r.ok) fail(`${r.status} ${r.statusText} for ${short(input)}`);
  return r;
};

// A repeat visit: the service worker's cache holds every file of this version (sw.js); the snapshot and the engine
// archive are read from Cache Storage here, straight, instead of each request waking the service worker (fetched
// through it instead, the snapshot was no faster: README); the .wasm is fetched (below). No cache (first visit, service workers blocked): the network, as before. caches.match takes
// the oldest cache that has the file, the one the serving (older) service worker still uses during an update.
async function cachedFetch(url) {
  try {
    const hit = self.caches && await self.caches.match(url);
    if (hit) { times.cached = (times.cached || 0) + 1; return hit; }
  } catch (err) { /* no Cache Storage here (opaque origin, private mode): the network */ }
  return checkedFetch(url);
}

// ---- the WebAssembly, compiled from the first moment -------------------------------------------------
const params = new URL(self.location.href).searchParams;
const wasmURL = new URL("./vendor/pyodide/pyodide.asm.wasm", import.meta.url).href;
let compiled = null;   // Promise<WebAssembly.Module>, once started
function compileWasm(given) {
  if (compiled) return compiled;
  times.wasm = given ? "given" : "streamed";   // tests/test_page_speed.py
  compiled = (given ? Promise.resolve(given) : WebAssembly.compileStreaming(checkedFetch(wasmURL))).then((m) => {
    times.wasm_compiled = performance.now();
    return m;
  });
  compiled.catch(() => {});   // awaited below; a failure falls back to Pyodide's own path
  return compiled;
}
// Pyodide's fetch of the .wasm: an empty stand-in while ours compiles (its body is never read: see below)
self.fetch = (input, init) => compiled && String(input && input.url ? input.url : input) === wasmURL
  ? Promise.resolve(new Response(new Uint8Array(0), { headers: { "content-type": "application/wasm" } }))
  : checkedFetch(input, init);
const instantiateStreaming = WebAssembly.instantiateStreaming.bind(WebAssembly);
WebAssembly.instantiateStreaming = async (source, imports) => {
  if (!compiled) return instantiateStreaming(source, imports);
  let module;
  try { module = await compiled; } catch (err) {
    if (reported) throw err;
    console.warn("zerocalc: streaming compilation failed; Pyodide compiles the .wasm itself:", err);
    times.wasm = "fallback";
    return WebAssembly.instantiate(await (await checkedFetch(wasmURL)).arrayBuffer(), imports);
  }
  times.instantiate = performance.now();
  const instance = await WebAssembly.instantiate(module, imports);
  times.instantiated = performance.now();
  return { module, instance };
};
self.addEventListener("unhandledrejection", (e) => fail(String(e.reason && e.reason.message ? e.reason.message : e.reason)));
self.addEventListener("error", (e) => fail(e.message || "the engine worker failed"));

async function fetchBytes(path) {
  const r = await cachedFetch(new URL(path, site).href);
  if (!r.ok) throw new Error(`${r.status} ${r.statusText} for ${path}`);
  return new Uint8Array(await r.arrayBuffer());
}

async function fetchSnapshot() {
  const url = new URL("assets/engine.snapshot", site).href;
  const hit = self.caches && await self.caches.match(url).catch(() => null);
  if (hit) times.cached = (times.cached || 0) + 1;
  const r = hit || await rawFetch(url);   // missing: not a fault, boot normally
  if (!r.ok || !r.body) throw new Error(`${r.status} for the snapshot`);
  times.snapshot_response = performance.now();
  // Inflate while it downloads. The first bytes tell gzip (as built) from bytes a server already decoded.
  const reader = r.body.getReader();
  const first = await reader.read();
  if (first.done) throw new Error("the snapshot is empty");
  const body = new ReadableStream({
    start(c) { c.enqueue(first.value); },
    async pull(c) { const { done, value } = await reader.read(); if (done) c.close(); else c.enqueue(value); },
    cancel(why) { reader.cancel(why); },
  });
  const gz = first.value[0] === 0x1f && first.value[1] === 0x8b;
  const raw = new Uint8Array(await new Response(gz ? body.pipeThrough(new DecompressionStream("gzip")) : body).arrayBuffer());
  times.snapshot_ready = performance.now();
  return raw;
}

// The engine archive is stored, not deflated (scripts/build_site.py write_engine_archive): its entries are read
// from the zip's central directory and written straight into Pyodide's file system, 4.6 ms against 28-31 ms for
// pyodide.unpackArchive (Python's zipfile inside the wasm) in Node, 70-110 ms in Chromium's worker. Anything
// else (a deflated entry, no central directory) goes to unpackArchive.
function writeStoredZip(FS, zip, dir) {
  const dv = new DataView(zip.buffer, zip.byteOffset, zip.byteLength);
  let end = zip.length - 22;
  while (end >= 0 && dv.getUint32(end, true) !== 0x06054b50) end--;
  if (end < 0) return false;
  const count = dv.getUint16(end + 10, true);
  const names = new TextDecoder();
  const entries = [];
  for (let i = 0, p = dv.getUint32(end + 16, true); i < count; i++) {
    if (dv.getUint32(p, true) !== 0x02014b50 || dv.getUint16(p + 10, true) !== 0) return false;
    const size = dv.getUint32(p + 20, true), nameLen = dv.getUint16(p + 28, true);
    const local = dv.getUint32(p + 42, true);
    entries.push([names.decode(zip.subarray(p + 46, p + 46 + nameLen)), local, size]);
    p += 46 + nameLen + dv.getUint16(p + 30, true) + dv.getUint16(p + 32, true);
  }
  const made = new Set();
  for (const [name, local, size] of entries) {
    if (name.endsWith("/")) continue;
    const start = local + 30 + dv.getUint16(local + 26, true) + dv.getUint16(local + 28, true);
    const path = dir + name;
    const parent = path.slice(0, path.lastIndexOf("/"));
    if (!made.has(parent)) { FS.mkdirTree(parent); made.add(parent); }
    FS.writeFile(path, zip.subarray(start, start + size));
  }
  return true;
}

const indexURL = new URL("./vendor/pyodide/", import.meta.url).href;
// The worker's name says its role and boot ("zerocalc-planner", "zerocalc-engine-normal": assets/engine.js): a worker
// the service worker serves takes the cached response's URL as its location, which has no query string.
const wantSnapshot = params.get("boot") !== "normal" && !/-normal$/.test(self.name || "");
const role = params.get("role") === "planner" || /^zerocalc-planner/.test(self.name || "") ? "planner" : "engine";

async function startPython(snapshot) {
  const { loadPyodide } = await pyodideLoader;
  if (snapshot) {
    try {
      return { pyodide: await loadPyodide({ indexURL, _loadSnapshot: snapshot }), boot: "snapshot" };
    } catch (err) {
      if (reported) throw err;   // a runtime file is missing: a normal boot cannot work either
      console.warn("zerocalc: the engine snapshot did not restore; booting normally:", err);
    }
  }
  return { pyodide: await loadPyodide({ indexURL }), boot: "normal" };
}

async function boot(given) {
  compileWasm(given);
  const snapshot = wantSnapshot ? fetchSnapshot() : null;
  snapshot?.catch(() => {});   // awaited inside loadPyodide; a rejection here is not an "unhandled" fault
  // every engine file in one archive (scripts/build_site.py write_engine_archive): one request, not ~150
  const files = fetchBytes("assets/engine.zip");
  // A missing engine file fails the boot now, not after Pyodide has finished loading.
  const filesFailed = files.then(() => new Promise(() => {}));
  const { pyodide, boot: how } = await Promise.race([startPython(snapshot), filesFailed]);
  times.python_up = performance.now();
  const home = "/home/pyodide/";   // Pyodide's cwd, on sys.path: ./zerocalc/... imports as zerocalc
  const archive = await files;
  times.files_fetched = performance.now();
  if (!writeStoredZip(pyodide.FS, archive, home)) pyodide.unpackArchive(archive, "zip", { extractDir: home });
  times.files_written = performance.now();
  return { call: pyodide.pyimport("app.worker").call, how };
}

// The planner waits one message for the engine's compiled module ({module}, or {module: null}); the engine starts now.
const started = role === "planner"
  ? new Promise((resolve) => { self.onmessage = (e) => { self.onmessage = null; resolve(boot(e.data && e.data.module)); }; })
  : boot();
started.then(({ call, how }) => {
  if (reported) return;
  self.onmessage = (e) => {
    const { id, fn, text } = e.data;
    let out;
    try { out = call(fn || "compute", text); } catch (err) { out = JSON.stringify({ fatal: String(err) }); }
    self.postMessage({ id, text: out });
  };
  times.ready = performance.now();
  times.role = role;
  // the compiled module goes to the page, which hands it to the planner worker (assets/engine.js)
  compiled.then((module) => self.postMessage({ ready: true, boot: how, times, module }),
                () => self.postMessage({ ready: true, boot: how, times, module: null }));
  // The page already shows the default plan (pre-rendered), so "ready" does not wait for a first answer;
  // this warm-up pays the first call's one-off costs (lazy imports, preset architecture) meanwhile.
  // (a snapshot was taken after that call: there a share link's request runs at once instead of queueing behind it)
  if (how !== "snapshot") setTimeout(() => { try { call("compute", '{"plan": {}}'); } catch (err) { /* the next real call reports it */ } }, 0);
}, (err) => fail(String(err && err.message ? err.message : err)));
