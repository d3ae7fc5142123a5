// Starts the engine as early as possible: this module is loaded `async` from the top of <head>, so the
// Pyodide worker is on its way while the rest of the page is still being parsed. assets/app.js imports
// the same module instance and awaits `engine` (the worker's exports, py/app/worker.py).
const here = (path) => new URL(path, import.meta.url).href;

export const engine = import("./vendor/pyscript/core.js").then(({ PyWorker }) =>
  PyWorker(here("../py/app/worker.py"), {
    config: here("../pyscript.json"),
    version: here("./vendor/pyodide/pyodide.mjs"),   // PyWorker ignores `interpreter`: never the CDN
  }));
engine.catch(() => {});   // reported by app.js; this only keeps an early failure from being "unhandled"
