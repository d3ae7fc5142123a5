// First script of the page (a plain file, not inline: the Content-Security-Policy allows only this site's
// own scripts). Before first paint: the remembered theme and the ?embed=1 view. Then the engine's worker
// starts at once (Pyodide boots for seconds; every ms counts); assets/engine.js takes it over and replays
// any message or error that arrived before it.
(function () {
  var html = document.documentElement;
  var q = new URLSearchParams(location.search);
  if (q.get("embed") === "1") html.setAttribute("data-embed", "1");
  var theme = q.get("theme");   // ?theme=light|dark (an embedding page matching its own), else the remembered toggle
  try { if (theme !== "dark" && theme !== "light") theme = localStorage.getItem("zerocalc-theme"); } catch (e) { /* none */ }
  if (theme === "dark" || theme === "light") html.setAttribute("data-theme", theme);
  if (q.get("runtime") === "pyscript") return;
  try {
    var boot = q.get("boot") === "normal" ? "?boot=normal" : "";   // skip the engine snapshot (tests, benchmark)
    var worker = new Worker("./assets/worker.js" + boot, { type: "module", name: "zerocalc-engine" + (boot ? "-normal" : "") });
    var early = [];
    worker.onmessage = function (e) { early.push(e); };
    worker.onerror = function (e) { early.push(e); };
    window.zerocalcBoot = { worker: worker, early: early };
  } catch (e) { /* engine.js reports it */ }
})();
