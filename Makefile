# One command sets up and runs the main job, one sets up and runs the tests.
# Each creates its own virtual environment in .venv (torch is pinned to the CPU build 2.13.0).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-all test-browser bench lint clean models

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/bertlab demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-all: $(STAMP)
	$(BIN)/python -m pytest -q -m ""

# `bertlab serve` in headless Chromium (Debian: apt-get install chromium chromium-driver).
test-browser: $(STAMP)
	$(BIN)/python -m pytest -q -m browser

# Remake the models that ship in bertlab/models (bertlab:NAME): two hours of pre-training
# on 2 CPU cores with the shared data beside the checkout (tools/ship_model.py, docs/models.md).
models: $(STAMP)
	$(BIN)/python tools/ship_model.py --data ../shared/data

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_model.py

lint: $(STAMP)
	$(BIN)/ruff check bertlab tests benchmarks

clean:
	rm -rf $(VENV) build *.egg-info
