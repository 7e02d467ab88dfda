# biaslab - the two commands of the README, plus helpers.
#   make run   create .venv if missing, install, dvc repro
#   make test  the test suite (what CI runs)
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test bench lock install clean-outputs ui

$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.lock
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	@test -d .dvc || $(BIN)/dvc init -q
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python bench/run.py

ui: $(STAMP)
	$(BIN)/mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db --default-artifact-root mlruns/artifacts

lock: $(STAMP)
	$(BIN)/python -m pip freeze --exclude-editable | sed 's/^torch==\(.*\)+cpu$$/torch==\1/' | grep -v '^biaslab' > requirements.lock
