// "Paste a crash log": the crash-log doctor (py/app/doctor.py, zerocalc.doctor) in the page's engine worker.
// The log is read from the textarea, checked against the size limit, and handed to the worker only: it is
// never sent over the network and never inserted as HTML (every string goes in with textContent).
// The plan is the page's current plan: window.zerocalcPlan() when the app provides it, else the share link's
// `#plan=<URL-encoded plan-v1 JSON>` (keys that differ from the default), else none.
import { engine } from "./engine.js";

const MAX_BYTES = 200 * 1024;   // = MAX_LOG_BYTES in py/app/doctor.py

function currentPlan() {
  if (typeof window.zerocalcPlan === "function") {
    try { return { plan: window.zerocalcPlan() }; } catch (e) { /* fall back to the link */ }
  }
  const m = location.hash.match(/^#plan=(.*)$/s);
  if (!m) return { plan: {} };     // the default plan
  try {
    const plan = JSON.parse(decodeURIComponent(m[1]));
    return plan && typeof plan === "object" && !Array.isArray(plan) ? { plan } : { plan: null, note: "the share link's plan is not a JSON object" };
  } catch (e) { return { plan: null, note: `the share link's plan is not valid JSON (${e.message})` }; }
}

function el(tag, text, attrs = {}) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

function mergeChanges(plan, changes) {
  const out = { ...plan };
  for (const [k, v] of Object.entries(changes)) {
    out[k] = v && typeof v === "object" && !Array.isArray(v) && out[k] && typeof out[k] === "object" ? { ...out[k], ...v } : v;
  }
  return out;
}

function render(root, answer, plan) {
  const out = root.querySelector("#doctor-out");
  out.replaceChildren();
  const d = answer.display, r = answer.result;
  const dl = el("dl", null, { class: "doctor-facts" });
  const fact = (label, text, attrs) => { dl.append(el("dt", label), el("dd", text, attrs)); };
  fact("Kind", d.kind, { "data-doctor": "kind", "data-value": r.kind });
  fact("Phase", d.phase, { "data-doctor": "phase", "data-value": r.phase, "data-run-phase": r.run_phase });
  fact("Device", d.device, { "data-doctor": "device" });
  for (const f of d.fields) fact(f.label, f.text, { "data-doctor": f.key, "data-bytes": String(f.bytes) });
  if (r.kind === "cuda_oom" && r.reserved_unallocated_bytes !== null) fact("Fragmentation", d.fragmentation, { "data-doctor": "fragmentation", "data-value": String(r.fragmentation) });
  if (d.nccl) fact("Collective", d.nccl, { "data-doctor": "nccl" });
  out.append(dl);
  if (answer.plan_error) out.append(el("p", answer.plan_error, { class: "doctor-note", "data-doctor": "plan-error" }));
  if (d.findings.length) {
    out.append(el("h3", "Findings"));
    const ul = el("ul", null, { class: "doctor-findings" });
    for (const f of d.findings) {
      const li = el("li", null, { "data-finding": f.id, "data-severity": f.severity });
      li.append(el("b", `${f.severity}: `), el("span", f.message));
      ul.append(li);
    }
    out.append(ul);
  }
  if (d.changes.length) {
    out.append(el("h3", "Plan changes"));
    const ul = el("ul", null, { class: "doctor-changes", "data-doctor": "plan-changes" });
    for (const c of d.changes) ul.append(el("li", c));
    out.append(ul);
    if (plan) {
      const b = el("button", "Apply to the plan", { type: "button", id: "doctor-apply" });
      b.addEventListener("click", () => {
        location.hash = "plan=" + encodeURIComponent(JSON.stringify(mergeChanges(plan, r.plan_changes)));
      });
      out.append(b);
    }
  }
}

function setup() {
  const root = document.getElementById("doctor");
  if (!root) return;
  const area = root.querySelector("textarea[name=crash_log]");
  const msg = root.querySelector("#doctor-msg");
  const run = root.querySelector("#doctor-run");
  const say = (text, state) => { msg.textContent = text; root.dataset.state = state; };
  async function diagnose() {
    const text = area.value;
    const size = new TextEncoder().encode(text).length;
    root.querySelector("#doctor-out").replaceChildren();
    if (size > MAX_BYTES) {
      say(`The log is ${Math.round(size / 1024)} KB; paste at most ${MAX_BYTES / 1024} KB: the error message and the traceback above it are enough.`, "too-large");
      return;
    }
    if (!text.trim()) { say("Paste a log first.", "empty"); return; }
    const { plan, note } = currentPlan();
    say("Reading the log…", "busy");
    let answer;
    try {
      const api = await engine;
      answer = JSON.parse(await api.call("doctor", JSON.stringify({ log: text, plan })));
    } catch (e) { say(`The engine is not available: ${e.message}`, "failed"); return; }
    if (answer.fatal) { say(`Engine error: ${answer.fatal}`, "failed"); return; }
    if (answer.error) { say(answer.error, answer.too_large ? "too-large" : "failed"); return; }
    say(note ? `Read without a plan: ${note}.` : answer.display.with_plan ? "Read against the current plan." : "Read without a plan.", "done");
    render(root, answer, plan);
  }
  run.addEventListener("click", diagnose);
  area.addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); diagnose(); } });
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup);
else setup();
