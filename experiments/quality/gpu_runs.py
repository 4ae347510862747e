# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""The study's open runs on a lent GPU, within one short offline call: issue 47's runs take days on CPU cores and
minutes on a GPU, where the study's ten bf16 runs trained side by side (about 4 minutes per 10,000 updates each).
Every kind of run run_study.py trains travels: the study's runs, the extensions (--extend, issue 47) and the
settled runs (--settle, issue 66), the last two the longest, as they train past the budget. A plan entry's "kind"
(None, "extended" or "settled") names the folder of runs_dir and of results/ the run lives in: a run past the
budget shares its name with the study's run it continues.

A lent GPU machine sees only the work tree (64 MiB with what is carried), has no network, and returns at most
8 files of 16 MiB (64 MiB together). So the work goes in three steps, each resumable run continued where it was:

    python -m experiments.quality.gpu_runs pack                 # here: gpu_carry/ <- the corpora, the tokenizer,
                                                                # the open runs' newest state (as much as fits),
                                                                # the plan
    make study-gpu WHEELHOUSE=wheelhouse STUDY_SECONDS=420      # there, carrying wheelhouse and gpu_carry: `run`
    python -m experiments.quality.gpu_runs unpack DIR           # here: DIR's parts -> results/ and --runs_dir

`run` starts one run_study.py process per run of the plan at once (their kernels share the GPU through MPS where the
machine has it), all in fp32 (`--mixed_precision no`, the precision of issue 47's CPU runs, so either machine
continues the other's checkpoints). At --seconds it stops what still runs and writes to --out: the results files it
changed, each process's log tail, and the newest state of every run left unfinished, as far as the files allowed
back hold them. `unpack` puts the results into experiments/quality/results and each returned state into --runs_dir,
refusing while a process here still works on that run, and keeping a local state that is further along (with
its results record).
"""

import argparse
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from experiments.quality import study

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "experiments/quality/results"
CARRY = REPO / "gpu_carry"          # git-ignored; the GPU call carries it
CARRY_MIB = 34                      # 64 MiB - the tree without release/ (~7) - the wheelhouse (15) - the corpora (6)
BACK_PART = 15 * 2**20              # files come back at most 16 MiB each, 8 files, 64 MiB together
BACK_PARTS = 4
LOG_TAIL = 64 * 2**10
# A run trained past the budget, by its kind (its folder in runs_dir and results/): the flag run_study.py takes.
KINDS = {"extended": "--extend", "settled": "--settle"}


# --- which runs are open, and where their state lies ------------------------------------------------------------
def incomplete(record, r, checked=True):
    """Whether run_study.py would still work on a run (`checked`: a point of a run trained past the budget, whose
    model checks always run) with this record. A run of the study is done once finetuned with every seed, its checks
    run where its model is (the study's first GPU runs left theirs there); the peer, never finetuned, once checked."""
    if record is None or "perplexity" not in record:
        return True
    checks = {"order_check", *(["projection_check"] * study.learned_projections(r))}
    if (checked or r["model_type"] == "peer") and not checks <= set(record):
        return True
    return r["model_type"] != "peer" and not {str(s) for s in study.FINETUNE_SEEDS} <= set(record["finetune"])


def record(path):
    """A results file, or None where it is not written yet."""
    return json.loads(path.read_text()) if path.exists() else None


def record_path(run):
    """A run's results file, relative to results/: a run trained past the budget has one of its own beside the
    study's record of the same name."""
    return Path(run["kind"] or "") / f"{run['name']}.json"


def label(run):
    """How the logs, back.json and the printed lines name a run: one trained past the budget shares its name with
    the study's run."""
    return f"{run['name']} ({run['kind']})" if run["kind"] else run["name"]


def open_points(run):
    """The updates at which a run trained past the budget keeps a point not yet checked and finetuned with every
    seed (a point not kept yet counts): an extension's every study.EXTENDED_STEPS; a settled run's budget and, once
    study.settled stopped it, its stop, the only points its record holds; [] for neither."""
    result = record(RESULTS / record_path(run)) or {}
    points, r = result.get("points", {}), next(r for r in study.RUNS if r["name"] == run["name"])
    due = set(study.EXTENDED_STEPS) if run["kind"] == "extended" else {
        study.PRETRAIN["max_steps"], *([result["settled"]["step"]] if "settled" in result else [])}
    return sorted(s for s in due | {int(s) for s in points} if incomplete(points.get(str(s)), r))


def finished(run):
    """Whether run_study.py has nothing left to do on a run of study.EXTENDED or study.SETTLED: every point
    complete, and a settled run stopped by study.settled (until then its training goes on past its points)."""
    stopped = run["kind"] != "settled" or "settled" in (record(RESULTS / record_path(run)) or {})
    return stopped and not open_points(run)


def open_runs():
    """[{"name", "kind"}] for every run of the study, every extension and every settled run run_study.py has not
    finished, in the study's order (its runs first, then the extensions, then the settled runs). A run of the study
    that never ran alone and trains past the budget (the convolution's seeds) is left to that run, which writes its
    study record at the budget: planned twice, the two would train the same updates side by side."""
    past_the_budget = {*study.EXTENDED, *study.SETTLED}
    todo = [{"name": r["name"], "kind": None} for r in study.RUNS
            if incomplete(found := record(RESULTS / f"{r['name']}.json"), r, checked=False)
            and not (found is None and r["name"] in past_the_budget)]
    for kind, names in (("extended", study.EXTENDED), ("settled", study.SETTLED)):
        todo += [{"name": name, "kind": kind} for name in names if not finished({"name": name, "kind": kind})]
    return todo


def state_folders(runs_dir, run):
    """The folders of `runs_dir` that hold a run's state: its training folder, a short phase's and a peer's start
    folder; for a run trained past the budget, those in its kind's folder (extended/, settled/) and the snapshot
    (that point's model) of each point not yet checked and finetuned. A complete point's snapshot stays here: its
    figures are in the record, and the room is the open runs'."""
    name = run["name"]
    if run["kind"]:
        names = [f"{run['kind']}/{name}", f"{run['kind']}/{name}_short",
                 *(f"{run['kind']}/{name}_step{s}" for s in open_points(run))]
    else:
        names = [name, f"{name}_short", f"{name}_start"]
    return [runs_dir / name for name in names if (runs_dir / name).is_dir()]


def newest_checkpoint(folder):
    checkpoints = [c for c in (folder / "checkpoints").glob("checkpoint_*") if c.name.split("_")[-1].isdigit()]
    return max(checkpoints, key=lambda c: int(c.name.split("_")[-1]), default=None)


def progress(runs_dir, run):
    """Updates done in a run's state counted from its first, 0 where none: what unpack compares. A short-phase run's
    long phase is a train_mlm.py run of its own whose checkpoints count from the switch, so its count adds to the
    short phase's, whose last checkpoint is the switch (study.SHORT_PHASE's steps are a multiple of
    checkpointing_steps). A snapshot is a kept point's model, not training: it counts nothing."""
    total = 0
    for folder in state_folders(runs_dir, run):
        if (checkpoint := newest_checkpoint(folder)) and "_step" not in folder.name:
            total += int(checkpoint.name.split("_")[-1])
    return total


def kept_files(folder):
    """A state folder's files worth carrying: all but logs and every checkpoint older than the newest; and the notes
    of where it trained, beside it (study.hardware_log)."""
    if study.hardware_log(folder).exists():
        yield study.hardware_log(folder)
    newest = newest_checkpoint(folder)
    for path in sorted(folder.rglob("*")):
        inside = path.relative_to(folder).parts
        if (path.is_file() and inside[0] != "logs" and not any(part.startswith(".") for part in inside)
                and (inside[0] != "checkpoints" or (newest is not None and inside[1] == newest.name))):
            yield path


def state_size(runs_dir, run):
    return sum(p.stat().st_size for folder in state_folders(runs_dir, run) for p in kept_files(folder))


def fitting(runs, size_of, room):
    """(the runs whose states fit in `room` bytes, taken in order, and the others): what comes back from a call."""
    fit, left = [], []
    for run in runs:
        size = size_of(run)
        (fit if size <= room else left).append(run)
        room -= size if size <= room else 0
    return fit, left


def copy_state(runs_dir, run, dest):
    for folder in state_folders(runs_dir, run):
        for path in kept_files(folder):
            target = dest / path.relative_to(runs_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)


# --- here: pack -----------------------------------------------------------------------------------------------------
def pack(args, parser):
    """gpu_carry/: data/ (the corpora), runs/ (the tokenizer and the open runs' newest state, most progressed first,
    while they fit --max_mib) and plan.json (every open run: those without their state here start afresh there)."""
    runs_dir = study.runs_dir(args.runs_dir)
    if not (runs_dir / study.TOKENIZER / "tokenizer_config.json").exists():
        parser.error(f"no shared tokenizer in {runs_dir / study.TOKENIZER}: the runs there would each train one at "
                     f"once; let run_study.py pretrain here first (its first invocation trains it)")
    runs = open_runs()
    if args.only:
        unknown = set(args.only) - {r["name"] for r in runs}
        if unknown:
            parser.error(f"--only: not open runs: {', '.join(sorted(unknown))} (open: "
                         f"{', '.join(r['name'] for r in runs) or 'none'})")
        runs = [r for r in runs if r["name"] in args.only]
    data = study.data_files(args.data_dir, parser, REPO, "pretrain", "finetune")
    shutil.rmtree(args.into, ignore_errors=True)
    for stage, files in data.items():
        for key, path in files.items():
            target = args.into / "data" / (study.PRETRAIN_DATA if stage == "pretrain" else study.FINETUNE_DATA)[key]
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    shutil.copytree(runs_dir / study.TOKENIZER, args.into / "runs" / study.TOKENIZER)
    room, carried, left = args.max_mib * 2**20, [], []
    for run in sorted(runs, key=lambda r: -progress(runs_dir, r)):
        size = state_size(runs_dir, run)
        if size and size > room:
            left.append({**run, "mib": round(size / 2**20, 1)})
            continue
        if size:
            copy_state(runs_dir, run, args.into / "runs")
            room -= size
            carried.append(run["name"])
    plan = {"runs": runs, "carried": carried, "left_here": left}
    (args.into / "plan.json").write_text(json.dumps(plan, indent=1) + "\n")
    mib = sum(p.stat().st_size for p in args.into.rglob("*") if p.is_file()) / 2**20
    print(f"{args.into}: {mib:.1f} MiB; {len(runs)} open run(s), state carried for {len(carried)}: "
          f"{', '.join(carried) or '-'}")
    for run in left:
        print(f"  {run['name']}: its state ({run['mib']} MiB) does not fit --max_mib; it starts afresh there, and "
              f"unpack keeps the state here unless the one returned is further along")
    # a run starts afresh there at the size of the largest state here: the study's runs differ little
    typical = max((state_size(runs_dir, r) for r in runs), default=0)
    back, lost = fitting(sorted(runs, key=lambda r: -progress(runs_dir, r)),
                         lambda r: state_size(runs_dir, r) or typical, BACK_PART * BACK_PARTS - 2**20)
    if lost:
        print(f"  about {len(back)} of the {len(runs)} runs' states fit in what a call returns "
              f"({BACK_PARTS * BACK_PART / 2**20:.0f} MiB): an unfinished run beyond them trains there for nothing; "
              f"`--only` picks fewer ({', '.join(r['name'] for r in lost)} would not fit)")


# --- there: run -----------------------------------------------------------------------------------------------------
def command(run, carry, note):
    return [sys.executable, "-m", "experiments.quality.run_study", *([KINDS[run["kind"]]] if run["kind"] else []),
            "--only", run["name"], "--mixed_precision", "no", "--runs_dir", str(carry / "runs"),
            "--data_dir", str(carry / "data"), *(["--hardware_note", note] if note else [])]


def start_mps():
    """The CUDA MPS daemon where the machine has one (without it, processes sharing the GPU take turns); whether it
    started, for the log."""
    if not shutil.which("nvidia-cuda-mps-control"):
        return False
    return subprocess.run(["nvidia-cuda-mps-control", "-d"], check=False, capture_output=True).returncode == 0


def stop(processes, grace=30):
    """Stop each run's process group (run_study.py and the script it runs): each resumes from its newest checkpoint."""
    for proc in processes:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in processes:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# The lent machine has no network: a Hub lookup would wait for its timeout before falling back to local files.
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def run(args, parser):
    plan_file = args.carry / "plan.json"
    if not plan_file.exists():
        parser.error(f"{plan_file} is missing: run `python -m experiments.quality.gpu_runs pack` where the runs are, "
                     f"and carry its folder")
    plan, began = json.loads(plan_file.read_text()), time.time()
    logs = args.carry / "logs"
    logs.mkdir(exist_ok=True)
    mps = start_mps()
    print(f"MPS: {'started' if mps else 'not available (the processes take turns on the device)'}", flush=True)
    count = len(plan["runs"])  # the records' speed is each run's share of the device
    note = f"shared by {count} runs at once{' under MPS' * mps}" if count > 1 else None
    processes = []
    for r in plan["runs"]:
        cmd = command(r, args.carry, note)
        print("$", " ".join(cmd[1:]), flush=True)
        with (logs / f"{r['name']}{'.' + r['kind'] if r['kind'] else ''}.log").open("a") as log:
            processes.append(subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                              env={**os.environ, **OFFLINE},
                                              start_new_session=True))
    end = time.monotonic() + args.seconds
    while time.monotonic() < end and any(p.poll() is None for p in processes):
        time.sleep(1)
    stop(processes)
    codes = {label(r): p.returncode for r, p in zip(plan["runs"], processes, strict=True)}  # one process per run
    bring_back(args, plan, began, codes)


def bring_back(args, plan, began, codes):
    """--out/back.tar.gz.00, .01, ...: back.json (what happened), the results files changed since `began`, the tail
    of each log (each process's, each script's), and the state of each run still open, most progressed first, while
    the parts allowed back hold them."""
    runs_dir, still_open = args.carry / "runs", open_runs()
    changed = [p for p in RESULTS.rglob("*.json") if p.stat().st_mtime >= began]
    room = BACK_PART * BACK_PARTS - sum(p.stat().st_size for p in changed) - 2**20
    returned, left = fitting(sorted((r for r in still_open if r in plan["runs"]), key=lambda r: -progress(runs_dir, r)),
                             lambda r: state_size(runs_dir, r), room)
    import torch
    back = {"plan": plan, "exit_codes": codes, "seconds": round(time.time() - began, 1),
            "hardware": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU",
            "finished": [r for r in plan["runs"] if r not in still_open], "returned": returned, "left_there": left,
            "progress": {label(r): progress(runs_dir, r) for r in plan["runs"]}}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        add_bytes(tar, "back.json", json.dumps(back, indent=1).encode())
        for path in changed:
            tar.add(path, f"results/{path.relative_to(RESULTS)}")
        for log in [*(args.carry / "logs").glob("*.log"), *runs_dir.glob("*.log"),
                    *(log for kind in KINDS for log in runs_dir.glob(f"{kind}/*.log"))]:
            add_bytes(tar, f"logs/{log.relative_to(args.carry)}", log.read_bytes()[-LOG_TAIL:])
        for r in returned:
            for folder in state_folders(runs_dir, r):
                for path in kept_files(folder):
                    tar.add(path, f"runs/{path.relative_to(runs_dir)}")
    data = buffer.getvalue()
    args.out.mkdir(parents=True, exist_ok=True)
    for i in range(0, len(data), BACK_PART):
        (args.out / f"back.tar.gz.{i // BACK_PART:02d}").write_bytes(data[i:i + BACK_PART])
    print(json.dumps({k: back[k] for k in ("exit_codes", "progress", "seconds", "hardware")}, indent=1))
    print(f"{len(data) / 2**20:.1f} MiB back in {-(-len(data) // BACK_PART)} part(s); finished "
          f"{len(back['finished'])}, state returned for {len(returned)}, left there {len(left)}", flush=True)


def add_bytes(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), int(time.time())
    tar.addfile(info, io.BytesIO(data))


# --- here: unpack ---------------------------------------------------------------------------------------------------
def busy(run, runs_dir):
    """Whether a process here works on a run: its command line names one of the run's training folders
    (train_mlm.py's --output_dir), whichever its kind (a run of the study and its extension or settled run share
    records), or the run (run_study.py's --only)."""
    folders = [base / f"{run['name']}{suffix}" for base in (runs_dir, *(runs_dir / kind for kind in KINDS))
               for suffix in ("", "_short")]
    names = {str(folder) for folder in folders} | {run["name"]}
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = set(cmdline.read_bytes().decode(errors="replace").split("\0"))
        except OSError:
            continue
        if words & names and int(cmdline.parent.name) != os.getpid():
            return True
    return False


def unpack(args, parser):
    parts = sorted(args.back.glob("back.tar.gz.*"))
    if not parts:
        parser.error(f"{args.back} holds no back.tar.gz.NN parts (what `gpu_runs run` writes to --out)")
    runs_dir = study.runs_dir(args.runs_dir)
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(fileobj=io.BytesIO(b"".join(
            p.read_bytes() for p in parts)), mode="r:gz") as tar:
        tar.extractall(tmp, filter="data")
        back, tmp = json.loads((Path(tmp) / "back.json").read_text()), Path(tmp)
        working = [r["name"] for r in back["plan"]["runs"] if busy(r, runs_dir)]
        if working:
            parser.error(f"stop the processes here that work on {', '.join(working)} first: the results and state "
                         f"returned replace theirs")
        kept = [r for r in back["returned"] if progress(runs_dir, r) > progress(tmp / "runs", r)]
        mine = {str(record_path(r)) for r in kept}  # a kept state keeps its record
        for path in sorted((tmp / "results").rglob("*.json")):
            if str(path.relative_to(tmp / "results")) in mine:
                continue
            target = RESULTS / path.relative_to(tmp / "results")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target.with_suffix(".json.tmp"))
            target.with_suffix(".json.tmp").replace(target)
            print(f"results: {target.relative_to(REPO)}")
        for r in back["returned"]:
            here, there = progress(runs_dir, r), progress(tmp / "runs", r)
            if r in kept:
                print(f"{label(r)}: kept the state here and its record ({here} updates; {there} returned)")
                continue
            for folder in state_folders(tmp / "runs", r):  # each folder returned replaces its counterpart here
                target = runs_dir / folder.relative_to(tmp / "runs")
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(folder, target)
                study.hardware_log(target).unlink(missing_ok=True)  # the notes of where it trained come with it
                if study.hardware_log(folder).exists():
                    shutil.copy2(study.hardware_log(folder), study.hardware_log(target))
            print(f"{label(r)}: state at {there} updates, from {back['hardware']}")
    print(f"{len(back['finished'])} run(s) finished there; left there (state lost, rerun): "
          f"{', '.join(r['name'] for r in back['left_there']) or 'none'}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    steps = parser.add_subparsers(dest="step", required=True)
    p = steps.add_parser("pack", help="here: fill gpu_carry/ for the GPU call")
    p.add_argument("--into", type=Path, default=CARRY, help=f"the folder to fill (default {CARRY.name}, replaced)")
    p.add_argument("--only", nargs="+", metavar="NAME", help="just these open runs")
    p.add_argument("--max_mib", type=float, default=CARRY_MIB, help=f"room for run state (default {CARRY_MIB})")
    p.add_argument("--runs_dir", metavar="DIR", help=f"where the runs are (default {study.RUNS_DIR})")
    study.add_data_dir_argument(p)
    p = steps.add_parser("run", help="there: the plan's runs, then the parts to bring back")
    p.add_argument("--carry", type=Path, default=CARRY, help=f"the packed folder (default {CARRY.name})")
    p.add_argument("--seconds", type=float, required=True, help="stop every run after this long")
    p.add_argument("--out", type=Path, required=True, help="where the parts to bring back go ($OUT)")
    p = steps.add_parser("unpack", help="here: results and returned state from the parts")
    p.add_argument("back", type=Path, help="the folder holding back.tar.gz.00, ...")
    p.add_argument("--runs_dir", metavar="DIR", help=f"where the runs are (default {study.RUNS_DIR})")
    args = parser.parse_args(argv)
    for flag in ("seconds", "max_mib"):
        if getattr(args, flag, 1) <= 0:
            parser.error(f"--{flag} must be positive, got {getattr(args, flag)}")
    {"pack": pack, "run": run, "unpack": unpack}[args.step](args, parser)


if __name__ == "__main__":
    main()
