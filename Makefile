# The two commands of README.md: `make demo` (set up .venv, then pretrain a small Linformer on the
# bundled corpus, on CPU) and `make test` (set up .venv with the test extras, then run the whole suite).
# Both create or reuse the project environment .venv (scripts/setup.sh); the system Python is never
# installed into.
VENV ?= .venv
PY := $(VENV)/bin/python
# One thread per process: on a shared 2-core machine PyTorch's default (all cores) ran the demo 2.3x
# slower per step (0.65 vs 1.47 s median, interleaved); `accelerate launch` does the same. Override
# with `make demo DEMO_THREADS=2` on a quiet machine.
DEMO_THREADS ?= 1

.PHONY: setup setup-dev demo test release release-mlm wheelhouse gpu-check study-gpu

setup:
	VENV=$(VENV) bash scripts/setup.sh

setup-dev:
	VENV=$(VENV) bash scripts/setup.sh dev

demo: setup
	OMP_NUM_THREADS=$(DEMO_THREADS) $(PY) train_mlm.py --overwrite_output_dir

test: setup-dev
	$(PY) -m ruff check .
	HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 $(PY) -m pytest -q -n 2 --dist loadgroup --durations=15

# Rebuild release/minilm-l6-linformer-n4096 (convert all-MiniLM-L6-v2, train the long path, evaluate, fp16
# folder); resumable, about an hour on 2 CPU cores. Needs ../shared/data (news, Rotten Tomatoes).
release: setup-dev
	PY=$(PY) bash experiments/long_documents/build.sh

# Build release/minilm-l6-linformer-mlm-n4096 (experiments/masked_lm: masked-LM head on all-MiniLM-L6-v2, Linformer
# conversions, equal continued pretraining, evaluation, finetuning, report, fp16 folder); resumable, several CPU
# hours (one thread). Needs ../shared/data (news, Rotten Tomatoes).
release-mlm: setup-dev
	HF_HUB_OFFLINE=1 $(PY) -m experiments.masked_lm.run
	HF_HUB_OFFLINE=1 $(PY) -m experiments.masked_lm.evaluate
	$(PY) -m experiments.masked_lm.report --collect
	HF_HUB_OFFLINE=1 $(PY) -m experiments.masked_lm.release

# The offline GPU machine's packages: every wheel benchmarks/gpu_check.py needs beyond the machine's image
# (benchmarks/wheelhouse.txt, for Python 3.12 manylinux x86_64) and this project's own, into wheelhouse/
# (git-ignored); prints its size. Needs a package index; docs/development.md says how it is used.
wheelhouse: setup
	$(PY) -m benchmarks.wheelhouse download --dest wheelhouse

# Everything GPU-only on one GPU in at most ten minutes, install included (benchmarks/gpu_check.py): issue 67's
# steps first (training against RoBERTa-sdpa and ModernBERT at up to 65,536 tokens per update, the quality study's
# step times, batch 1 eager and compiled alike), then the first check's (inference time and memory, the largest
# batch, fp16/bf16 MLM updates, FSDP2 and its resume), left out here where benchmarks/results/gpu holds them
# (--skip_committed; GPU_CHECK_FLAGS= runs them too). Results in benchmarks/results/gpu, rewritten after every step,
# and in one archive, $(GPU_ARCHIVE) (the device returns a few files; `tar -xzf` it into benchmarks/results/gpu).
# On the offline GPU machine: `make gpu-check WHEELHOUSE=wheelhouse` installs the wheelhouse beside the image's
# packages (its torch untouched) and runs the check with its python3. Its CPU dry run is a test.
GPU_SITE ?= /tmp/linformer-site
GPU_CHECK_FLAGS ?= --skip_committed
GPU_ARCHIVE ?= $${OUT:-outputs}/gpu_check.tar.gz
ifdef WHEELHOUSE
gpu-check:
	python3 -m benchmarks.wheelhouse install --src $(WHEELHOUSE) --target $(GPU_SITE)
	PYTHONPATH=$(GPU_SITE) python3 -m benchmarks.gpu_check --out benchmarks/results/gpu $(GPU_CHECK_FLAGS) --archive "$(GPU_ARCHIVE)"
else
gpu-check: setup-dev
	$(PY) -m benchmarks.gpu_check --out benchmarks/results/gpu $(GPU_CHECK_FLAGS) --archive "$(GPU_ARCHIVE)"
endif

# The quality study's open runs on a lent GPU for STUDY_SECONDS (experiments/quality/gpu_runs.py): after
# `python -m experiments.quality.gpu_runs pack` here, the call carries wheelhouse and gpu_carry; the results and the
# unfinished runs' state come back in $OUT (else back/), for `python -m experiments.quality.gpu_runs unpack`.
STUDY_SECONDS ?= 420
ifdef WHEELHOUSE
study-gpu:
	python3 -m benchmarks.wheelhouse install --src $(WHEELHOUSE) --target $(GPU_SITE)
	PYTHONPATH=$(GPU_SITE) python3 -m experiments.quality.gpu_runs run --seconds $(STUDY_SECONDS) --out "$${OUT:-back}"
else
study-gpu: setup-dev
	$(PY) -m experiments.quality.gpu_runs run --seconds $(STUDY_SECONDS) --out "$${OUT:-back}"
endif
