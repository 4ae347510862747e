# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""What every benchmark script shares around its measurements: the common flags (device, dtype, threads,
model size, where results go), the machine and commit a result was taken on, and writing and formatting
results."""

import csv
import hashlib
import json
import math
import os
import shlex
import subprocess
import sys
from pathlib import Path

import torch

from benchmarks.models import BASE, DTYPES, TINY, baseline_models

HERE = Path(__file__).absolute().parent  # absolute, not resolved: paths in results keep the checkout's spelling
ROOT = HERE.parent
# A run writes into OUTPUT (git-ignored) unless asked for the committed folder with `--out benchmarks/results`:
# a newcomer re-running a command must not overwrite the results the docs are generated from. A string, as the
# --out default: the flag's value is one either way, and results record it as given.
OUTPUT = str(ROOT / "outputs" / "benchmarks")
RESULTS = HERE / "results"
OUT_HELP = ("folder of the result files (default: outputs/benchmarks, git-ignored; benchmarks/results replaces the "
            "committed ones)")
# train_mlm.py's --mixed_precision spells them bf16 / fp16: both spellings are accepted, results say the long one.
DTYPE_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def int_list(text):
    """'512,1024' -> [512, 1024], with a clear error for anything else."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"expected a comma-separated list of integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise ValueError(f"expected positive integers, got {text!r}")
    return values


def parse_grid(parser, args):
    """--n and --k as lists of integers and --baselines as [(label, model)] (models.baseline_models), or the
    parser's one-line error naming the flag."""
    try:
        return int_list(args.n), int_list(args.k), baseline_models(args.baselines)
    except ValueError as e:
        parser.error(str(e))


def dims_from(text):
    """'hidden_size=128,num_hidden_layers=2,...' -> a model size: RoBERTa-base's, with the fields given replaced."""
    dims = dict(BASE)
    for item in (i for i in text.split(",") if i.strip()):
        key, eq, value = item.partition("=")
        if not eq or key.strip() not in (*BASE, "vocab_size") or not value.strip().isdigit():
            fields = ", ".join((*BASE, "vocab_size"))
            raise ValueError(f"--dims: expected FIELD=INTEGER,... with FIELD one of {fields}, got {item!r}")
        dims[key.strip()] = int(value)
    return dims


def pick_device(name):
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name not in ("cpu", "cuda"):
        raise ValueError(f"--device must be auto, cpu or cuda, got {name!r}")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda asked for, but torch.cuda.is_available() is False")
    return torch.device(name)


def pick_dtype(name, device):
    name = DTYPE_ALIASES.get(name, name)
    if name not in DTYPES:
        raise ValueError(f"--dtype must be one of {', '.join(DTYPES)} (or {', '.join(DTYPE_ALIASES)}), got {name!r}")
    if name == "float16" and device.type == "cpu":
        raise ValueError("--dtype float16 is not supported on CPU; use float32 or bfloat16")
    return DTYPES[name]


def add_run_args(parser, repeats=3, tag_help=None):
    """The flags every timing script shares; setup_run() reads them."""
    parser.add_argument("--repeats", type=int, default=repeats, help="timed runs of each model (interleaved)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="float32", help="float32, bfloat16 or float16 (or fp32, bf16, fp16)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--tiny", action="store_true", help="2 layers, hidden 64 (smoke tests)")
    parser.add_argument("--out", default=OUTPUT, help=OUT_HELP)
    parser.add_argument("--tag", default=None, help=tag_help)


def setup_run(args, parser):
    """Device, dtype, threads and model size from the flags every benchmark script shares."""
    try:
        device = pick_device(args.device)
        dtype = pick_dtype(args.dtype, device)
    except ValueError as e:
        parser.error(str(e))
    args.dtype = DTYPE_ALIASES.get(args.dtype, args.dtype)  # specs and results carry the DTYPES name
    if args.threads:
        torch.set_num_threads(args.threads)
    return device, dtype, (TINY if args.tiny else BASE)


def command_line(module, argv=None):
    """The command that made a result, as run from the repository root (argv: the script's arguments)."""
    return shlex.join(["python", "-m", module, *(sys.argv[1:] if argv is None else argv)])


def machine_info(device):
    info = dict(torch=torch.__version__, device=device.type, threads=torch.get_num_threads(),
                cpu_count=os.cpu_count())
    try:  # provenance: which commit, and the exact modeling file that was measured
        info["git_head"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                          text=True).stdout.strip()
        modeling = ROOT / "src" / "linformer_hf" / "modeling_linformer.py"
        info["modeling_sha1"] = hashlib.sha1(modeling.read_bytes()).hexdigest()[:12]
    except OSError:
        pass
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    else:
        try:
            lines = Path("/proc/cpuinfo").read_text().splitlines()
            info["cpu"] = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
            flags = next(line.split(":", 1)[1].split() for line in lines if line.startswith("flags"))
            info["cpu_extensions"] = [name for name in CPU_EXTENSIONS if name in flags]
        except (OSError, StopIteration):
            pass
    return info


# The vector extensions that change which CPU kernels run (int8 products: VNNI; bf16: AVX512-BF16, AMX), as
# /proc/cpuinfo names them; a CPU figure means little without them
CPU_EXTENSIONS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def instruction_sets(info):
    """The CPU's extensions of `machine_info` in words, the missing ones named: 'AVX2, FMA; no AVX-512, VNNI, AMX'."""
    if "cpu_extensions" not in info:
        return "instruction sets not recorded"
    have = set(info["cpu_extensions"])
    present = [name.upper() for name in ("avx2", "fma") if name in have]
    present += ["AVX-512"] * ("avx512f" in have) + ["VNNI"] * bool({"avx512_vnni", "avx_vnni"} & have)
    present += ["AVX512-BF16"] * ("avx512_bf16" in have) + ["AMX"] * bool({"amx_bf16", "amx_int8"} & have)
    missing = [name for name in ("AVX-512", "VNNI", "AMX") if name not in present]
    return ", ".join(present) + (f"; no {', '.join(missing)}" if missing else "")


def save_json(path, obj):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        json.dump(obj, f, indent=1, default=str)


def save_csv(path, rows):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def fmt_ratio(x):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.1f}x" if x < 10 else f"{x:.0f}x"


def fmt_bytes(b):
    return f"{b / 2**20:.0f} MiB" if b < 2**30 else f"{b / 2**30:.2f} GiB"
