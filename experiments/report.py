"""Turn experiments/results/*.json (written by run_study.py) into experiments/results.md and PNG plots of
validation perplexity against updates. Works on whatever subset of the study exists, and lists what is missing.

    python experiments/report.py
"""

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import yaml  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import study  # noqa: E402

BASELINE = "roberta_n512"
TARGETS = [("linformer_n512_k128_layerwise", "perplexity", 5.0), ("linformer_n512_k256_layerwise", "perplexity", 3.0),
           ("linformer_n512_k128_layerwise", "accuracy", 1.0), ("linformer_n512_k256_layerwise", "accuracy", 1.0)]

# --- load ----------------------------------------------------------------------------------------
results = []
for path in sorted((HERE / "results").glob("*.json")):
    try:
        r = json.loads(path.read_text())
        r["name"], r["perplexity"], r["curve"]
    except (json.JSONDecodeError, KeyError) as e:
        sys.exit(f"report.py: {path} is not a run_study.py results file ({type(e).__name__}: {e})")
    results.append(r)
paper = yaml.safe_load((HERE / "paper_numbers.yaml").read_text())
ref_path = HERE / "results/reference/unigram.json"
unigram = json.loads(ref_path.read_text())["unigram_perplexity"] if ref_path.exists() else None

arch_of = lambda name: name.rsplit("_s", 1)[0]  # noqa: E731  run name without the seed
order = list(dict.fromkeys(arch_of(r["name"]) for r in study.RUNS))
planned = {r["name"]: r for r in study.RUNS}
groups = defaultdict(list)
for r in results:
    groups[arch_of(r["name"])].append(r)


def mean_std(values):
    if not values:
        return None, None
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else None)


def fmt(mean, std, digits=2, scale=1.0):
    if mean is None:
        return "-"
    return f"{mean * scale:.{digits}f}" + (f" ± {std * scale:.{digits}f}" if std is not None else "")


def summary(arch):
    runs = groups.get(arch, [])
    ppl = mean_std([r["perplexity"] for r in runs])
    accs = [f["accuracy"] for r in runs for f in r.get("finetune", {}).values()]
    return {"runs": runs, "ppl": ppl, "acc": mean_std(accs), "n_acc": len(accs)}


def describe(arch):
    spec = next(r for r in study.RUNS if arch_of(r["name"]) == arch)
    if spec["model_type"] == "roberta":
        return spec["n"], "-", "standard attention"
    return spec["n"], spec["k"], spec["sharing"]


base = summary(BASELINE)


def gap(value, reference):  # relative perplexity gap, in percent
    return None if value is None or reference is None else 100 * (value / reference - 1)


# --- tables --------------------------------------------------------------------------------------
lines = ["# Small-scale quality study: results", "",
         "Written by `python experiments/report.py` from `experiments/results/*.json`; do not edit by hand.", ""]
if results:
    c = results[0]["config"]
    lines += [f"Every run: {c['model']['num_hidden_layers']} layers, hidden {c['model']['hidden_size']}, "
              f"{c['model']['num_attention_heads']} heads, FFN {c['model']['intermediate_size']}; "
              f"{c['max_steps']} updates of {study.TOKENS_PER_UPDATE} tokens "
              f"({results[0]['tokens_seen']:,} tokens seen), learning rate {c['learning_rate']} "
              f"({c['lr_scheduler_type']}, {c['warmup_steps']} warmup), mixed precision {c['mixed_precision']}, "
              f"news corpus (train/validation as given), one shared byte-level BPE tokenizer "
              f"(vocabulary {study.TOKENIZER_VOCAB_SIZE}). Rotten Tomatoes: finetune_glue.py, "
              f"{study.FINETUNE['num_train_epochs']} epochs, learning rate {study.FINETUNE['learning_rate']}, "
              f"validation accuracy of the final model (no epoch selection).", ""]
if unigram is not None:
    lines += [f"Reference: a context-free (unigram) model scores perplexity {unigram:.1f} on the same validation "
              f"tokens (`results/reference/unigram.json`); a model near it has not yet learnt to use context, "
              f"whatever its attention.", ""]
maj_path = HERE / "results/reference/rotten_tomatoes_majority.json"
if maj_path.exists():
    lines += [f"Reference: always predicting the majority label scores "
              f"{100 * json.loads(maj_path.read_text())['validation_accuracy']:.1f}% on Rotten Tomatoes validation "
              f"(`results/reference/rotten_tomatoes_majority.json`).", ""]
table2 = {row["ours"]: row for row in paper["table2"]["rows"] if row.get("ours")}
for row in paper["table2"]["rows"]:  # check the transcription: the paper prints each row's average
    if abs(statistics.mean(row["scores"]) - row["average"]) > 0.006:
        sys.exit(f"report.py: paper_numbers.yaml row {row['label']!r} (n={row['n']}): its scores do not average "
                 f"to its printed average {row['average']}: fix the transcription")
sst2 = paper["table2"]["columns"].index("SST-2")
note = "" if paper.get("verified_against_pdf") else " (transcribed, not yet checked against the PDF)"

lines += ["## Every configuration", "",
          f"Perplexity: final validation perplexity (mean ± std over pretraining seeds); gap: relative to the "
          f"RoBERTa baseline's mean. Accuracy: Rotten Tomatoes validation accuracy, % (mean ± std over every "
          f"finetuning run). Paper: Table 2 of Wang et al. 2020, SST-2 (the closest task to Rotten Tomatoes: "
          f"built from the same reviews) and the 4-task average, for the same comparison{note}.", "",
          "| run | n | k | sharing | params | seeds | val. perplexity | gap vs baseline | RT accuracy (runs) "
          "| paper SST-2 | paper avg |",
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
for arch in order:
    s = summary(arch)
    n, k, sharing = describe(arch)
    p = table2.get(arch)
    params = f"{s['runs'][0]['config']['num_parameters'] / 1e6:.2f}M" if s["runs"] else "-"
    g = gap(s["ppl"][0], base["ppl"][0])
    paper_sst2, paper_avg = (f"{p['scores'][sst2]}", f"{statistics.mean(p['scores']):.2f}") if p else ("-", "-")
    lines.append(f"| {arch} | {n} | {k} | {sharing} | {params} | {len(s['runs'])} | {fmt(*s['ppl'])} | "
                 f"{'-' if g is None else f'{g:+.1f}%'} | {fmt(*s['acc'], 1, 100)} ({s['n_acc']}) | "
                 f"{paper_sst2} | {paper_avg} |")

lines += ["", "## Targets", "", "| target | measured | met? |", "| --- | --- | --- |"]
for arch, what, limit in TARGETS:
    s = summary(arch)
    if what == "perplexity":
        value = gap(s["ppl"][0], base["ppl"][0])
        text = f"{arch} perplexity within {limit:g}% of the baseline's"
        shown = "-" if value is None else f"{value:+.1f}%"
    else:
        value = None if s["acc"][0] is None or base["acc"][0] is None else 100 * (s["acc"][0] - base["acc"][0])
        text = f"{arch} Rotten Tomatoes accuracy within {limit:g} point of the baseline's"
        shown = "-" if value is None else f"{value:+.1f} points"
    ok = value is not None and (value <= limit if what == "perplexity" else value >= -limit)  # better always meets
    verdict = "not measured" if value is None else ("met" if ok else "MISSED")
    if value is not None and what == "perplexity" and unigram is not None and base["ppl"][0] >= unigram:
        verdict += " (but the baseline has not left the unigram plateau: this measures who leaves it first, not final quality)"
    if value is not None and what == "accuracy" and maj_path.exists():
        chance = json.loads(maj_path.read_text())["validation_accuracy"]
        at_chance = [a for a, acc in ((arch, s["acc"][0]), (BASELINE, base["acc"][0])) if abs(acc - chance) < 1e-9]
        if at_chance:
            verdict += f" ({', '.join(at_chance)} at the majority-class accuracy: learnt nothing)"
    seeds = f" ({len(s['runs'])} vs {len(base['runs'])} pretraining seeds)" if value is not None else ""
    lines.append(f"| {text} | {shown}{seeds} | {verdict} |")

lines += ["", "## The paper's Figure 3 claims beside ours", ""]
compared = {"k": [a for a in order if a == BASELINE or (a.startswith("linformer_n512_") and a.endswith("layerwise"))],
            "sharing": [a for a in order if a == BASELINE or a.startswith("linformer_n512_k128_")],
            "n": [a for a in order if a.startswith("linformer_") and "_k128_layerwise" in a]}
for key, claim in paper["figure3"].items():
    ours = [f"{a} {fmt(*summary(a)['ppl'])}" for a in compared[key] if groups.get(a)]
    lines += [f"- **{key}** - paper: {claim}", "  - ours (final validation perplexity): " + ("; ".join(ours) or "no runs yet")]

probes = sorted((HERE / "results/probes").glob("*.json"))
if probes:
    lines += ["", "## Probes (outside the study's budget)", ""]
    for path in probes:
        probe = json.loads(path.read_text())
        evals = [m for m in probe["metrics"] if "eval_perplexity" in m]
        lines += [f"- `{path.name}`: {probe['what']}. Validation perplexity by update: "
                  + ", ".join(f"{m['step']}: {m['eval_perplexity']:.0f}" for m in evals)
                  + f". Command: `{probe['command']}`"]

missing = [name for name in planned if name not in {r["name"] for r in results}]
unfinetuned = [r["name"] for r in results if len(r.get("finetune", {})) < len(study.FINETUNE_SEEDS)]
lines += ["", "## Missing", "",
          f"- not pretrained yet ({len(missing)} of {len(planned)}): " + (", ".join(missing) or "none"),
          f"- fewer than {len(study.FINETUNE_SEEDS)} finetuning seeds: " + (", ".join(unfinetuned) or "none")]

lines += ["", "## Commands", "", "Each run, exactly as run_study.py ran it (from the repository root):", ""]
for r in results:
    lines += [f"- `{r['name']}` ({r['pretrain_seconds'] / 60:.1f} min on a shared CPU core): "
              f"`OMP_NUM_THREADS=1 {r['pretrain_command']}`"]
    for seed, f in sorted(r.get("finetune", {}).items()):
        lines += [f"  - finetuning seed {seed}: `OMP_NUM_THREADS=1 {f['command']}`"]

# --- plots ---------------------------------------------------------------------------------------
panels = [("k (n=512, layerwise)", lambda a: a == BASELINE or (a.startswith("linformer_n512_") and a.endswith("layerwise"))),
          ("sharing (n=512, k=128)", lambda a: a == BASELINE or a.startswith("linformer_n512_k128_")),
          ("n (k=128, layerwise)", lambda a: a == BASELINE or (a.startswith("linformer_") and "_k128_layerwise" in a))]
fig, axes = plt.subplots(1, 3, figsize=(16, 4.8), sharey=True)
for ax, (title, chosen) in zip(axes, panels):
    for arch in [a for a in order if chosen(a) and groups.get(a)]:
        runs = groups[arch]
        steps = [p["step"] for p in runs[0]["curve"]]
        curves = [[p["perplexity"] for p in r["curve"]] for r in runs if [p["step"] for p in r["curve"]] == steps]
        mean = [statistics.mean(v) for v in zip(*curves)]
        line, = ax.plot(steps[1:], mean[1:], marker="o", ms=3,
                        label=f"{arch} ({len(curves)} seed{'s' * (len(curves) > 1)})",
                        color="black" if arch == BASELINE else None)
        if len(curves) > 1:
            ax.fill_between(steps[1:], [min(v) for v in zip(*curves)][1:], [max(v) for v in zip(*curves)][1:],
                            color=line.get_color(), alpha=0.2)
    if unigram is not None:
        ax.axhline(unigram, color="gray", ls="--", lw=1, label="unigram (no context)")
    ax.set(title=title, xlabel="update", yscale="log")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%.0f"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%.0f"))
    ax.grid(True, which="both", alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=7)
axes[0].set_ylabel("validation perplexity (news)")
fig.suptitle("Masked-LM validation perplexity vs updates (step 0 omitted; band: min-max over seeds)")
fig.tight_layout()
fig.savefig(HERE / "perplexity_curves.png", dpi=120)
lines += ["", "## Plots", "", "![validation perplexity vs update](perplexity_curves.png)", ""]

(HERE / "results.md").write_text("\n".join(lines) + "\n")
print(f"wrote {HERE / 'results.md'} and {HERE / 'perplexity_curves.png'} from {len(results)} results "
      f"({len(missing)} runs missing)")
