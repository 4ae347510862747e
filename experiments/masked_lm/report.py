# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""results.md of the masked-LM experiment, from the committed results files only.

    python -m experiments.masked_lm.report --collect      # first copy what the runs left (curves, finetuning)
    python -m experiments.masked_lm.report                # then render results.md and the plot

`--collect` reads --runs_dir into results/runs.json (collect.py: the runs' curves and finetuning predictions);
evaluate.py wrote results/evaluation.json. The report turns both into results.md (its prose in
results.template.md) and perplexity_curves.png: each goal of the issue met, missed or undecided from its interval
(benchmarks/reporting.py's vocabulary).
"""

import argparse
import json
from pathlib import Path

import numpy as np

from benchmarks.reporting import body, compose, figure, interval, lines, paired_bootstrap, records, verdict, write
from experiments.masked_lm import collect
from experiments.masked_lm.run import FINETUNE_SEEDS, RELEASE, RUNS_DIR
from experiments.shared import REPO

HERE = REPO / "experiments/masked_lm"
RESULTS = HERE / "results"
BOOTSTRAP = 2000  # resamples of the finetuning goals' intervals (evaluate.py's own intervals use as many)
LABELS = {"source_head": "source + head (BERT attention)", "continue_source": "source + head, continued",
          "convert_k128": "Linformer k = 128, converted", "continue_k128": "Linformer k = 128, continued",
          "convert_k256": "Linformer k = 256, converted", "continue_k256": "Linformer k = 256, continued",
          "convert_n4096_windowed": "n = 4096 windows + slots, converted",
          "continue_n4096_windowed": "n = 4096 windows + slots, continued (fp32; the release in fp16)",
          "convert_n4096_projected": "n = 4096 projected + exact 512, converted",
          "continue_n4096_projected": "n = 4096 projected + exact 512, continued",
          RELEASE.name: "the release: n = 4096 windows + slots, continued (fp16)"}
# (comparison in evaluation.json, the largest ratio the goal allows): met when the whole interval lies below it.
PERPLEXITY_GOALS = [
    (("blocks", "continue_k256", "continue_source"), 1.03, "n = 512, k = 256 within 3% of standard attention"),
    (("blocks", "continue_k128", "continue_source"), 1.05, "n = 512, k = 128 within 5% of standard attention"),
    (("documents", RELEASE.name, "continue_source"), 1.0,
     "n = 4096 on whole documents no worse than the source on 512-token windows"),
]
# (task, the least difference the goal allows, goal): met when the whole interval of n = 4096 minus source lies above.
FINETUNING_GOALS = [("outlets", 0.0, "outlets, whole articles: n = 4096 beats the source truncated to 512"),
                    ("rt", -0.01, "Rotten Tomatoes within 1 point of the source")]


def seed_mean(finetuning, name):
    """Per example, the fraction of finetuning seeds that got it right; None until every seed ran."""
    runs = [finetuning.get(f"{name}_s{seed}") for seed in FINETUNE_SEEDS]
    return None if None in runs else np.mean([r["correct"] for r in runs], axis=0)


def goals(evaluation, finetuning):
    """[goal, measured, verdict] of each goal of the issue, "not measured yet" until its records exist."""
    comparisons = {(c["reading"], c["model"], c["reference"]): c for c in evaluation.get("comparisons", [])}
    rows = [[goal, f"{c['ratio']:.3f} x [{c['low']:.3f}, {c['high']:.3f}] ({c['units']} {key[0]})",
             verdict(c["low"], c["high"], bound, above=False)] if (c := comparisons.get(key)) else
            [goal, "not measured yet", "-"] for key, bound, goal in PERPLEXITY_GOALS]
    for task, bound, goal in FINETUNING_GOALS:
        ours, theirs = seed_mean(finetuning, f"{task}_n4096"), seed_mean(finetuning, f"{task}_source")
        difference = None if ours is None or theirs is None else paired_bootstrap(ours, theirs, resamples=BOOTSTRAP)
        rows.append([goal, f"{ours.mean():.3f} vs {theirs.mean():.3f}: {interval(*difference)}",
                     verdict(*difference[1:], bound)] if difference else [goal, "not measured yet", "-"])
    return rows


def commands(records):
    """Every figure with the command that made it, as a list."""
    return "\n".join(f"- `{name}`: `{record['command']}`" for name, record in records.items())


def render(evaluation, runs):
    """results.md: the parts of results.template.md that the records call for, filled with tables built from them
    (a section whose records do not exist yet is left out)."""
    models, training, finetuning = evaluation.get("models", {}), runs.get("training", {}), runs.get("finetuning", {})

    def label(name):
        return LABELS.get(name, name)

    return compose(HERE / "results.template.md", [
        ("head", lambda: {"goals": body(goals(evaluation, finetuning))}),
        ("models", lambda: models and {
            "cut": evaluation.get("documents_cut_at_4094_tokens", 0),
            "models": body([label(name), *(f"{m[r]['perplexity']:.2f} / {m[r]['top1']:.3f} / {m[r]['top5']:.3f}"
                                           for r in ("blocks", "documents"))] for name, m in models.items()),
            "ratios": body([c["reading"], label(c["model"]), label(c["reference"]), interval(
                c["ratio"], c["low"], c["high"], ".3f")] for c in evaluation.get("comparisons", []))}),
        ("fill_mask", lambda: models and evaluation.get("fill_mask") and {"fill_mask": body(
            [label(c["model"]), label(c["reference"]), *(interval(
                *(100 * c[k][x] for x in ("difference", "low", "high")), "+.1f") for k in ("top1", "top5"))]
            for c in evaluation["fill_mask"])}),
        ("training", lambda: training and {"commands": commands(training), "steps": body(
            [name + (" (earlier build)" if t.get("earlier_build") else ""), "yes" if t["done"] else "no",
             f"{t['tokens']:,}", f"{t['hours']:.2f}", *(f"{t['curve'][i]['perplexity']:.1f}" if t["curve"] else "-"
                                                        for i in (0, -1))] for name, t in training.items())}),
        ("finetuning", lambda: finetuning and {"commands": commands(finetuning), "runs": body(
            [name, f"{f['accuracy']:.3f}", json.dumps(f["truncated"])] for name, f in finetuning.items())})])


def page(results=RESULTS):
    """results.md from the results files alone (what the comparison test renders)."""
    found = records(results)  # evaluation.json and runs.json
    return render(found.get("evaluation", {}), found.get("runs", {}))


def plot(runs, path):
    with figure(path, figsize=(7, 4)) as (fig, ax):
        lines(ax, {LABELS.get(name, name): zip(*points, strict=True) for name, t in runs.get("training", {}).items()
                   if (points := [(c["tokens"], c["perplexity"]) for c in t["curve"] if c["tokens"] is not None])},
              xlabel="tokens seen in the step", ylabel="validation perplexity", yscale="log")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--collect", action="store_true", help="read --runs_dir into results/runs.json first")
    p.add_argument("--runs_dir", default=RUNS_DIR)
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--out", type=Path, default=HERE)
    args = p.parse_args(argv)
    if args.collect:
        collect.write(Path(args.runs_dir).expanduser(), args.results)
    plot(records(args.results).get("runs", {}), args.out / "perplexity_curves.png")
    print(write({args.out / "results.md": page(args.results)}))


if __name__ == "__main__":
    main()
