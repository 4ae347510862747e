"""Turn experiments/quality/results/*.json (written by run_study.py) into experiments/quality/results.md and PNG plots of
validation perplexity against updates. Works on whatever subset of the study exists, and lists what is missing.

    python -m experiments.quality.render
"""

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import yaml  # noqa: E402

from experiments.quality import study  # noqa: E402

argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

BASELINE = "roberta_n512"
# (run, what, limit, finetuning results key): the targets, plus the accuracy one under the variant that
# the short-input investigation points to.
TARGETS = [("linformer_n512_k128_layerwise", "perplexity", 5.0, None),
           ("linformer_n512_k256_layerwise", "perplexity", 3.0, None),
           ("linformer_n512_k128_layerwise", "accuracy", 1.0, "finetune"),
           ("linformer_n512_k256_layerwise", "accuracy", 1.0, "finetune"),
           ("linformer_n512_k128_layerwise", "accuracy", 1.0, "finetune_mean")]

# --- load ----------------------------------------------------------------------------------------
results = []
for path in sorted((HERE / "results").glob("*.json")):
    try:
        r = json.loads(path.read_text())
        r["name"], r["perplexity"], r["curve"]
    except (json.JSONDecodeError, KeyError) as e:
        sys.exit(f"render.py: {path} is not a run_study.py results file ({type(e).__name__}: {e})")
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


def model_fields(config):
    """The model fields a run's train_config.yaml set: its `model:` mapping (runs made before train_mlm.py took
    --config_overrides), else its config_overrides (a mapping, or the flag's KEY=VALUE,... text)."""
    fields = config.get("model") or config.get("config_overrides") or {}
    return yaml.safe_load("{" + fields.replace("=", ": ") + "}") if isinstance(fields, str) else fields


def mean_std(values):
    if not values:
        return None, None
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else None)


def fmt(mean, std, digits=2, scale=1.0):
    if mean is None:
        return "-"
    return f"{mean * scale:.{digits}f}" + (f" ± {std * scale:.{digits}f}" if std is not None else "")


def summary(arch, finetune="finetune"):
    runs = groups.get(arch, [])
    ppl = mean_std([r["perplexity"] for r in runs])
    accs = [f["accuracy"] for r in runs for f in r.get(finetune, {}).values()]
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
         "Written by `python -m experiments.quality.render` from `experiments/quality/results/*.json`; do not edit by hand.", ""]
card_start = len(lines)  # from here to card_end, the text is also written into model_card.md
if results:
    c = results[0]["config"]
    m = model_fields(c)
    lines += [f"Every run: {m['num_hidden_layers']} layers, hidden {m['hidden_size']}, "
              f"{m['num_attention_heads']} heads, FFN {m['intermediate_size']}; "
              f"{c['max_steps']} updates of {study.TOKENS_PER_UPDATE} tokens "
              f"({results[0]['tokens_seen']:,} tokens seen), learning rate {c['learning_rate']} "
              f"({c['lr_scheduler_type']}, {c['warmup_steps']} warmup), mixed precision {c['mixed_precision']}, "
              f"news corpus (train/validation as given), one shared byte-level BPE tokenizer "
              f"(vocabulary {study.TOKENIZER_VOCAB_SIZE}). Rotten Tomatoes: finetune_glue.py, "
              f"{study.FINETUNE['num_train_epochs']} epoch{'s' * (study.FINETUNE['num_train_epochs'] != 1)}, learning rate {study.FINETUNE['learning_rate']}, "
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
        sys.exit(f"render.py: paper_numbers.yaml row {row['label']!r} (n={row['n']}): its scores do not average "
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
for arch, what, limit, key in TARGETS:
    s = summary(arch, key or "finetune")
    if what == "perplexity":
        value = gap(s["ppl"][0], base["ppl"][0])
        text = f"{arch} perplexity within {limit:g}% of the baseline's"
        shown = "-" if value is None else f"{value:+.1f}%"
    else:
        value = None if s["acc"][0] is None or base["acc"][0] is None else 100 * (s["acc"][0] - base["acc"][0])
        text = f"{arch} Rotten Tomatoes accuracy within {limit:g} point of the baseline's"
        if key != "finetune":
            text += f" ({key.removeprefix('finetune_')}: `{study.FINETUNE_VARIANTS[key.removeprefix('finetune_')]}`)"
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
    seeds = f" ({len(s['runs'])} vs {len(base['runs'])} pretraining seeds" + (
        f", {s['n_acc']} vs {base['n_acc']} finetuning runs)" if what == "accuracy" else ")") if value is not None else ""
    lines.append(f"| {text} | {shown}{seeds} | {verdict} |")

lines += ["", "## The paper's Figure 3 claims beside ours", ""]
compared = {"k": [a for a in order if a == BASELINE or (a.startswith("linformer_n512_") and a.endswith("layerwise"))],
            "sharing": [a for a in order if a == BASELINE or a.startswith("linformer_n512_k128_")],
            "n": [a for a in order if a.startswith("linformer_") and "_k128_layerwise" in a]}
for key, claim in paper["figure3"].items():
    ours = [f"{a} {fmt(*summary(a)['ppl'])}" for a in compared[key] if groups.get(a)]
    lines += [f"- **{key}** - paper: {claim}", "  - ours (final validation perplexity): " + ("; ".join(ours) or "no runs yet")]

# --- short inputs: the length mismatch between pretraining blocks and finetuning texts ---------------
def by_name(folder):
    return {r["name"]: r for r in (json.loads(p.read_text()) for p in sorted((HERE / folder).glob("*.json")))}


short = by_name("results/short_inputs")
short_lines = []
if short:
    lengths = sorted({int(L) for r in short.values() for L in r["lengths"]})
    scalings = list(dict.fromkeys(s for r in short.values() for d in r["lengths"].values() for s in d))
    short_lines += ["## Short inputs", "",
                    "Masked-LM validation perplexity on blocks of L tokens (the first validation tokens, cut into "
                    "blocks of L, identical masks for every model), for each `projection_length_scaling` of the "
                    "same checkpoint. Pretraining packs documents into full n-token blocks. Commands: "
                    + "; ".join(f"`{c}`" for c in dict.fromkeys(r["command"] for r in short.values())) + ".", "",
                    "| run | scaling | " + " | ".join(f"L={L}" for L in lengths) + " |",
                    "| --- | --- | " + " | ".join("---" for _ in lengths) + " |"]
    for name in [r["name"] for r in study.RUNS if r["name"] in short]:
        for scaling in scalings:
            cells = [short[name]["lengths"].get(str(L), {}).get(scaling) for L in lengths]
            if any(cells):
                short_lines.append(f"| {name} | {scaling} | "
                                   + " | ".join("-" if c is None else f"{c['perplexity']:.1f}" for c in cells) + " |")
variants = [(arch, v) for arch in order for v in study.FINETUNE_VARIANTS
            if any(v in r["variants"] for r in study.RUNS if arch_of(r["name"]) == arch)]
if variants:
    short_lines += ["", "Rotten Tomatoes validation accuracy, % (mean ± std over every finetuning run), finetuned "
                    "from the same checkpoints with the paper's projection (no scaling) and with each variant of "
                    "`study.FINETUNE_VARIANTS`:", "",
                    "| run | variant | options | RT accuracy (runs) | paper's setting (runs) | baseline (runs) |",
                    "| --- | --- | --- | --- | --- | --- |"]
    for arch, v in variants:
        sv, s0 = summary(arch, f"finetune_{v}"), summary(arch)
        short_lines.append(f"| {arch} | {v} | `{study.FINETUNE_VARIANTS[v]}` | {fmt(*sv['acc'], 1, 100)} "
                           f"({sv['n_acc']}) | {fmt(*s0['acc'], 1, 100)} ({s0['n_acc']}) | "
                           f"{fmt(*base['acc'], 1, 100)} ({base['n_acc']}) |")
probed = by_name("results/feature_probes")
if probed:
    first = next(iter(probed.values()))
    short_lines += ["", "Linear probes (logistic regression on frozen final states, fitted on "
                    f"{first['train_examples']:,} Rotten Tomatoes training sentences, validation accuracy, %): does "
                    "the first token's state (what the classification head reads by default) or the mean of the "
                    "tokens' states carry the sentiment before any finetuning? Commands: "
                    + "; ".join(f"`{c}`" for c in dict.fromkeys(r["command"] for r in probed.values())) + ".", "",
                    "| run | scaling | first token | mean of tokens |", "| --- | --- | --- | --- |"]
    for name in [r["name"] for r in study.RUNS if r["name"] in probed]:
        for scaling, acc in probed[name]["accuracy"].items():
            short_lines.append(f"| {name} | {scaling} | {100 * acc['first_token']:.1f} | {100 * acc['mean']:.1f} |")
lines += [""] + short_lines if short_lines else []

card_end = len(lines)

pilot = sorted((HERE / "results/pilot").glob("*.json"))
if pilot:
    runs = [json.loads(path.read_text()) for path in pilot]
    c = runs[0]["config"]
    lines += ["", "## Pilot (an earlier, smaller budget; not part of the tables above)", "",
              f"{c['max_steps']} updates of {c['per_device_train_batch_size'] * c['block_size']} tokens, "
              f"learning rate {c['learning_rate']}, {c['warmup_steps']} warmup updates, otherwise as above. "
              "Final validation perplexity: "
              + ", ".join(f"{r['name']} {r['perplexity']:.0f}" for r in runs) + "."]

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
unfinetuned = [f"{r['name']} ({key})" for r in results
               for key in ["finetune", *(f"finetune_{v}" for v in planned.get(r["name"], {}).get("variants", []))]
               if len(r.get(key, {})) < len(study.FINETUNE_SEEDS)]
lines += ["", "## Missing", "",
          f"- not pretrained yet ({len(missing)} of {len(planned)}): " + (", ".join(missing) or "none"),
          f"- fewer than {len(study.FINETUNE_SEEDS)} finetuning seeds: " + (", ".join(unfinetuned) or "none")]

lines += ["", "## Commands", "", "Each run, exactly as run_study.py ran it (from the repository root):", ""]
for r in results:
    lines += [f"- `{r['name']}` ({r['pretrain_seconds'] / 60:.1f} min on a shared CPU core): "
              f"`OMP_NUM_THREADS=1 {r['pretrain_command']}`"]
    for key in [k for k in r if k.startswith("finetune")]:
        for seed, f in sorted(r[key].items()):
            lines += [f"  - {key.replace('_', ' ')}, seed {seed}: `OMP_NUM_THREADS=1 {f['command']}`"]

# --- plots ---------------------------------------------------------------------------------------
panels = [("k (n=512, layerwise)", lambda a: a == BASELINE or (a.startswith("linformer_n512_") and a.endswith("layerwise"))),
          ("sharing (n=512, k=128)", lambda a: a == BASELINE or a.startswith("linformer_n512_k128_")),
          ("n (k=128, layerwise)", lambda a: a == BASELINE or (a.startswith("linformer_") and "_k128_layerwise" in a))]
fig, grid = plt.subplots(2, 3, figsize=(16, 9), sharey="row", sharex=True)


def smooth(values, window=5):
    return [statistics.mean(values[max(0, i - window + 1):i + 1]) for i in range(len(values))]


for col, (title, chosen) in enumerate(panels):
    top, bottom = grid[0, col], grid[1, col]
    for arch in [a for a in order if chosen(a) and groups.get(a)]:
        runs = groups[arch]
        steps = [p["step"] for p in runs[0]["curve"]]
        curves = [[p["perplexity"] for p in r["curve"]] for r in runs if [p["step"] for p in r["curve"]] == steps]
        mean = [statistics.mean(v) for v in zip(*curves)]
        label = f"{arch} ({len(curves)} seed{'s' * (len(curves) > 1)})"
        line, = top.plot(steps[1:], mean[1:], marker="o", ms=3, label=label,
                         color="black" if arch == BASELINE else None)
        if len(curves) > 1:
            top.fill_between(steps[1:], [min(v) for v in zip(*curves)][1:], [max(v) for v in zip(*curves)][1:],
                             color=line.get_color(), alpha=0.2)
        train_steps = [p["step"] for p in runs[0]["train_curve"]]
        train = [[p["loss"] for p in r["train_curve"]] for r in runs
                 if [p["step"] for p in r["train_curve"]] == train_steps]
        bottom.plot(train_steps, smooth([statistics.mean(v) for v in zip(*train)]), color=line.get_color(),
                    lw=1.2, label=label)
    if unigram is not None:
        top.axhline(unigram, color="gray", ls="--", lw=1, label="unigram (no context)")
        bottom.axhline(math.log(unigram), color="gray", ls="--", lw=1, label="unigram (no context)")
    top.set(title=title)
    bottom.set(xlabel="update")
    for ax in (top, bottom):
        ax.grid(True, which="both", alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
grid[0, 0].set_ylabel("validation perplexity (news)")
grid[1, 0].set_ylabel("training loss (mean over seeds, moving average of 5 logs)")
fig.suptitle("Masked-LM pretraining: validation perplexity (top; step 0 omitted; band: min-max over seeds) "
             "and training loss (bottom) vs updates")
fig.tight_layout()
fig.savefig(HERE / "perplexity_curves.png", dpi=110)
lines += ["", "## Plots", "", "![validation perplexity vs update](perplexity_curves.png)", ""]

(HERE / "results.md").write_text("\n".join(lines) + "\n")

# --- model card: its results section is this report's tables plus the benchmarks' efficiency summary ----
bench = REPO / "benchmarks/results/inference.json"
efficiency = []
if bench.exists():
    b = json.loads(bench.read_text())
    rows = [r for r in b["rows"] if r["model"].startswith("linformer") and r["k"] in (128, 256)]
    efficiency += ["### Efficiency", "",
                   f"Inference, batch 1, {b['dims']['num_hidden_layers']} layers x hidden {b['dims']['hidden_size']} "
                   f"(RoBERTa-base size), {b['machine']['device'].upper()} ({b['machine']['cpu']}, "
                   f"{b['machine']['threads']} thread, torch {b['machine']['torch']}, {b['args']['dtype']}): how many "
                   "times faster / less activation memory than HF RoBERTa of the same size, medians of interleaved "
                   "repeats; the paper's V100 figure in brackets. From `benchmarks/results/inference.json`, written by "
                   f"`python -m benchmarks.inference --threads {b['args']['threads']} --max-forward-s "
                   f"{b['args']['max_forward_s']:g}`; every benchmark is in `benchmarks/results/RESULTS.md`.", "",
                   "| n | k | time vs RoBERTa eager (paper) | time vs RoBERTa sdpa | memory vs eager (paper) | memory vs sdpa |",
                   "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        efficiency.append(f"| {r['n']} | {r['k']} | {r['time_saved_vs_eager']:.2f}x ({r['paper_time_saved']}x) | "
                          f"{r['time_saved_vs_sdpa']:.2f}x | {r['mem_saved_vs_eager']:.1f}x ({r['paper_mem_saved']}x) | "
                          f"{r['mem_saved_vs_sdpa']:.2f}x |")
    efficiency.append("")
card = REPO / "model_card.md"
begin, end = "<!-- BEGIN RESULTS: written by experiments/quality/render.py, do not edit -->", "<!-- END RESULTS -->"
text = card.read_text()
if begin not in text or end not in text:
    sys.exit(f"render.py: {card} lacks the markers {begin!r} / {end!r} around its results")
section = [("#" + line if line.startswith("## ") else line).replace("`results/", "`experiments/quality/results/")
           for line in lines[card_start:card_end]]
section += ["", "### Curves", "", "![validation perplexity and training loss vs update](experiments/quality/perplexity_curves.png)",
            "", *efficiency, "Every run's exact command, the probes and the pilot: `experiments/quality/results.md`."]
card.write_text(text[:text.index(begin) + len(begin)] + "\n" + "\n".join(section) + "\n" + text[text.index(end):])
print(f"wrote {HERE / 'results.md'}, {HERE / 'perplexity_curves.png'} and {card} from {len(results)} results "
      f"({len(missing)} runs missing)")
