# biaslab - the two commands of the README, plus helpers.
#   make run   create .venv if missing, install, dvc repro; on a CUDA host (nvidia-smi on PATH) also the [gpu]
#              extra (bitsandbytes: 4/8-bit LoRA bases, the paged 8-bit optimizer), never into requirements.lock
#   make test  the test suite (what CI runs), two workers; installs Debian's postgresql and chromium first when
#              missing (see postgres-server, chromium)
#   make test-fast  the unit and pipeline layers only (no MLflow store, no subprocess stages): the inner loop
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
GPU_STAMP := $(VENV)/.installed-gpu
# a CUDA host: the NVIDIA driver's nvidia-smi is on PATH (override: make run CUDA_HOST= / CUDA_HOST=1)
CUDA_HOST ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && echo 1)

.PHONY: run test test-fast bench bench-precision gpu-smoke gpu-check gpu-extra lock install clean-outputs ui postgres-server chromium

$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q --no-compile -r requirements.lock
	$(BIN)/python -m pip install -q --no-deps -e .
	@# bytecode on every core, where pip compiles on one (`make install`, fresh clone, 2 cores: 138 s and 123 s
	@# with pip compiling, 102 s and 90 s this way). Best effort: a few torch test files use newer syntax and
	@# do not compile, under pip either
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib >/dev/null 2>&1 || true
	touch $(STAMP)

install: $(STAMP)

# the [gpu] extra of pyproject.toml on top of the locked set (pip keeps every locked pin, adds bitsandbytes)
$(GPU_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q --no-compile -e '.[gpu]'
	touch $(GPU_STAMP)

gpu-extra: $(GPU_STAMP)

run: $(STAMP) $(if $(CUDA_HOST),$(GPU_STAMP))
	@test -d .dvc || $(BIN)/dvc init -q
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro

test-fast: $(STAMP)
	$(BIN)/python -m pytest tests/unit tests/pipeline -q

# two pytest-xdist workers, each running whole test files (module fixtures such as the team server start once)
test: $(STAMP) postgres-server chromium
	@$(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder; status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests (exit 5) - failing" >&2; fi; \
	exit $$status

# PostgreSQL server binaries for the scale-out tests (tests/integration/conftest.py starts a throwaway
# cluster from them). When initdb is on neither PATH nor /usr/lib/postgresql/*/bin and apt-get is usable
# as root: apt-get install postgresql (after apt-get update if the first try fails). Best effort: never
# fails the target; without the binaries those tests skip and say why.
postgres-server:
	@if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "make: PostgreSQL server binaries (initdb) not found: apt-get install -y -q postgresql"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql \
	  || { echo "make: install failed; apt-get update -q and retry"; apt-get update -q \
	       && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql; } \
	  || echo "make: could not install postgresql; the PostgreSQL tests will skip"; \
	else \
	  echo "make: PostgreSQL server binaries (initdb) not found and apt-get is not usable as root;" \
	       "the PostgreSQL tests will skip (install with: apt-get install postgresql)"; \
	fi

# Headless Chromium for the MLflow UI browser test (tests/integration/test_mlflow_ui_browser.py renders the
# runs table, a registry version page and the comparison page). Like postgres-server: when no chromium is on
# PATH and apt-get is usable as root, apt-get install chromium (after apt-get update if the first try fails).
# Best effort: never fails the target; without it the browser test skips and says why.
chromium:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then \
	  :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "make: chromium not found: apt-get install -y -q chromium"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium \
	  || { echo "make: install failed; apt-get update -q and retry"; apt-get update -q \
	       && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium; } \
	  || echo "make: could not install chromium; the browser test will skip"; \
	else \
	  echo "make: chromium not found and apt-get is not usable as root; the browser test will skip" \
	       "(install with: apt-get install chromium)"; \
	fi

bench: $(STAMP)
	$(BIN)/python bench/run.py

# peak RSS and bytes on disk of snapshot / edit_embeddings / finetune / register on a bf16 ~0.5 B model
bench-precision: $(STAMP)
	$(BIN)/python bench/precision.py

# the whole pipeline on CUDA in bf16 with a 4-bit LoRA at reduced sizes; says SKIPPED (exit 0) without CUDA
gpu-smoke: $(GPU_STAMP)
	$(BIN)/python bench/gpu_smoke.py

# after make run: the evaluate/finetune library calls on CUDA (fp32 and bf16 vs the CPU, 4-bit LoRA), no DVC/MLflow
gpu-check: $(GPU_STAMP)
	$(BIN)/python bench/gpu_check.py

# MLflow UI on the run store; prints the address that opens the runs table (model-training view)
ui: $(STAMP)
	$(BIN)/biaslab ui

# the CPU lock: never the [gpu] extra, even when frozen on a CUDA host that installed it
lock: $(STAMP)
	$(BIN)/python -m pip freeze --exclude-editable | sed 's/^torch==\(.*\)+cpu$$/torch==\1/' \
	  | grep -v -e '^biaslab' -e '^bitsandbytes==' > requirements.lock
