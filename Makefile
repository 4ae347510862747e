# The two commands of README.md: `make demo` (set up, then pretrain a small Linformer on the bundled
# corpus, on CPU) and `make test` (set up with the test extras, then run the whole suite).
PYTHON ?= python3

.PHONY: setup setup-dev demo test

setup:
	PYTHON=$(PYTHON) bash scripts/setup.sh

setup-dev:
	PYTHON=$(PYTHON) bash scripts/setup.sh dev

demo: setup
	$(PYTHON) train_mlm.py --overwrite_output_dir

test: setup-dev
	HF_HUB_OFFLINE=1 $(PYTHON) -m pytest -q --durations=15
