# zerocalc: the two commands people run are `make serve` and `make test` (see README).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
PLAN ?= examples/default-plan.json

.PHONY: serve test site vendor venv tools-venv chromium trace trace-stacks trace-families trace-oneoff trace-seq2seq trace-bart trace-bert trace-run trace-post dsprobe dsprobe-check fsdpprobe fsdpprobe-check fidelity post-fidelity allocator-cache fragmentation archgen bench bench-page kernelbench clean

# Python environment: engine tests + browser driver. Re-made when pyproject.toml changes.
$(VENV)/.base: pyproject.toml
	@echo "zerocalc: setting up $(VENV) (pytest, hypothesis, playwright; about a minute on a fresh machine) ..."
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -U pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

# Ground-truth tools (torch CPU wheel, deepspeed without prebuilt ops, transformers, peft, accelerate).
$(VENV)/.tools: $(VENV)/.base
	@echo "zerocalc: installing the ground-truth tools into $(VENV) (torch CPU, deepspeed, transformers, peft; a few minutes) ..."
	$(PY) -m pip install -q torch==2.13.0
	DS_BUILD_OPS=0 $(PY) -m pip install -q -e '.[dev,tools]'
	touch $@

venv: $(VENV)/.base
tools-venv: $(VENV)/.tools

# Debian's Chromium for the browser tests (playwright cannot download a browser here).
chromium:
	@test -n "$(CHROMIUM_SKIP_APT)" || command -v /usr/bin/chromium >/dev/null || { echo "zerocalc: installing Debian's chromium for the browser tests ..."; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

# Runtime files (PyScript, Pyodide, MicroPython) from the npm registry into assets/vendor/.
vendor: node_modules/.package-lock.json
	$(PYTHON) scripts/vendor.py
	$(PYTHON) scripts/vendor_yaml.py
node_modules/.package-lock.json: package.json package-lock.json
	@echo "zerocalc: npm ci (PyScript and Pyodide from the npm registry) ..."
	npm ci --no-audit --no-fund

# The deployable static folder _site/ (page, py/, vendored runtime, pre-rendered defaults).
site: vendor
	$(PYTHON) scripts/build_site.py

serve: site
	@echo "zerocalc: serving on http://localhost:$(PORT)/  (Ctrl-C to stop)"
	cd _site && $(PYTHON) -m http.server $(PORT) --bind 127.0.0.1

test: tools-venv chromium site
	$(PY) -m pytest

trace: tools-venv
	$(PY) -m tools.memtrace $(PLAN)

# Stack grid (tools/memtrace/stacks.py): pinned transformers eras in their own venvs (not part of `make test`).
.venv-tf445/.ok:
	$(PYTHON) -m venv .venv-tf445
	.venv-tf445/bin/pip install -q torch==2.13.0 transformers==4.45.2 "peft<0.12" accelerate numpy
	touch $@
.venv-tf448/.ok:
	$(PYTHON) -m venv .venv-tf448
	.venv-tf448/bin/pip install -q torch==2.13.0 "transformers>=4.48,<4.49" "peft>=0.14,<0.15" accelerate numpy
	touch $@

.venv-torchtune/.ok:
	$(PYTHON) -m venv .venv-torchtune
	.venv-torchtune/bin/pip install -q torch==2.13.0 torchtune==0.6.1 torchao==0.10.0 numpy
	touch $@
.venv-litgpt/.ok:
	$(PYTHON) -m venv .venv-litgpt
	.venv-litgpt/bin/pip install -q torch==2.13.0 litgpt==0.5.13 numpy
	touch $@
# torchtitan 0.3.0 imports triton at import time (distributed/minimal_async_ep/kernels.py), even on CPU
.venv-torchtitan/.ok:
	$(PYTHON) -m venv .venv-torchtitan
	.venv-torchtitan/bin/pip install -q torch==2.13.0 torchtitan==0.3.0 triton numpy
	touch $@

trace-stacks: tools-venv .venv-tf445/.ok .venv-tf448/.ok .venv-torchtune/.ok .venv-litgpt/.ok .venv-torchtitan/.ok
	$(PY) -m tools.memtrace.stacks run
	PYTHONPATH=$(CURDIR)/py .venv-tf445/bin/python -m tools.memtrace.stacks run
	PYTHONPATH=$(CURDIR)/py .venv-tf448/bin/python -m tools.memtrace.stacks run
	PYTHONPATH=$(CURDIR)/py .venv-torchtune/bin/python -m tools.memtrace.stacks run
	PYTHONPATH=$(CURDIR)/py .venv-litgpt/bin/python -m tools.memtrace.stacks run
	PYTHONPATH=$(CURDIR)/py .venv-torchtitan/bin/python -m tools.memtrace.stacks run
	$(PY) -m tools.memtrace.stacks defaults
	$(PY) -m tools.memtrace.stacks readme

# Family grid (tools/memtrace/families.py): one small config per decoder family, full / LoRA / eager / checkpointed;
# fixtures in tools/memtrace/golden/families/, held by tests/test_family_grid.py (not part of `make test`)
trace-families: tools-venv
	$(PY) -m tools.memtrace.families

trace-oneoff: tools-venv
	$(PY) -m tools.memtrace.oneoff

# Encoder-decoder grid (tools/memtrace/seq2seq.py): T5, T5 v1.1 and M2M100 as AutoModelForSeq2SeqLM; fixtures in
# tools/memtrace/golden/seq2seq/, held by tests/test_seq2seq_grid.py
trace-seq2seq: tools-venv
	$(PY) -m tools.memtrace.seq2seq

# BART-lineage causal decoders (tools/memtrace/bart.py): BART, mBART, Marian, Pegasus as AutoModelForCausalLM;
# fixtures in tools/memtrace/golden/bart/, held by tests/test_bart_grid.py
trace-bart: tools-venv
	$(PY) -m tools.memtrace.bart

# BERT-lineage causal LMs (tools/memtrace/bert.py): RoBERTa and its copies, ERNIE, BertGeneration, ELECTRA, BigBird,
# RoFormer, RoBERTa-PreLayerNorm, XLM-RoBERTa-XL, Megatron-BERT as *ForCausalLM (is_decoder); tests/test_bert_grid.py
trace-bert: tools-venv
	$(PY) -m tools.memtrace.bert

# Whole runs (tools/memtrace/rungrid.py): HF Trainer load, init, two steps, eval, save on fake tensors, and the
# DeepSpeed / FSDP probes' load and save phases; fixtures in tools/memtrace/golden/run/ (not part of `make test`)
trace-run: tools-venv .venv-torchtune/.ok .venv-litgpt/.ok
	$(PY) -m tools.memtrace.rungrid
	PYTHONPATH=$(CURDIR)/py .venv-torchtune/bin/python -m tools.memtrace.rungrid --recipes
	PYTHONPATH=$(CURDIR)/py .venv-litgpt/bin/python -m tools.memtrace.rungrid --recipes

# Post-training (tools/memtrace/post.py, tools/dsprobe/refmodel.py): TRL's DPO / GRPO steps on fake tensors and
# TRL's ZeRO reference on CPU ranks, from .venv-trl (tools venv + TRL, tools/memtrace/requirements-trl.txt);
# fixtures in tools/memtrace/golden/post/ (not part of `make test`)
.venv-trl/.ok: tools-venv
	$(PY) -m venv .venv-trl
	$(PY) -c "import site; print(site.getsitepackages()[0])" > \
	  "$$(.venv-trl/bin/python -c 'import site; print(site.getsitepackages()[0])')/tools-venv.pth"
	.venv-trl/bin/pip install -q --no-deps -r tools/memtrace/requirements-trl.txt
	.venv-trl/bin/pip install -q --no-deps --target .venv-trl-114 trl==1.14.2
	for v in 017:0.17.0 018:0.18.2 019:0.19.1; do \
	  .venv-trl/bin/pip install -q --no-deps --target .venv-trl-$${v%%:*} trl==$${v#*:} || exit 1; done
	touch $@
trace-post: .venv-trl/.ok
	PYTHONPATH=$(CURDIR)/py:$(CURDIR) .venv-trl/bin/python -m tools.memtrace.postgrid
	PYTHONPATH=$(CURDIR)/.venv-trl-114:$(CURDIR)/py:$(CURDIR) .venv-trl/bin/python -m tools.memtrace.postgrid
	for v in 017 018 019; do \
	  PYTHONPATH=$(CURDIR)/.venv-trl-$$v:$(CURDIR)/py:$(CURDIR) .venv-trl/bin/python -m tools.memtrace.postgrid \
	  || exit 1; done
	PYTHONPATH=$(CURDIR)/py:$(CURDIR) .venv-trl/bin/python -m tools.dsprobe.refmodel --json tools/memtrace/golden/post/ds-ref-model.json

dsprobe: tools-venv
	$(PY) -m tools.dsprobe $(PLAN)

dsprobe-check: tools-venv
	$(PY) -m tools.dsprobe.check

fsdpprobe: tools-venv
	$(PY) -m tools.fsdpprobe $(PLAN)

fsdpprobe-check: tools-venv
	$(PY) -m tools.fsdpprobe.check

fidelity: tools-venv
	$(PY) scripts/fidelity.py

# the README's post-training error table from tests/data/validation/post_training.json (tests/test_post_fidelity.py)
post-fidelity:
	$(PY) scripts/post_fidelity.py --write

# the tracer grid replayed through the CUDA caching allocator's rules: the cache shares memory/runtime.py uses
# Ground truth for the parameter counts: every transformers model_type + checkpoint configs + presets built on
# the meta device (tools/archgen) -> tests/data/architectures.json (tests/test_architectures.py reads it).
archgen: tools-venv
	$(PY) -m tools.archgen
	$(PY) -m tools.archgen.class_flags

allocator-cache: tools-venv
	$(PY) scripts/allocator_cache.py

# reserved over thousands of steps of varying batch lengths, replayed: the fixture memory/fragmentation.py is held to
fragmentation: tools-venv
	$(PY) scripts/fragmentation.py --json tests/data/fragmentation.json

bench: venv
	$(PY) scripts/bench_engine.py

# on a lent GPU only (issue 23): the kernel rates step/kernels.py takes from published benchmarks
kernelbench: venv
	$(PY) -m tools.kernelbench --out kernel_rates.json

bench-page: venv site
	$(PY) scripts/bench_page.py

clean:
	rm -rf _site assets/vendor node_modules $(VENV)
