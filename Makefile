# Two entry points (see README): `make demo` runs the main job, `make test` runs the tests.
# Both create ./.venv on first use. torch is installed first from the CPU wheel
# (torch==2.13.0) so that no later requirement can pull a multi-GB CUDA build.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.slalom-installed

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(VENV)/bin/slalom-xai demo --out demo_output

# The suite runs on every core (pytest-xdist, one worker per core; TEST_WORKERS=0 runs it in one
# process). --dist loadfile keeps each test file on one worker, so a file's module fixtures
# (models, fitted runs) are built once and its tests run in their written order.
TEST_WORKERS ?= auto

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 MPLBACKEND=Agg $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile tests

# The numeric invariance tests (scores across batching, offsets, runtimes; marker
# `invariance`) once more under a second BLAS/threads setting: one thread, torch's
# portable kernels instead of AVX2/AVX-512, MKL's compatible code path (what it runs on
# other CPUs). Their bounds come from the fits, so they must hold here too (~1-2 min).
INVARIANCE_ENV := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE

test-invariance: $(STAMP)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 MPLBACKEND=Agg $(INVARIANCE_ENV) $(PY) -m pytest -q -m invariance tests

.PHONY: install demo test test-invariance
