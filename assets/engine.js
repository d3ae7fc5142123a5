// Starts the engine as early as possible: this module is loaded `async` from the top of <head>, so the
// Pyodide worker is on its way while the rest of the page is still being parsed. assets/app.js imports
// the same module instance and awaits `engine`: an object whose compute(requestJSON) resolves to the
// view JSON of py/app/worker.py, and call(name, requestJSON) to the answer of any entry of its CALLS.
//
// Default: a plain module Worker (assets/worker.js) running Pyodide. `?runtime=pyscript` runs the same
// worker.py through PyScript's PyWorker instead; scripts/bench_page.py --pyscript measures both (PyScript's
// bootstrap costs ~0.5 s more to ready here, which breaks the 1.1x-of-bare-Pyodide budget).
const here = (path) => new URL(path, import.meta.url).href;

function viaWorker() {
  return new Promise((resolve, reject) => {
    // index.html's first inline script has usually started the worker already.
    const boot = window.zerocalcBoot || { worker: new Worker(here("./worker.js") + (/[?&]boot=normal\b/.test(location.search) ? "?boot=normal" : ""),
                                                         { type: "module", name: "zerocalc-engine" }), early: [] };
    const worker = boot.worker;
    const waiting = new Map();
    let next = 0;
    const call = (fn, text) => new Promise((res) => { const id = next++; waiting.set(id, res); worker.postMessage({ id, fn, text }); });
    const compute = (text) => call("compute", text);
    worker.onmessage = ({ data }) => {
      if (data.ready) resolve({ compute, call, boot: data.boot, times: data.times });
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

const runtime = new URLSearchParams(location.search).get("runtime");
export const engine = runtime === "pyscript" ? viaPyScript() : viaWorker();
engine.catch(() => {});   // reported by app.js; this only keeps an early failure from being "unhandled"
