// "What fits" panel: asks the engine's CALLS["fit_start"] / ["fit_step"] (py/app/fit_view.py) for the plan in the address bar
// (#plan=..., or the default), shows the ranked options (each with a button that applies it: setting
// location.hash to the changed plan's fragment, which app.js loads into the form on hashchange) and draws
// the engine's series as inline SVG. User-visible text goes in with textContent only.
//
// Typing never waits for it: the panel plans in its own worker (engine.js planner(): the same snapshot, another
// thread), so an edit's request never queues behind a re-plan; the re-plan goes in slices of a few ms (fit_start,
// then fit_step until the view comes), and no slice is sent, nor an answer parsed, while an edit is in flight
// (<html data-pending>, set by app.js from input to its figures): the edit's own request has the CPU to itself after
// at most one slice (2 cores, two workers). An answer is drawn only while no edit is in flight, one piece per
// animation frame (the table, then each chart), and a newer re-plan abandons the drawing of an older one.
// #fit[data-render-ms] is the longest piece, #fit[data-deferred] how many frames it waited for edits,
// #fit[data-slices] how many slices the re-plan took (scripts/bench_page.py reads them).
import { engine, planner } from "./engine.js";

const $ = (s, root = document) => root.querySelector(s);
const SVG = "http://www.w3.org/2000/svg";
const COMPONENTS = ["weights", "gradients", "optimizer_states", "activations", "logits", "lora_adapters", "buffers", "runtime"];
const NAMES = { optimizer_states: "optimizer states", lora_adapters: "LoRA adapters" };
const nice = (c) => NAMES[c] || c;
let seq = 0;
let timer = null;
let runs = 0;

function planFromHash() {
  const m = location.hash.match(/^#plan=(.*)$/s);
  if (!m) return {};
  try {
    const p = JSON.parse(decodeURIComponent(m[1]));
    return p && typeof p === "object" && !Array.isArray(p) ? p : {};
  } catch (e) { return {}; }
}

function el(tag, attrs = {}, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function svg(tag, attrs = {}, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

function fmt(n, digits = 0) { return Number(n).toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits }); }

function renderRows(v) {
  const body = $("#fit-rows");
  body.replaceChildren();
  v.rows.forEach((r, i) => {
    const tr = el("tr", { "data-fits": String(r.fits), "data-fit-option": String(i) });
    tr.append(el("td", {}, r.label), el("td", { class: "fit-change" }, r.change_text),
      el("td", { class: "num", "data-bytes": String(r.device_used_bytes) }, fmt(r.gib, 2)),
      el("td", { class: "fit-verdict" }, r.fits ? "fits" : "out of memory"),
      el("td", { class: "num" }, `${fmt(r.tokens_per_s_per_gpu)} (${r.delta_pct > 0 ? "+" : ""}${fmt(r.delta_pct, 1)} %)`));
    const td = el("td");
    const b = el("button", { type: "button", "data-fragment": r.fragment, "aria-label": `Apply: ${r.label}` }, "Apply");
    b.addEventListener("click", () => { location.hash = r.fragment; });
    td.append(b);
    tr.append(td);
    body.append(tr);
  });
  const ul = $("#fit-advice");
  ul.replaceChildren(...v.advice.map((a) => el("li", {}, a)));
  $("#fit-summary").textContent =
    `This plan: ${fmt(v.gib, 2)} of ${fmt(v.capacity_gib, 2)} GiB per GPU (${v.fits ? "fits" : "out of memory"}), ` +
    `${fmt(v.tokens_per_s_per_gpu)} tokens/s per GPU at ${fmt(100 * v.mfu, 1)} % MFU. ` +
    `Largest micro-batch that fits: ${v.max_micro_batch_size ?? "none"}; longest sequence: ${v.max_seq_len ?? "none"}. ` +
    "Fewest GPUs by stage: " + Object.entries(v.min_gpus).map(([k, n]) => `${k}: ${n ?? "none"}`).join(", ") + ".";
}

// A chart: <svg role="img"> with <title>/<desc>, plus a visually hidden table with the same numbers.
function figure(id, title, desc, header, rows, draw) {
  const box = $(`[data-fit-chart='${id}']`);
  box.replaceChildren();
  const W = 340, H = 190;
  const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-labelledby": `fit-${id}-t fit-${id}-d`, class: "fit-svg" });
  s.append(svg("title", { id: `fit-${id}-t` }, title), svg("desc", { id: `fit-${id}-d` }, desc));
  draw(s, W, H);
  const cap = el("p", { class: "fit-chart-title", "aria-hidden": "true" }, title);
  // the table inside a visually hidden box: an absolutely placed table ignores height: 1px and ran past the footer
  const t = el("table");
  t.append(el("caption", {}, title));
  const hr = el("tr");
  for (const h of header) hr.append(el("th", { scope: "col" }, h));
  t.append(hr);
  for (const r of rows) { const tr = el("tr"); for (const c of r) tr.append(el("td", {}, String(c))); t.append(tr); }
  const hidden = el("div", { class: "sr" });
  hidden.append(t);
  box.append(cap, s, hidden);
}

// Every axis says its unit: the y axis GiB per GPU, the x axis its quantity and unit (xAxis).
function stacked(id, title, series, xName, xAxis) {
  const pts = series.points;
  const max = Math.max(series.capacity_gib, ...pts.map((p) => p.total_gib)) * 1.05 || 1;
  const desc = `${title}. ` + pts.map((p) => `${xName} ${p.x}: ${fmt(p.total_gib, 1)} GiB${p.fits ? "" : " (out of memory)"}`).join("; ") +
    `. Capacity ${fmt(series.capacity_gib, 1)} GiB.`;
  const rows = pts.map((p) => [p.x, ...COMPONENTS.map((c) => fmt(p.components[c], 2)), fmt(p.total_gib, 2)]);
  figure(id, title, desc, [xName, ...COMPONENTS.map(nice), "device used GiB"], rows, (s, W, H) => {
    const L = 36, B = 32, T = 18, w = (W - L - 6) / Math.max(1, pts.length);
    const y = (g) => H - B - (g / max) * (H - B - T);
    s.append(svg("line", { x1: L, x2: W - 4, y1: y(0), y2: y(0), class: "fit-axis" }));
    for (const g of [0, max / 2, max]) s.append(svg("text", { x: L - 4, y: y(g) + 3, class: "fit-tick", "text-anchor": "end" }, fmt(g)));
    s.append(svg("text", { x: 2, y: 9, class: "fit-unit", "data-axis": "y" }, "GiB per GPU"));
    s.append(svg("text", { x: L + (W - L) / 2, y: H - 3, class: "fit-unit", "text-anchor": "middle", "data-axis": "x" }, xAxis));
    pts.forEach((p, i) => {
      let acc = 0;
      const x = L + i * w + w * 0.15;
      for (const c of COMPONENTS) {
        const g = p.components[c];
        if (!g) continue;
        s.append(svg("rect", { x, width: w * 0.7, y: y(acc + g), height: Math.max(0, y(acc) - y(acc + g)), class: `fit-c-${c}` }));
        acc += g;
      }
      s.append(svg("text", { x: x + w * 0.35, y: H - B + 11, class: "fit-tick", "text-anchor": "middle" }, String(p.x)));
    });
    s.append(svg("line", { x1: L, x2: W - 4, y1: y(series.capacity_gib), y2: y(series.capacity_gib), class: "fit-cap" }));
  });
}

function splitChart(splits) {
  const max = Math.max(...splits.map((s) => s.time_s)) || 1;
  const parts = [["compute_s", "compute"], ["exposed_communication_s", "exposed communication"], ["offload_s", "offload"]];
  const desc = "Step time split. " + splits.map((s) => `${s.label}: ${fmt(s.time_s, 2)} s (compute ${fmt(s.compute_s, 2)}, ` +
    `exposed communication ${fmt(s.exposed_communication_s, 2)}, offload ${fmt(s.offload_s, 2)})`).join("; ") + ".";
  figure("step_split", "Step time: compute / exposed communication / offload", desc,
    ["plan", "compute s", "exposed communication s", "offload s", "tokens/s per GPU"],
    splits.map((s) => [s.label, fmt(s.compute_s, 3), fmt(s.exposed_communication_s, 3), fmt(s.offload_s, 3), fmt(s.tokens_per_s_per_gpu)]),
    (g, W, H) => {
      const L = 4, h = (H - 22) / Math.max(1, splits.length);
      g.append(svg("text", { x: W - 6, y: H - 4, class: "fit-unit", "text-anchor": "end", "data-axis": "x" },
        `bar length: step time, seconds (longest ${fmt(max, 2)} s)`));
      splits.forEach((s, i) => {
        let acc = 0;
        const y = 4 + i * h;
        for (const [k, name] of parts) {
          const w = (s[k] / max) * (W - L - 8);
          if (w > 0) {
            const r = svg("rect", { x: L + acc, y: y + h * 0.42, width: w, height: h * 0.45, class: `fit-t-${k}` });
            r.append(svg("title", {}, `${name}: ${fmt(s[k], 3)} s`));
            g.append(r);
          }
          acc += w;
        }
        g.append(svg("text", { x: L, y: y + h * 0.36, class: "fit-tick" }, `${s.label} — ${fmt(s.time_s, 2)} s`));
      });
    });
}

function stagesChart(stages, capacity) {
  if (!stages.length) { $("[data-fit-chart='stages']").replaceChildren(); return; }
  const series = { capacity_gib: capacity, points: stages.map((s) => ({ ...s, x: s.label })) };
  stacked("stages", "Memory per GPU by stage (ZeRO / FSDP side by side)", series, "stage", "ZeRO stage / FSDP sharding");
}

const pieces = (v) => [
  () => renderRows(v),
  () => stacked("seq_len", "Memory per GPU vs sequence length", v.charts.seq_len, "sequence length",
    "sequence length, tokens"),
  () => stacked("micro_batch_size", "Memory per GPU vs micro-batch", v.charts.micro_batch_size, "micro-batch",
    "micro-batch, sequences per GPU"),
  () => stacked("gpus", "Memory per GPU vs GPU count", v.charts.gpus, "GPUs", "data-parallel GPUs"),
  () => splitChart(v.charts.step_split),
  () => stagesChart(v.charts.stages, v.capacity_gib),
];

const root = document.documentElement;
const frame = () => new Promise((resolve) => {   // a hidden page (no frames): 100 ms later
  const late = setTimeout(resolve, 100);
  requestAnimationFrame(() => { clearTimeout(late); resolve(); });
});

// -> false when a newer re-plan took over. Each piece runs at the start of a frame in which no edit is in flight.
async function render(v, my, sec, waited) {
  let longest = 0, deferred = waited;
  for (const piece of pieces(v)) {
    await frame();
    while (root.dataset.pending) { deferred++; await frame(); }
    if (my !== seq) return false;
    const t = performance.now();
    piece();
    longest = Math.max(longest, performance.now() - t);
  }
  sec.dataset.renderMs = longest.toFixed(2);
  sec.dataset.deferred = String(deferred);
  return true;
}

let planning = false;   // one planning loop at a time; a newer run() only bumps seq, and the loop restarts from it
let booted = false;

// The re-plan goes a slice at a time (py/app/fit_view.py fit_start / fit_step, ~4 ms of Python each), and the next
// slice is sent only while no edit is in flight: an edit pre-empts the planner after at most one slice, so the edit's
// own request has the CPU (2 cores: the page, the engine's worker, the planner's). A newer run() (hashchange,
// Recompute, the address bar) restarts from its plan with fit_start, which drops the unfinished one.
async function run() {
  ++seq;
  const sec = $("#fit");
  sec.dataset.state = "busy";
  sec.setAttribute("aria-busy", "true");
  if (planning) return;   // the loop below sees the newer seq
  planning = true;
  let api, v, t0, mine = 0, waited = 0;
  try {
    // the planner's boot waits for the page's first figures (a share link's): two boots' worth of CPU at once
    // would slow them on a small machine
    while (!booted && root.dataset.pending) await frame();
    booted = true;
    api = await planner();
    sec.dataset.worker = api.role || "engine";   // "planner": its own worker (tests/test_page_speed.py)
    if (api.times) sec.dataset.workerTimes = JSON.stringify(api.times);
    for (let next = "fit_start"; ;) {
      while (root.dataset.pending) { waited++; await frame(); }   // an edit in flight: no slice is sent
      if (mine !== seq) { mine = seq; next = "fit_start"; t0 = performance.now(); }
      const text = await api.call(next, next === "fit_start" ? JSON.stringify({ plan: planFromHash() }) : "{}");
      while (root.dataset.pending) { waited++; await frame(); }   // even an answer's JSON.parse waits for an edit's figures
      if (mine !== seq) continue;                                 // a newer re-plan: this answer is never used
      v = JSON.parse(text);
      if (!v.pending) break;
      next = "fit_step";
    }
  } finally { planning = false; }
  sec.dataset.ms = (performance.now() - t0).toFixed(1);   // first slice sent -> view received, round trips included
  if (v.fatal) {
    sec.removeAttribute("aria-busy");
    $("#fit-summary").textContent = `The planner failed: ${v.fatal}`; sec.dataset.state = "failed"; return;
  }
  if (!(await render(v, mine, sec, waited))) return;
  sec.removeAttribute("aria-busy");
  sec.dataset.pyMs = String(v.fit_py_ms ?? v.py_ms);   // Python over all the slices
  sec.dataset.slices = String(v.slices);
  sec.dataset.share = v.share;
  sec.dataset.runs = String(++runs);
  sec.dataset.state = "ready";
}

function later(ms) { clearTimeout(timer); timer = setTimeout(run, ms); }

window.addEventListener("hashchange", () => later(0));
// app.js writes the form's plan into the address bar 250 ms after its answer (a slow answer cannot leave this
// panel on the previous plan); a short wait more keeps the search off the worker while someone is still typing
window.addEventListener("zerocalc:address", () => later(300));
document.addEventListener("DOMContentLoaded", () => {
  $("#fit-refresh")?.addEventListener("click", () => later(0));
  engine.then(() => later(0), () => { $("#fit-summary").textContent = "The engine did not start."; });
});
