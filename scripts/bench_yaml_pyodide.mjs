// Cost of loading the vendored PyYAML (assets/vendor/pyyaml, scripts/vendor_yaml.py) into Pyodide and parsing
// an axolotl YAML: `node scripts/bench_yaml_pyodide.mjs` from the repository root. Run 0 is the cold import.
const { loadPyodide } = await import(process.cwd() + "/node_modules/pyodide/pyodide.mjs");
import fs from "node:fs";
const root = "" + process.cwd() + "/assets/vendor/pyyaml/";
const idx = JSON.parse(fs.readFileSync(root + "files.json", "utf8"));
const sample = fs.readFileSync("" + process.cwd() + "/tests/data/configs/axolotl/llama-3__fft-8b-liger-fsdp.yaml", "utf8");
const py = await loadPyodide();
const runs = [];
for (let i = 0; i < 5; i++) {
  py.runPython("import sys; [sys.modules.pop(m) for m in list(sys.modules) if m == 'yaml' or m.startswith('yaml.')]");
  const base = "/tmp/pyyaml" + i;
  const t0 = performance.now();
  py.FS.mkdirTree(base + "/yaml");
  for (const f of idx.files) py.FS.writeFile(base + "/" + f.path, fs.readFileSync(root + f.path));
  const t1 = performance.now();
  py.globals.set("sample", sample);
  py.globals.set("base", base);
  py.runPython("import sys, importlib; sys.path.insert(0, base); importlib.invalidate_caches(); import yaml");
  const t2 = performance.now();
  py.runPython("yaml.safe_load(sample)");
  const t3 = performance.now();
  py.runPython("sys.path.pop(0)");
  runs.push({write_ms: +(t1 - t0).toFixed(1), import_ms: +(t2 - t1).toFixed(1), first_parse_ms: +(t3 - t2).toFixed(1)});
}
console.log(JSON.stringify({pyyaml: idx.version, bytes: idx.files.reduce((a, f) => a + f.bytes, 0), runs}));
