# The two commands of README.md: `make demo` (set up .venv, then pretrain a small Linformer on the
# bundled corpus, on CPU) and `make test` (set up .venv with the test extras, then run the whole suite).
# Both create or reuse the project environment .venv (scripts/setup.sh); the system Python is never
# installed into.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup setup-dev demo test

setup:
	VENV=$(VENV) bash scripts/setup.sh

setup-dev:
	VENV=$(VENV) bash scripts/setup.sh dev

demo: setup
	$(PY) train_mlm.py --overwrite_output_dir

test: setup-dev
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q --durations=15
