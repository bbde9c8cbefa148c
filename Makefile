# Development in one command: `make test` takes a fresh clone to passing tests (a venv in
# .venv, the CPU build of torch, trinity-cli editable with its test and ray extras, then
# pytest); `make check` adds ruff and mypy, as CI does (.ci/run calls it).
PYTHON ?= python3
VENV ?= .venv
# The CPU build of PyTorch (on this project's CI machine pip takes it from local disk).
TORCH ?= torch==2.13.0
# A portable AVX2 build of llama.cpp: the default -march=native build enables AMX on some
# Intel CPUs and segfaults there (README, "Troubleshooting").
CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
CMAKE_BUILD_PARALLEL_LEVEL ?= 2
export CMAKE_ARGS CMAKE_BUILD_PARALLEL_LEVEL

BIN := $(VENV)/bin
INSTALLED := $(VENV)/.trinity-installed

.PHONY: test check lint fast plain-install clean-venv

test: $(INSTALLED)
	$(BIN)/pytest -q

fast: $(INSTALLED)
	$(BIN)/pytest -q -m "not integration and not slow"

lint: $(INSTALLED)
	$(BIN)/ruff check src tests scripts
	$(BIN)/mypy src

check: lint test

# A plain (non-editable) `pip install .` in a fresh venv, every command run from it.
plain-install:
	.ci/plain-install-smoke

# Re-installed when pyproject.toml changes; llama-cpp-python compiles once (pip caches the wheel).
$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/pip install "$(TORCH)"
	$(BIN)/pip install -e ".[test,ray]"
	touch $@

clean-venv:
	rm -rf $(VENV)
