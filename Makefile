# Every target builds its own virtualenv from pyproject.toml; only python3.11 and make are needed.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test proto bench clean

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	@touch $@

demo: $(STAMP)
	$(VENV)/bin/hedgefs demo

test: $(STAMP)
	$(PY) -m pytest -q

proto: $(STAMP)
	$(PY) -m hedgefs.proto.generate

bench: $(STAMP)
	$(PY) -m hedgefs.bench.scenarios

clean:
	rm -rf $(VENV) .pytest_cache
