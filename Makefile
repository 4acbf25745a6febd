# mlcbench: `make sweep` sets itself up and runs the default sweep; `make test` runs the tests, ruff included.
VENV ?= .venv
PYTHON ?= python3
GPU ?=
ENVS ?= local
SUITE ?=
DB ?= sqlite:///results/mlcbench.db
BIN := $(VENV)/bin

.PHONY: sweep test lint typecheck results clean-venv

$(BIN)/mlcbench: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first: with the pin satisfied, nothing else pulls another (multi-GB) build
	$(BIN)/pip install -q -c constraints.txt torch
	$(BIN)/pip install -q -c constraints.txt -e '.[worker,test]'
	touch $@

sweep: $(BIN)/mlcbench
	$(BIN)/mlcbench sweep --env $(ENVS) --db $(DB) $(if $(GPU),--gpu $(GPU)) $(if $(SUITE),--suite $(SUITE))

results: $(BIN)/mlcbench
	$(BIN)/mlcbench results --db $(DB)

test: $(BIN)/mlcbench
	@echo "collecting the tests (about 20 s), then a dot per test; a fixture that works for minutes first says what"
	$(BIN)/python -m pytest -q

# ruff alone (make test runs it too, as tests/test_lint.py)
lint: $(BIN)/mlcbench
	$(BIN)/ruff check .

# mypy over the parts every image imports, read under the import names setuptools maps them to (mlcbench.schema ...)
typecheck: $(BIN)/mlcbench
	rm -rf build/typecheck && mkdir -p build/typecheck/mlcbench
	ln -s ../../../schema ../../../workers build/typecheck/mlcbench/
	MYPYPATH=build/typecheck $(BIN)/python -m mypy -p mlcbench.schema -p mlcbench.workers

clean-venv:
	rm -rf $(VENV)

-include mk/*.mk
