// "Import your config" box: paste or drop an axolotl / LLaMA-Factory / torchtune / accelerate YAML, a
// TrainingArguments / TRL JSON or a ds_config.json; the engine (py/app/importer.py via the worker's
// CALLS["import_config"]) returns the plan it describes and every key it could not map. Applying sets
// location.hash to the imported plan's share fragment; app.js reloads the form on hashchange.
// YAML needs PyYAML: its pure-Python files (assets/vendor/pyyaml, same origin) are fetched only the first
// time a non-JSON file is imported. Everything user-supplied reaches the DOM through textContent.
import { engine } from "./engine.js";

const MAX_BYTES = 200 * 1024;
let yamlFiles = null;   // {"yaml/x.py": text} once fetched
let yamlSent = false;

const $ = (s) => document.querySelector(s);

function isJson(text) {
  try { JSON.parse(text); return true; } catch (e) { return false; }
}

async function fetchYaml() {
  const base = new URL("./vendor/pyyaml/", import.meta.url);
  const r = await fetch(new URL("files.json", base));
  if (!r.ok) throw new Error("this build of the page has no YAML parser (scripts/vendor_yaml.py did not run); paste JSON instead");
  const index = await r.json();
  const out = {};
  await Promise.all(index.files.map(async (f) => { out[f.path] = await (await fetch(new URL(f.path, base))).text(); }));
  return out;
}

function currentPlan() {
  const m = location.hash.match(/^#plan=(.*)$/s);
  if (!m) return {};
  try { const p = JSON.parse(decodeURIComponent(m[1])); return p && typeof p === "object" && !Array.isArray(p) ? p : {}; }
  catch (e) { return {}; }
}

function show(value) {
  return typeof value === "string" ? value : JSON.stringify(value);
}

function fillList(ul, items, line) {
  ul.replaceChildren();
  for (const it of items) {
    const li = document.createElement("li");
    li.textContent = line(it);
    ul.append(li);
  }
}

let lastAnswer = null;

// The same per-key report as `zerocalc import` prints (zerocalc/imports/report.py): detected format with its
// confidence and evidence, other candidates, counts per kind, every unmapped key with its kind. Text only.
const KIND_LABEL = {
  no_effect: "no memory effect", not_modelled: "not modelled", not_mapped: "not mapped",
  unknown: "not read", empty: "empty (trainer default)", read: "read, no plan key of its own",
};

function reportLine(id, before) {
  let el = document.getElementById(id);
  if (!el) {
    el = document.createElement("p");
    el.id = id;
    el.dataset.import = id.replace("import-", "");
    before.before(el);
  }
  return el;
}

function showDetection(answer) {
  const lists = $("#import-result .import-lists") || $("#import-mapped");
  const det = reportLine("import-detect", lists);
  const rep = answer.report || {};
  const cands = rep.candidates || [];
  const conf = typeof rep.confidence === "number" ? rep.confidence.toFixed(2) : "given";
  let text = `Detected format: ${answer.format} (confidence ${conf})`;
  if (cands.length) text += ` from ${cands[0].evidence.slice(0, 3).join("; ")}`;
  text += ".";
  if (cands.length > 1) {
    text += rep.ambiguous ? " The file also matches " : " Also considered: ";
    text += cands.slice(1).map((c) => `${c.format} (score ${c.score.toFixed(2)}: ${c.evidence.slice(0, 2).join("; ")})`).join(", ") + ".";
  }
  det.textContent = text;
  det.dataset.ambiguous = rep.ambiguous ? "true" : "false";
  const counts = reportLine("import-counts", lists);
  const c = rep.counts || {};
  const parts = [`${c.mapped ?? answer.applied.length} mapped from the file`, `${c.defaults ?? 0} trainer defaults`];
  for (const k of Object.keys(KIND_LABEL)) if (c[k]) parts.push(`${c[k]} ${KIND_LABEL[k]}`);
  counts.textContent = `Keys: ${parts.join(" · ")}.`;
}

function kindOf(answer, key) {
  const groups = (answer.report && answer.report.unmapped) || {};
  for (const [kind, items] of Object.entries(groups)) if (items.some((n) => n.key === key)) return kind;
  return "not_mapped";
}

async function runImport() {
  const text = $("#import-text").value;
  const status = $("#import-status");
  const result = $("#import-result");
  result.hidden = true;
  $("#import-apply").disabled = true;
  lastAnswer = null;
  const size = new TextEncoder().encode(text).length;
  if (size > MAX_BYTES) {
    status.textContent = `The pasted config is ${Math.floor(size / 1024)} KB; configs over 200 KB are refused.`;
    status.dataset.state = "error";
    return;
  }
  status.dataset.state = "busy";
  status.textContent = "Reading…";
  try {
    const api = await engine;
    const request = { text, plan: currentPlan(), name: $("#import-text").dataset.filename || "config" };
    if (!isJson(text) && !yamlSent) {
      status.textContent = "Loading the YAML parser…";
      yamlFiles = yamlFiles || await fetchYaml();
      request.yaml_files = yamlFiles;
    }
    const answer = JSON.parse(await api.call("import_config", JSON.stringify(request)));
    if (request.yaml_files && !answer.fatal) yamlSent = true;
    if (answer.fatal) throw new Error(answer.fatal);
    if (answer.error) {
      status.textContent = answer.error;
      status.dataset.state = "error";
      return;
    }
    lastAnswer = answer;
    const conf = answer.report && typeof answer.report.confidence === "number" ?
      ` (confidence ${answer.report.confidence.toFixed(2)})` : "";
    status.textContent = `Read as ${answer.format}${conf}: ${answer.applied.length} keys mapped, ` +
      `${answer.not_represented.length} not in the plan.`;
    status.dataset.state = "ok";
    result.dataset.format = answer.format;
    showDetection(answer);
    fillList($("#import-mapped"), answer.applied, (a) =>
      `${a.key} → ${a.plan_key ?? "(checked)"} = ${show(a.value)}${a.default ? " (trainer default)" : ""}`);
    const order = Object.keys(KIND_LABEL);
    const unmapped = answer.not_represented.map((n) => ({ ...n, kind: kindOf(answer, n.key) }))
      .sort((a, b) => order.indexOf(a.kind) - order.indexOf(b.kind));
    fillList($("#import-unmapped"), unmapped, (n) => `${n.key}: ${n.reason}`);
    $("#import-unmapped").querySelectorAll("li").forEach((li, i) => {
      li.dataset.kind = unmapped[i].kind;
      li.title = KIND_LABEL[unmapped[i].kind] || "";
    });
    fillList($("#import-warnings"), answer.warnings, (w) => w.message);
    $("#import-warnings-wrap").hidden = answer.warnings.length === 0;
    result.hidden = false;
    $("#import-apply").disabled = false;
  } catch (e) {
    status.textContent = `Import failed: ${e.message}`;
    status.dataset.state = "error";
  }
}

function applyImport() {
  if (!lastAnswer) return;
  location.hash = lastAnswer.hash;
  $("#import-status").textContent = `Applied the ${lastAnswer.format} config to the form.`;
}

function readFile(file) {
  if (!file) return;
  if (file.size > MAX_BYTES) {
    $("#import-status").textContent = `${file.name} is ${Math.floor(file.size / 1024)} KB; configs over 200 KB are refused.`;
    $("#import-status").dataset.state = "error";
    return;
  }
  file.text().then((t) => {
    $("#import-text").value = t;
    $("#import-text").dataset.filename = file.name;
    runImport();
  });
}

function init() {
  const box = $("#import");
  if (!box) return;
  $("#import-run").addEventListener("click", runImport);
  $("#import-apply").addEventListener("click", applyImport);
  $("#import-file").addEventListener("change", (e) => readFile(e.target.files[0]));
  $("#import-text").addEventListener("input", () => { delete $("#import-text").dataset.filename; });
  box.addEventListener("dragover", (e) => { e.preventDefault(); box.classList.add("dragging"); });
  box.addEventListener("dragleave", () => box.classList.remove("dragging"));
  box.addEventListener("drop", (e) => {
    e.preventDefault();
    box.classList.remove("dragging");
    readFile(e.dataTransfer.files[0]);
  });
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
else init();
