// Starts the engine as early as possible: this module is loaded `async` from the top of <head>, so the
// Pyodide worker is on its way while the rest of the page is still being parsed. assets/app.js imports
// the same module instance and awaits `engine`: an object whose compute(requestJSON) resolves to the
// view JSON of py/app/worker.py, and call(name, requestJSON) to the answer of any entry of its CALLS.
//
// Default: a plain module Worker (assets/worker.js) running Pyodide. `?runtime=pyscript` runs the same
// worker.py through PyScript's PyWorker instead; scripts/bench_page.py --pyscript measures both (PyScript's
// bootstrap costs ~0.5 s more to ready here, which breaks the 1.1x-of-bare-Pyodide budget).
//
// `planner()` -> a second engine of the same kind for the "what fits" panel (assets/fit.js): its own module worker
// (assets/worker.js?role=planner), restored from the same snapshot with the WebAssembly module the engine already
// compiled, so a re-plan (tens of ms of Python) never sits in front of an edit's own request. Started on the
// first call, after the engine is ready (two Pyodide boots at once would slow the first on a small machine); if it
// cannot start, the panel uses the engine itself, as before.
const here = (path) => new URL(path, import.meta.url).href;
const normalBoot = /[?&]boot=normal\b/.test(location.search);

function viaWorker(boot) {
  return new Promise((resolve, reject) => {
    const worker = boot.worker;
    const waiting = new Map();
    let next = 0;
    const call = (fn, text) => new Promise((res) => { const id = next++; waiting.set(id, res); worker.postMessage({ id, fn, text }); });
    const compute = (text) => call("compute", text);
    worker.onmessage = ({ data }) => {
      if (data.ready) resolve({ compute, call, boot: data.boot, times: data.times, module: data.module || null, worker });
      else if (data.error) reject(new Error(data.error));
      else { waiting.get(data.id)?.(data.text); waiting.delete(data.id); }
    };
    worker.onerror = (e) => reject(new Error(e.message || "the engine worker failed to load"));
    for (const e of boot.early) (e.type === "error" ? worker.onerror : worker.onmessage)(e);
  });
}

async function viaPyScript() {
  const { PyWorker } = await import("./vendor/pyscript/core.js");
  const worker = await PyWorker(here("../py/app/worker.py"), {
    config: here("../pyscript.json"),
    version: here("./vendor/pyodide/pyodide.mjs"),   // PyWorker ignores `interpreter`: never the CDN
  });
  return { compute: (text) => worker.sync.call("compute", text), call: (fn, text) => worker.sync.call(fn, text) };
}

// ?planner=engine: the panel plans in the engine's own worker, as before the planner (scripts/bench_page.py compares)
const oneWorker = new URLSearchParams(location.search).get("planner") === "engine";

function startWorker(role) {
  const q = [role === "planner" ? "role=planner" : "", normalBoot ? "boot=normal" : ""].filter(Boolean).join("&");
  return new Worker(here("./worker.js") + (q ? "?" + q : ""), { type: "module", name: "zerocalc-" + role + (normalBoot ? "-normal" : "") });
}

const runtime = new URLSearchParams(location.search).get("runtime");
// index.html's first script (assets/boot.js) has usually started the engine's worker already.
export const engine = runtime === "pyscript" ? viaPyScript() : viaWorker(window.zerocalcBoot || { worker: startWorker("engine"), early: [] });
engine.catch(() => {});   // reported by app.js; this only keeps an early failure from being "unhandled"

let plannerReady = null;
export function planner() {
  if (plannerReady) return plannerReady;
  plannerReady = engine.then((main) => {
    if (!main.worker || oneWorker) return main;   // PyScript's PyWorker: one engine for everything
    const worker = startWorker("planner");
    worker.postMessage({ module: main.module });   // the compiled WebAssembly (null: the planner compiles its own)
    return viaWorker({ worker, early: [] }).then((p) => ({ ...p, role: "planner" }), (err) => {
      console.warn("zerocalc: the planner worker did not start; the engine plans instead:", err);
      worker.terminate();
      return main;
    });
  });
  return plannerReady;
}
