"""Turn experiments/quality/results/*.json (written by run_study.py) into experiments/quality/results.md, the plot of
validation perplexity against tokens seen (perplexity_curves.png) and the results section of model_card.md. Works on
whatever subset of the study exists, and lists what is missing.

    python -m experiments.quality.render
"""

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from scipy import stats

from benchmarks.reporting import figure, splice, status, table, verdict
from experiments.quality import study

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SOURCE = "python -m experiments.quality.render"  # the marker of its block in model_card.md
BASELINE, N, K = study.BASELINE, study.N, study.K
# The targets: (what, run, kind, limit). "ratio": perplexity at most limit x the unigram reference;
# "accuracy": Rotten Tomatoes accuracy at least limit (%); "gap": perplexity at most limit % above the baseline's;
# "points": accuracy at most limit points below the baseline's.
TARGETS = [(BASELINE, "ratio", 0.3), (BASELINE, "accuracy", 68.0),
           (study.LINFORMER, "gap", 5.0), (study.LINFORMER, "points", 1.0),
           (study.name_of(study.linformer(k=2 * K)), "gap", 3.0)]


def arch_of(name):
    """A run's configuration: its name without the seed."""
    return name.rsplit("_s", 1)[0]


def read(path, *keys):
    try:
        record = json.loads(path.read_text())
        [record[k] for k in keys]
    except (json.JSONDecodeError, KeyError) as e:
        sys.exit(f"render.py: {path} is not a results file of this study ({type(e).__name__}: {e})")
    return record


@dataclass
class Records:
    """Everything the page is written from, read once from the results folder."""
    results: list
    pilots: list
    exact: dict
    extended: dict
    paper: dict
    reference: dict
    groups: dict = field(default_factory=lambda: defaultdict(list))  # configuration -> its runs (pretraining seeds)
    order: list = field(default_factory=lambda: list(dict.fromkeys(arch_of(r["name"]) for r in study.RUNS)))

    def __post_init__(self):
        for r in self.results:
            self.groups[arch_of(r["name"])].append(r)

    @property
    def unigram(self):
        return self.reference.get("unigram", {}).get("unigram_perplexity")

    @property
    def neighbours(self):
        return self.reference.get("neighbours", {}).get("neighbours_perplexity")

    def summary(self, arch):
        """Over the pretraining seeds of one configuration: perplexity, and Rotten Tomatoes accuracy (each seed's
        mean over its finetuning seeds), with their 95% intervals; the finetuning runs counted."""
        runs = self.groups.get(arch, [])
        return {"runs": runs, "ppl": perplexity_interval([r["perplexity"] for r in runs]),
                "acc": interval(seed_accuracies(runs)), "n_acc": sum(len(r["finetune"]) for r in runs)}


def load(folder=HERE / "results"):
    paper = yaml.safe_load((HERE / "paper_numbers.yaml").read_text())
    for row in paper["table2"]["rows"]:  # check the transcription: the paper prints each row's average
        if abs(statistics.mean(row["scores"]) - row["average"]) > 0.006:
            sys.exit(f"render.py: paper_numbers.yaml row {row['label']!r} (n={row['n']}): its scores do not average "
                     f"to its printed average {row['average']}: fix the transcription")
    return Records(
        results=[read(path, "name", "perplexity", "curve", "hardware") for path in sorted(folder.glob("*.json"))],
        pilots=[read(path, "name", "what", "curve") for path in sorted((folder / "pilots").glob("*.json"))],
        exact={r["name"]: r for r in (read(path, "name", "finetune")
                                      for path in sorted((folder / "exact_rt").glob("*.json")))},
        extended={r["name"]: r for r in (read(path, "name", "points", "curve")
                                         for path in sorted((folder / "extended").glob("*.json")))},
        paper=paper,
        reference={name: json.loads(path.read_text()) for name in ("unigram", "neighbours", "rotten_tomatoes")
                   if (path := folder / f"reference/{name}.json").exists()})


# --- statistics over pretraining seeds (t-intervals: three seeds are too few to resample) ----------------------
def interval(values):
    """(mean, half-width of its 95% t-interval over the values; None for one value), or (None, None)."""
    if not values:
        return None, None
    if len(values) == 1:
        return values[0], None
    return statistics.mean(values), stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5


def perplexity_interval(values):
    """Perplexities over seeds, averaged as losses: (exp of the mean loss, i.e. the geometric mean, and the 95%
    t-interval of the mean loss mapped back through exp, or None for one value), or (None, None). Perplexity is
    multiplicative: one seed that leaves the unigram plateau late would dominate an arithmetic mean."""
    mean, half = interval([math.log(v) for v in values])
    if mean is None:
        return None, None
    return math.exp(mean), None if half is None else (math.exp(mean - half), math.exp(mean + half))


def seed_accuracies(runs):
    """Each pretraining seed's Rotten Tomatoes accuracy: the mean over its finetuning seeds."""
    return [statistics.mean(f["accuracy"] for f in r["finetune"].values()) for r in runs if r["finetune"]]


def welch(ours, theirs):
    """The 95% Welch t-interval of mean(ours) - mean(theirs), None with fewer than two values on either side;
    values without any spread give the difference itself."""
    if len(ours) < 2 or len(theirs) < 2:
        return None
    ci = stats.ttest_ind(ours, theirs, equal_var=False).confidence_interval(0.95)
    if not (math.isfinite(ci.low) and math.isfinite(ci.high)):
        return (statistics.mean(ours) - statistics.mean(theirs),) * 2
    return ci.low, ci.high


def prediction_interval(runs):
    """Where one more pretraining seed's perplexity would fall (95%, over the loss): the yardstick for a
    configuration run with one seed. None with fewer than two seeds."""
    losses = [math.log(r["perplexity"]) for r in runs]
    if len(losses) < 2:
        return None
    half = stats.t.ppf(0.975, len(losses) - 1) * statistics.stdev(losses) * (1 + 1 / len(losses)) ** 0.5
    return math.exp(statistics.mean(losses) - half), math.exp(statistics.mean(losses) + half)


def gap(value, reference):  # relative perplexity gap, in percent
    return None if value is None or reference is None else 100 * (value / reference - 1)


def fmt_perplexity(mean_bounds):
    mean, bounds = mean_bounds
    if mean is None:
        return "-"
    return f"{mean:.1f}" + (f" ({bounds[0]:.1f}-{bounds[1]:.1f})" if bounds else "")


def fmt(mean_half, digits=1, scale=1.0):
    mean, half = mean_half
    if mean is None:
        return "-"
    return f"{mean * scale:.{digits}f}" + (f" ± {half * scale:.{digits}f}" if half is not None else "")


def describe(arch):
    spec = next(r for r in study.RUNS if arch_of(r["name"]) == arch)
    if spec["model_type"] == "roberta":
        return spec["n"], "-", "standard attention"
    return spec["n"], spec["k"], spec["sharing"]


def compared(s):
    """The configurations each of the paper's Figure 3 claims is about, and standard attention at each n."""
    return {"k": [a for a in s.order if a == BASELINE or (a.startswith(f"linformer_n{N}_") and a.endswith("layerwise"))],
            "sharing": [a for a in s.order if a == BASELINE or a.startswith(f"linformer_n{N}_k{K}_")],
            "n": [a for a in s.order if a.startswith("linformer_") and f"_k{K}_layerwise" in a],
            "baselines": [a for a in s.order if a.startswith("roberta_")]}


# --- sections: each a list of lines; the first ones are also model_card.md's results ----------------------------
def budget(s):
    c, fields = study.PRETRAIN, study.PRETRAIN["config_overrides"]  # the budget every run shares
    lines = [f"Every run: {fields['num_hidden_layers']} layers, hidden {fields['hidden_size']}, "
             f"{fields['num_attention_heads']} heads, FFN {fields['intermediate_size']}, "
             f"dropout {fields.get('hidden_dropout_prob', 'as configured')}; "
             f"{c['max_steps']:,} updates of {study.TOKENS_PER_UPDATE:,} tokens ({c['max_steps'] * study.TOKENS_PER_UPDATE:,} "
             f"tokens), {100 * c['mlm_probability']:g}% of tokens masked in training and "
             f"{100 * c['eval_mlm_probability']:g}% in validation, learning rate {c['learning_rate']} "
             f"({c['lr_scheduler_type']}, "
             + (f"{100 * c['warmup_ratio']:g}% warmup" if c.get("warmup_ratio") else f"{c.get('warmup_steps', 0)} warmup updates")
             + f"), mixed precision "
             f"{c['mixed_precision']}, news corpus (train/validation as given), one shared byte-level BPE tokenizer "
             f"(vocabulary {study.TOKENIZER_VOCAB_SIZE}); every Linformer's E/F start as "
             f"`projection_init={study.linformer()['config_overrides']['projection_init']}` (README.md, \"Budget\"). "
             f"Rotten Tomatoes: finetune_glue.py with the default "
             f"classification head (first token), {study.FINETUNE['num_train_epochs']} epochs, learning rate "
             f"{study.FINETUNE['learning_rate']}, validation accuracy of the final model (no epoch selection). "
             f"Intervals: 95% t-intervals over pretraining seeds (perplexity: over the validation loss, shown as "
             f"exp(mean loss) with its bounds; accuracy: each seed's mean over its {len(study.FINETUNE_SEEDS)} "
             f"finetuning seeds). Where each run trained (CPU or GPU): the Cost section.", ""]
    lines += [f"Validation replaces every masked token by `<mask>` (train_mlm.py --eval_mask_replace_prob "
              f"{c['eval_mask_replace_prob']:g} --eval_random_replace_prob {c['eval_random_replace_prob']:g}): a token is "
              f"predicted from its context alone. Under BERT's 80/10/10, a tenth of the scored tokens are their own answer, "
              f"and a model that only copies its input and knows unigram frequencies scores about half the unigram "
              f"perplexity without reading any context.", ""]
    if s.unigram is not None:
        lines += [f"References on the same validation tokens: a context-free (unigram) model scores perplexity "
                  f"{s.unigram:.1f} (`results/reference/unigram.json`); a model near it has not learnt to use context."
                  + (f" A count model that sees only the two neighbours of each token (train-split counts, fixed "
                     f"interpolation) scores {s.neighbours:.1f} (`results/reference/neighbours.json`): what reading the "
                     f"words around a mask is worth." if s.neighbours is not None else ""), ""]
    if "rotten_tomatoes" in s.reference:
        rt = s.reference["rotten_tomatoes"]
        lines += [f"Reference, Rotten Tomatoes validation: always predicting the majority label scores "
                  f"{100 * rt['majority']['validation_accuracy']:.1f}%; TF-IDF features with logistic regression "
                  f"(scikit-learn, fitted on the same training split) {100 * rt['tfidf_logistic_regression']['validation_accuracy']:.1f}%, "
                  f"the floor a model that has learnt language should approach (`results/reference/rotten_tomatoes.json`).", ""]
    return lines


def configurations(s):
    table2 = {row["ours"]: row for row in s.paper["table2"]["rows"] if row.get("ours")}
    sst2 = s.paper["table2"]["columns"].index("SST-2")
    base, rows = s.summary(BASELINE), []
    for arch in s.order:
        m, p = s.summary(arch), table2.get(arch)
        g = gap(m["ppl"][0], base["ppl"][0])
        rows.append([arch, *describe(arch), f"{m['runs'][0]['config']['num_parameters'] / 1e6:.2f}M" if m["runs"] else "-",
                     len(m["runs"]), fmt_perplexity(m["ppl"]),
                     "-" if m["ppl"][0] is None or s.unigram is None else f"{m['ppl'][0] / s.unigram:.3f}",
                     "-" if g is None else f"{g:+.1f}%", f"{fmt(m['acc'], 1, 100)} ({m['n_acc']})",
                     *((f"{p['scores'][sst2]}", f"{statistics.mean(p['scores']):.2f}") if p else ("-", "-"))])
    return ["## Every configuration", "",
            "Perplexity: final validation perplexity (news, 15% masked); x unigram: that over the unigram reference; "
            "gap: relative to the RoBERTa baseline's mean. Accuracy: Rotten Tomatoes validation accuracy, %. Paper: "
            "Table 2 of Wang et al. 2020, SST-2 (built from the same reviews) and the 4-task average.", "",
            table(["run", "n", "k", "sharing", "params", "seeds", "val. perplexity", "x unigram", "gap vs baseline",
                   "RT accuracy (finetuning runs)", "paper SST-2", "paper avg"], rows), ""]


def target(s, arch, kind, limit):
    """One row of the targets table: what, the measurement with its interval, the verdict. A bound on the baseline
    is a plain condition; a comparison with the baseline is judged by its Welch interval, or by the estimate alone
    where one seed on either side gives none."""
    m, base = s.summary(arch), s.summary(BASELINE)
    ci = None
    if kind == "ratio":
        value = None if m["ppl"][0] is None or s.unigram is None else m["ppl"][0] / s.unigram
        text, shown = f"{arch} perplexity <= {limit:g} x unigram", f"{value:.3f} x" if value else "-"
        judged = status((value or 0) <= limit)
    elif kind == "accuracy":
        value = None if m["acc"][0] is None else 100 * m["acc"][0]
        text, shown = f"{arch} Rotten Tomatoes accuracy >= {limit:g}%", f"{value:.1f}%" if value else "-"
        judged = status((value or 0) >= limit)
    elif kind == "gap":
        value = gap(m["ppl"][0], base["ppl"][0])
        ci = welch(*([math.log(r["perplexity"]) for r in x["runs"]] for x in (m, base)))  # on the loss
        ci = ci and tuple(100 * (math.exp(x) - 1) for x in ci)
        text, shown = f"{arch} perplexity within {limit:g}% of the baseline's", "-" if value is None else f"{value:+.1f}%"
    else:
        value = None if m["acc"][0] is None or base["acc"][0] is None else 100 * (m["acc"][0] - base["acc"][0])
        ci = welch(seed_accuracies(m["runs"]), seed_accuracies(base["runs"]))
        ci = ci and tuple(100 * x for x in ci)
        text = f"{arch} Rotten Tomatoes accuracy within {limit:g} point of the baseline's"
        shown = "-" if value is None else f"{value:+.1f} points"
    if ci:
        shown += f" ({ci[0]:+.1f} to {ci[1]:+.1f})"
    if value is None:
        return [text, shown, "not measured"]
    if kind in ("gap", "points"):
        low, high = ci or (value, value)
        judged = verdict(low, high, limit, above=False) if kind == "gap" else verdict(low, high, -limit)
        shown += f", {len(m['runs'])} vs {len(base['runs'])} pretraining seeds"
    else:
        shown += f" ({len(m['runs'])} pretraining seed{'s' * (len(m['runs']) != 1)})"
    return [text, shown, judged]


def targets(s):
    return ["## Targets (issue 34)", "",
            "A comparison with the baseline is met when its whole 95% interval (Welch's t over pretraining seeds: "
            "perplexity on the validation loss, i.e. the ratio of geometric means; accuracy on each seed's mean) is "
            "inside the limit, **missed** when it is wholly outside, undecided when it straddles the limit. With one "
            "seed on either side there is no interval and the verdict is the estimate's alone.", "",
            table(["target", "measured (95% interval)", "met?"], [target(s, *t) for t in TARGETS]), ""]


def exact_short_path(s):
    """Rotten Tomatoes through the exact short path (run_study.py --exact_short_path), beside the projected one."""
    if not s.exact:
        return []

    def seeds_cell(finetune):  # the mean over finetuning seeds, then each seed
        if not finetune:
            return "-"
        accuracies = [100 * f["accuracy"] for f in finetune.values()]
        return f"{statistics.mean(accuracies):.1f}% (" + " / ".join(f"{a:.1f}" for a in accuracies) + ")"

    by_name = {r["name"]: r.get("finetune", {}) for r in s.results}
    rows = [[name, seeds_cell(by_name.get(name)), seeds_cell(r["finetune"]),
             seeds_cell(by_name.get(f"{BASELINE}_s{name.rsplit('_s', 1)[1]}"))] for name, r in s.exact.items()]
    return ["## Short inputs read exactly (run_study.py --exact_short_path)", "",
            "Every pretraining block was n tokens long, so E/F only ever projected n positions; a Rotten Tomatoes "
            "review (at most 128 tokens) is read through their first L columns. The same finetuning (recipe, seeds) "
            "with `--config_overrides exact_attention_length=L` (L: the finetuning length, or k if larger) reads "
            "each review by exact attention with the pretrained weights instead (the exact short path): the mean "
            "over finetuning seeds, each seed in brackets, beside the run's own finetuning and the baseline's.", "",
            table(["run", "RT, projected (as pretrained)", "RT, exact short path", "baseline (same pretraining seed)"],
                  rows), ""]


def listing(s, archs):
    """Configurations with their final perplexity, best first; a note on any within 10% of the unigram reference's
    or above it (no use of context learnt)."""
    ours = sorted((s.summary(a)["ppl"][0], a) for a in archs if s.groups.get(a))
    unigram = " (on the unigram line: no context learnt)"
    return "; ".join(f"{a} {fmt_perplexity(s.summary(a)['ppl'])}" + (unigram if s.unigram and p and p > 0.9 * s.unigram
                                                                      else "") for p, a in ours) or "no runs yet"


def figure3(s):
    lines, archs = ["## The paper's Figure 3 claims beside ours", ""], compared(s)
    linformer_seeds = prediction_interval(s.groups.get(study.LINFORMER, []))
    for key, claim in s.paper["figure3"].items():
        lines += [f"- **{key}** - paper: {claim}", f"  - ours (final validation perplexity, best first): {listing(s, archs[key])}"]
        if key == "n":
            lines.append(f"  - standard attention at each n, the same budget: {listing(s, archs['baselines'])}")
        single = [a for a in archs[key] if a.startswith("linformer_") and len(s.groups.get(a, [])) == 1]
        if key != "n" and single and linformer_seeds:
            # One pretraining seed against where another seed of the multi-seed Linformer would fall: inside is a tie.
            low, high = linformer_seeds
            inside = [a for a in single if low <= s.groups[a][0]["perplexity"] <= high]
            outside = [a for a in single if a not in inside]
            lines.append(f"  - one-seed runs against the range another seed of {study.LINFORMER} would fall in (95% "
                         f"prediction interval over its seeds, {low:.1f}-{high:.1f}): inside (a tie): "
                         f"{', '.join(inside) or 'none'}; outside: {', '.join(outside) or 'none'}")
    return lines


def locality(r):
    """A run's E/F cells of the order-check table: means over its learnt matrices beside a Gaussian's."""
    e = r.get("projection_check", {}).get("projections", {})
    learnt = [v for key, v in e.items() if key != "random"]
    if not learnt:
        return ["-", "-", "-"]
    mean = {key: statistics.mean(v[key] for v in learnt) for key in ("positions_read", "nearby_share")}
    # A matrix whose best stretch holds under 1.5 x a Gaussian's share has lost the locality it started with.
    mixed = sum(v["nearby_share"] < 1.5 * e["random"]["nearby_share"] for v in learnt)
    return [f"{mean['positions_read']:.1f} ({e['random']['positions_read']:.1f})",
            f"{mean['nearby_share']:.3f} ({e['random']['nearby_share']:.3f})", f"{mixed} of {len(learnt)}"]


def order_check(s):
    checked = [r for r in s.results if "order_check" in r]
    if not checked:
        return []
    unchecked = [r["name"] for r in s.results if "order_check" not in r]
    return ["", "## What the models learnt: word order, and how local E/F became", "",
            f"`order_check.py`: perplexity on the first {checked[0]['order_check']['blocks']} validation blocks of each "
            "run's n, as written and with each block's tokens shuffled (masks moving with their tokens, every masked "
            "token `<mask>`): a model that reads word order scores far better as written; one that knows only which "
            "words occur together scores the same. `projection_check.py` (Linformers): how many of the n positions each "
            "slot of E/F reads, and the share of its weight in its best stretch of n/k neighbouring positions, means "
            "over slots and matrices, beside a Gaussian matrix of the same shape (where E/F would be had they "
            "learnt no locality). E/F start as window means (each slot reads its own n/k positions, share 1); a matrix whose "
            "best-stretch share fell under 1.5 x the Gaussian's has become a mixture of the whole block. Each run's "
            "commands are in its results file.", "",
            table(["run", "as written", "shuffled", "shuffled / as written", "E/F: positions read per slot (Gaussian)",
                   "E/F: share in best stretch (Gaussian)", "E/F matrices as mixed as a Gaussian"],
                  [[r["name"], f"{r['order_check']['perplexity_as_written']:.1f}",
                    f"{r['order_check']['perplexity_shuffled']:.1f}", f"{r['order_check']['shuffled_over_written']:.2f}",
                    *locality(r)] for r in checked])] + (
        ["", f"Not checked (no model in the runs folder): {', '.join(unchecked)}."] if unchecked else [])


def cost(s):
    if not s.results:
        return []
    hardware = dict.fromkeys(r["hardware"] for r in s.results)
    return ["", "## Cost", "", "Every run follows the same recipe; only where it ran differs. Pretraining time is "
            "summed over logging windows (it survives resumption); on a GPU shared by several runs at once it is wall "
            "time under that sharing. Finetuning: each finetuning command's wall time.", "",
            table(["hardware", "runs", "pretraining hours", "finetuning hours"],
                  [[hw, len(mine), f"{sum(r['pretrain_seconds'] for r in mine) / 3600:.2f}",
                    f"{sum(f['seconds'] for r in mine for f in r['finetune'].values()) / 3600:.2f}"]
                   for hw in hardware for mine in [[r for r in s.results if r["hardware"] == hw]]]), "",
            table(["run", "hardware", "tokens/s", "training minutes"],
                  [[r["name"], r["hardware"], f"{r['tokens_per_second']:,}", f"{r['pretrain_seconds'] / 60:.1f}"]
                   for r in s.results])]


def pilots(s):
    if not s.pilots:
        return []
    lines = ["", "## Pilots (chose the recipe; not part of the tables above)", "",
             "Runs recorded with `python -m experiments.quality.record_pilot RUN --name NAME --what ...` "
             "(`results/pilots/NAME.json`: command, curve, tokens/s). Validation perplexity with every masked token "
             "replaced by `<mask>`, as the study's, on the validation split's first `--max_eval_samples` blocks "
             "(the command says how many).", "",
             table(["pilot", "what", "tokens seen", "tokens/s", "final perplexity", "x unigram", "RT accuracy (finetuning)"],
                   [[r["name"], r["what"], f"{r['tokens_seen']:,}", f"{r['tokens_per_second_median']:,}",
                     f"{r['final_perplexity']:.1f}", f"{r['final_vs_unigram']:.3f}",
                     ", ".join(f"{100 * f['accuracy']:.1f}% ({lr})" for lr, f in r.get("finetune", {}).items()) or "-"]
                    for r in s.pilots]), "", "Pilot commands:", ""]
    for r in s.pilots:
        lines += [f"- `{r['name']}`: `{r['pretrain_command']}`"]
        lines += [f"  - finetuning, {key}: `{f['command']}`" for key, f in r.get("finetune", {}).items() if "command" in f]
    return lines


def missing(s):
    planned = [r["name"] for r in study.RUNS]
    absent = [name for name in planned if name not in {r["name"] for r in s.results}]
    unfinetuned = [r["name"] for r in s.results
                   if len(r["finetune"]) < len(study.FINETUNE_SEEDS) and r["run"]["model_type"] != "peer"]
    return ["", "## Missing", "",
            f"- not pretrained yet ({len(absent)} of {len(planned)}): " + (", ".join(absent) or "none"),
            f"- fewer than {len(study.FINETUNE_SEEDS)} finetuning seeds: " + (", ".join(unfinetuned) or "none")]


def reached(curve, level):
    """The first update at which a validation curve is at or below `level`, or None."""
    return next((p["step"] for p in curve if p["perplexity"] <= level), None)


def longer_verdict(r, base_level, gaps):
    """Delay: the run reaches the baseline's perplexity at the study's budget within the extension. Ceiling: it
    has not by the last stop and its gap to the baseline did not shrink over the last stretch. Undecided: neither."""
    last = max(study.EXTENDED_STEPS)
    at = None if base_level is None else reached(r["curve"], base_level)
    if at is not None:
        return f"delay: the baseline's {study.PRETRAIN['max_steps']:,}-update perplexity after {at:,} updates"
    done = str(last) in r["points"]
    known = [g for g in gaps if g is not None]
    if done and len(known) >= 2 and known[-1] >= known[-2]:
        return f"ceiling: not within {last:,} updates, and the gap did not shrink over the last stretch"
    return f"undecided: not within {max(map(int, r['points'])):,} updates" + ("" if done else " (still running)")


def longer(s):
    """Issue 47: the extended runs at each stop, against the baseline's extended run at the same stop."""
    steps = study.EXTENDED_STEPS
    lines = ["", "## Longer: delay or ceiling (issue 47)", "",
             f"The runs of `study.EXTENDED` trained again from their first update and stopped at "
             f"{', '.join(f'{t:,}' for t in steps)} updates (`run_study.py --extend`; `results/extended/`). At each "
             f"stop: validation perplexity, its gap to the baseline's at the same stop, and the Rotten Tomatoes "
             f"accuracy (mean over finetuning seeds). One pretraining seed each. Verdict: delay if a Linformer reaches "
             f"the baseline's perplexity at {study.PRETRAIN['max_steps']:,} updates within the extension (the update "
             f"is given); ceiling if it has not by the last stop and its gap did not shrink over the last stretch; "
             f"undecided otherwise.", ""]
    if not s.extended:
        return lines + ["No extended run has reached a stop yet.", ""]
    base = s.extended.get(f"{BASELINE}_s0")
    base_level = base["points"].get(str(study.PRETRAIN["max_steps"]), {}).get("perplexity") if base else None
    rows = []
    for name, r in s.extended.items():
        points = [r["points"].get(str(t)) for t in steps]
        base_points = [base["points"].get(str(t)) if base else None for t in steps]
        gaps = [gap(p["perplexity"], b["perplexity"]) if p and b else None for p, b in zip(points, base_points)]
        accuracy = [statistics.mean(f["accuracy"] for f in p["finetune"].values()) if p and p["finetune"] else None
                    for p in points]
        rows.append([name, f"{r['mixed_precision']}, {next(p['hardware'] for p in points if p)}",
                     *[f"{p['perplexity']:.1f}" if p else "-" for p in points],
                     *["-" if g is None else f"{g:+.1f}%" for g in gaps],
                     *["-" if a is None else f"{100 * a:.1f}" for a in accuracy],
                     "baseline" if r is base else longer_verdict(r, base_level, gaps)])
    header = ["run", "precision, hardware", *[f"perplexity at {t:,}" for t in steps],
              *[f"gap at {t:,}" for t in steps], *[f"RT % at {t:,}" for t in steps], "verdict"]
    lines += [table(header, rows), ""]
    if base:  # whether the yardstick itself has flattened: its perplexity's fall over each stretch
        stops = [(t, base["points"][str(t)]["perplexity"]) for t in steps if str(t) in base["points"]]
        falls = [f"{100 * (1 - b / a):.1f}% from {s0:,} to {s1:,}" for (s0, a), (s1, b) in zip(stops, stops[1:])]
        lines += [f"The baseline's perplexity fell {'; '.join(falls) or 'over no stretch yet'}.", ""]
    return lines


def commands(s):
    lines = ["", "## Commands", "", "Each run, exactly as run_study.py ran it (from the repository root; it resumes its "
             "newest checkpoint when run again):", ""]
    for r in s.results:
        lines += [f"- `{r['name']}`: `OMP_NUM_THREADS=1 {r['pretrain_command']}`"]
        lines += [f"  - finetuning seed {seed}: `OMP_NUM_THREADS=1 {f['command']}`" for seed, f in sorted(r["finetune"].items())]
    return lines


# The sections of results.md in order; CARD's are also model_card.md's results section.
CARD = [budget, configurations, targets, exact_short_path, figure3, order_check]
PAGE = [longer, cost, pilots, missing, commands]


def efficiency(bench):
    """model_card.md's efficiency summary, from the benchmarks' inference results."""
    if not bench.exists():
        return []
    b = json.loads(bench.read_text())
    rows = [r for r in b["rows"] if r["model"].startswith("linformer") and r["k"] in (128, 256)]
    return ["### Efficiency", "",
            f"Inference, batch 1, {b['dims']['num_hidden_layers']} layers x hidden {b['dims']['hidden_size']} "
            f"(RoBERTa-base size), {b['machine']['device'].upper()} ({b['machine']['cpu']}, "
            f"{b['machine']['threads']} thread, torch {b['machine']['torch']}, {b['args']['dtype']}): how many "
            "times faster / less activation memory than HF RoBERTa of the same size, medians of interleaved "
            "repeats; the paper's V100 figure in brackets. From `benchmarks/results/inference.json`, written by "
            f"`python -m benchmarks.inference --threads {b['args']['threads']} --max-forward-s "
            f"{b['args']['max_forward_s']:g}`; every benchmark is in `benchmarks/results/RESULTS.md`.", "",
            table(["n", "k", "time vs RoBERTa eager (paper)", "time vs RoBERTa sdpa", "memory vs eager (paper)",
                   "memory vs sdpa"],
                  [[r["n"], r["k"], f"{r['time_saved_vs_eager']:.2f}x ({r['paper_time_saved']}x)",
                    f"{r['time_saved_vs_sdpa']:.2f}x", f"{r['mem_saved_vs_eager']:.1f}x ({r['paper_mem_saved']}x)",
                    f"{r['mem_saved_vs_sdpa']:.2f}x"] for r in rows]), ""]


def pages(s, card=REPO / "model_card.md"):
    """{path: text}: results.md, and `card` with its results block rewritten (sections a level down, paths from the
    repository root, the curves and the benchmarks' efficiency summary)."""
    shared = [line for section in CARD for line in section(s)]
    page = ["# Small-scale quality study: results", "",
            f"Written by `{SOURCE}` from `experiments/quality/results/*.json`; do not edit by hand.", "",
            *shared, *[line for section in PAGE for line in section(s)],
            "", "## Plot", "", "![validation perplexity vs tokens seen](perplexity_curves.png)", ""]
    block = [("#" + line if line.startswith("## ") else line).replace("`results/", "`experiments/quality/results/")
             for line in "\n".join(shared).split("\n")]
    block += ["", "### Curves", "", "![validation perplexity vs tokens seen](experiments/quality/perplexity_curves.png)",
              "", *efficiency(REPO / "benchmarks/results/inference.json"),
              "Every run's exact command, the cost and the pilots: `experiments/quality/results.md`."]
    return {HERE / "results.md": "\n".join(page) + "\n", card: splice(card.read_text(), SOURCE, "\n".join(block))}


def plot(s, path):
    """Validation perplexity against tokens seen: one panel for each Figure 3 claim, a fourth for the pilots."""
    archs = compared(s)
    panels = [(f"k (n={N}, layerwise sharing)", archs["k"]), (f"sharing (n={N}, k={K})", archs["sharing"]),
              (f"n (k={K}, layerwise sharing; dashed: standard attention at that n)", [*archs["baselines"], *archs["n"]])]
    with figure(path, 1, 4, figsize=(22, 5.5), sharey=True) as (fig, axes):
        for r in s.pilots:  # the fourth panel: how long each recipe sat on the unigram line
            axes[3].plot([p["tokens_seen"] / 1e6 for p in r["curve"][1:]], [p["perplexity"] for p in r["curve"][1:]],
                         marker="o", ms=2, label=r["name"])
        axes[3].set_title("pilots (recipes, first validation blocks)")
        for ax, (title, configurations) in zip(axes, [*panels, ("", [])]):
            for arch in [a for a in configurations if s.groups.get(a)]:
                runs = s.groups[arch]
                # Seeds share their evaluation updates, not exactly their token counts (blocks differ in padding):
                # the x-axis is the seeds' mean tokens seen at each update.
                steps = [p["step"] for p in runs[0]["curve"]]
                same = [r for r in runs if [p["step"] for p in r["curve"]] == steps]
                tokens = [statistics.mean(v) for v in zip(*[[p["tokens_seen"] for p in r["curve"]] for r in same])]
                curves = [[p["perplexity"] for p in r["curve"]] for r in same]
                mean = [math.exp(statistics.mean(map(math.log, v))) for v in zip(*curves)]  # as the tables: over the loss
                line, = ax.plot([t / 1e6 for t in tokens[1:]], mean[1:], marker="o", ms=3,
                                label=f"{arch} ({len(curves)} seed{'s' * (len(curves) > 1)})",
                                color="black" if arch == BASELINE else None,
                                ls="--" if arch in archs["baselines"] and arch != BASELINE else "-")
                if len(curves) > 1:
                    ax.fill_between([t / 1e6 for t in tokens[1:]], [min(v) for v in zip(*curves)][1:],
                                    [max(v) for v in zip(*curves)][1:], color=line.get_color(), alpha=0.2)
            if s.unigram is not None:
                ax.axhline(s.unigram, color="gray", ls="--", lw=1, label=f"unigram, no context ({s.unigram:.0f})")
                ax.axhline(0.3 * s.unigram, color="gray", ls=":", lw=1, label="0.3 x unigram (target)")
            if s.neighbours is not None:
                ax.axhline(s.neighbours, color="gray", ls="-.", lw=1, label=f"two-neighbour count model ({s.neighbours:.0f})")
            ax.set(title=title or ax.get_title(), xlabel="tokens seen (millions)", yscale="log")
            ax.grid(True, which="both", alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=7)
        axes[0].set_ylabel("validation perplexity (news, 15% masked)")
        fig.suptitle("Masked-LM pretraining: validation perplexity vs tokens seen (before any update omitted; band: "
                     "min-max over seeds)")


def main(argv=None):
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    s = load()
    written = pages(s)
    for path, text in written.items():
        path.write_text(text)
    plot(s, HERE / "perplexity_curves.png")
    print(f"wrote {', '.join(map(str, written))} and {HERE / 'perplexity_curves.png'} from {len(s.results)} results")


if __name__ == "__main__":
    main()
