# Two entry points that work on a fresh machine (Python 3.10+; no GPU needed):
#   make quickstart   creates .venv, installs polymnesia, runs configs/quickstart.yaml
#   make test         creates .venv, installs polymnesia with its test extras, runs lint, types and tests
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch is pinned to the CPU build that pip finds on these machines; on a GPU machine
# install the torch build you want first and set TORCH_SPEC= to keep it.
TORCH_SPEC ?= torch==2.13.0

.PHONY: install quickstart test lint typecheck unit integration clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/activate pyproject.toml
	if [ -n "$(TORCH_SPEC)" ]; then $(BIN)/pip install --quiet "$(TORCH_SPEC)"; fi
	$(BIN)/pip install --quiet -e ".[test]"
	touch $@

install: $(VENV)/.installed

quickstart: install
	$(BIN)/polymnesia run configs/quickstart.yaml

lint: install
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts

typecheck: install
	$(BIN)/mypy

unit: install
	$(BIN)/pytest

integration: install
	$(BIN)/pytest -m integration

test: lint typecheck
	$(BIN)/pytest -m "integration or not integration"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
