# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Record one pilot run (a train_mlm.py output folder) as results/pilots/NAME.json for render.py: what it tried, its
command (rebuilt from the train_config.yaml the run wrote), validation perplexity against tokens seen, tokens per
second. Pilots choose the study's recipe; they are not part of its tables.

    python -m experiments.quality.record_pilot ~/runs/quality/pilots/L1 --name L1 --what "lr 1e-3, constant"
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
# train_config.yaml also holds facts of the run beside its resolved flags: the command takes the flags only.
NOT_FLAGS = {"num_processes", "accumulation", "num_parameters", "task"}


def flag_value(value):
    if isinstance(value, bool):
        return str(value).lower()
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)


def make_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", type=Path, help="the train_mlm.py --output_dir of the pilot")
    p.add_argument("--name", required=True, help="the pilot's name (results/pilots/NAME.json)")
    p.add_argument("--what", required=True, help="what the pilot tried, in a few words")
    p.add_argument("--finetune", type=Path, nargs="*", default=[], metavar="RUN",
                   help="finetune_glue.py output folders of the pilot's model (Rotten Tomatoes), recorded by learning "
                        "rate and seed")
    return p


def check_folders(args, p):
    """Every folder named is a finished run of its script: a missing file ends the script with one line."""
    for folder, needed, script in [(args.run, "metrics.jsonl", "train_mlm.py"),
                                   (args.run, "train_config.yaml", "train_mlm.py"),
                                   *[(f, name, "finetune_glue.py") for f in args.finetune
                                     for name in ("eval_results.json", "train_config.yaml")]]:
        if not (folder / needed).is_file():
            p.exit(2, f"record_pilot.py: {folder} has no {needed}: not a finished {script} output folder\n")


def command(script, config):
    """The run's command, rebuilt from the resolved flags its train_config.yaml holds."""
    flags = " ".join(f"--{k} {flag_value(v)}" for k, v in config.items() if k not in NOT_FLAGS and v is not None)
    return f"OMP_NUM_THREADS=1 python {script} {flags}".replace(str(Path.home()), "~")


def finetunes(folders, p):
    """The finetuning runs, keyed by learning rate and seed; the same run named twice is a usage error."""
    finetune = {}
    for folder in folders:
        tuned = yaml.safe_load((folder / "train_config.yaml").read_text())
        key = f"lr {tuned['learning_rate']:g}, seed {tuned['seed']}"
        if key in finetune:
            p.exit(2, f"record_pilot.py: --finetune names two runs of {key}; pass each once\n")
        finetune[key] = {"accuracy": json.loads((folder / "eval_results.json").read_text())["validation"]["accuracy"],
                         "seed": tuned["seed"], "command": command("finetune_glue.py", tuned)}
    return finetune


def between(tokens_at, step):
    """Tokens seen at an update that logged no training window (evaluation every 250 updates, logging every 20):
    interpolated between the windows around it, or carried on at the last window's rate after the last one."""
    before = max(s for s in tokens_at if s < step)
    after = min((s for s in tokens_at if s > step), default=None)
    if after is None:
        earlier = max((s for s in tokens_at if s < before), default=0)
        rate = (tokens_at[before] - tokens_at[earlier]) / max(before - earlier, 1)
        return round(tokens_at[before] + rate * (step - before))
    return round(tokens_at[before] + (tokens_at[after] - tokens_at[before]) * (step - before) / (after - before))


def pilot_record(args, p):
    """The record of the pilot in args.run (and its finetunes), against the unigram reference."""
    config = yaml.safe_load((args.run / "train_config.yaml").read_text())
    with (args.run / "metrics.jsonl").open() as f:
        log = [json.loads(line) for line in f]
    train = [m for m in log if "train_loss" in m]
    evals = [m for m in log if "eval_perplexity" in m]
    if not train or not evals:
        p.exit(2, f"record_pilot.py: {args.run}/metrics.jsonl has no training or no validation entry yet\n")
    tokens_at = {0: 0, **{m["step"]: m["tokens_seen"] for m in train}}
    unigram = json.loads((HERE / "results/reference/unigram.json").read_text())["unigram_perplexity"]
    finetune = finetunes(args.finetune, p)
    return {
        "name": args.name, "what": args.what,
        "pretrain_command": command("train_mlm.py", config),
        "tokens_seen": train[-1]["tokens_seen"],
        "tokens_per_second_median": round(statistics.median(m["tokens_per_second"] for m in train)),
        "unigram_perplexity": round(unigram, 1),
        "final_perplexity": round(evals[-1]["eval_perplexity"], 2),
        "final_vs_unigram": round(evals[-1]["eval_perplexity"] / unigram, 3),
        "curve": [{"step": m["step"],
                   "tokens_seen": tokens_at[m["step"]] if m["step"] in tokens_at else between(tokens_at, m["step"]),
                   "perplexity": round(m["eval_perplexity"], 2)} for m in evals],
        **({"finetune": finetune} if finetune else {}),
    }


def write(record):
    """results/pilots/NAME.json, written whole: a temporary file renamed over the record, so an interrupted write
    leaves the old one."""
    out = HERE / "results/pilots" / f"{record['name']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(out)
    return out


def main(argv=None):
    p = make_parser()
    args = p.parse_args(argv)
    check_folders(args, p)
    record = pilot_record(args, p)
    out = write(record)
    print(f"wrote {out}: {record['final_perplexity']:.1f} ({record['final_vs_unigram']:.3f} x unigram) after "
          f"{record['tokens_seen']:,} tokens", file=sys.stderr)


if __name__ == "__main__":
    main()
