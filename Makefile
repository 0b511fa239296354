# dsh-testkit: every target builds its own .venv from the project's files; nothing by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test check docs docs-gen lint typecheck pytest demo bench stress record-live dist clean

# LangSmith's pytest plugin comes with langchain-core (the verdict suite's LangChain client) and
# costs ~0.5 s at every pytest start; the suite starts pytest dozens of times (the docs' test
# examples, other checkouts' goldens), so it is left out of every run below, and of the pytest
# processes the tests start (they inherit the environment).
ifeq ($(findstring no:langsmith_plugin,$(PYTEST_ADDOPTS)),)
export PYTEST_ADDOPTS := -p no:langsmith_plugin $(PYTEST_ADDOPTS)
endif

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e . --group dev
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy --strict on the packages and tools; tests/, e2e/ and benchmarks/ too, looser (see the
# [[tool.mypy.overrides]] for them in pyproject.toml).
typecheck: $(STAMP)
	$(BIN)/mypy

# The suite on two pytest-xdist workers under coverage run (not --cov, so the pytest plugin's
# import-time lines are measured too): patch = subprocess (pyproject.toml) measures each worker
# from its first line into a data file of its own, and coverage combine merges them. Bytecode
# caching is on (PYTHONDONTWRITEBYTECODE empty): where the environment turns it off, every worker
# and every Python the tests start would compile and assertion-rewrite the project anew.
pytest: $(STAMP)
	$(BIN)/coverage erase
	PYTHONDONTWRITEBYTECODE= HYPOTHESIS_PROFILE=ci $(BIN)/coverage run -m pytest -n 2 $(PYTEST_ARGS)
	@$(BIN)/coverage combine --quiet
	@# The total is read off the table's TOTAL line: each report analyses every file anew (~3 s).
	@# The table's exit status (2 below fail_under) is make's.
	@table="$$($(BIN)/coverage report --skip-covered)"; status=$$?; echo "$$table"; \
	all=$$(echo "$$table" | awk '$$1 == "TOTAL" { sub("%", "", $$NF); print $$NF }'); \
	echo "branch coverage: dsh_core $$($(BIN)/coverage report --include='dsh_core/*' --format=total)%, all $$all%"; \
	exit $$status

# Lint first (a second); then the types and the suite side by side: on two CPUs the suite leaves
# some idle (workers waiting on the programs it starts), which mypy fills. Either failing fails.
test: lint
	@$(MAKE) --no-print-directory -j 2 typecheck pytest

# The edit-test loop: lint, types and the suite on both CPUs, no coverage, hypothesis on fewer
# examples (the "fast" profile in tests/conftest.py), without the tests marked slow (whole
# programs run end to end: the docs' examples, the benchmarks' smoke run, the goldens regenerated
# in other checkouts). Not a substitute for make test, which runs them all.
check: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	PYTHONDONTWRITEBYTECODE= HYPOTHESIS_PROFILE=fast $(BIN)/pytest -q -n 2 -m "not slow" $(PYTEST_ARGS)

# The documentation site (MkDocs): warnings are errors. Output in site/ (not committed).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# Rewrite the sections of docs/ generated from the code (CLI, script schema, cause codes, the
# report's legend, API tables); tests/test_docs_generated.py fails while one is stale.
docs-gen: $(STAMP)
	$(BIN)/python -m tools.gen_docs

# The release files: the sdist and the wheel in $(DIST), checked as a package index checks them
# (twine check --strict). The backend is the pinned hatchling of the dev group, used without
# build isolation, so this works offline; the version is pyproject.toml's. tests/test_install.py
# runs it and installs the wheel in a fresh environment.
DIST ?= dist
dist: $(STAMP)
	rm -rf $(DIST)
	$(BIN)/python -m build --no-isolation --outdir $(DIST) .
	$(BIN)/twine check --strict $(DIST)/*

demo: $(STAMP)
	$(BIN)/dsh-testkit demo

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e . --group dev --group bench
	$(BIN)/python benchmarks/run.py

# The adversarial suite for longer (tests/adversarial/stress.py): DSH_STRESS_SECONDS bounds the
# run (default 120), DSH_STRESS_SEED picks the sample. Figures go to RELIABILITY.md.
stress: $(STAMP)
	$(BIN)/python -m tests.adversarial.stress

record-live: $(STAMP)
	@test -n "$$DEEPSEEK_API_KEY" || { echo "record-live needs DEEPSEEK_API_KEY in the environment"; exit 2; }
	$(BIN)/python -m tools.record_cassettes record-live cassettes

clean:
	rm -rf $(VENV) .coverage .mypy_cache .ruff_cache
