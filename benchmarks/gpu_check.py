# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Everything that needs a GPU, in one command sized to a ten-minute GPU loan (`make gpu-check`).

GPU time comes to this project rarely, in loans of minutes, on machines with no network: a previous loan, an H200,
trained ten of the quality study's runs and part of an eleventh (the `hardware` field of
experiments/quality/results/*.json), and an H200 ran this check once (benchmarks/results/gpu, docs/benchmarks.md
"On a GPU"). The claims only a GPU can settle are collected here, sized to run on one 80 GB GPU in at most ten
minutes with the offline install (`make gpu-check WHEELHOUSE=wheelhouse`, benchmarks/wheelhouse.py), in order of
value, so that a run cut short still leaves the most important results: the results file (`gpu_check.json` and its
rendering `gpu_check.md`, beside the benchmark tables' own files in `--out`) is rewritten after every step.

0. Issue 67's steps, benchmarks/README.md's block "Training and compiled batch 1 on a GPU", run first:
   `training_cuda_bf16` (one train_mlm.py update of Linformer k = 128, 256, RoBERTa-sdpa and ModernBERT at n = 512,
   4,096, 16,384, each at the largest tokens per update that fits up to 65,536: tokens/s, peak memory, MFU, where
   the time goes), `training_cuda_bf16_study*` (seconds per update of the quality study's configurations, for the
   GPU time to reach standard attention's quality), `compiled_cuda` (batch 1 eager and compiled alike, fp16 and
   bf16, n = 512 and 4,096, four runs compiling side by side), `training_cuda_bf16_ckpt` (n = 65,536, activation
   checkpointing on every model). The steps below ran on an H200 and are committed: `--skip_committed` (what
   `make gpu-check` passes) leaves them out and carries their entries into the new results file; `--archive`
   packs every result file into one .tar.gz (a loan returns at most 8 files).
1. `inference_cuda_{fp16,bf16}_b1`: inference time and peak memory at batch 1, Linformer k = 128, 256 against
   RoBERTa-sdpa (the sdpa kernel it picked recorded), RoBERTa-eager (the paper's baseline, where it fits) and
   ModernBERT at n = 512 to 65536, and `max_batch_cuda_fp16`: the paper's Table 3 form, the largest batch each
   fits and its time per token there. These are benchmarks/README.md's GPU block, read from it, so that the
   README and this check cannot drift apart.
2. `mlm_fp16`, `mlm_bf16`: a few hundred `train_mlm.py` updates at RoBERTa-base size (the model of
   `configs/linformer_base_n512_k256_layerwise.yaml`, on the bundled Moby Dick: the machine has no network):
   tokens/s from the run's `metrics.jsonl`, and the fp16 updates the gradient scaler skipped.
3. `fsdp2_resume`: `accelerate launch --use_fsdp --fsdp_version 2` of `train_mlm.py`, then the same run resumed
   from its middle checkpoint, which must end where the uninterrupted run ends.

Sizing. Every step's seconds are estimated before it runs (the plan, printed first; `--plan` prints it alone):
matmul FLOP counts (benchmarks/flop_counts.py) at USABLE of the bf16 matmul rate measured on this workplace's
H100 and H200, activation traffic at half the measured copy bandwidth, and fixed costs (process start, model
build, train_mlm.py's start, accelerate launch) measured on the project's CPU machine, a slower one. Each step
runs in its own process group, stopped at CAP_FACTOR times its estimate and never past the whole budget: a step
stopped so is recorded as cut, and the next one runs. A failed step is recorded with its error; the command
exits non-zero at the end if any step did not finish. Each run's full output is in `--work_dir`/logs.

    python -m benchmarks.gpu_check --out benchmarks/results/gpu --skip_committed --archive $OUT/gpu_check.tar.gz
                                                                  # one GPU (what `make gpu-check` runs)
    python -m benchmarks.gpu_check --plan                         # the steps and their estimated seconds
    python -m benchmarks.gpu_check --dry_run                      # CPU, tiny model, a few steps: what the tests run

`--dry_run` runs the same steps on CPU so that they cannot rot: a tiny model and a few updates, bf16 where the
GPU run uses fp16 (CPU fp16 training is refused), FSDP switched on for CPU processes by `tests/fsdp_on_cpu.py`
(Accelerate enables it on GPUs only), the README's GPU commands with tiny n, and a cap of DRY_RUN_CAP_S per step.
"""

import argparse
import contextlib
import importlib.metadata
import io
import json
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import traceback
import types
from pathlib import Path

import torch

from benchmarks import flop_counts, harness, inference, measure, models
from benchmarks.reporting import table
from linformer_training.arguments import format_overrides, read_recipe
from linformer_training.tracking import read_jsonl

RECIPE = harness.ROOT / "configs" / "linformer_base_n512_k256_layerwise.yaml"
MOBY_DICK = harness.ROOT / "data" / "moby_dick" / "chapters.jsonl"
FSDP2 = ["--use_fsdp", "--fsdp_version", "2", "--fsdp_sync_module_states", "false",
         "--fsdp_activation_checkpointing", "true", "--fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP",
         "--fsdp_transformer_layer_cls_to_wrap", "LinformerLayer"]
# GPU kernels such as the embedding's backward add in a nondeterministic order, so a resumed GPU run may
# differ from the uninterrupted one in the last bits: its losses must agree to this relative tolerance,
# and whether the weights are bit-identical (they are on CPU) is reported beside it.
RESUME_RTOL = 1e-3
# Values that shrink a GPU command of benchmarks/README.md to seconds on CPU; every flag it names stays.
CPU_STAND_INS = {"--device": "cpu", "--n": "64,128", "--k": "16,32", "--pairs": "64:16,128:32", "--repeats": "1",
                 "--warmup": "1", "--mem-gib": "0.05", "--dtype": {"fp16": "bf16", "float16": "bf16"},
                 "--tokens-per-update": "64", "--peer-k": "16"}
# compiled.py on CPU: dynamo alone (backend eager), since inductor's C++ takes tens of seconds a model on CPU
CPU_FLAGS = {"benchmarks.inference": ["--no-memory"], "benchmarks.training": ["--no-memory"],
             "benchmarks.compiled": ["--backend", "eager"]}
RACE = "Training and compiled batch 1 on a GPU"  # the README block of issue 67's steps, run first
OLD = "On a GPU"  # the first check's block

# ---------------------------------------------------------------- the time budget (see the module's docstring)
BUDGET_S = 600            # the loan: install and every step
MATMUL_PEAK = 790e12      # FLOP/s of a bf16 8192^3 matmul on this workplace's H100 (798) and H200 (769-798)
USABLE = 0.25             # the share of it a whole forward or update is assumed to reach: conservative, since
                          # the CPU runs reached 85-95% of the CPU's matmul rate at n >= 2048 (docs/benchmarks.md)
BANDWIDTH = 1.5e12        # B/s of activation traffic: half the 3.0 TB/s device-to-device copy measured on the H100
LAUNCH_S = 0.010          # a forward's floor at batch 1: ~200 kernel launches of 12 layers, 50 us each
PROCESS_S = 15            # a fresh Python importing torch and transformers, CUDA started (CPU machine: 7-21 s)
BUILD_S = 1               # one base-size model built on the GPU, weights drawn there (CPU machine, no draws: 0.2 s)
PLOTS_S = 5               # inference.py's three figures (matplotlib)
TRAIN_START_S = 30        # train_mlm.py to its first update: imports, tokenizer trained on Moby Dick, packing, model
                          # built, first evaluation (CPU machine, one thread: 31 s, most of it a base-size evaluation)
UPDATE_OVERHEAD_S = 0.05  # per update beyond its FLOPs: optimizer step, clipping, data, logging
COMPILE_S = 45            # torch.compile of one model (dynamo, inductor, CUDA graphs), an assumption: tiny models took
                          # 8-31 s each with inductor's C++ backend on the CPU machine's one slow thread
SAVE_S = 10               # train_mlm.py's evaluation and final save
LAUNCHER_S = 15           # accelerate launch's own start (torchrun, a second interpreter)
INSTALL_S = 30            # pip installing the wheelhouse (--target, --no-deps, no compile)
CAP_FACTOR = 1.5          # a step is stopped at this many times its estimate (and never past the budget)
MARGIN_S = 30             # kept from the steps: a command past the loan's 600 s is killed with its results unwritten
MIN_STEP_S = 20           # a step that would get less than this is not started
DRY_RUN_CAP_S = 300       # each step of the CPU dry run
MLM_STEPS, FSDP_STEPS = 300, 40


class StepFailed(Exception):
    """A failure whose message already says what and why: recorded as it is, without a traceback."""


class StepCut(StepFailed):
    """A step stopped at its time cap: recorded as cut, and the next step runs."""


# ---------------------------------------------------------------- the plan: GPU or dry run

def plan_for(args):
    """The sizes and step counts of each run: the GPU's, or the dry run's (seconds on CPU). Its files are strings
    (the work folder made absolute and normalized): they are arguments of the commands the steps run, and recorded
    with them."""
    recipe = read_recipe(RECIPE)
    work = Path(args.work_dir or harness.ROOT / "runs" / ("gpu_check_dry" if args.dry_run else "gpu_check")).resolve()
    if not args.dry_run:
        # The recipe's model and optimizer; its Hub corpus and tokenizer may be out of reach of the GPU machine
        # (the bundled Moby Dick and a tokenizer trained on it instead), and its 10k warm-up exceeds the run.
        return dict(dry_run=False, work=str(work), corpus=str(MOBY_DICK), env={},
                    mlm=dict(model=recipe["config_overrides"], tokenizer_vocab_size=4096,
                             batch=recipe["per_device_train_batch_size"], learning_rate=recipe["learning_rate"],
                             warmup=30, eval_samples=64),
                    mlm_steps=args.mlm_steps, logging_steps=25, precisions={"fp16": "fp16", "bf16": "bf16"},
                    fsdp_steps=FSDP_STEPS, fsdp_wrapper=[])
    tiny = {**recipe["config_overrides"], "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
            "intermediate_size": 64, "max_seq_length": 64, "projected_dim": 16,
            "vocab_size": 512}  # above the tokenizer's, as at base size (50265 vs 4096)
    return dict(dry_run=True, work=str(work), corpus=str(work / "moby15.jsonl"),
                env={"OMP_NUM_THREADS": "1", "ACCELERATE_USE_CPU": "1"},
                mlm=dict(model=tiny, tokenizer_vocab_size=400, batch=8, learning_rate=3e-3, warmup=1, eval_samples=16),
                mlm_steps=6, logging_steps=2, precisions={"fp16": "bf16", "bf16": "bf16"},
                fsdp_steps=4, fsdp_wrapper=[str(harness.ROOT / "tests" / "fsdp_on_cpu.py")])


def flag(argv, name, default=None):
    return argv[argv.index(name) + 1] if name in argv else default


def forward_s(model, n, k, batch, bytes_per=2, dims=models.BASE):
    """Estimated seconds of one forward on the GPU: launch floor, matmul FLOPs at USABLE of the peak, and each
    activation byte written and read twice at BANDWIDTH (an uncounted attention kernel as full attention)."""
    flops = flop_counts.forward_flops(model, n, k, dims, batch) or flop_counts.flops_modernbert(n, dims, batch)
    traffic = 4 * measure.estimate_activation_bytes(model, n, k, dims, batch, bytes_per, training=True)
    return LAUNCH_S + flops / (USABLE * MATMUL_PEAK) + traffic / BANDWIDTH


def estimate_inference(argv):
    """inference.py's command: the configurations its own plan keeps on an 80 GB GPU, each built once, then
    the profiled forward, the memory forward, warm-ups and repeats."""
    baselines = models.baseline_models(flag(argv, "--baselines", "eager,sdpa"))
    ns, ks = harness.int_list(flag(argv, "--n")), harness.int_list(flag(argv, "--k"))
    batch, bytes_per = int(flag(argv, "--batch", 1)), 2
    args = types.SimpleNamespace(linformer_attn="sdpa", sharing="layerwise", chunk_ff=0, batch=batch,
                                 dtype="bfloat16", max_forward_s=float(flag(argv, "--max-forward-s", 60)))
    budget = float(flag(argv, "--mem-budget", 0.5)) * 80e9
    with contextlib.redirect_stdout(io.StringIO()):  # its skips are the run's to print
        plan, _ = inference.plan_runs(args, ns, ks, baselines, models.BASE, USABLE * MATMUL_PEAK, budget, bytes_per)
    rounds = int(flag(argv, "--warmup", 1)) + int(flag(argv, "--repeats", 3)) + 1
    return PROCESS_S + PLOTS_S + sum(len(configs) * BUILD_S + rounds * sum(
        forward_s(c["model"], n, c["k"], batch, bytes_per) for c in configs) for n, configs in plan.items())


def estimate_max_batch(argv):
    """max_batch.py's command: per n and model a build, two forwards at batch 1, then warm-up and repeats at a
    batch whose matmul FLOPs take --max-forward-s at the matmul peak (USABLE of it here: longer)."""
    baselines = [m for _, m in models.baseline_models(flag(argv, "--baselines", "sdpa,eager"))]
    ns, ks = harness.int_list(flag(argv, "--n")), harness.int_list(flag(argv, "--k"))
    cap = float(flag(argv, "--max-forward-s", 1.0)) / USABLE
    rounds = int(flag(argv, "--warmup", 1)) + int(flag(argv, "--repeats", 2))
    memory = float(flag(argv, "--mem-gib", 75)) * 2**30
    seconds = PROCESS_S
    for n in ns:
        for model, k in [(m, None) for m in baselines] + [("linformer-sdpa", k) for k in ks if k <= n // 2]:
            if measure.estimate_activation_bytes(model, n, k, models.BASE, 1, 2) > memory:
                continue  # out of memory at batch 1: seconds
            seconds += BUILD_S + 2 * forward_s(model, n, k, 1) + rounds * max(cap, forward_s(model, n, k, 1))
    return seconds


def estimate_training(argv):
    """training.py's command: per n and model a build, then two steps for fitting and memory, the warm-ups, the
    repeats and the profiled step, each at --tokens-per-update (its matmul FLOPs at USABLE of the peak)."""
    from benchmarks import training

    args, grid, baselines, *_ = training.parse_args([*argv, "--device", "cpu"])
    rate, seconds = USABLE * MATMUL_PEAK, PROCESS_S
    for n, ks in grid.items():
        for spec in training.specs_at(n, ks, args, baselines, harness.dims_from(flag(argv, "--dims", "")), None):
            flops = training.step_flops(spec, args, bound=True)
            updates = 2 + args.warmup + args.repeats + 2 * args.profile
            seconds += BUILD_S + updates * (flops / rate + UPDATE_OVERHEAD_S)
    return seconds


def estimate_compiled(argv):
    """compiled.py's command: COMPILE_S per model (the three transformers models and Linformer's k's, the peers
    at one k), then warm-ups and repeats eager and compiled (forwards at batch 1)."""
    ns, ks = harness.int_list(flag(argv, "--n", "512,4096")), harness.int_list(flag(argv, "--k", "128,256"))
    baselines = [m for _, m in models.baseline_models(flag(argv, "--baselines", "sdpa,modernbert"))]
    peers = len([p for p in flag(argv, "--peers", "linformer,linformer-pytorch").split(",") if p])
    rounds = int(flag(argv, "--warmup", 3)) + 2 * int(flag(argv, "--repeats", 20))
    seconds = PROCESS_S
    for n in ns:
        named = ([(m, None) for m in baselines] + [("linformer-sdpa", k) for k in ks]
                 + [("linformer-sdpa", min(ks))] * peers)
        seconds += sum(BUILD_S + COMPILE_S + rounds * forward_s(m, n, k, 1) for m, k in named)
    return seconds


def update_s(plan, steps, checkpointing=False):
    """train_mlm.py's updates: 3 x the forward's FLOPs (4 x with activation checkpointing), the MLM head's
    vocabulary logits at every position included, plus the per-update overhead."""
    mlm, dims = plan["mlm"], plan["mlm"]["model"]
    n, tokens = dims["max_seq_length"], mlm["batch"] * dims["max_seq_length"]
    D, V = dims["hidden_size"], dims["vocab_size"]
    forward = flop_counts.flops_linformer(n, dims["projected_dim"], dims, mlm["batch"]) + 2 * tokens * (D * D + D * V)
    return steps * ((4 if checkpointing else 3) * forward / (USABLE * MATMUL_PEAK) + UPDATE_OVERHEAD_S)


ESTIMATES = {"benchmarks.max_batch": estimate_max_batch, "benchmarks.inference": estimate_inference,
             "benchmarks.training": estimate_training, "benchmarks.compiled": estimate_compiled}
# The first check's steps, whose results are committed (benchmarks/results/gpu): --skip_committed leaves them out
OLD_STEPS = ("inference_cuda_fp16_b1", "inference_cuda_bf16_b1", "max_batch_cuda_fp16", "mlm_fp16", "mlm_bf16",
             "fsdp2_resume")


def gpu_steps(plan, skip=()):
    """[(name, what, estimated seconds, function, arguments)] in order of value: issue 67's README block (training
    side by side, the quality study's step times, compiled batch 1: its commands run side by side are one step),
    then the first check's (its README block, the MLM runs, FSDP2 and its resume), less those in `skip`."""
    steps = []
    for group in readme_gpu_commands(RACE, grouped=True) + [[argv] for argv in readme_gpu_commands(OLD)]:
        tags = [flag(argv, "--tag") for argv in group]
        name = tags[0] if len(group) == 1 else os.path.commonprefix(tags).rstrip("_")
        estimate = max(ESTIMATES[argv[2]](argv[3:]) for argv in group)  # side by side: the longest
        steps.append((name, " & ".join(map(shlex.join, group)), estimate, benchmark_table, tuple(group)))
    mlm = TRAIN_START_S + SAVE_S + update_s(plan, plan["mlm_steps"])
    for precision in ("fp16", "bf16"):
        steps.append((f"mlm_{precision}", f"{plan['mlm_steps']} train_mlm.py updates at RoBERTa-base size, {precision}",
                      mlm, mlm_updates, (precision,)))
    fsdp = 2 * (LAUNCHER_S + TRAIN_START_S + SAVE_S) + update_s(plan, plan["fsdp_steps"] * 3 // 2, checkpointing=True)
    steps.append(("fsdp2_resume", f"{plan['fsdp_steps']} updates under FSDP2 through accelerate launch, then the "
                  "second half again from the middle checkpoint", fsdp, fsdp2_resume, ()))
    return [step for step in steps if step[0] not in skip]


def committed_steps(folder):
    """{name: entry} of the first check's steps that ran ok in the committed results (`folder`/gpu_check.json)."""
    path = Path(folder) / "gpu_check.json"
    if not path.is_file():
        return {}
    check = json.loads(path.read_text())
    return {name: dict(entry, committed_from=check["machine"].get("git_head", "?"))
            for name, entry in check["steps"].items() if name in OLD_STEPS and entry["status"] == "ok"}


def plan_table(steps):
    """The plan as a markdown table (install and start are not capped: they come before the budget's clock), and
    its total seconds."""
    rows = [("install", "make gpu-check WHEELHOUSE=wheelhouse: pip install --no-index --target", INSTALL_S, "-"),
            ("start", "gpu_check.py's own start: imports, the plan", PROCESS_S, "-")]
    rows += [(name, what, estimate, f"{CAP_FACTOR * estimate:.0f}") for name, what, estimate, *_ in steps]
    total = sum(seconds for _, _, seconds, _ in rows)
    return table(["step", "what", "estimated seconds", "cap"], [
        *([name, what, f"{seconds:.0f}", cap] for name, what, seconds, cap in rows),
        ["total", "", f"{total:.0f} of {BUDGET_S}", ""]]), total


# ---------------------------------------------------------------- running things

def run_logged(plan, name, command):
    """run_together with one command."""
    return run_together(plan, {name: command})[name]


def run_together(plan, commands):
    """Run {name: command} side by side from the repository root, each in its own process group, its output in
    logs/<name>.log, until the step's deadline; a failure is StepFailed with the command and the end of its
    output, which is where train_mlm.py and the launcher say why; passing the deadline is StepCut (every group is
    stopped: the launcher's workers too, which would otherwise hold the GPU). Returns {name: what ran}."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **plan["env"]}
    start, procs = time.perf_counter(), {}
    logs = Path(plan["work"]) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for name, command in commands.items():
        log = logs / f"{name}.log"
        with log.open("w") as f:
            f.write("$ " + shlex.join(command) + "\n")
            f.flush()
            procs[name] = (subprocess.Popen(command, cwd=harness.ROOT, env=env, stdout=f, stderr=subprocess.STDOUT,
                                            start_new_session=True), log)
    codes = {}
    try:
        for name, (proc, _) in procs.items():
            codes[name] = proc.wait(timeout=max(plan["deadline"] - time.monotonic(), 1))
    except subprocess.TimeoutExpired:
        for name, (proc, _) in procs.items():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                codes[name] = None
    seconds = time.perf_counter() - start
    for name, code in codes.items():
        if code != 0:
            command, log = commands[name], procs[name][1]
            with log.open() as f:
                lines = f.readlines()[1:]
            # the launcher's own report comes last and names no cause: the lines that say "error" come first
            said = [line for line in lines[:-15] if "error" in line.lower()][-5:]
            tail = "".join(said + lines[-15:])
            if code is None:
                raise StepCut(f"`{shlex.join(command)}` passed the step's cap and was stopped after {seconds:.0f} s; "
                              f"from {log}:\n{tail}")
            raise StepFailed(f"`{shlex.join(command)}` ended with {code} after {seconds:.0f} s; from {log}:\n{tail}")
    return {name: dict(command=shlex.join(commands[name]), seconds=round(seconds, 1), log=str(procs[name][1]))
            for name in commands}


def train_mlm_flags(plan, output_dir, steps, logging_steps, checkpointing_steps=0):
    mlm = plan["mlm"]
    return ["train_mlm.py", "--train_file", plan["corpus"], "--model_type", "linformer",
            "--config_overrides", format_overrides(mlm["model"]),
            "--tokenizer_vocab_size", str(mlm["tokenizer_vocab_size"]),
            "--per_device_train_batch_size", str(mlm["batch"]), "--learning_rate", str(mlm["learning_rate"]),
            "--warmup_steps", str(mlm["warmup"]), "--max_steps", str(steps), "--logging_steps", str(logging_steps),
            "--eval_steps", "0", "--max_eval_samples", str(mlm["eval_samples"]), "--report_to", "none",
            "--checkpointing_steps", str(checkpointing_steps), "--save_total_limit", "2",
            "--output_dir", str(output_dir), "--overwrite_output_dir"]


def metrics(output_dir):
    path = Path(output_dir) / "metrics.jsonl"
    if not path.is_file():
        raise StepFailed(f"{path} is missing: the run wrote no metrics")
    return read_jsonl(path)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---------------------------------------------------------------- the steps

def mlm_updates(plan, precision):
    """Tokens/s of train_mlm.py at RoBERTa-base size in one precision, and what fp16's scaler skipped.
    The first logging window holds the start-up (allocator, kernel selection), so it is left out."""
    used = plan["precisions"][precision]
    output_dir = Path(plan["work"]) / f"mlm_{precision}"
    command = [sys.executable, *train_mlm_flags(plan, output_dir, plan["mlm_steps"], plan["logging_steps"]),
               "--mixed_precision", used]
    ran = run_logged(plan, f"mlm_{precision}", command)
    rows = metrics(output_dir)
    windows = [r for r in rows if "tokens_per_second" in r]
    if not windows or windows[-1]["step"] != plan["mlm_steps"]:
        raise StepFailed(f"{output_dir}/metrics.jsonl does not reach update {plan['mlm_steps']}")
    timed = windows[1:] or windows
    evals = [r for r in rows if "eval_loss" in r]
    return dict(ran, precision=used, updates=windows[-1]["step"], tokens_per_update=plan["mlm"]["batch"] *
                plan["mlm"]["model"]["max_seq_length"],
                tokens_per_second=statistics.median(r["tokens_per_second"] for r in timed),
                timed_windows=len(timed), peak_memory_gb=max(r["peak_memory_gb"] for r in windows),
                skipped_updates=windows[-1].get("skipped_updates"), loss_scale=windows[-1].get("loss_scale"),
                first_eval_loss=evals[0]["eval_loss"], last_eval_loss=evals[-1]["eval_loss"])


def accelerate_launch(plan):
    return [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "1", "--num_machines", "1",
            "--mixed_precision", "bf16", "--dynamo_backend", "no", "--main_process_port", str(free_port()),
            *FSDP2, *plan["fsdp_wrapper"]]


def logged_losses(output_dir, after):
    return {(r["step"], key): r[key] for r in metrics(output_dir) if r["step"] > after
            for key in ("train_loss", "eval_loss") if key in r}


def fsdp2_resume(plan):
    """An FSDP2 run on one process, then the same run resumed from its middle checkpoint (copied into a
    fresh folder, as after a pre-emption): the resumed updates must log the uninterrupted run's losses."""
    from safetensors.torch import load_file

    steps, half = plan["fsdp_steps"], plan["fsdp_steps"] // 2
    straight, resumed = Path(plan["work"]) / "fsdp2", Path(plan["work"]) / "fsdp2_resumed"
    ran = [run_logged(plan, "fsdp2", [*accelerate_launch(plan), *train_mlm_flags(plan, straight, steps, 1, half)])]
    checkpoint = straight / "checkpoints" / f"checkpoint_{half}"
    if not (checkpoint / "pytorch_model_fsdp_0").is_dir():
        raise StepFailed(f"{checkpoint} has no pytorch_model_fsdp_0 (a sharded FSDP checkpoint): FSDP did not run")
    shutil.rmtree(resumed, ignore_errors=True)
    shutil.copytree(checkpoint, resumed / "checkpoints" / f"checkpoint_{half}")
    resume = [word for word in train_mlm_flags(plan, resumed, steps, 1, half) if word != "--overwrite_output_dir"]
    ran.append(run_logged(plan, "fsdp2_resumed",
                          [*accelerate_launch(plan), *resume, "--resume_from_checkpoint", "latest"]))

    want, got = logged_losses(straight, half), logged_losses(resumed, half)
    if set(got) != set(want):
        raise StepFailed(f"the resumed run logged {sorted(got)}, the uninterrupted one {sorted(want)}")
    worst = max(abs(got[k] - want[k]) / abs(want[k]) for k in want)
    one, two = load_file(straight / "model.safetensors"), load_file(resumed / "model.safetensors")
    if one.keys() != two.keys():
        raise StepFailed(f"the resumed model's weights are {sorted(two)}, the uninterrupted one's {sorted(one)}")
    max_diff = max((a.float() - two[k].float()).abs().max().item() for k, a in one.items())
    result = dict(commands=ran, updates=steps, resumed_from=half, losses_compared=len(want),
                  max_relative_loss_difference=worst, max_abs_weight_difference=max_diff,
                  bit_exact=all(torch.equal(a, two[k]) for k, a in one.items()),
                  final_train_loss=want[(steps, "train_loss")])
    if worst > RESUME_RTOL:
        raise StepFailed(f"the resumed run does not end where the uninterrupted one does: losses differ by up to "
                         f"{worst:.2g} (relative; allowed {RESUME_RTOL}); {result}")
    return result


def readme_gpu_commands(heading=OLD, grouped=False):
    """The commands of a block of benchmarks/README.md (the paragraph starting with `heading`, then its first
    ```bash block), as argv lists, with $GPU-style variables expanded; `grouped`: as lists of the commands that run
    side by side (each ending in `&`, up to the `wait`), one list for each other command."""
    text = (harness.HERE / "README.md").read_text()
    block = text.split("\n" + heading, 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    shell_vars, commands, groups, together = {}, [], [], False
    for line in block.replace("\\\n", " ").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line == "wait":
            together = False
            continue
        name, eq, value = line.partition("=")
        if eq and name.isidentifier():  # GPU="..."; a command line has a space before any "="
            shell_vars[name] = shlex.split(value)[0]
            continue
        for name, value in shell_vars.items():
            line = line.replace("$" + name, value)
        argv = shlex.split(line.removesuffix("&"))
        commands.append(argv)
        if together and line.endswith("&"):
            groups[-1].append(argv)
        else:
            groups.append([argv])
        together = line.endswith("&")
    return groups if grouped else commands


def on_cpu(module, args, out):
    """A GPU command's flags shrunk to seconds on CPU: tiny model, tiny n, fp16 as bf16, no memory probes."""
    args = list(args)
    for i, name in enumerate(args[:-1]):
        stand_in = CPU_STAND_INS.get(name)
        if isinstance(stand_in, dict):
            args[i + 1] = stand_in.get(args[i + 1], args[i + 1])
        elif stand_in is not None:
            args[i + 1] = stand_in
    return args + ["--tiny", "--threads", "1", *CPU_FLAGS.get(module, []), "--out", out]


def benchmark_table(plan, *argvs):
    """Commands of a README GPU block, as written there (dry run: shrunk to CPU), side by side: each's result."""
    commands = {}
    for argv in argvs:
        if argv[:2] != ["python", "-m"] or not argv[2].startswith("benchmarks."):
            raise StepFailed("benchmarks/README.md's GPU block has a command this check cannot run: "
                             f"{shlex.join(argv)}")
        if plan["dry_run"]:
            args = on_cpu(argv[2], argv[3:], str(Path(plan["work"]) / "benchmarks"))
        else:
            args = [*argv[3:], "--out", plan["out"]]
        commands[flag(args, "--tag")] = (argv, [sys.executable, "-m", argv[2], *args])
    ran = run_together(plan, {tag: command for tag, (_, command) in commands.items()})
    results = []
    for tag, (argv, command) in commands.items():
        out = Path(flag(command, "--out"))
        result = json.loads((out / f"{tag}.json").read_text())
        results.append(dict(ran[tag], readme_command=shlex.join(argv), result=str(out / f"{tag}.json"),
                            rows=len(result["rows"]), skipped=result.get("skipped", []),
                            table=(out / f"{tag}.md").read_text()))
    return results[0] if len(results) == 1 else dict(command=" & ".join(r["command"] for r in results), runs=results)


# ---------------------------------------------------------------- results

def run_step(results, plan, step, cap_s):
    """One step until its cap; a failing step is recorded with its error, a step past its cap as cut, one with
    no time left as not run, and the check goes on with the next one. The results file is written after it."""
    name, what, estimate, function, arguments = step
    start = time.perf_counter()
    left = plan["end"] - time.monotonic()
    print(f"gpu_check: {name} (estimated {estimate:.0f} s, cap {min(cap_s, left):.0f} s) ...", flush=True)
    if left < min(MIN_STEP_S, cap_s):
        entry = dict(status="not run", error=f"{left:.0f} s of the budget left")
    else:
        plan["deadline"] = time.monotonic() + min(cap_s, left)
        try:
            entry = dict(status="ok", **function(plan, *arguments))
        except StepCut as e:
            entry = dict(status="cut", error=str(e))
        except Exception as e:  # every failure belongs in the results file
            detail = str(e) if isinstance(e, StepFailed) else traceback.format_exc()
            entry = dict(status="failed", error=detail)
    entry.update(seconds=round(time.perf_counter() - start, 1), estimated_s=round(estimate), cap_s=round(cap_s))
    results["steps"][name] = entry
    print(f"gpu_check: {name}: {entry['status']} ({entry['seconds']:.0f} s)" +
          (f"\n{entry['error']}" if entry["status"] != "ok" else ""), flush=True)
    save(results, plan["out"], plan.get("archive"))


def save(results, out, archive=None):
    """The results file and its rendering; and the archive, rewritten too, so that a loan ending mid-check (its
    command killed at its limit) still returns every step finished so far."""
    harness.save_json(Path(out) / "gpu_check.json", results)
    (Path(out) / "gpu_check.md").write_text(render(results))
    if archive:
        pack(out, archive)


def render(results):
    """gpu_check.md: the plan, the numbers of each step, then the benchmark tables as their scripts wrote them."""
    steps = results["steps"]
    machine = results["machine"]
    def fmt(value, spec):
        return "-" if value is None else format(value, spec)

    md = [f"# GPU check{' (dry run on CPU: tiny model, not a measurement)' if results['dry_run'] else ''}", "",
          f"`{results['command']}`, commit {machine.get('git_head', '?')}, {machine.get('gpu') or machine.get('cpu')}, "
          f"torch {machine['torch']}, " + ", ".join(f"{k} {v}" for k, v in results["packages"].items() if k != "torch")
          + ". Status: " + ", ".join(f"{k} {v['status']}" for k, v in steps.items()) + ".", "",
          "The plan (seconds on the GPU, estimated before the run; a step is stopped at its cap):", "",
          results["plan"], ""]
    for name, entry in steps.items():
        md.append(f"## {name}: {entry['status']} ({entry['seconds']:.0f} s; estimated {entry['estimated_s']} s)")
        md.append("")
        if entry["status"] != "ok":
            md += ["```", entry["error"].rstrip(), "```", ""]
        elif name.startswith("mlm"):
            md += ["| precision | updates | tokens/update | tokens/s (median) | peak memory | skipped fp16 updates "
                   "| loss scale | eval loss before / after |", "|---" * 8 + "|",
                   f"| {entry['precision']} | {entry['updates']} | {entry['tokens_per_update']} "
                   f"| {entry['tokens_per_second']:,.0f} | {entry['peak_memory_gb']:.1f} GiB "
                   f"| {fmt(entry['skipped_updates'], 'd')} | {fmt(entry['loss_scale'], 'g')} "
                   f"| {entry['first_eval_loss']:.3f} / {entry['last_eval_loss']:.3f} |", "",
                   f"`{entry['command']}`", ""]
        elif name == "fsdp2_resume":
            md += [f"{entry['updates']} updates under FSDP2; resumed from update {entry['resumed_from']}: "
                   f"{entry['losses_compared']} logged losses differ by at most "
                   f"{entry['max_relative_loss_difference']:.2g} (relative), weights by at most "
                   f"{entry['max_abs_weight_difference']:.2g} "
                   f"({'bit-identical' if entry['bit_exact'] else 'not bit-identical'}).", ""]
            md += [f"`{c['command']}`" for c in entry["commands"]] + [""]
        elif "committed_from" in entry:
            md += [f"Not run again (--skip_committed): the committed result of commit {entry['committed_from']}.", ""]
        else:
            for run in entry.get("runs", [entry]):
                # the script's headings one level below this step's
                lines = ["##" + line if line.startswith("#") else line for line in run["table"].rstrip().splitlines()]
                md += [f"`{run['command']}`", "", *lines, ""]
    return "\n".join(md) + "\n"


def packages():
    """The versions this run used: with the wheelhouse first on PYTHONPATH, its transformers, not the image's."""
    found = {}
    for name in ("torch", "transformers", "accelerate", "datasets", "tokenizers", "linformer-hf"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def main(argv=None):
    started = time.monotonic()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dry_run", action="store_true", help="CPU, tiny model, a few steps (what the tests run)")
    p.add_argument("--plan", action="store_true",
                   help="print the GPU plan with each step's estimated seconds; run nothing")
    p.add_argument("--mlm_steps", type=int, default=MLM_STEPS, help="updates of each MLM run on the GPU")
    p.add_argument("--budget_s", type=float, default=BUDGET_S - INSTALL_S - MARGIN_S,
                   help=f"seconds for all steps (default: {BUDGET_S} less the install's estimate and {MARGIN_S} s for "
                        "the loan's own start and the transfers)")
    p.add_argument("--out", default=None, help="folder of gpu_check.{json,md} and the benchmark tables' files "
                                               "(default: outputs/benchmarks, git-ignored; dry run: --work_dir)")
    p.add_argument("--work_dir", default=None, help="runs and logs (default: runs/gpu_check, runs/gpu_check_dry)")
    p.add_argument("--skip_committed", action="store_true",
                   help="leave out the first check's steps whose results benchmarks/results/gpu holds (ok); their "
                        "entries are carried into the new results file")
    p.add_argument("--archive", default=None, metavar="FILE.tar.gz",
                   help="every file of --out in one archive, rewritten after each step (a GPU loan returns a few "
                        "files only)")
    args = p.parse_args(argv)
    if args.mlm_steps < 2:
        p.error(f"--mlm_steps must be at least 2, got {args.mlm_steps}")
    if args.budget_s <= 0:
        p.error(f"--budget_s must be positive, got {args.budget_s}")
    if args.archive and not args.archive.endswith(".tar.gz"):
        p.error(f"--archive must name a .tar.gz file, got {args.archive!r}")
    committed = committed_steps(harness.RESULTS / "gpu") if args.skip_committed else {}
    gpu = gpu_steps(plan_for(argparse.Namespace(**{**vars(args), "dry_run": False})), skip=committed)
    planned, total = plan_table(gpu)
    print(f"gpu_check: the plan on one GPU (estimated seconds; stopped at the cap):\n{planned}", flush=True)
    if args.plan:
        return 0
    if not args.dry_run and not torch.cuda.is_available():
        p.error("no GPU: torch.cuda.is_available() is False (`--dry_run` runs the same steps on CPU, `--plan` prints "
                "them)")
    plan = plan_for(args)
    Path(plan["work"]).mkdir(parents=True, exist_ok=True)
    if plan["dry_run"]:
        with MOBY_DICK.open() as src, Path(plan["corpus"]).open("w") as dst:
            dst.writelines(src.readlines()[:15])
    plan["out"] = str(Path(args.out or (plan["work"] if plan["dry_run"] else harness.OUTPUT)).resolve())
    plan["end"] = started + (float("inf") if plan["dry_run"] else args.budget_s)
    plan["archive"] = args.archive
    command = "python -m benchmarks.gpu_check" + (" " + shlex.join(argv if argv is not None else sys.argv[1:]))
    results = dict(command=command.strip(), dry_run=plan["dry_run"], plan=planned, estimated_total_s=round(total),
                   machine=harness.machine_info(torch.device("cpu" if plan["dry_run"] else "cuda")),
                   packages=packages(), steps={})
    for step in gpu_steps(plan, skip=committed):
        run_step(results, plan, step, DRY_RUN_CAP_S if plan["dry_run"] else CAP_FACTOR * step[2])
    results["steps"].update(committed)
    save(results, plan["out"], args.archive)
    unfinished = [name for name, entry in results["steps"].items() if entry["status"] != "ok"]
    print(f"wrote {Path(plan['out']) / 'gpu_check'}.{{json,md}}" +
          (f"; not finished: {', '.join(unfinished)}" if unfinished else ""))
    if args.archive:
        print(f"wrote {args.archive}")
    return 1 if unfinished else 0


def pack(folder, archive):
    """Every file directly in `folder` (the results: tables, JSON, plots, gpu_check.{json,md}) in one .tar.gz,
    named as they lie in benchmarks/results/gpu, so that `tar -xzf ARCHIVE -C benchmarks/results/gpu` puts them
    there."""
    import tarfile

    archive = Path(archive).resolve()
    part = archive.with_name(f"{archive.name}.part")  # then renamed: a kill mid-write leaves the last whole one
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(part, "w:gz") as tar:
        for path in sorted(Path(folder).iterdir()):
            if path.is_file() and path.resolve() not in (archive, part):
                tar.add(path, arcname=path.name)
    part.replace(archive)
    return archive


if __name__ == "__main__":
    sys.exit(main())
