# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Run the quality study: pretrain each run of experiments/quality/study.py with train_mlm.py, then finetune it
on Rotten Tomatoes with finetune_glue.py, one process at a time. Results go to experiments/quality/results/NAME.json
(config, commands, validation perplexity curve, final perplexity, finetuning accuracies, order_check.py's and
projection_check.py's reports), written when a run's pretraining ends and again after each check and finetuning seed.

Checkpoints, logs and the shared tokenizer go to --runs_dir (default ~/runs/quality), outside the work tree.
Every run is resumable: pretraining saves a checkpoint every `checkpointing_steps` updates and this script always
passes --resume_from_checkpoint latest, so an interrupted invocation continues where it stopped when run again;
finished work (a results file, a finetuning seed in it) is skipped.

The news corpus and Rotten Tomatoes are not bundled: they are read from --data_dir (default ../shared/data,
where developer checkouts have them; where to get them: experiments/README.md, "Data").

    python -m experiments.quality.run_study                          # every run, in priority order
    python -m experiments.quality.run_study --data_dir ~/linformer-data --runs_dir /scratch/quality
    python -m experiments.quality.run_study --only roberta_n128_s0 linformer_n128_k32_layerwise_s0
    python -m experiments.quality.run_study --stage pretrain         # pretraining only
    python -m experiments.quality.run_study --finetune_seeds 0       # one finetuning seed per run
    python -m experiments.quality.run_study --exact_short_path       # Linformer runs, short inputs read exactly
    python -m experiments.quality.run_study --extend --only roberta_n128_s0 --mixed_precision no   # issue 47
    python -m experiments.quality.run_study --settle --only roberta_n512_short128_s0 --mixed_precision no  # 66
    python -m experiments.quality.run_study --list
"""

import argparse
import contextlib
import csv
import hashlib
import importlib
import io
import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

from experiments.quality import study

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "experiments/quality/results"


@dataclass
class State:
    """What one invocation works with, passed to each step that needs it: its parsed arguments, the runs folder
    (checkpoints, logs), the shared tokenizer in it, and the environment of the commands it runs."""
    args: argparse.Namespace
    runs_dir: Path
    tokenizer: Path
    env: dict


def make_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", nargs="+", metavar="NAME", help="run just these runs (names from --list)")
    p.add_argument("--stage", choices=["all", "pretrain", "finetune"], default="all")
    p.add_argument("--finetune_seeds", type=int, nargs="+", default=list(study.FINETUNE_SEEDS))
    p.add_argument("--rebuild", action="store_true", help="pretrain again from scratch even where results exist; "
                   "the results file is rewritten")
    p.add_argument("--exact_short_path", action="store_true",
                   help="finetune the pretrained Linformer runs with learned E/F again with every Rotten Tomatoes "
                        "input read by exact attention with the pretrained weights (study.finetune_exact_overrides): "
                        "pretraining only fed n-token blocks through E/F; results go to results/exact_rt/NAME.json")
    p.add_argument("--extend", action="store_true",
                   help=f"train the runs of study.EXTENDED again from their first update, stopping at each of "
                        f"{', '.join(map(str, study.EXTENDED_STEPS))} updates to check and finetune the model there; "
                        f"results go to results/extended/NAME.json, checkpoints to --runs_dir/extended/NAME")
    p.add_argument("--extend_to", type=int, choices=study.EXTENDED_STEPS,
                   help="with --extend, stop at this point (default the last): several runs then advance together, "
                        "each a point at a time, instead of one to the end before the next starts")
    p.add_argument("--settle", action="store_true",
                   help="train the runs of study.SETTLED (the paper's n = 512) again from their first update and on "
                        "n-token blocks past the budget until their perplexity settles (study.SETTLE: a stretch of "
                        f"{study.SETTLE['window']:,} updates lowers it by less than {study.SETTLE['fall']:.0%}%, or "
                        f"{study.SETTLE['long_updates']:,} updates on n-token blocks), checking and finetuning them "
                        "at the budget and there; results go to results/settled/NAME.json, checkpoints to "
                        "--runs_dir/settled/NAME")
    p.add_argument("--mixed_precision", choices=["no", "fp16", "bf16"],
                   help=f"the precision of the pretraining and finetuning this invocation runs (default the "
                        f"study's, {study.PRETRAIN['mixed_precision']}); a CPU without bf16 instructions runs bf16 "
                        f"many times slower than fp32 ('no'). Recorded in the results file; a run started in one "
                        f"precision is not resumed in another")
    p.add_argument("--hardware_note", metavar="TEXT", help="added to the hardware each record names: how the device "
                   "was shared (gpu_runs.py: 'shared by 9 runs at once under MPS')")
    p.add_argument("--list", action="store_true", help="print the runs and whether they are done, then exit")
    p.add_argument("--runs_dir", metavar="DIR", help=f"checkpoints, logs and the tokenizer (default {study.RUNS_DIR})")
    study.add_data_dir_argument(p)
    return p


def chosen_runs(args, p):
    """The runs this invocation works on (--only, narrowed by --exact_short_path or --extend); flags that do not go
    together are a parser error. --exact_short_path sets args.stage to "finetune"."""
    runs = study.select(args.only, p)
    if args.exact_short_path:
        if args.stage == "pretrain" or args.rebuild:
            p.error("--exact_short_path finetunes the pretrained runs as they are: it takes neither --stage pretrain "
                    "nor --rebuild")
        args.stage = "finetune"
        runs = [r for r in runs if study.learned_projections(r)]
    if args.extend and args.settle:
        p.error("--extend and --settle train different runs past the budget: pass one of them")
    for flag, chosen in (("extend", study.EXTENDED), ("settle", study.SETTLED)):
        if not getattr(args, flag):
            continue
        if args.exact_short_path or args.rebuild or args.stage != "all":
            p.error(f"--{flag} runs every stage of each of its runs, resuming what exists: it takes none of "
                    "--exact_short_path, --rebuild, --stage")
        runs = [r for r in runs if r["name"] in chosen]
        if args.only and len(runs) < len(args.only):
            p.error(f"--{flag}: only these runs take it: {', '.join(chosen)}")
    if args.extend_to and not args.extend:
        p.error("--extend_to is where --extend stops: pass --extend with it")
    if any(s < 0 for s in args.finetune_seeds):
        p.error("--finetune_seeds must be non-negative")
    return runs


def make_state(args):
    runs_dir = study.runs_dir(args.runs_dir)
    # One core per process, as agreed on the shared machine (train_mlm.py and finetune_glue.py inherit it).
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           "RAYON_NUM_THREADS": os.environ.get("RAYON_NUM_THREADS", "1"), "TOKENIZERS_PARALLELISM": "false"}
    return State(args=args, runs_dir=runs_dir, tokenizer=runs_dir / study.TOKENIZER, env=env)


def load(name):
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def save(path, result):
    """Write a results file whole (a temporary file renamed over it: an interrupted write leaves the old one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    tmp.replace(path)


def flags(options):
    return [x for key, value in options.items() for x in (f"--{key}", flag_value(value))]


def flag_value(value):
    """A flag's value: a path inside the repository relative to its root (where the commands run), any other
    absolute; a mapping as KEY=VALUE,... with YAML values (train_mlm.py --config_overrides)."""
    if isinstance(value, Path):
        return str(value.relative_to(REPO)) if value.is_relative_to(REPO) else str(value)
    if isinstance(value, dict):
        return ",".join(f"{k}={v if isinstance(v, str) else json.dumps(v, separators=(',', ':'))}"
                        for k, v in value.items())
    return str(value)


def shown(cmd):
    """A command as the results file records it: from the repository root, the home folder as ~."""
    return "python " + " ".join(cmd[1:]).replace(str(Path.home()), "~")


def execute(cmd, log, env):
    """Run one command from the repository root in `env`; its output is appended to `log`; fail loudly."""
    print("$", " ".join(cmd), flush=True)
    start = time.time()
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as f:
        f.write(f"\n$ {' '.join(cmd)}\n")
        f.flush()
        code = subprocess.run(cmd, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT).returncode
    if code:
        with log.open() as f:
            tail = "".join(f.readlines()[-15:])
        sys.exit(f"run_study.py: command failed (exit {code}), log {log}:\n{tail}")
    return time.time() - start


def window_tokens(train_log):
    """Tokens trained on in each logging window of metrics.jsonl (each window logs the running total)."""
    seen = [0] + [m["tokens_seen"] for m in train_log]  # the total before each window, then after the last
    return [m["tokens_seen"] - before for m, before in zip(train_log, seen[:-1], strict=True)]


def window_seconds(train_log):
    """Time spent training in each logging window of metrics.jsonl (its tokens / its tokens per second): it survives
    resumption, where the log keeps the windows up to the checkpoint and the resumed run adds its own."""
    return [tokens / m["tokens_per_second"] for tokens, m in zip(window_tokens(train_log), train_log, strict=True)]


def hardware(state):
    """Where this invocation trains (render.py's Cost table): the GPU train_mlm.py will pick, else the CPU and the
    threads it is given, then --hardware_note (how the device was shared, which its speed depends on). Runs on
    different hardware share the recipe, not the numerics or the speed."""
    import torch
    threads = state.env["OMP_NUM_THREADS"]
    device = (f"{torch.cuda.get_device_name(0)} (CUDA)" if torch.cuda.is_available()
              else f"CPU, {threads} thread{'s' * (threads != '1')}")
    return ", ".join(filter(None, [device, state.args.hardware_note]))


def note_hardware(state, folder):
    """Before train_mlm.py trains in `folder`: the hardware the updates after its newest checkpoint will run on
    (study.hardware_log), which record() reads per logging window."""
    from linformer_training.checkpoints import list_checkpoints

    done = list_checkpoints(folder)
    log = study.hardware_log(folder)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as f:
        f.write(json.dumps({"after_step": int(done[-1].name.split("_")[-1]) if done else 0,
                            "hardware": hardware(state)}) + "\n")


def window_hardware(state, folder, train):
    """The hardware of each logging window of a folder's training log, from the folder's notes (note_hardware). A
    folder without notes (trained before they were kept) ran where this invocation runs; windows before its first
    note ran somewhere not recorded."""
    log = study.hardware_log(folder)
    if log.exists():
        with log.open() as f:
            notes = [json.loads(line) for line in f]
    else:
        notes = [{"after_step": 0, "hardware": hardware(state)}]
    return [next((n["hardware"] for n in reversed(notes) if n["after_step"] < m["step"]), "not recorded")
            for m in train]


def segments_of(windows):
    """(last update, hardware, precision, seconds, tokens) per logging window, in order -> the stretches on one
    hardware in one precision, each with its first and last update, seconds and tokens: where and how a run that
    moved between machines trained, how fast."""
    segments, last = [], 0
    for step, where, precision, seconds, tokens in windows:
        if segments and (segments[-1]["hardware"], segments[-1]["precision"]) == (where, precision):
            seg = segments[-1]
            seg.update(last_step=step, seconds=seg["seconds"] + seconds, tokens_seen=seg["tokens_seen"] + tokens)
        else:
            segments.append({"hardware": where, "precision": precision, "first_step": last + 1, "last_step": step,
                             "seconds": seconds, "tokens_seen": tokens})
        last = step
    return [{**seg, "seconds": round(seg["seconds"], 1)} for seg in segments]


def described(segments):
    """A record's `hardware`: the one device it trained on, or each with its updates."""
    if len({seg["hardware"] for seg in segments}) == 1:
        return segments[0]["hardware"]
    return "; ".join(f"{seg['hardware']} (updates {seg['first_step']:,}-{seg['last_step']:,})" for seg in segments)


def pretrain(state, r, out, data, **changes):
    """Pretrain one run (resuming its newest checkpoint, if any) and return its results record. `changes`
    replace the study's options (--extend: max_steps, mixed_precision)."""
    n = r["n"]
    if study.TOKENS_PER_UPDATE % n:
        sys.exit(f"run_study.py: {r['name']}: n={n} does not divide TOKENS_PER_UPDATE={study.TOKENS_PER_UPDATE}")
    options = {"config": r["config"], **data, **study.PRETRAIN, "tokenizer_name": state.tokenizer,
               "model_type": r["model_type"],
               "config_overrides": {**study.PRETRAIN["config_overrides"], **r["config_overrides"]},
               "per_device_train_batch_size": study.TOKENS_PER_UPDATE // n, "seed": r["seed"], "output_dir": out,
               # A folder with a checkpoint is resumed; one without (never started, or cut before its first
               # checkpoint) is started afresh.
               "resume_from_checkpoint": "latest", "overwrite_output_dir": "true", **changes}
    started = [folder / "train_config.yaml" for folder in (out, out.with_name(f"{out.name}_short"))]
    begun = {yaml.safe_load(path.read_text())["mixed_precision"] for path in started if path.exists()}
    if other := begun - {options["mixed_precision"]}:  # a folder being resumed keeps the precision it started with
        sys.exit(f"run_study.py: {r['name']} was started with --mixed_precision {other.pop()}: pass it again to "
                 "resume (a run mixing precisions would be neither's), or --rebuild")
    if r["model_type"] == "peer":  # its own start folder, trained as a checkpoint whose code it carries
        options = continued(options, peer_start(state, r), trust_remote_code="true")
    if "short" in r:
        return pretrain_in_phases(state, r, out, options, **r["short"])
    cmd = [sys.executable, "train_mlm.py", *flags(options)]
    note_hardware(state, out)
    execute(cmd, out.with_suffix(".pretrain.log"), state.env)
    return record(state, r, out, [cmd])


def continued(options, start, **extra):
    """`options` training the model of folder `start` instead of a new one (the folder's config is the model's)."""
    kept = {key: value for key, value in options.items() if key not in ("config", "model_type", "config_overrides")}
    return {"model_name_or_path": start, **extra, **kept}


def pretrain_in_phases(state, r, out, options, block_size, steps):
    """Issue 47, item 2: the first `steps` updates on blocks of `block_size` tokens (as many tokens per update, in a
    folder of their own, NAME_short), then the rest of the budget on n-token blocks in `out`, starting from the
    short phase's weights (its optimizer state does not carry over: the long phase warms up again). Each phase is a
    plain train_mlm.py command that resumes on its own; the long one starts only when the short one has finished."""
    total, short = options["max_steps"], out.with_name(f"{out.name}_short")
    if not 0 < steps < total or study.TOKENS_PER_UPDATE % block_size:
        sys.exit(f"run_study.py: {r['name']}: a short phase of {steps} updates on {block_size}-token blocks does not "
                 f"fit a budget of {total} updates of {study.TOKENS_PER_UPDATE} tokens")
    first = [sys.executable, "train_mlm.py", *flags({
        **options, "block_size": block_size, "per_device_train_batch_size": study.TOKENS_PER_UPDATE // block_size,
        "max_steps": steps, "output_dir": short})]
    then = [sys.executable, "train_mlm.py", *flags({**continued(options, short), "max_steps": total - steps})]
    if not finished(short, steps):
        if twin := trained_twin(r, short, steps, options["mixed_precision"]):
            share_short_phase(twin, short, first)
        else:
            note_hardware(state, short)
            execute(first, short.with_suffix(".pretrain.log"), state.env)
    note_hardware(state, out)
    execute(then, out.with_suffix(".pretrain.log"), state.env)
    return record(state, r, out, [first, then], short)


def trained_twin(r, short, steps, precision):
    """The short-phase folder of a run that trains the same short phase as `r` (study.short_phase_twins), beside
    `short`, finished after `steps` updates in `precision`; None if no twin has one."""
    for name in study.short_phase_twins(r):
        folder = short.with_name(f"{name}_short")
        if finished(folder, steps) and precision == yaml.safe_load(
                (folder / "train_config.yaml").read_text())["mixed_precision"]:
            return folder
    return None


def command_config(command):
    """The model config and seed a train_mlm.py `command` (a new model) starts from, as train_mlm.py builds them."""
    import train_mlm
    from linformer_training.tokenization import load_tokenizer

    args = train_mlm.parse_args(train_mlm.MLMArguments, command[2:], prog="train_mlm.py")  # [python, train_mlm.py, ...]
    return train_mlm.model_config(args, load_tokenizer(args.tokenizer_name)), args.seed


def start_weights(config, seed):
    """The weights a new model of `config` starts from under `seed` (train_mlm.py seeds, then builds it)."""
    from transformers import AutoModelForMaskedLM, set_seed

    set_seed(seed)
    model = AutoModelForMaskedLM.from_config(config)
    return model, model.state_dict()


def projection_names(model):
    return {f"{model.base_model_prefix}.encoder.projections.{name}"
            for name, _ in model.base_model.encoder.projections.named_parameters()}


def share_short_phase(twin, short, command):
    """Issue 66: `short` made from its twin's finished short phase (`twin`) instead of training it again: the twin's
    weights, this run's own projections as `command` (this run's short phase) starts them, which that phase would
    not change (study.PROJECTION_ONLY). Refused unless the two start alike apart from the projections, each
    projection starts from fixed values, and the twin's are still at theirs. The twin's logs, training config and
    hardware notes come along (its updates are this run's), with short_phase.json naming it."""
    import torch
    from transformers import AutoConfig, AutoModelForMaskedLM

    import linformer_hf  # noqa: F401  (the Linformer registered with the Auto classes)
    from linformer_training import checkpoints

    config, seed = command_config(command)
    model, own = start_weights(config, seed)
    other_seed = start_weights(config, seed + 1)[1]
    twin_model, twin_start = start_weights(AutoConfig.from_pretrained(twin), seed)
    trained = AutoModelForMaskedLM.from_pretrained(twin, dtype=torch.float32).state_dict()
    names, twin_names = projection_names(model), projection_names(twin_model)
    unshared = (trained.keys() - twin_names) ^ (own.keys() - names)
    problems = [
        *([f"only one of them has {', '.join(sorted(unshared))}"] if unshared else []),
        *(f"{key} starts unlike the twin's" for key in sorted(own.keys() - names)
          if key in twin_start and not torch.equal(own[key], twin_start[key])),
        *(f"{key} starts from the seed" for key in sorted(names) if not torch.equal(own[key], other_seed[key])),
        *(f"the twin's {key} trained" for key in sorted(twin_names) if not torch.equal(twin_start[key], trained[key]))]
    if problems:
        sys.exit(f"run_study.py: {short.name} cannot share the short phase of {twin.name}: " + "; ".join(problems))
    model.load_state_dict({key: own[key] if key in names else trained[key] for key in own})
    building = short.with_name(f"{short.name}.sharing")
    shutil.rmtree(building, ignore_errors=True)
    shutil.copytree(twin, building, ignore=shutil.ignore_patterns(
        "checkpoints", "model.safetensors", "config.json", "README.md", checkpoints.MANIFEST))  # the twin's own
    model.save_pretrained(building)
    (building / "short_phase.json").write_text(json.dumps({"trained_as": twin.name.removesuffix("_short")}) + "\n")
    checkpoints.write_manifest(building)
    if study.hardware_log(twin).exists():
        shutil.copyfile(study.hardware_log(twin), study.hardware_log(short))
    shutil.rmtree(short, ignore_errors=True)
    building.rename(short)
    with short.with_suffix(".pretrain.log").open("a") as f:
        f.write(f"\nshort phase shared: the weights of {twin} after its short phase, this run's own projections\n")
    print(f"{short.name}: the short phase of {twin.name}, with this run's own projections", flush=True)


def shared_from(short):
    """{"trained_as": NAME} where a short phase was shared from run NAME's (share_short_phase), else nothing."""
    note = short / "short_phase.json"
    return json.loads(note.read_text()) if note.exists() else {}


def finished(folder, steps):
    """Whether the train_mlm.py run in `folder` has saved its model after `steps` updates."""
    log = folder / "metrics.jsonl"
    if not ((folder / "model.safetensors").exists() and log.exists()):
        return False
    with log.open() as f:
        return any(json.loads(line).get("step") == steps and "eval_perplexity" in line for line in f)


def curves(folder, after=(0, 0)):
    """The validation curve and the training log of a train_mlm.py folder (metrics.jsonl), steps and tokens counted
    on from `after` (the step and tokens of a phase before it)."""
    with (folder / "metrics.jsonl").open() as f:
        log = [json.loads(line) for line in f]
    train = [m for m in log if "train_loss" in m]
    tokens_at = {0: 0, **{m["step"]: m["tokens_seen"] for m in train}}
    step, tokens = after
    curve = [{"step": step + m["step"],
              "tokens_seen": tokens + tokens_at.get(m["step"], m["step"] * study.TOKENS_PER_UPDATE),
              "loss": m["eval_loss"], "perplexity": m["eval_perplexity"]} for m in log if "eval_perplexity" in m]
    return curve, train


def record(state, r, out, cmds, short=None):
    """The results record of a pretrained run: its validation curve, training log and seconds, command(s) and
    hardware. A run with a short phase has both phases joined, steps and tokens counted from its first update;
    `short_phase` keeps the short phase's last point (scored on short blocks), where the curve has the long
    phase's first (the same model on n-token blocks)."""
    curve, train, switch, windows = [], [], {}, []
    for folder in filter(None, [short, out]):
        after = (curve[-1]["step"], train[-1]["tokens_seen"]) if curve else (0, 0)
        part, log = curves(folder, after)
        if curve:
            switch = {"short_phase": {**r["short"], "perplexity": curve.pop()["perplexity"], **shared_from(short)}}
        curve += part
        # a folder trains in the precision it started with (prepare refuses another on resume)
        precision = yaml.safe_load((folder / "train_config.yaml").read_text())["mixed_precision"]
        windows += zip([m["step"] + after[0] for m in log], window_hardware(state, folder, log),
                       [precision] * len(log), window_seconds(log), window_tokens(log), strict=True)  # per window
        train += [{**m, "step": m["step"] + after[0], "tokens_seen": m["tokens_seen"] + after[1]} for m in log]
    segments, seconds = segments_of(windows), sum(w[3] for w in windows)
    return {"name": r["name"], "seed": r["seed"], "run": {k: v for k, v in r.items() if k != "name"},
            "pretrain_command": " && ".join(map(shown, cmds)),
            "config": yaml.safe_load((out / "train_config.yaml").read_text()), **switch,
            "curve": curve, "perplexity": curve[-1]["perplexity"], "loss": curve[-1]["loss"],
            "train_curve": [{"step": m["step"], "loss": m["train_loss"]} for m in train],
            "tokens_seen": train[-1]["tokens_seen"], "pretrain_seconds": round(seconds, 1),
            "tokens_per_second": round(train[-1]["tokens_seen"] / seconds), "hardware": described(segments),
            "hardware_segments": segments, "finetune": {}}


def peer_start(state, r):
    """The peer run's untrained folder (experiments/quality/peer.py), written once beside its run folder."""
    start = state.runs_dir / f"{r['name']}_start"
    if not (start / "model.safetensors").exists():
        from experiments.quality.peer import write_start
        from linformer_training.tokenization import load_tokenizer

        write_start(start, {**study.PRETRAIN["config_overrides"], **r["config_overrides"]}, r["seed"],
                    len(load_tokenizer(state.tokenizer)))
    return start


def finetune(state, r, out, seed, data, exact=False, ft_out=None, **changes):
    """Finetune one run's pretrained model on Rotten Tomatoes with one seed (with `exact`, every input read by the
    exact short path; `changes` replace the study's options); its record."""
    ft_out = ft_out or state.runs_dir / f"{r['name']}_rt{'_exact' if exact else ''}_s{seed}"
    options = {**data, **study.FINETUNE, "model_name_or_path": out, "seed": seed, "output_dir": ft_out,
               "overwrite_output_dir": "true", **changes}  # a cut finetuning run (minutes) starts again
    if exact:
        options["config_overrides"] = study.finetune_exact_overrides(r)
    cmd = [sys.executable, "finetune_glue.py", *flags(options)]
    seconds = execute(cmd, ft_out.with_suffix(".log"), state.env)
    scores = json.loads((ft_out / "eval_results.json").read_text())
    return {"accuracy": scores["validation"]["accuracy"], "command": shown(cmd), "seconds": round(seconds, 1),
            "eval_results": scores}


def check(script, out, extra, env):
    """One of this folder's model checks (order_check.py, projection_check.py) on a pretrained run: its JSON report
    and command, for render.py's table of what the models learnt. It runs in this process (a new one would spend
    longer importing than checking), on the threads the command is recorded with."""
    import torch

    cmd = [sys.executable, "-m", f"experiments.quality.{script}", flag_value(out), *extra]
    threads, printed = torch.get_num_threads(), io.StringIO()
    torch.set_num_threads(int(env["OMP_NUM_THREADS"]))
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()) as said:
            importlib.import_module(f"experiments.quality.{script}").main([str(out), *extra])
    except SystemExit as e:
        sys.exit(f"run_study.py: {script}.py failed on {out} (exit {e.code}):\n{said.getvalue()[-2000:]}")
    finally:
        torch.set_num_threads(threads)
    report = json.loads(printed.getvalue().strip().splitlines()[-1])
    report.pop("model")  # the folder, machine-specific: the command names it
    return {**report, "command": shown(cmd)}


def add_checks(state, r, folder, record, path, point=None):
    """What a pretrained model learnt, beyond its perplexity: word order, and (a Linformer) how local its E/F became;
    each check not yet in `point` (one point of an extended or settled record; default the record itself) is run on
    `folder`, and the whole `record` saved to `path` at once (saving the point alone there would leave a file with
    no curve and no other point until the next save)."""
    point = record if point is None else point
    data_dir = state.args.data_dir
    checks = {"order_check": ["--block_size", str(r["n"]), *(["--data_dir", data_dir] if data_dir else [])]}
    if study.learned_projections(r):  # learned E/F to read
        checks["projection_check"] = []
    for script, extra in checks.items():
        if script not in point:
            point[script] = check(script, folder, extra, state.env)
            save(path, record)


def begun(state, r, kind):
    """The results record of a run trained again past the budget (`kind`: "extended" or "settled"), as far as it
    got, with its path and training folder; a run begun in another precision is refused."""
    name, precision = r["name"], state.args.mixed_precision or study.PRETRAIN["mixed_precision"]
    path = RESULTS / kind / f"{name}.json"
    result = json.loads(path.read_text()) if path.exists() else {
        "name": name, "seed": r["seed"], "run": {k: v for k, v in r.items() if k != "name"},
        "mixed_precision": precision, "points": {}}
    if result["mixed_precision"] != precision:
        sys.exit(f"run_study.py: {name} was {kind} with --mixed_precision {result['mixed_precision']}: pass it "
                 f"again to continue (a run mixing precisions would be neither's)")
    return result, path, state.runs_dir / kind / name


def train_to(state, r, out, data, result, path, steps):
    """Train `out` on to `steps` updates (resuming) and keep its curve in `result`; the pretraining record."""
    record = pretrain(state, r, out, data["pretrain"], max_steps=steps, mixed_precision=result["mixed_precision"])
    if record["curve"][-1]["step"] != steps:
        sys.exit(f"run_study.py: {r['name']}: training stopped at update {record['curve'][-1]['step']}, not {steps}")
    result.update({key: record[key] for key in ("config", "curve", "train_curve", "short_phase") if key in record})
    save(path, result)
    return record


def keep_point(state, r, out, result, path, record):
    """The model at the end of `record` copied beside `out` (NAME_stepS) and its point added to `result`."""
    steps = record["curve"][-1]["step"]
    snapshot = out.with_name(f"{out.name}_step{steps}")
    shutil.rmtree(snapshot, ignore_errors=True)
    shutil.copytree(out, snapshot, ignore=shutil.ignore_patterns("checkpoints", "logs", ".*"))
    point = {key: record[key] for key in ("perplexity", "loss", "tokens_seen", "pretrain_seconds",
                                          "pretrain_command", "hardware", "hardware_segments")}
    result["points"][str(steps)] = {**point, "finetune": {}}
    save(path, result)
    if steps == study.PRETRAIN["max_steps"] and load(r["name"]) is None:
        save(RESULTS / f"{r['name']}.json", record)  # the study's record of a run that never ran alone
    print(f"{r['name']}: validation perplexity {point['perplexity']:.2f} after {steps} updates", flush=True)


def finish_point(state, r, out, data, result, path, steps):
    """A kept point checked and finetuned with every seed not yet in it (the results file rewritten after each)."""
    point, snapshot = result["points"][str(steps)], out.with_name(f"{out.name}_step{steps}")
    add_checks(state, r, snapshot, result, path, point)
    for seed in state.args.finetune_seeds:
        if str(seed) not in point["finetune"]:
            point["finetune"][str(seed)] = finetune(
                state, r, snapshot, seed, data["finetune"], ft_out=snapshot.with_name(f"{snapshot.name}_rt_s{seed}"),
                mixed_precision=result["mixed_precision"])
            save(path, result)
            print(f"{r['name']} at {steps} updates: Rotten Tomatoes validation accuracy "
                  f"{point['finetune'][str(seed)]['accuracy']:.4f} (seed {seed})", flush=True)
    mirror_budget_point(r["name"], point)


def extend(state, r, data):
    """Issue 47: one run of study.EXTENDED trained again from its first update to each point of
    study.EXTENDED_STEPS in turn (each a resume with a higher --max_steps: the rate is constant after warmup, so
    where a run stops does not change its updates). At each point a copy of the model is kept, checked and
    finetuned with every seed; the results file is rewritten after each step, so running again continues."""
    result, path, out = begun(state, r, "extended")
    to = state.args.extend_to
    for steps in study.EXTENDED_STEPS[:study.EXTENDED_STEPS.index(to) + 1 if to else None]:
        if str(steps) not in result["points"]:
            keep_point(state, r, out, result, path, train_to(state, r, out, data, result, path, steps))
        finish_point(state, r, out, data, result, path, steps)


def settle(state, r, data):
    """Issue 66, item 2: one run of study.SETTLED trained again from its first update to the study's budget (kept,
    checked and finetuned there, as an extended run's point), then on n-token blocks a stretch of
    study.SETTLE["window"] updates at a time until study.settled says it stops, where the model is kept, checked and
    finetuned again. The curve is saved after every stretch, so running again continues."""
    result, path, out = begun(state, r, "settled")
    budget, switch = study.PRETRAIN["max_steps"], r["short"]["steps"]
    if str(budget) not in result["points"]:
        keep_point(state, r, out, result, path, train_to(state, r, out, data, result, path, budget))
    finish_point(state, r, out, data, result, path, budget)
    record = None
    while (stop := study.settled(result["curve"], switch)) is None:
        record = train_to(state, r, out, data, result, path, result["curve"][-1]["step"] + study.SETTLE["window"])
        print(f"{r['name']}: validation perplexity {record['perplexity']:.2f} after {record['curve'][-1]['step']} "
              f"updates", flush=True)
    result["settled"] = stop
    save(path, result)
    if str(stop["step"]) not in result["points"]:  # (cut before it was kept: the finished folder is read again)
        keep_point(state, r, out, result, path, record or train_to(state, r, out, data, result, path, stop["step"]))
    finish_point(state, r, out, data, result, path, stop["step"])


def mirror_budget_point(name, point):
    """Issue 66: a run of study.EXTENDED that never ran alone (the convolution's new seeds) has its study record
    written from its extension's point at the study's budget, the same updates; that record then takes the point's
    checks and finetuning as they are made, so the 10k tables read it like any other run."""
    plain = load(name)
    if plain is None or plain["pretrain_command"] != point["pretrain_command"]:
        return
    done = {key: point[key] for key in ("order_check", "projection_check", "finetune") if key in point}
    if any(plain.get(key) != value for key, value in done.items()):
        save(RESULTS / f"{name}.json", {**plain, **done})


def reference_tokens(tokenizer, news):
    """The shared tokenizer and both news splits tokenized with it (no special tokens): what the references count."""
    from linformer_training.corpus import load_corpus
    from linformer_training.tokenization import load_tokenizer
    tok, corpus = load_tokenizer(tokenizer), load_corpus(**news)
    return tok, {split: tok(list(corpus[split]["text"]), add_special_tokens=False)["input_ids"]
                 for split in ("train", "validation")}


def unigram_reference(tok, ids):
    """The perplexity of a context-free model (train-split unigram frequencies, add-one smoothed) on the validation
    tokens that masking can pick (no special tokens). A model near it has not learnt to use context."""
    counts = {split: Counter(i for doc in docs for i in doc) for split, docs in ids.items()}
    total, vocab = sum(counts["train"].values()), len(tok)
    nll = -sum(c * math.log((counts["train"][i] + 1) / (total + vocab)) for i, c in counts["validation"].items())
    tokens = sum(counts["validation"].values())
    return {"unigram_perplexity": math.exp(nll / tokens), "validation_tokens": tokens, "train_tokens": total,
            "vocab_size": vocab}


def neighbours_reference(tok, ids, weights=(0.4, 0.4, 0.2)):
    """The perplexity of a count model that sees only a token's two neighbours, on the same validation tokens as
    `unigram_reference`: p(word | before, after) from train-split counts, interpolated with the mean of
    p(word | before) and p(word | after) and the add-one unigram, with fixed weights (not tuned on validation). A
    model that has learnt to read the words around a mask should approach or beat it; one near the unigram line has
    not started."""
    edge = tok.eos_token_id  # a document's neighbour outside it, as packing puts </s> between documents
    unigram, left, right, both, seen_left, seen_right, seen_both = (Counter() for _ in range(7))
    for doc in ids["train"]:
        doc = [edge, *doc, edge]
        for before, word, after in zip(doc[:-2], doc[1:-1], doc[2:], strict=True):  # each token and its neighbours
            unigram[word] += 1
            left[before, word] += 1
            right[word, after] += 1
            both[before, word, after] += 1
            seen_left[before] += 1
            seen_right[after] += 1
            seen_both[before, after] += 1
    total, vocab = sum(unigram.values()), len(tok)
    nll, tokens = 0.0, 0
    for doc in ids["validation"]:
        doc = [edge, *doc, edge]
        for before, word, after in zip(doc[:-2], doc[1:-1], doc[2:], strict=True):  # each token and its neighbours
            p_unigram = (unigram[word] + 1) / (total + vocab)
            p_left = left[before, word] / seen_left[before] if seen_left[before] else p_unigram
            p_right = right[word, after] / seen_right[after] if seen_right[after] else p_unigram
            p_both = both[before, word, after] / seen_both[before, after] if seen_both[before, after] else 0.0
            nll -= math.log(weights[0] * p_both + weights[1] * (p_left + p_right) / 2 + weights[2] * p_unigram)
            tokens += 1
    return {"neighbours_perplexity": math.exp(nll / tokens), "validation_tokens": tokens, "train_tokens": total,
            "weights": {"both_neighbours": weights[0], "one_neighbour": weights[1], "unigram": weights[2]}}


def rotten_tomatoes_references(files):
    """Rotten Tomatoes validation accuracy of the training split's majority label, and of TF-IDF features (words
    and word pairs) with logistic regression fitted on the training split: the floor a model that learnt any
    language should approach (scikit-learn defaults otherwise, nothing tuned on validation)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    rows = {}
    for split in ("train", "validation"):
        with Path(files[f"{split}_file"]).open() as f:
            rows[split] = list(csv.DictReader(f))
    text = {split: [row["sentence"] for row in r] for split, r in rows.items()}
    labels = {split: [row["label"] for row in r] for split, r in rows.items()}
    label = max(set(labels["train"]), key=labels["train"].count)
    tfidf = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    classifier = LogisticRegression(max_iter=2000).fit(tfidf.fit_transform(text["train"]), labels["train"])
    predicted = classifier.predict(tfidf.transform(text["validation"]))
    return {"majority": {"majority_label": label, "validation_accuracy":
                         labels["validation"].count(label) / len(labels["validation"])},
            "tfidf_logistic_regression": {
                "validation_accuracy": sum(map(str.__eq__, predicted, labels["validation"])) / len(predicted),
                "features": "TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True), fitted on train",
                "classifier": "LogisticRegression(max_iter=2000)", "train_examples": len(text["train"]),
                "validation_examples": len(text["validation"])}}


def list_runs(state, runs):
    """--list: each run, whether its pretraining is done or started, and its finetuning seeds so far; a run of
    study.EXTENDED or study.SETTLED also shows how far its training past the budget got (these take days on CPU)."""
    for r in runs:
        res = load(r["name"]) or {}
        started = (state.runs_dir / r["name"] / "metrics.jsonl").exists()
        progress = "done" if "perplexity" in res else ("started" if started else "-")
        seeds = sorted(int(s) for s in res.get("finetune", {}))
        print(f"{r['name']:40s} pretrained: {progress:7s} finetuning seeds: {seeds}")
        for kind, names in (("extended", study.EXTENDED), ("settled", study.SETTLED)):
            if r["name"] in names:
                print(f"    {kind}: {past_the_budget(state, r, kind)}")


def past_the_budget(state, r, kind):
    """One line: the points kept (with their finetuning seeds), where training stands, and a settled run's stop."""
    path = RESULTS / kind / f"{r['name']}.json"
    result = json.loads(path.read_text()) if path.exists() else {"points": {}}
    kept = ", ".join(f"{int(step):,} ({len(point['finetune'])} finetuned)" for step, point in result["points"].items())
    # the record's curve where the folder is behind it or gone (a run finished on a lent GPU brings back its record)
    recorded = result["curve"][-1]["step"] if result.get("curve") else 0
    steps = max(last_update(state.runs_dir / kind / r["name"], r), recorded)
    goal = f" of {study.EXTENDED_STEPS[-1]:,}" if kind == "extended" else ""
    said = [f"kept at {kept}" if kept else "nothing kept yet",
            f"trained to update {steps:,}{goal}" if steps else "not started"]
    if "settled" in result:
        said.append(f"stopped at {result['settled']['step']:,}: {result['settled']['why']}")
    return "; ".join(said)


def last_update(out, r):
    """The last update logged in a training folder, counted from the run's first (a long phase logs its own steps
    from the switch, its short phase in NAME_short); 0 before any."""
    if "short" not in r:
        return logged_update(out)
    long = logged_update(out)
    return r["short"]["steps"] + long if long else logged_update(out.with_name(f"{out.name}_short"))


def logged_update(folder):
    metrics = folder / "metrics.jsonl"
    lines = metrics.read_text().splitlines() if metrics.exists() else []
    return max((json.loads(line).get("step", 0) for line in lines), default=0)


def train_shared_tokenizer(state, news):
    """The byte-level BPE every run reads, trained once on the news train split by train_mlm.py's code. It is saved
    beside its place and moved in whole, so that two invocations started together never read half of one; and it
    must be the tokenizer the committed records were made with."""
    if not (state.tokenizer / "tokenizer_config.json").exists():
        from linformer_training.corpus import load_corpus
        from linformer_training.tokenization import train_tokenizer
        print(f"training the shared tokenizer into {state.tokenizer}", flush=True)
        partial = state.tokenizer.with_name(f"{state.tokenizer.name}.partial-{os.getpid()}")
        train_tokenizer(load_corpus(**news)["train"], study.TOKENIZER_VOCAB_SIZE).save_pretrained(partial)
        try:
            partial.rename(state.tokenizer)
        except OSError:  # another invocation moved its (identical) one in first
            shutil.rmtree(partial)
    digest = hashlib.sha256((state.tokenizer / "tokenizer.json").read_bytes()).hexdigest()
    if study.TOKENIZER_SHA256 and digest != study.TOKENIZER_SHA256:
        raise SystemExit(f"the shared tokenizer {state.tokenizer / 'tokenizer.json'} has sha256 {digest}, not the "
                         f"{study.TOKENIZER_SHA256} of the committed records (study.TOKENIZER_SHA256): runs made with "
                         "it would not compare with them. Train it with the `tokenizers` version of the records, or "
                         "start a study of your own and set TOKENIZER_SHA256 to its digest.")


def write_news_references(state, news):
    """results/reference/{unigram,neighbours}.json, those missing, from one tokenization of the news corpus."""
    references = {"unigram": unigram_reference, "neighbours": neighbours_reference}
    missing = {name: count for name, count in references.items() if not (RESULTS / f"reference/{name}.json").exists()}
    if missing:
        tokens = reference_tokens(state.tokenizer, news)
        for name, count in missing.items():
            save(RESULTS / f"reference/{name}.json", count(*tokens))


def write_rotten_tomatoes_reference(files):
    if not (RESULTS / "reference/rotten_tomatoes.json").exists():
        save(RESULTS / "reference/rotten_tomatoes.json", rotten_tomatoes_references(files))


def run(state, r, data):
    """One run of the study, as far as this invocation's stage goes: pretrained (unless its results exist; again
    with --rebuild), checked, and finetuned with each seed its results file lacks (with --exact_short_path, into
    results/exact_rt/)."""
    args = state.args
    name, out = r["name"], state.runs_dir / r["name"]
    path = RESULTS / ("exact_rt" if args.exact_short_path else "") / f"{name}.json"
    result = json.loads(path.read_text()) if path.exists() else None
    if args.exact_short_path and result is None and (out / "model.safetensors").exists():
        result = {"name": name, "overrides": study.finetune_exact_overrides(r), "finetune": {}}
    precision = {"mixed_precision": args.mixed_precision} if args.mixed_precision else {}
    if args.stage != "finetune" and (result is None or args.rebuild):
        if args.rebuild:  # with the short phase's folder, where the run has one
            for folder in (out, out.with_name(f"{out.name}_short")):
                shutil.rmtree(folder, ignore_errors=True)
        result = pretrain(state, r, out, data["pretrain"], **precision)
        save(path, result)
        print(f"{name}: validation perplexity {result['perplexity']:.2f} after {result['curve'][-1]['step']} updates "
              f"({result['pretrain_seconds'] / 60:.1f} min of training)", flush=True)
    if args.stage != "finetune" and result is not None and (out / "model.safetensors").exists():
        add_checks(state, r, out, result, path)
    if args.stage == "pretrain" or r["model_type"] == "peer":  # the peer has no padding mask to finetune with
        return
    if result is None:
        print(f"{name}: not pretrained yet, no finetuning (run with --stage all or pretrain)")
        return
    for seed in args.finetune_seeds:
        if str(seed) in result["finetune"]:
            continue
        if not (out / "model.safetensors").exists():
            sys.exit(f"run_study.py: {name}: its pretrained model {out} is missing; rebuild it with --only {name} "
                     f"--rebuild")
        result["finetune"][str(seed)] = finetune(state, r, out, seed, data["finetune"], args.exact_short_path,
                                                 **precision)
        save(path, result)
        print(f"{name}: Rotten Tomatoes validation accuracy{' (exact short path)' * args.exact_short_path} "
              f"{result['finetune'][str(seed)]['accuracy']:.4f} "
              f"(seed {seed}, {result['finetune'][str(seed)]['seconds'] / 60:.1f} min)", flush=True)


def main(argv=None):
    parser = make_parser()
    args = parser.parse_args(argv)
    runs = chosen_runs(args, parser)
    state = make_state(args)
    if args.list:
        list_runs(state, runs)
        return
    # Pretraining reads the news corpus, finetuning Rotten Tomatoes: check that what this invocation needs is there.
    stages = {"all": ["pretrain", "finetune"]}.get(args.stage, [args.stage])
    data = study.data_files(args.data_dir, parser, REPO, *stages)
    if "pretrain" in data:
        news = {key: [str(path)] for key, path in data["pretrain"].items()}
        train_shared_tokenizer(state, news)
        write_news_references(state, news)
    if "finetune" in data:
        write_rotten_tomatoes_reference(data["finetune"])
    for r in runs:
        if args.extend:
            extend(state, r, data)
        elif args.settle:
            settle(state, r, data)
        else:
            run(state, r, data)


if __name__ == "__main__":
    main()
