// zerocalc page glue (main thread). Reads the form into a plan-v1 dict, asks the engine for the view
// (Python: py/app/view.py, running in a Pyodide Web Worker, see assets/engine.js), and copies the view
// into the DOM. No arithmetic here, and user text only ever goes in through textContent / value.
// Why plain JS on the main thread: nothing to boot, so the page (pre-rendered at build time) takes input
// at first paint and the main thread stays free while Pyodide starts — see scripts/bench_page.py.

import { engine as engineReady } from "./engine.js";

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));
const html = document.documentElement;
const form = $("#plan");
const presets = JSON.parse($("#zc-presets").textContent);
const NUMBER = /^\s*[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?\s*$/i;
const PASTE = "model_config_json";
// Size limits on what a user (or a link) hands the page: a real config.json is a few KiB, a plan a few hundred
// bytes. Bigger input is refused with a message, before any parsing.
const PASTE_LIMIT = 256 * 1024;   // characters of a pasted config.json
const LINK_LIMIT = 64 * 1024;     // characters of a share link's #plan= fragment
const LENGTHS_LIMIT = 2048 * 1024; // characters of pasted sample lengths (~300,000 samples; a histogram is smaller)
const LENGTHS = "data.histogram";
const kib = (n) => `${Math.ceil(n / 1024).toLocaleString("en")} KiB`;

let engine = null;          // the worker's exports once Python is up
let busy = false;           // one request in flight; later inputs coalesce into one more
let dirty = false;
let lastGood = null;        // last plan the engine accepted: a bad field falls back to its value here
let pasted = null;          // the parsed config.json of a custom model
let targetsOverride = null; // lora.targets from a share link, until the model's checkboxes exist
let clientErrors = {};      // found before the engine: config.json syntax, share-link problems
let updates = 0;
let touched = false;        // any input before the engine was ready
let urlTimer = 0;
let lastShare = "";
let engineFailed = false;
const embedded = html.dataset.embed === "1";   // ?embed=1, set by assets/boot.js
const framed = window.parent !== window;   // the runtime could not start: the form still edits the share link

// ---- form -> plan ---------------------------------------------------------------------------------

function valueOf(el) {
  const kind = el.dataset.type;
  if (kind === "bool") return el.checked;
  if (kind === "flag") return el.checked ? true : undefined;   // post-training checkboxes: unticked = the key's default
  if (kind === "tribool") return el.value === "" ? undefined : el.value === "true";
  // "auto" and named values (stack.kbit_prepare "trl-bf16") stay strings; "true" / "false" are booleans
  if (kind === "autobool") return el.value === "true" ? true : el.value === "false" ? false : el.value;
  if (kind === "csv") return el.value.split(",").map((t) => t.trim()).filter((t) => t !== "");
  if (kind === "json") {     // the run / post_training blocks: empty = the defaults; text that is not JSON goes as is
    const t = el.value.trim();
    if (!t) return undefined;
    try { return JSON.parse(t); } catch { return t; }
  }
  if (kind === "int" || kind === "num") return NUMBER.test(el.value) ? Number(el.value) : el.value;
  return el.value;           // text the engine cannot read is sent as is: it names the key
}

function setPath(obj, dotted, value) {
  const keys = dotted.split(".");
  let o = obj;
  for (const k of keys.slice(0, -1)) o = (o[k] ??= {});
  o[keys[keys.length - 1]] = value;
}

function customModel() {
  const m = { ...(pasted || {}) };
  for (const el of $$("#custom-model [name^='model.']")) {
    const key = el.name.slice("model.".length);
    if (el.type === "checkbox") m[key] = el.checked;
    else if (el.value.trim() !== "") m[key] = valueOf(el);
  }
  if (!m.name) m.name = "Custom model";
  return m;   // a pasted config's extra fields (MoE, rope, ...) ride along; the form's dimensions win
}

function readForm() {
  const plan = { schema: 1 };
  const targets = [];
  for (const el of form.elements) {
    const name = el.name;
    if (!name || name === PASTE || name.startsWith("model.") || name.startsWith("gpu.")) continue;
    if (el.type === "radio" && !el.checked) continue;
    if (name === "lora.targets") { if (el.checked) targets.push(el.value); continue; }
    let v = valueOf(el);
    if (v === undefined) continue;
    if (name === LENGTHS) {   // pasted lengths go to the engine as text (py/app/data_view.py parses them)
      delete clientErrors[LENGTHS];
      if (v.length > LENGTHS_LIMIT) {
        clientErrors[LENGTHS] = `The pasted lengths are ${kib(v.length)}; the limit is ${kib(LENGTHS_LIMIT)}. ` +
          "Paste a histogram [[length, count], ...] instead (collections.Counter of the lengths). They are not used.";
        continue;
      }
      v = v.trim();
    }
    if (/^(deepspeed|network|data|allocator|post_training)\./.test(name) && v === "") continue;   // empty = the default
    setPath(plan, name, v);
  }
  // post-training (plan-v1 Extension 7): no method, no block; a generator only where one of its fields is set
  if (plan.post_training && !plan.post_training.method) delete plan.post_training;
  setPath(plan, "lora.targets", targetsOverride ?? targets);
  if (plan.model === "custom") plan.model = customModel();
  if (plan.gpu === "custom") plan.gpu = { name: $("[name='gpu.name']").value,
                                          memory_gib: valueOf($("[name='gpu.memory_gib']")) };
  return plan;
}

// ---- engine round trip ----------------------------------------------------------------------------

function request() {
  if (engineFailed) { shareFromForm(); return; }
  if (!engine) { document.body.dataset.stale = "true"; status("loading", "Engine still starting — your changes are kept and applied when it is ready."); return; }
  html.dataset.pending = "true";
  if (busy) { dirty = true; return; }
  busy = true; dirty = false;
  const t0 = performance.now();
  const req = JSON.stringify({ plan: readForm(), good: lastGood });
  engine.compute(req)
    .then((text) => apply(JSON.parse(text), t0))
    .catch((err) => showGlobal("The engine failed on this plan: " + err))
    .finally(() => { busy = false; if (dirty) request(); else delete html.dataset.pending; });
}

// ---- view -> DOM ------------------------------------------------------------------------------------

function put(el, fig) {
  if (!fig) return;
  if (el.textContent !== fig.text) el.textContent = fig.text;
  if (fig.bytes !== undefined && fig.bytes !== null) el.dataset.bytes = String(fig.bytes);
  else delete el.dataset.bytes;
}

function el(tag, attrs = {}, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function renderComponents(components) {
  const stack = $("#stack");
  const rows = $("#rows");
  const keys = components.map((c) => c.key).join(",");
  if (rows.dataset.keys !== keys) {   // rebuild only when the set of components changes
    stack.replaceChildren(...components.map((c) => el("span", { class: `seg seg-${c.key}`, "data-seg": c.key })));
    rows.replaceChildren(...components.map((c) => {
      const tr = el("tr", { "data-comp": c.key });
      const th = el("th", { scope: "row" });
      th.append(el("i", { class: `sw seg-${c.key}` }), document.createTextNode(c.label));
      const bar = el("td", { class: "barcell" });
      bar.append(el("span", { class: `bar seg-${c.key}` }));
      tr.append(th, bar, el("td", { class: "num", "data-out": `per_gpu.components.${c.key}` }), el("td", { class: "num share" }));
      return tr;
    }));
    rows.dataset.keys = keys;
  }
  components.forEach((c, i) => {
    const seg = stack.children[i];
    seg.style.width = `${c.width}%`;
    seg.title = `${c.label}: ${c.text}`;
    const tr = rows.children[i];
    tr.querySelector(".bar").style.width = `${c.width}%`;
    tr.querySelector(".share").textContent = c.share;
  });
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
  const n = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, String(v));
  if (text !== undefined) n.textContent = text;
  return n;
}

function renderRun(chart) {   // the run's phases (py/app/view.py run_chart): numbers and fixed labels, no HTML
  const root = $("#run-chart");
  if (!root || !chart) return;
  root.setAttribute("viewBox", `0 0 ${chart.width} ${chart.height}`);
  $("#run-desc").textContent = chart.summary;
  const peak = $("#run-peak");
  if (peak) peak.textContent = chart.peak_text || "";   // the phase that sets the peak, as text (never HTML)
  const kids = [svg("line", { class: "cap", x1: 0, x2: chart.width, y1: chart.cap_y, y2: chart.cap_y })];
  for (const b of chart.bars) {
    const g = svg("g", { class: "ph" + (b.over ? " ph-over" : "") + (b.peak ? " ph-peak" : ""), "data-phase": b.key });
    g.append(svg("title", {}, `${b.label}: ${b.text} GiB. ${b.note}`),
             svg("rect", { x: b.x, y: b.y, width: b.w, height: b.h }),
             svg("text", { class: "val", x: b.x + b.w / 2, y: b.y - 4 }, b.text),
             svg("text", { class: "lab", x: b.x + b.w / 2, y: chart.height - 6 }, b.label));
    kids.push(g);
  }
  $("#run-bars").replaceChildren(...kids);
}

// reserved over the run (py/app/data_view.py reserved_chart): SVG marks and the hidden table, as text and numbers
const MARKS = new Set(["line", "text", "polyline", "circle"]);
function renderReserved(chart) {
  const root = $("#reserved-chart");
  if (!root || !chart) return;
  root.setAttribute("viewBox", `0 0 ${chart.width} ${chart.height}`);
  $("#reserved-desc").textContent = chart.summary;
  $("#reserved-marks").replaceChildren(...chart.marks.filter((m) => MARKS.has(m.tag)).map((m) => svg(m.tag, m.attrs, m.text)));
  const t = chart.table;
  const head = el("tr");
  for (const h of t.header) head.append(el("th", { scope: "col" }, h));
  const rows = t.rows.map((r) => { const tr = el("tr"); for (const c of r) tr.append(el("td", {}, String(c))); return tr; });
  $("#reserved-table").replaceChildren(el("caption", {}, t.caption), head, ...rows);
}

function renderStep(parts, said) {
  // the step block's breakdown (py/app/view.py step_parts): one segment per part, widths in % of the step
  const bar = $("#step-bar"), legend = $("#step-legend");
  if (!bar || !legend) return;
  bar.replaceChildren(...parts.map((p) => {
    const s = el("span", { class: `sseg sseg-${p.key}` });
    s.style.width = `${p.width}%`;
    s.title = `${p.label}: ${p.text} (${p.share})`;
    return s;
  }));
  legend.replaceChildren(...parts.map((p) => {
    const li = el("li");
    li.append(el("i", { class: `sw sseg-${p.key}` }), document.createTextNode(`${p.label} ${p.text}`));
    return li;
  }));
  if (said) bar.setAttribute("aria-label", said.text);
}

function renderChecklist(warnings) {
  const items = warnings.length ? warnings.map((w) => {
    const li = el("li", { class: `sev-${w.severity}`, "data-warning": w.id });
    const msg = el("span", { class: "msg" }, w.message);
    if (w.fix) msg.append(el("span", { class: "fix" }, w.fix));
    li.append(el("span", { class: "sev" }, w.severity), msg);
    return li;
  }) : [(() => { const li = el("li", { class: "sev-ok" });
    li.append(el("span", { class: "sev" }, "ok"), el("span", { class: "msg" }, "No warnings for this plan.")); return li; })()];
  $("#checklist").replaceChildren(...items);
}

function renderTargets(available, chosen) {
  const box = $("#targets");
  const have = $$("input", box).map((i) => i.value);
  const same = have.length === available.length && have.every((t, i) => t === available[i]);
  if (!same) {
    box.replaceChildren(...available.map((t) => {
      const label = el("label", { class: "target" });
      const input = el("input", { type: "checkbox", name: "lora.targets", value: t, "data-type": "list" });
      label.append(input, document.createTextNode(" "), el("code", {}, t));
      return label;
    }));
  }
  for (const input of $$("input", box)) input.checked = chosen.includes(input.value);
}

function errorSlot(key) {
  const slot = (k) => $(`[data-error-for="${CSS.escape(k)}"]`);
  if (slot(key)) return slot(key);
  if (key.startsWith("model.") && pasted) return slot(PASTE);
  const parts = key.split(".");
  while (parts.length > 1) { parts.pop(); if (slot(parts.join("."))) return slot(parts.join(".")); }
  return slot("plan");
}

function renderErrors(errors) {
  for (const p of $$("[data-error-for]")) { p.hidden = true; p.textContent = ""; }
  for (const f of $$(".invalid")) f.classList.remove("invalid");
  for (const i of $$("[aria-invalid]")) i.removeAttribute("aria-invalid");
  for (const [key, message] of Object.entries(errors)) {
    const p = errorSlot(key);
    p.textContent = p.hidden ? message : p.textContent + " " + message;
    p.hidden = false;
    const field = p.closest("[data-field]");
    if (field) field.classList.add("invalid");
    for (const input of $$(`[name="${CSS.escape(key)}"]`)) input.setAttribute("aria-invalid", "true");
  }
}

// An answer reaches the DOM in two steps. First, in the same task as the worker's message, the edit's own figures:
// every [data-out] / [data-view] number, the verdict, the breakdown's bars, the form's own state (LoRA targets, the
// fields' errors); <html data-updates> counts them (input -> figures: scripts/bench_page.py). Then, one piece per
// animation frame, what only draws them again (the run chart, the reserved chart, the step bar, the checklist, the
// DeepSpeed config, the share link): a piece waits while an edit is in flight (<html data-pending>) and a newer
// answer abandons an older answer's pieces, so typing never waits behind a chart. <html data-drawn> is the
// update whose pieces are all on screen (tests wait for it; tests/test_page_speed.py holds the order).
let drawing = 0;   // the update whose pieces are being drawn; a newer one makes an older drawing stop
// the next animation frame; a hidden or throttled page (no frames) draws 100 ms later instead
const frame = () => new Promise((resolve) => {
  const late = setTimeout(resolve, 100);
  requestAnimationFrame(() => { clearTimeout(late); resolve(); });
});

function apply(v, t0) {
  if (v.fatal) { showGlobal("Engine error: " + v.fatal); return; }
  const tApply = performance.now();
  renderComponents(v.components);
  const targetError = Object.keys(v.errors).some((k) => k.startsWith("lora.targets"));
  if (!targetError) renderTargets(v.targets, v.plan.lora.targets);
  targetsOverride = null;
  for (const e of $$("[data-out]")) put(e, v.out[e.dataset.out]);
  for (const e of $$("[data-view]")) put(e, v.view[e.dataset.view]);
  $("#cap-line").style.left = `${v.capacity_pct}%`;
  $("#over").style.left = `${v.capacity_pct}%`;
  $("#oom").hidden = v.fits;
  document.body.dataset.fits = String(v.fits);
  document.body.dataset.offloaded = String(v.offloaded);
  document.body.dataset.method = v.plan.method;
  renderErrors({ ...v.errors, ...clientErrors });
  lastGood = v.plan;
  lastShare = v.share;
  delete document.body.dataset.stale;
  html.dataset.updates = String(++updates);
  if (updates === 1) html.dataset.firstAnswerMs = performance.now().toFixed(1);   // a share link's own figures
  html.dataset.updateMs = (performance.now() - t0).toFixed(2);   // input -> DOM written
  html.dataset.pyMs = String(v.py_ms);                            // of which Python in the worker
  html.dataset.applyMs = (performance.now() - tApply).toFixed(2); // and DOM writes here
  try { performance.measure("zc:input->figures", { start: t0, end: performance.now() }); } catch (e) { /* old browser */ }
  markReady();
  drawRest(v, updates);
}

// -> the pieces of an answer that only redraw it, in order (each one frame)
const restPieces = (v) => [
  () => renderRun(v.run),
  () => renderReserved(v.reserved),
  () => { renderStep(v.step_parts || [], v.view["step.breakdown"]); renderChecklist(v.warnings); },
  () => {
    const pre = $("[data-export='ds_config']");
    if (pre.textContent !== v.ds_config.text) pre.textContent = v.ds_config.text;
    $("#config-note").textContent = v.ds_config.note;
    $("#config-note").hidden = !v.ds_config.note;
  },
  () => {
    showShare(v.share);
    if (embedded && framed) postEstimate(v);
    clearTimeout(urlTimer);   // the address bar follows the plan, off the input's critical path
    const hashNow = location.hash, url = location.pathname + location.search + v.share;
    // a link opened in the meantime (its hashchange not yet handled) must not be overwritten by this answer's share
    urlTimer = setTimeout(() => { if (location.hash === hashNow) writeAddress(url, v.share); }, 250);
  },
];

async function drawRest(v, my) {
  drawing = my;
  const t = performance.now();
  let longest = 0;
  for (const piece of restPieces(v)) {
    await frame();
    while (html.dataset.pending && drawing === my) await frame();
    if (drawing !== my) return;   // a newer answer's figures are on screen: its own pieces follow
    const p0 = performance.now();
    piece();
    longest = Math.max(longest, performance.now() - p0);
  }
  html.dataset.drawn = String(my);
  html.dataset.drawMs = (performance.now() - t).toFixed(1);   // figures -> every piece drawn (frames included)
  html.dataset.drawPieceMs = longest.toFixed(2);               // the longest piece (main thread, one frame)
}

function markReady() {
  if (html.dataset.engine === "ready") return;
  html.dataset.engine = "ready";
  html.dataset.readyMs = performance.now().toFixed(1);
  status("ready", "Engine ready — every change recomputes in your browser.");
}

function status(state, text) {
  $("#engine-status").dataset.state = state;
  $("#engine-text").textContent = text;
}

// The share link, the full-page link of the embed view and the <iframe> snippet, for a #plan= fragment.
function showShare(fragment) {
  const params = new URLSearchParams(location.search);
  params.delete("embed");
  const rest = params.toString();
  const full = location.origin + location.pathname + (rest ? "?" + rest : "") + fragment;
  $("#share-url").value = embedded ? full : location.origin + location.pathname + location.search + fragment;
  $("#embed-open").href = full;
  params.set("embed", "1");
  const src = location.origin + location.pathname + "?" + params.toString() + fragment;
  $("#embed-snippet").value = `<iframe src="${src.replace(/"/g, "%22")}" title="zerocalc: GPU memory plan" width="100%" height="900" loading="lazy"></iframe>`;
}

// Embedded (?embed=1 in a frame): each estimate goes to the embedding page. The message carries the estimate
// as plan-v1's estimate dict (py/app/embed.py), the plan, the share link and this view's height (to size the frame).
function postEstimate(v) {
  engine.call("estimate", JSON.stringify({ plan: v.plan })).then((text) => {
    const est = JSON.parse(text);
    if (est.fatal) return;
    delete est.py_ms;
    window.parent.postMessage({ type: "zerocalc:estimate", schema: 1, plan: v.plan, estimate: est.estimate, fits: v.fits,
                                url: $("#embed-open").href, height: document.documentElement.scrollHeight }, "*");
  });
}

// Without an engine the share link still follows the form: the whole plan as read from the form (plan-v1).
function shareFromForm() {
  let plan;
  try { plan = readForm(); } catch { return; }
  const share = "#plan=" + encodeURIComponent(JSON.stringify(plan));
  lastShare = share;
  const url = location.pathname + location.search + share;
  showShare(share);
  html.dataset.shareUpdates = String(Number(html.dataset.shareUpdates || 0) + 1);
  clearTimeout(urlTimer);
  urlTimer = setTimeout(() => writeAddress(url, share), 250);
}

// replaceState fires no hashchange: the "what fits" panel (fit.js) plans from the address bar and hears this instead
function writeAddress(url, share) {
  if (location.hash === share) return;
  history.replaceState(null, "", url);
  window.dispatchEvent(new Event("zerocalc:address"));
}

function showGlobal(message) {
  clientErrors.plan = message;
  renderErrors(clientErrors);
}

// ---- custom model / GPU, pasted config.json, share link -------------------------------------------

function fillDims(cfg) {
  const src = cfg && !("hidden_size" in cfg) && cfg.text_config ? cfg.text_config : cfg || {};
  for (const input of $$("#custom-model [name^='model.']")) {
    const key = input.name.slice("model.".length);
    if (input.type === "checkbox") input.checked = Boolean(src[key]);
    else if (input.tagName === "SELECT") input.value = src[key] ?? "llama";
    else input.value = src[key] ?? "";
  }
}

function syncCustomVisibility() {
  $("#custom-model").hidden = $("#f-model").value !== "custom";
  $("#custom-gpu").hidden = $("#f-gpu").value !== "custom";
}

let prevModel = $("#f-model").value;
let prevGpu = $("#f-gpu").value;

function onModelSelect() {
  const value = $("#f-model").value;
  if (value === "custom" && !pasted && presets.models[prevModel]) fillDims(presets.models[prevModel]);
  if (value !== "custom") prevModel = value;
  syncCustomVisibility();
}

function onGpuSelect() {
  const value = $("#f-gpu").value;
  if (value === "custom" && presets.gpus[prevGpu]) $("[name='gpu.memory_gib']").value = String(presets.gpus[prevGpu].memory_gib);
  if (value !== "custom") prevGpu = value;
  syncCustomVisibility();
}

function onPaste() {
  const raw = $(`[name=${PASTE}]`).value;
  delete clientErrors[PASTE];
  if (raw.length > PASTE_LIMIT) {
    clientErrors[PASTE] = `config.json is ${kib(raw.length)}; the limit is ${kib(PASTE_LIMIT)} (a real one is a few KiB). The model is unchanged.`;
    return false;
  }
  const text = raw.trim();
  if (!text) { pasted = null; return true; }
  let obj;
  try { obj = JSON.parse(text); } catch (e) {
    clientErrors[PASTE] = `config.json is not valid JSON (${e.message}); the model is unchanged.`;
    return false;
  }
  if (!obj || typeof obj !== "object" || Array.isArray(obj)) {
    clientErrors[PASTE] = "config.json must be a JSON object like {\"hidden_size\": 4096, …}; the model is unchanged.";
    return false;
  }
  pasted = obj;
  fillDims(obj);
  $("#f-model").value = "custom";
  syncCustomVisibility();
  return true;
}

function setField(name, value) {
  const inputs = $$(`[name="${CSS.escape(name)}"]`, form);
  if (!inputs.length) return false;
  for (const input of inputs) {
    if (input.type === "radio") input.checked = String(value) === input.value;
    else if (input.type === "checkbox") input.checked = value === true;
    else if (input.dataset.type === "tribool") input.value = value === true ? "true" : value === false ? "false" : "";
    else if (input.dataset.type === "autobool") input.value = String(value);
    else if (input.dataset.type === "csv") input.value = Array.isArray(value) ? value.join(", ") : String(value);
    else if (name === "data.lengths" && value === "fixed") input.value = "";   // the default: its empty option
    else input.value = value === null || value === undefined ? "" : typeof value === "string" ? value : JSON.stringify(value);
  }
  return true;
}

// post_training's sub-blocks whose keys have fields of their own (the reward / critic blocks are one JSON field each)
const POST_BLOCKS = ["generator", "packing", "offload_between_updates"];

// The post-training fields that only one trainer reads ([data-when]) are shown where they apply, and wherever they
// hold a value (a share link's, or one kept after the trainer changed), so the engine's message on it stays in view.
function syncPostVisibility() {
  const val = (n) => (form.elements[n] && form.elements[n].value) || "";
  const trainer = val("post_training.trainer"), gen = val("post_training.generator.engine");
  const method = val("post_training.method"), version = releaseOf(val("post_training.trainer_version"));
  // rpo_alpha: DPOTrainer's (dpo, ipo) in TRL up to 0.28 (a version must be given: the default is the newest),
  // ms-swift and LLaMA-Factory (pref_ftx): postplan.py _check_rpo
  const rpo = ["dpo", "ipo"].includes(method) && (["ms-swift", "llamafactory"].includes(trainer) ||
              (["", "trl"].includes(trainer) && version !== null && older(version, [0, 29, 0])));
  const when = { verl: trainer === "verl", offload: ["verl", "ms-swift", "openrlhf"].includes(trainer),
                 layered: trainer === "verl" && gen !== "hf" && form.elements.method.value !== "full", rpo };
  for (const box of $$("[data-when]", form)) {
    const held = $$("input", box).some((i) => (i.type === "checkbox" ? i.checked : i.value.trim() !== ""));
    box.hidden = !(when[box.dataset.when] || held);
  }
  syncSleepDefault(trainer, version);
}

// "1.14" -> [1, 14, 0]; null when it is no release number (the engine names it)
function releaseOf(text) {
  const t = text.trim();
  return /^\d{1,4}(\.\d{1,4}){0,2}$/.test(t) ? [...t.split(".").map(Number), 0, 0].slice(0, 3) : null;
}
function older(v, than) {
  for (let i = 0; i < 3; i++) if (v[i] !== than[i]) return v[i] < than[i];
  return false;
}

// The sleep level's empty option says what the engine takes for it (py/app/render.py SLEEP_DEFAULTS): verl's own
// level (1 up to 0.5 and with layered_summon, 2 from 0.6; postplan.verl_sleep_level), 0 for the others.
function syncSleepDefault(trainer, version) {
  const sleep = form.elements["post_training.generator.sleep"];
  if (!sleep || !sleep.dataset.defaults) return;
  let labels;
  try { labels = JSON.parse(sleep.dataset.defaults); } catch { return; }
  let key = trainer || "trl";
  if (trainer === "verl") {
    const layered = form.elements["post_training.generator.layered_summon"];
    key = layered && layered.checked ? "verl-layered"
      : version !== null && older(version, [0, 6, 0]) ? "verl-1" : "verl-2";
  }
  if (labels[key]) sleep.options[0].textContent = labels[key];
}

function loadShareLink() {
  const m = location.hash.match(/^#plan=(.*)$/s);
  if (!m) return false;
  if (m[1].length > LINK_LIMIT) {
    clientErrors.plan = `The share link's plan is ${kib(m[1].length)}; the limit is ${kib(LINK_LIMIT)}. Showing the default plan.`;
    return false;
  }
  let plan;
  try { plan = JSON.parse(decodeURIComponent(m[1])); } catch (e) {
    clientErrors.plan = `The share link's plan is not valid JSON (${e.message}); showing the default plan.`;
    return false;
  }
  if (!plan || typeof plan !== "object" || Array.isArray(plan)) { clientErrors.plan = "The share link's plan must be a JSON object."; return false; }
  const unknown = [];
  for (const [key, value] of Object.entries(plan)) {
    if (key === "schema") continue;
    if (key === "model" && value && typeof value === "object") {
      $(`[name=${PASTE}]`).value = JSON.stringify(value, null, 2); $("#paste-config").open = true; onPaste(); continue;
    }
    if (key === "gpu" && value && typeof value === "object") {
      setField("gpu", "custom"); setField("gpu.name", value.name ?? "Custom GPU"); setField("gpu.memory_gib", value.memory_gib ?? ""); continue;
    }
    if (key === "run") { setField("run", value); continue; }   // one JSON field holds the whole run block
    if (key === "post_training" && value && typeof value === "object" && !Array.isArray(value)) {
      for (const [k2, v2] of Object.entries(value)) {      // one level deeper: post_training.generator.* and the like
        if (v2 && typeof v2 === "object" && !Array.isArray(v2) && POST_BLOCKS.includes(k2)) {
          for (const [k3, v3] of Object.entries(v2)) if (!setField(`post_training.${k2}.${k3}`, v3) && v3 !== null) unknown.push(`post_training.${k2}.${k3}`);
        } else if (!setField(`post_training.${k2}`, v2) && v2 !== null) unknown.push(`post_training.${k2}`);
      }
      continue;
    }
    if (key === "lora" && value && typeof value === "object" && "targets" in value) targetsOverride = value.targets;
    if (value && typeof value === "object" && !Array.isArray(value)) {
      for (const [k2, v2] of Object.entries(value)) if (!(key === "lora" && k2 === "targets") && !setField(`${key}.${k2}`, v2)) unknown.push(`${key}.${k2}`);
      continue;
    }
    if (!setField(key, value)) unknown.push(key);
  }
  if (unknown.length) clientErrors.plan = "The share link has keys this page does not know (ignored): " + unknown.join(", ");
  prevModel = $("#f-model").value === "custom" ? prevModel : $("#f-model").value;
  prevGpu = $("#f-gpu").value === "custom" ? prevGpu : $("#f-gpu").value;
  syncCustomVisibility();
  syncPostVisibility();
  document.body.dataset.method = form.elements.method.value;
  return true;
}

// ---- buttons ---------------------------------------------------------------------------------------

async function copyText(text, button) {
  try { await navigator.clipboard.writeText(text); } catch {
    const ta = el("textarea"); ta.value = text; document.body.append(ta); ta.select();
    document.execCommand("copy"); ta.remove();
  }
  const label = button.textContent;
  button.textContent = "Copied ✓";
  setTimeout(() => { button.textContent = label; }, 1500);
}

$("#copy-config").addEventListener("click", (e) => copyText($("[data-export='ds_config']").textContent, e.currentTarget));
$("#copy-link").addEventListener("click", (e) => copyText($("#share-url").value, e.currentTarget));
$("#copy-embed").addEventListener("click", (e) => copyText($("#embed-snippet").value, e.currentTarget));
$("#download-config").addEventListener("click", () =>
  save(new Blob([$("[data-export='ds_config']").textContent + "\n"], { type: "application/json" }), "ds_config.json"));

// ---- theme: light / dark (prefers-color-scheme unless the toggle says otherwise; remembered) ---------

const darkQuery = matchMedia("(prefers-color-scheme: dark)");
const theme = () => html.dataset.theme || (darkQuery.matches ? "dark" : "light");
function paintThemeToggle() { $("#theme-toggle").setAttribute("aria-pressed", String(theme() === "dark")); }
$("#theme-toggle").addEventListener("click", () => {
  html.dataset.theme = theme() === "dark" ? "light" : "dark";
  try { localStorage.setItem("zerocalc-theme", html.dataset.theme); } catch { /* not remembered */ }
  paintThemeToggle();
});
darkQuery.addEventListener("change", paintThemeToggle);
paintThemeToggle();

// ---- the breakdown as CSV and as a PNG chart (drawn from the figures on screen) ---------------------

function breakdown() {
  const rows = $$("#rows tr[data-comp]").map((tr) => {
    const cell = tr.querySelector("[data-out]");
    return { key: tr.dataset.comp, label: tr.querySelector("th").textContent.trim(), bytes: Number(cell.dataset.bytes),
             text: cell.textContent.trim(), share: tr.querySelector(".share").textContent.trim() };
  });
  const total = (key, label) => { const d = $(`.totals [data-out="${key}"]`) || $(`[data-out="${key}"]`);
    return { key: key.replace("per_gpu.", ""), label, bytes: Number(d.dataset.bytes), text: d.textContent.trim(), share: "" }; };
  const totals = [total("per_gpu.peak_allocated_bytes", "Peak allocated"), total("per_gpu.peak_reserved_bytes", "Peak reserved"),
                  total("per_gpu.device_used_bytes", "Device used (nvidia-smi)"), total("per_gpu.capacity_bytes", "GPU capacity")];
  return { rows, totals };
}

// A cell as CSV: quoted, and never read as a formula by a spreadsheet (=, +, -, @ at the start).
const csvCell = (v) => { let t = String(v); if (/^[=+\-@\t\r]/.test(t)) t = "'" + t;
  return /[",\n\r']/.test(t) || t !== String(v) ? `"${t.replace(/"/g, '""')}"` : t; };

function breakdownCSV() {
  const { rows, totals } = breakdown();
  const lines = [["component", "label", "bytes", "GiB", "share"]];
  for (const r of [...rows, ...totals]) lines.push([r.key, r.label, r.bytes, r.text.replace(/ GiB$/, ""), r.share]);
  return lines.map((l) => l.map(csvCell).join(",")).join("\r\n") + "\r\n";
}

function save(blob, name) {
  const a = el("a", { href: URL.createObjectURL(blob), download: name });
  document.body.append(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

function drawChart() {
  const { rows, totals } = breakdown();
  const css = getComputedStyle(html);
  const v = (name) => css.getPropertyValue(name).trim();
  const W = 960, pad = 32, rowH = 30, barY = 96, barH = 44;
  const H = barY + barH + 40 + rows.length * rowH + 2 * rowH + pad;
  const canvas = el("canvas", { width: String(W * 2), height: String(H * 2) });
  const g = canvas.getContext("2d");
  g.scale(2, 2);
  g.fillStyle = v("--panel"); g.fillRect(0, 0, W, H);
  g.fillStyle = v("--ink"); g.font = "600 20px system-ui, sans-serif"; g.textBaseline = "middle";
  const model = $("[data-view='model.name']").textContent, cluster = $("[data-view='cluster.topology']").textContent;
  g.fillText(`Per-GPU memory at the peak: ${model}, ${cluster}`.slice(0, 90), pad, 34);
  g.font = "15px system-ui, sans-serif"; g.fillStyle = v("--muted");
  const used = totals[2], cap = totals[3];
  g.fillText(`${used.text} used (nvidia-smi) of ${cap.text} · ${$("[data-out='fits']").textContent}`.slice(0, 110), pad, 64);
  const scale = (W - 2 * pad) / Math.max(cap.bytes, rows.reduce((a, r) => a + r.bytes, 0), 1);
  let x = pad;
  for (const r of rows) { const w = r.bytes * scale; g.fillStyle = v(`--c-${r.key}`) || "#888"; g.fillRect(x, barY, w, barH); x += w; }
  g.strokeStyle = v("--ink"); g.setLineDash([6, 4]); g.lineWidth = 2;
  const cx = pad + cap.bytes * scale;
  g.beginPath(); g.moveTo(cx, barY - 10); g.lineTo(cx, barY + barH + 10); g.stroke(); g.setLineDash([]);
  let y = barY + barH + 40;
  g.font = "15px system-ui, sans-serif";
  for (const r of [...rows, ...totals]) {
    if (r.share) { g.fillStyle = v(`--c-${r.key}`) || "#888"; g.fillRect(pad, y - 8, 16, 16); }
    g.fillStyle = v("--ink"); g.textAlign = "left"; g.fillText(r.label, pad + 26, y);
    g.textAlign = "right"; g.fillText(r.text, W - pad - 90, y);
    g.fillStyle = v("--muted"); g.fillText(r.share, W - pad, y);
    y += rowH;
  }
  return canvas;
}

$("#copy-csv").addEventListener("click", (e) => copyText(breakdownCSV(), e.currentTarget));
$("#download-csv").addEventListener("click", () => save(new Blob([breakdownCSV()], { type: "text/csv" }), "zerocalc-breakdown.csv"));
$("#download-png").addEventListener("click", () => drawChart().toBlob((b) => save(b, "zerocalc-breakdown.png"), "image/png"));

// ---- wiring and boot --------------------------------------------------------------------------------

form.addEventListener("submit", (e) => e.preventDefault());
form.addEventListener("input", (e) => {
  touched = true;
  const name = e.target.name;
  if (name === "model") onModelSelect();
  if (name === "gpu") onGpuSelect();
  if (name === "method") document.body.dataset.method = e.target.value;
  if (name === "method" || name.startsWith("post_training.")) syncPostVisibility();
  if (name === PASTE && !onPaste()) { renderErrors(clientErrors); return; }
  request();
});

const shared = loadShareLink();
syncPostVisibility();
showShare(location.hash.startsWith("#plan=") ? location.hash : $("#share-url").value.replace(/^[^#]*/, ""));
syncCustomVisibility();
if (shared) { document.body.dataset.stale = "true"; status("loading", "Starting the engine… computing the shared plan."); }
if (Object.keys(clientErrors).length) renderErrors(clientErrors);

const BOOT_TIMEOUT_MS = 90_000;   // a slow phone takes ~30 s; a runtime that never answers must not spin forever

function failed(reason) {
  if (engine) return;
  engineFailed = true;
  html.dataset.engine = "failed";
  html.dataset.engineError = reason;
  const what = document.body.dataset.stale === "true" ? "The figures shown are still the default plan's, not this plan's"
                                                      : "The figures shown are for the default plan";
  status("failed", `The engine could not start (${reason}). ${what}; the form and the share link still work. Reload to retry.`);
  shareFromForm();
}

async function boot() {
  const watchdog = setTimeout(() => { if (!engine) failed(`no answer after ${BOOT_TIMEOUT_MS / 1000} s`); }, BOOT_TIMEOUT_MS);
  try {
    engine = await engineReady;
    html.dataset.engineBoot = engine.boot || "pyscript";   // "snapshot" | "normal" (assets/worker.js)
    if (engine.times) html.dataset.engineTimes = JSON.stringify(engine.times);   // worker-side milestones, ms
    // Untouched default page: its pre-rendered figures are the engine's (tests/test_page_site.py), so the
    // engine is ready as soon as it can answer. Anything typed or shared before now is computed first.
    if (touched || shared || embedded || Object.keys(clientErrors).length) request();
    else markReady();
  } catch (err) {
    failed(String(err && err.message ? err.message : err));
  } finally {
    clearTimeout(watchdog);
  }
}

// A share link pasted into this tab's address bar: load it like a fresh visit.
const DEFAULT_TARGETS = $$("[name='lora.targets']:checked").map((i) => i.value);
window.addEventListener("hashchange", () => {
  if (!location.hash.startsWith("#plan=") || location.hash === lastShare) return;
  clientErrors = {};
  pasted = null;
  form.reset();                       // back to the default plan (the HTML's own values) ...
  targetsOverride = DEFAULT_TARGETS;  // ... whose targets the rebuilt checkboxes no longer carry
  prevModel = $("#f-model").value;
  prevGpu = $("#f-gpu").value;
  loadShareLink();                    // ... then the link's keys on top
  syncCustomVisibility();
  syncPostVisibility();
  document.body.dataset.method = form.elements.method.value;
  renderErrors(clientErrors);
  request();
});
boot();

// ---- offline and installable: the service worker (sw.js, generated by scripts/build_site.py) -------------
// Registered once the engine is up, off the boot's critical path. A new deploy installs beside the running one; the page
// offers a reload, which lets it take over (the old version keeps serving until then: never a mix).
function registerServiceWorker() {
  if (!("serviceWorker" in navigator) || !/^https?:$/.test(location.protocol) || /[?&]nosw\b/.test(location.search)) return;
  const offer = (reg) => {
    if (!reg.waiting || !navigator.serviceWorker.controller) return;
    $("#sw-update").hidden = false;
    html.dataset.swUpdate = "ready";
  };
  navigator.serviceWorker.register("./sw.js").then((reg) => {
    offer(reg);
    reg.addEventListener("updatefound", () => {
      const sw = reg.installing;
      sw?.addEventListener("statechange", () => { if (sw.state === "installed") offer(reg); });
    });
    navigator.serviceWorker.ready.then(() => { html.dataset.offline = "ready"; });
  }).catch(() => { /* blocked (private mode, tests): the page works online as before */ });
  let reloading = false;
  navigator.serviceWorker.addEventListener("controllerchange", () => {
    if (html.dataset.swUpdate !== "accepted" || reloading) return;
    reloading = true;
    location.reload();
  });
  $("#sw-reload").addEventListener("click", () => {
    navigator.serviceWorker.getRegistration().then((reg) => {
      if (!reg || !reg.waiting) return;
      html.dataset.swUpdate = "accepted";
      reg.waiting.postMessage("skip-waiting");
    });
  });
}
// After the engine has booted (or failed): the precache download must not compete with the runtime's own.
engineReady.then(registerServiceWorker, registerServiceWorker);
