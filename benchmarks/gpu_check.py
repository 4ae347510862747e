"""Everything that needs a GPU, in one command for the day one is lent (`make gpu-check`).

No GPU has been lent to this project, so the claims that only a GPU can settle are collected here and
run in one go on one GPU, into one results file (`gpu_check.json` and its rendering `gpu_check.md`, beside the
benchmark tables' own files, in `--out`: outputs/benchmarks unless asked; `make gpu-check` asks for
benchmarks/results):

1. a few hundred masked-LM updates with `train_mlm.py` at RoBERTa-base size (the model of
   `configs/linformer_base_n512_k256_layerwise.yaml`, on the bundled Moby Dick: the GPU machine may
   have no network) in fp16 and in bf16: tokens/s from the run's `metrics.jsonl`, and how many fp16
   updates the gradient scaler skipped;
2. `accelerate launch --use_fsdp --fsdp_version 2` of `train_mlm.py` on the one GPU, then the same run
   resumed from its middle checkpoint, which must end where the uninterrupted run ends;
3. the benchmark tables against RoBERTa-sdpa (flash kernels on a GPU in fp16/bf16) and ModernBERT:
   the commands of benchmarks/README.md's GPU block, read from that block, so the README and this
   check cannot drift apart.

A step that fails is recorded with its error and the next one still runs; the command exits non-zero
at the end if any failed. Each run's full output is in `--work_dir`/logs.

    python -m benchmarks.gpu_check                # one GPU; writes outputs/benchmarks/gpu_check.{json,md}
    python -m benchmarks.gpu_check --dry_run      # CPU, tiny model, a few steps: what the tests run

`--dry_run` runs the same steps on CPU so that they cannot rot: a tiny model and a few updates, bf16
where the GPU run uses fp16 (CPU fp16 training is refused), FSDP switched on for CPU processes by
`tests/fsdp_on_cpu.py` (Accelerate enables it on GPUs only), and of the README's GPU block the first
command of each script with tiny n (tests/test_benchmarks.py runs all of them that way).
"""

import argparse
import json
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import time
import traceback

import torch
from linformer_training.arguments import format_overrides, read_recipe
from linformer_training.tracking import read_jsonl

from benchmarks import harness

ROOT = os.path.dirname(harness.HERE)
RECIPE = os.path.join(ROOT, "configs", "linformer_base_n512_k256_layerwise.yaml")
MOBY_DICK = os.path.join(ROOT, "data", "moby_dick", "chapters.jsonl")
FSDP2 = ["--use_fsdp", "--fsdp_version", "2", "--fsdp_sync_module_states", "false",
         "--fsdp_activation_checkpointing", "true", "--fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP",
         "--fsdp_transformer_layer_cls_to_wrap", "LinformerLayer"]
# GPU kernels such as the embedding's backward add in a nondeterministic order, so a resumed GPU run may
# differ from the uninterrupted one in the last bits: its losses must agree to this relative tolerance,
# and whether the weights are bit-identical (they are on CPU) is reported beside it.
RESUME_RTOL = 1e-3
# Values that shrink a GPU command of benchmarks/README.md to seconds on CPU; every flag it names stays.
CPU_STAND_INS = {"--device": "cpu", "--n": "64,128", "--k": "16,32", "--pairs": "64:16,128:32", "--repeats": "1",
                 "--warmup": "0", "--dtype": {"fp16": "bf16", "float16": "bf16"}}


class StepFailed(Exception):
    """A failure whose message already says what and why: recorded as it is, without a traceback."""


# ---------------------------------------------------------------- the plan: GPU or dry run

def plan_for(args):
    """The sizes and step counts of each run: the GPU's, or the dry run's (seconds on CPU)."""
    recipe = read_recipe(RECIPE)
    work = os.path.abspath(args.work_dir or os.path.join(ROOT, "runs", "gpu_check_dry" if args.dry_run else "gpu_check"))
    if not args.dry_run:
        # The recipe's model and optimizer; its Hub corpus and tokenizer may be out of reach of the GPU machine
        # (the bundled Moby Dick and a tokenizer trained on it instead), and its 10k warm-up exceeds the run.
        return dict(dry_run=False, work=work, corpus=MOBY_DICK, env={},
                    mlm=dict(model=recipe["config_overrides"], tokenizer_vocab_size=4096,
                             batch=recipe["per_device_train_batch_size"], learning_rate=recipe["learning_rate"],
                             warmup=30, eval_samples=64),
                    mlm_steps=args.mlm_steps, logging_steps=25, precisions={"fp16": "fp16", "bf16": "bf16"},
                    fsdp_steps=40, fsdp_wrapper=[], timeout=None)
    tiny = {**recipe["config_overrides"], "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
            "intermediate_size": 64, "max_seq_length": 64, "projected_dim": 16,
            "vocab_size": 512}  # above the tokenizer's, as at base size (50265 vs 4096)
    return dict(dry_run=True, work=work, corpus=os.path.join(work, "moby15.jsonl"),
                env={"OMP_NUM_THREADS": "1", "ACCELERATE_USE_CPU": "1"},
                mlm=dict(model=tiny, tokenizer_vocab_size=400, batch=8, learning_rate=3e-3, warmup=1, eval_samples=16),
                mlm_steps=6, logging_steps=2, precisions={"fp16": "bf16", "bf16": "bf16"},
                fsdp_steps=4, fsdp_wrapper=[os.path.join(ROOT, "tests", "fsdp_on_cpu.py")], timeout=300)


# ---------------------------------------------------------------- running things

def run_logged(plan, name, command):
    """Run `command` from the repository root, its output in logs/<name>.log; a failure is StepFailed
    with the command and the end of its output, which is where train_mlm.py and the launcher say why."""
    log = os.path.join(plan["work"], "logs", name + ".log")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **plan["env"]}
    start = time.perf_counter()
    with open(log, "w") as f:
        f.write("$ " + shlex.join(command) + "\n")
        f.flush()
        try:
            code = subprocess.run(command, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT,
                                  timeout=plan["timeout"]).returncode
        except subprocess.TimeoutExpired:
            code = f"a timeout ({plan['timeout']} s)"
    seconds = time.perf_counter() - start
    if code != 0:
        with open(log) as f:
            lines = f.readlines()[1:]
        # the launcher's own report comes last and names no cause: the lines that say "error" come first
        said = [line for line in lines[:-15] if "error" in line.lower()][-5:]
        raise StepFailed(f"`{shlex.join(command)}` ended with {code} after {seconds:.0f} s; from {log}:\n"
                         + "".join(said + lines[-15:]))
    return dict(command=shlex.join(command), seconds=round(seconds, 1), log=log)


def train_mlm_flags(plan, output_dir, steps, logging_steps, checkpointing_steps=0):
    mlm = plan["mlm"]
    return ["train_mlm.py", "--train_file", plan["corpus"], "--model_type", "linformer",
            "--config_overrides", format_overrides(mlm["model"]), "--tokenizer_vocab_size", str(mlm["tokenizer_vocab_size"]),
            "--per_device_train_batch_size", str(mlm["batch"]), "--learning_rate", str(mlm["learning_rate"]),
            "--warmup_steps", str(mlm["warmup"]), "--max_steps", str(steps), "--logging_steps", str(logging_steps),
            "--eval_steps", "0", "--max_eval_samples", str(mlm["eval_samples"]), "--report_to", "none",
            "--checkpointing_steps", str(checkpointing_steps), "--save_total_limit", "2",
            "--output_dir", output_dir, "--overwrite_output_dir"]


def metrics(output_dir):
    path = os.path.join(output_dir, "metrics.jsonl")
    if not os.path.isfile(path):
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
    output_dir = os.path.join(plan["work"], f"mlm_{precision}")
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


def fsdp2_resume(plan):
    """An FSDP2 run on one process, then the same run resumed from its middle checkpoint (copied into a
    fresh folder, as after a pre-emption): the resumed updates must log the uninterrupted run's losses."""
    from safetensors.torch import load_file

    steps, half = plan["fsdp_steps"], plan["fsdp_steps"] // 2
    def launch():
        return [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "1", "--num_machines", "1",
                "--mixed_precision", "bf16", "--dynamo_backend", "no", "--main_process_port", str(free_port()),
                *FSDP2, *plan["fsdp_wrapper"]]

    straight, resumed = os.path.join(plan["work"], "fsdp2"), os.path.join(plan["work"], "fsdp2_resumed")
    ran = [run_logged(plan, "fsdp2", [*launch(), *train_mlm_flags(plan, straight, steps, 1, half)])]
    checkpoint = os.path.join(straight, "checkpoints", f"checkpoint_{half}")
    if not os.path.isdir(os.path.join(checkpoint, "pytorch_model_fsdp_0")):
        raise StepFailed(f"{checkpoint} has no pytorch_model_fsdp_0 (a sharded FSDP checkpoint): FSDP did not run")
    shutil.rmtree(resumed, ignore_errors=True)
    shutil.copytree(checkpoint, os.path.join(resumed, "checkpoints", f"checkpoint_{half}"))
    resume = [flag for flag in train_mlm_flags(plan, resumed, steps, 1, half) if flag != "--overwrite_output_dir"]
    ran.append(run_logged(plan, "fsdp2_resumed", [*launch(), *resume, "--resume_from_checkpoint", "latest"]))

    def losses(output_dir):
        return {(r["step"], key): r[key] for r in metrics(output_dir) if r["step"] > half
                for key in ("train_loss", "eval_loss") if key in r}

    want, got = losses(straight), losses(resumed)
    if set(got) != set(want):
        raise StepFailed(f"the resumed run logged {sorted(got)}, the uninterrupted one {sorted(want)}")
    worst = max(abs(got[k] - want[k]) / abs(want[k]) for k in want)
    one, two = load_file(os.path.join(straight, "model.safetensors")), load_file(os.path.join(resumed, "model.safetensors"))
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


def readme_gpu_commands():
    """The commands of benchmarks/README.md's GPU block, as argv lists, with $GPU expanded."""
    text = open(os.path.join(harness.HERE, "README.md")).read()
    block = text.split("\nOn a GPU", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    shell_vars, commands = {}, []
    for line in block.replace("\\\n", " ").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, eq, value = line.partition("=")
        if eq and name.isidentifier():  # GPU="..."; a command line has a space before any "="
            shell_vars[name] = shlex.split(value)[0]
            continue
        for name, value in shell_vars.items():
            line = line.replace("$" + name, value)
        commands.append(shlex.split(line))
    return commands


def on_cpu(args, out):
    """A GPU command's flags shrunk to seconds on CPU: tiny model, tiny n, fp16 as bf16, no memory probes."""
    args = list(args)
    for i, flag in enumerate(args[:-1]):
        stand_in = CPU_STAND_INS.get(flag)
        if isinstance(stand_in, dict):
            args[i + 1] = stand_in.get(args[i + 1], args[i + 1])
        elif stand_in is not None:
            args[i + 1] = stand_in
    return args + ["--tiny", "--threads", "1", "--no-memory", "--out", out]


def benchmark_tables(plan):
    """The README's GPU commands, as written there (dry run: the first of each script, shrunk to CPU)."""
    commands = readme_gpu_commands()
    if plan["dry_run"]:
        firsts = {}
        for argv in commands:
            firsts.setdefault(argv[2], argv)
        commands = list(firsts.values())
    tables = []
    for argv in commands:
        if argv[:2] != ["python", "-m"] or not argv[2].startswith("benchmarks."):
            raise StepFailed(f"benchmarks/README.md's GPU block has a command this check cannot run: {shlex.join(argv)}")
        dry_out = os.path.join(plan["work"], "benchmarks")
        args = on_cpu(argv[3:], dry_out) if plan["dry_run"] else [*argv[3:], "--out", plan["out"]]
        tag = args[args.index("--tag") + 1]
        ran = run_logged(plan, tag, [sys.executable, "-m", argv[2], *args])
        base = os.path.join(args[args.index("--out") + 1], tag)
        result = json.load(open(base + ".json"))
        tables.append(dict(ran, readme_command=shlex.join(argv), result=base + ".json", rows=len(result["rows"]),
                           skipped=result.get("skipped", []), table=open(base + ".md").read()))
    return dict(tables=tables)


# ---------------------------------------------------------------- results

def run_step(results, name, step, *args):
    """A failing step is recorded with its error, and the check goes on with the next one."""
    start = time.perf_counter()
    print(f"gpu_check: {name} ...", flush=True)
    try:
        entry = dict(status="ok", **step(*args))
    except Exception as e:  # noqa: BLE001 - every failure belongs in the results file
        detail = str(e) if isinstance(e, StepFailed) else traceback.format_exc()
        entry = dict(status="failed", error=detail)
    entry["seconds"] = round(time.perf_counter() - start, 1)
    results["steps"][name] = entry
    print(f"gpu_check: {name}: {entry['status']} ({entry['seconds']:.0f} s)" +
          (f"\n{entry['error']}" if entry["status"] == "failed" else ""), flush=True)


def render(results):
    """gpu_check.md: the numbers of each step, then the benchmark tables as their scripts wrote them."""
    steps = results["steps"]
    machine = results["machine"]
    def fmt(value, spec):
        return "-" if value is None else format(value, spec)

    md = [f"# GPU check{' (dry run on CPU: tiny model, not a measurement)' if results['dry_run'] else ''}", "",
          f"`{results['command']}`, commit {machine.get('git_head', '?')}, {machine.get('gpu') or machine.get('cpu')}, "
          f"torch {machine['torch']}. Status: " + ", ".join(f"{k} {v['status']}" for k, v in steps.items()) + ".", ""]
    for name, entry in steps.items():
        md.append(f"## {name}: {entry['status']} ({entry['seconds']:.0f} s)")
        md.append("")
        if entry["status"] == "failed":
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
                   f"{entry['losses_compared']} logged losses differ by at most {entry['max_relative_loss_difference']:.2g} "
                   f"(relative), weights by at most {entry['max_abs_weight_difference']:.2g} "
                   f"({'bit-identical' if entry['bit_exact'] else 'not bit-identical'}).", ""]
            md += [f"`{c['command']}`" for c in entry["commands"]] + [""]
        else:
            for table in entry["tables"]:
                # the script's headings one level below this step's
                lines = ["##" + line if line.startswith("#") else line for line in table["table"].rstrip().splitlines()]
                md += [f"`{table['command']}` ({table['seconds']:.0f} s)", "", *lines, ""]
    return "\n".join(md) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dry_run", action="store_true", help="CPU, tiny model, a few steps (what the tests run)")
    p.add_argument("--mlm_steps", type=int, default=300, help="updates of each MLM run on the GPU")
    p.add_argument("--out", default=None, help="folder of gpu_check.{json,md} and the benchmark tables' files (default: "
                                               "outputs/benchmarks, git-ignored; dry run: --work_dir)")
    p.add_argument("--work_dir", default=None, help="runs and logs (default: runs/gpu_check, runs/gpu_check_dry)")
    args = p.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        p.error("no GPU: torch.cuda.is_available() is False (`--dry_run` runs the same steps on CPU)")
    if args.mlm_steps < 2:
        p.error(f"--mlm_steps must be at least 2, got {args.mlm_steps}")
    plan = plan_for(args)
    os.makedirs(plan["work"], exist_ok=True)
    if plan["dry_run"]:
        with open(MOBY_DICK) as src, open(plan["corpus"], "w") as dst:
            dst.writelines(src.readlines()[:15])
    out = plan["out"] = os.path.abspath(args.out or (plan["work"] if plan["dry_run"] else harness.OUTPUT))
    command = "python -m benchmarks.gpu_check" + (" " + shlex.join(argv if argv is not None else sys.argv[1:]))
    results = dict(command=command.strip(), dry_run=plan["dry_run"],
                   machine=harness.machine_info(torch.device("cpu" if plan["dry_run"] else "cuda")), steps={})

    run_step(results, "mlm_fp16", mlm_updates, plan, "fp16")
    run_step(results, "mlm_bf16", mlm_updates, plan, "bf16")
    run_step(results, "fsdp2_resume", fsdp2_resume, plan)
    run_step(results, "benchmarks", benchmark_tables, plan)

    harness.save_json(os.path.join(out, "gpu_check.json"), results)
    with open(os.path.join(out, "gpu_check.md"), "w") as f:
        f.write(render(results))
    failed = [name for name, entry in results["steps"].items() if entry["status"] != "ok"]
    print(f"wrote {os.path.join(out, 'gpu_check')}.{{json,md}}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
