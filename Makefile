# Two entry points that work on a fresh machine (Python 3.10+; no GPU needed):
#   make quickstart   creates .venv, installs polymnesia, runs configs/quickstart.yaml
#   make test         creates .venv, installs polymnesia with its test extras, runs lint, types,
#                     the docs build (make docs) and tests
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch is pinned to the CPU build that pip finds on these machines; on a GPU machine
# install the torch build you want first and set TORCH_SPEC= to keep it.
TORCH_SPEC ?= torch==2.13.0

.PHONY: install constraints quickstart test lint typecheck docs unit integration browser clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# constraints.txt pins every other package to the versions the tests passed with
$(VENV)/.installed: $(BIN)/activate pyproject.toml constraints.txt
	if [ -n "$(TORCH_SPEC)" ]; then $(BIN)/pip install --quiet "$(TORCH_SPEC)"; fi
	$(BIN)/pip install --quiet -c constraints.txt -e ".[test]"
	touch $@

# rewrite constraints.txt from the installed environment (after the whole suite passed with it)
constraints: install
	{ sed -n '/^#/p' constraints.txt; $(BIN)/pip freeze --exclude-editable \
	  | grep -vE '^(torch|pip|setuptools|wheel)==' \
	  | sed 's/$$/; python_version >= "3.11"/'; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

install: $(VENV)/.installed

quickstart: install
	$(BIN)/polymnesia run configs/quickstart.yaml

lint: install
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts

typecheck: install
	$(BIN)/mypy

# the guide (docs/*.md) and the API reference from the docstrings (docs/api/) as a site in
# site/; --strict: a broken link or anchor, a page outside the nav or a docstring mkdocstrings
# cannot read fails it (tests/docs/test_api_reference.py: every package has a page). Not
# --quiet: it silences the warnings, and --strict then has nothing to count
docs: install
	$(BIN)/mkdocs build --strict --site-dir site

unit: install
	$(BIN)/pytest

integration: install
	$(BIN)/pytest -m integration

# headless Chromium for the browser test of report.html (tests/reports/test_reports_browser.py):
# installed with apt where apt is available and we are root; elsewhere that test is skipped
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "chromium could not be installed: the browser test of report.html will be skipped"; \
	  else echo "no chromium (and no apt as root to install it): the browser test of report.html will be skipped"; fi; }

test: lint typecheck docs browser
	$(BIN)/pytest -m "integration or not integration" --durations=30

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
