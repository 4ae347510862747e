# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""experiments/quality/results.md, its plot (perplexity_curves.png) and model_card.md's results block, from
experiments/quality/results/*.json (run_study.py writes them), for whatever subset of the study exists. A section is a
part of results.template.md (its prose) and the function of the same name that fills it (a false value leaves it
out); a sentence the records assemble (a verdict, a finding) is written whole in that function. The functions are
grouped by the question their section answers; CARD and PAGE put the sections in page order.

    python -m experiments.quality.render
"""

import argparse
import json
import math
import re
import statistics
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace

import yaml

from benchmarks import reporting
from benchmarks.reporting import body, compose, figure, number, splice, status, table, verdict, write
from experiments.quality import study

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TEMPLATE, PAPER = HERE / "results.template.md", HERE / "paper_numbers.yaml"
SOURCE = "python -m experiments.quality.render"  # the marker of its block in model_card.md
BASELINE, LINFORMER, N, K = study.BASELINE, study.LINFORMER, study.N, study.K
BUDGET, LAST_STOP = study.PRETRAIN["max_steps"], max(study.EXTENDED_STEPS)  # every run's updates; the extension's
# The targets: (configuration, kind, limit, reference), each kind said in target_row's words. The paper's n = 512
# (4n here) is judged against standard attention at that n, both with the short phase.
PAPER_N_BASELINE = study.name_of(study.short_first(study.roberta(n=4 * N)))
PAPER_N_TARGETS = [(study.name_of(study.short_first(study.linformer(n=4 * N, k=k))), "gap", limit, PAPER_N_BASELINE)
                   for k, limit in ((4 * K, 5.0), (8 * K, 3.0))]
TARGETS = [(BASELINE, "ratio", 0.3, BASELINE), (BASELINE, "accuracy", 68.0, BASELINE),
           (LINFORMER, "gap", 5.0, BASELINE), (LINFORMER, "points", 1.0, BASELINE),
           (study.name_of(study.linformer(k=2 * K)), "gap", 3.0, BASELINE),
           (PAPER_N_BASELINE, "ratio", 0.3, PAPER_N_BASELINE), *PAPER_N_TARGETS]


def configuration_of(name):
    """A run's configuration: its name without the seed."""
    return name.rsplit("_s", 1)[0]


def load(folder=HERE / "results", paper=PAPER):
    """Everything the pages are written from, read once. A Table 2 row of the paper whose scores do not average to
    its printed average is a mistyped transcription, and raises ValueError."""
    paper = yaml.safe_load(Path(paper).read_text())
    for row in paper["table2"]["rows"]:
        if abs(statistics.mean(row["scores"]) - row["average"]) > 0.006:
            raise ValueError(f"paper_numbers.yaml row {row['label']!r} (n={row['n']}): its scores do not average to "
                             f"its printed average {row['average']}: fix the transcription")
    references = reporting.records(folder / "reference")
    runs = list(reporting.records(folder, "name", "perplexity", "curve", "hardware").values())
    configurations = list(dict.fromkeys(configuration_of(spec["name"]) for spec in study.RUNS))  # the study's order
    return SimpleNamespace(
        runs=runs, paper=paper, configurations=configurations, references=references,
        by_configuration={c: [run for run in runs if configuration_of(run["name"]) == c] for c in configurations},
        pilots=list(reporting.records(folder / "pilots", "name", "what", "curve").values()),
        exact_short_path=reporting.records(folder / "exact_rt", "name", "finetune"),  # NAME.json: records by run name
        extended=reporting.records(folder / "extended", "name", "points", "curve"),
        settled=reporting.records(folder / "settled", "name", "points", "curve"),
        unigram=references.get("unigram", {}).get("unigram_perplexity"),
        neighbours=references.get("neighbours", {}).get("neighbours_perplexity"))


# --- a configuration over its pretraining seeds ------------------------------------------------------------------
def loss(run):
    return math.log(run["perplexity"])


def accuracy(run):
    """A run's (or an extended stop's) Rotten Tomatoes accuracy: the mean over finetuning seeds (None before any)."""
    return statistics.mean(f["accuracy"] for f in run["finetune"].values()) if run["finetune"] else None


def gap(value, reference):
    """The relative perplexity gap, in percent."""
    return None if value is None or reference is None else 100 * (value / reference - 1)


def over_seeds(records, configuration):
    """One configuration over its pretraining seeds: perplexity as exp(mean loss) with its 95% bounds (a seed that
    leaves the unigram plateau late would dominate an arithmetic mean), accuracy as (mean, 95% half-width)."""
    runs = records.by_configuration.get(configuration, [])
    mean, half = reporting.t_interval([loss(run) for run in runs])
    return SimpleNamespace(runs=runs, perplexity=None if mean is None else math.exp(mean),
                           accuracy=reporting.t_interval([a for run in runs if (a := accuracy(run)) is not None]),
                           bounds=None if half is None else (math.exp(mean - half), math.exp(mean + half)))


def perplexity_cell(seeds):
    return number(seeds.perplexity, ".1f") + (f" ({seeds.bounds[0]:.1f}-{seeds.bounds[1]:.1f})" if seeds.bounds else "")


def accuracy_cell(run):
    return number(100 * accuracy(run) if run and run["finetune"] else None, ".1f")


# --- what every run did, and the references a result is read against ---------------------------------------------
def recipe(records):
    pretrain, fields, per_update = study.PRETRAIN, study.PRETRAIN["config_overrides"], study.TOKENS_PER_UPDATE
    return dict(pretrain, **fields, dropout=fields.get("hidden_dropout_prob", "as configured"), updates=f"{BUDGET:,}",
                tokens_per_update=f"{per_update:,}", tokens=f"{BUDGET * per_update:,}",
                masked=f"{100 * pretrain['mlm_probability']:g}",
                eval_masked=f"{100 * pretrain['eval_mlm_probability']:g}",
                warmup=f"{100 * pretrain['warmup_ratio']:g}% warmup" if pretrain.get("warmup_ratio")
                else f"{pretrain.get('warmup_steps', 0)} warmup updates", vocabulary=study.TOKENIZER_VOCAB_SIZE,
                projection_init=study.linformer()["config_overrides"]["projection_init"],
                epochs=study.FINETUNE["num_train_epochs"], finetuning_rate=study.FINETUNE["learning_rate"],
                finetuning_seeds=len(study.FINETUNE_SEEDS),
                **{key: f"{pretrain[key]:g}" for key in ("eval_mask_replace_prob", "eval_random_replace_prob")})


def news_references(records):
    """run_study.py writes both news references at once, from one tokenization."""
    return records.unigram and records.neighbours and {"unigram": f"{records.unigram:.1f}",
                                                       "neighbours": f"{records.neighbours:.1f}"}


def rotten_tomatoes_reference(records):
    found = records.references.get("rotten_tomatoes")
    return found and {"majority": f"{100 * found['majority']['validation_accuracy']:.1f}",
                      "tfidf": f"{100 * found['tfidf_logistic_regression']['validation_accuracy']:.1f}"}


# --- does a model learn? --------------------------------------------------------------------------------------------
def every_configuration(records):
    table2 = {row["ours"]: row for row in records.paper["table2"]["rows"] if row.get("ours")}
    sst2, baseline, rows = records.paper["table2"]["columns"].index("SST-2"), over_seeds(records, BASELINE), []
    specs = {configuration_of(spec["name"]): spec for spec in study.RUNS}  # standard attention has no k, no sharing
    for configuration in records.configurations:
        seeds, paper, spec = over_seeds(records, configuration), table2.get(configuration), specs[configuration]
        mean, half = seeds.accuracy
        rows.append([configuration, spec["n"], spec.get("k", "-"), spec.get("sharing", "standard attention"),
                     f"{seeds.runs[0]['config']['num_parameters'] / 1e6:.2f}M" if seeds.runs else "-",
                     len(seeds.runs), perplexity_cell(seeds),
                     number(seeds.perplexity and records.unigram and seeds.perplexity / records.unigram),
                     number(gap(seeds.perplexity, baseline.perplexity), "+.1f", "%"),
                     number(mean and 100 * mean, ".1f") + ("" if half is None else f" ± {100 * half:.1f}")
                     + f" ({sum(len(run['finetune']) for run in seeds.runs)})",
                     *((paper["scores"][sst2], f"{statistics.mean(paper['scores']):.2f}") if paper else ("-", "-"))])
    return {"rows": body(rows)}


def target_row(records, configuration, kind, limit, reference=BASELINE):
    """One row of the targets table. A bound on a configuration is a plain condition; a comparison with the
    `reference` configuration is judged by its 95% interval: paired by seed where both ran the same seeds, else
    Welch's, else (perplexity, on the loss) the seeds' pooled spread around a one-seed side."""
    ours, theirs = over_seeds(records, configuration), over_seeds(records, reference)
    against = "the baseline" if reference == BASELINE else f"`{reference}`"
    what = configuration + {"ratio": f" perplexity <= {limit:g} x unigram",
                            "accuracy": f" Rotten Tomatoes accuracy >= {limit:g}%",
                            "gap": f" perplexity within {limit:g}% of {against}'s",
                            "points": f" Rotten Tomatoes accuracy within {limit:g} point of the baseline's"}[kind]
    seeds, (mean, base) = len(ours.runs), (ours.accuracy[0], theirs.accuracy[0])
    value = {"ratio": ours.perplexity and records.unigram and ours.perplexity / records.unigram,
             "accuracy": mean and 100 * mean, "gap": gap(ours.perplexity, theirs.perplexity),
             "points": None if None in (mean, base) else 100 * (mean - base)}[kind]
    if value is None:
        return [what, "-", "not measured"]
    if kind in ("ratio", "accuracy"):
        return [what, (f"{value:.3f} x" if kind == "ratio" else f"{value:.1f}%")
                + f" ({seeds} pretraining seed{'s' * (seeds != 1)})",
                status(value <= limit if kind == "ratio" else value >= limit)]
    # Perplexity on the loss (a one-seed side borrows the seeds' pooled spread), accuracy on each seed's mean.
    each = loss if kind == "gap" else accuracy
    values = [[(run["seed"], v) for run in side.runs if (v := each(run)) is not None] for side in (ours, theirs)]
    pooled = kind == "gap" and reporting.pooled_spread([loss(run) for run in runs]
                                                       for runs in records.by_configuration.values())
    paired = reporting.paired_t_interval(*map(dict, values))  # every run's values where the seeds do not pair
    interval = paired or reporting.difference_interval(*([v for _, v in side] for side in values), pooled)
    interval = interval and [100 * (math.exp(end) - 1) if kind == "gap" else 100 * end for end in interval]
    measured = ((f"{value:+.1f}%" if kind == "gap" else f"{value:+.1f} points")
                + (f" ({interval[0]:+.1f} to {interval[1]:+.1f})" if interval else "")
                + f", {seeds} vs {len(theirs.runs)} pretraining seeds" + ", paired by seed" * bool(paired))
    if interval is None:  # one seed a side and no spread to borrow: a bare difference is no verdict
        return [what, measured, "undecided (no interval: one pretraining seed on a side, and no seeds' spread to "
                                "borrow)"]
    return [what, measured, verdict(*interval, limit, above=False) if kind == "gap" else verdict(*interval, -limit)]


def locality_cells(run):
    """A run's E/F cells of the word-order table: means over its learnt matrices beside a Gaussian's."""
    projections = run.get("projection_check", {}).get("projections", {})
    learnt, gaussian = [v for key, v in projections.items() if key != "random"], projections.get("random")
    if not learnt:
        return ["-", "-", "-"]
    read, share = (statistics.mean(v[key] for v in learnt) for key in ("positions_read", "nearby_share"))
    # A matrix whose best stretch holds under 1.5 x a Gaussian's share has lost the locality it started with.
    mixed = sum(v["nearby_share"] < 1.5 * gaussian["nearby_share"] for v in learnt)
    return [f"{read:.1f} ({gaussian['positions_read']:.1f})", f"{share:.3f} ({gaussian['nearby_share']:.3f})",
            f"{mixed} of {len(learnt)}"]


def what_was_learnt(records):
    checked = [run for run in records.runs if "order_check" in run]
    unchecked = ", ".join(run["name"] for run in records.runs if "order_check" not in run)
    return checked and {
        "blocks": checked[0]["order_check"]["blocks"],
        "unchecked": unchecked and f"\n\nNot checked (no model in the runs folder): {unchecked}.",
        "rows": body([run["name"], f"{order['perplexity_as_written']:.1f}", f"{order['perplexity_shuffled']:.1f}",
                      f"{order['shuffled_over_written']:.2f}", *locality_cells(run)]
                     for run, order in ((run, run["order_check"]) for run in checked))}


# --- how k, sharing and the projection matter -------------------------------------------------------------------
def short_inputs_read_exactly(records):
    """Rotten Tomatoes read by the exact short path (run_study.py --exact_short_path) beside the projected one."""
    def cell(finetune):
        seeds = [100 * f["accuracy"] for f in (finetune or {}).values()]
        return f"{statistics.mean(seeds):.1f}% ({' / '.join(f'{a:.1f}' for a in seeds)})" if seeds else "-"

    own = {run["name"]: run.get("finetune") for run in records.runs}
    return records.exact_short_path and {"rows": body(
        [name, cell(own.get(name)), cell(exact["finetune"]), cell(own.get(f"{BASELINE}_s{name.rsplit('_s', 1)[1]}"))]
        for name, exact in records.exact_short_path.items())}


def claimed(records):
    """The configurations each of the paper's Figure 3 claims is about, standard attention at each n, and the peer
    and the convolution (drawn beside the sharing modes, not part of that claim)."""
    patterns = {"k": f"{BASELINE}|linformer_n{N}_.*layerwise", "baselines": "roberta_n[0-9]+",
                "sharing": f"{BASELINE}|linformer_n{N}_k{K}_(none|headwise|key_value|layerwise)",
                "n": f"linformer_n[0-9]+_k{K}_layerwise",
                "peer": f"lucidrains_n{N}_k{K}_.*|linformer_n{N}_k{K}_.*_conv"}
    return {key: [c for c in records.configurations if re.fullmatch(pattern, c)] for key, pattern in patterns.items()}


def ranked(records, configurations):
    """Configurations with their final perplexity, best first; one within 10% of the unigram reference's, or above
    it, has learnt no use of context."""
    found = sorted((over_seeds(records, c).perplexity, c) for c in configurations if records.by_configuration.get(c))
    return "; ".join(f"{c} {perplexity_cell(over_seeds(records, c))}" + " (on the unigram line: no context learnt)"
                     * bool(records.unigram and ppl > 0.9 * records.unigram) for ppl, c in found) or "no runs yet"


def figure3_claims(records):
    """Each of the paper's Figure 3 claims beside our configurations; a configuration of one pretraining seed is
    read against where another seed of the multi-seed Linformer would fall (inside: a tie)."""
    claims, about = [], claimed(records)
    mean, half = reporting.t_interval([loss(run) for run in records.by_configuration.get(LINFORMER, [])], predict=True)
    for key, claim in records.paper["figure3"].items():
        claims.append(f"- **{key}** - paper: {claim}\n"
                      f"  - ours (final validation perplexity, best first): {ranked(records, about[key])}")
        if key == "n":
            claims.append(f"  - standard attention at each n, the same budget: {ranked(records, about['baselines'])}")
        single = [c for c in about[key] if c.startswith("linformer_") and len(records.by_configuration.get(c, [])) == 1]
        if key != "n" and single and half is not None:
            low, high = math.exp(mean - half), math.exp(mean + half)
            inside = [c for c in single if low <= records.by_configuration[c][0]["perplexity"] <= high]
            outside = [c for c in single if c not in inside]
            claims.append(f"  - one-seed runs against the range another seed of {LINFORMER} would fall in (95% "
                          f"prediction interval over its seeds, {low:.1f}-{high:.1f}): inside (a tie): "
                          f"{', '.join(inside) or 'none'}; outside: {', '.join(outside) or 'none'}")
    return {"claims": "\n".join(claims)}


# --- does a Linformer catch up if it trains longer? (delay or ceiling) ------------------------------------------
def precision_name(mixed_precision):
    """A run's --mixed_precision as the pages name it ("no" trains in fp32)."""
    return "fp32" if mixed_precision == "no" else mixed_precision


def extended_baseline(records):
    """The baseline's extended record and its perplexity at the budget (None before): every extension's yardstick."""
    baseline = records.extended.get(f"{BASELINE}_s0", {"points": {}})
    return baseline, baseline["points"].get(str(BUDGET), {}).get("perplexity")


def reached(run, level):
    """The first evaluated update of a run at or below `level` on n-token blocks (None if none): a short phase's
    points are read on its short blocks, where perplexity is lower than on n-token ones, so they are not compared."""
    short = run.get("run", {}).get("short", {}).get("steps", -1)
    return next((point["step"] for point in run["curve"] if point["step"] > short and point["perplexity"] <= level),
                None)


def longer_answer(records):
    """The card's practical answer: how many times the budget each extended Linformer configuration needs to reach
    the baseline's perplexity at the budget, with its gap at the last stop its seeds and the baseline all have; then
    the paper's n's targets, as judged."""
    (baseline, level), by_configuration = extended_baseline(records), {}
    for name, run in sorted(records.extended.items()):
        if level is not None and run is not baseline and run["points"]:
            by_configuration.setdefault(configuration_of(name), []).append((name, run))
    runs = [catch_up(configuration, seeds, baseline, level) for configuration, seeds in by_configuration.items()]
    if not runs:
        return None
    paper_n = [f"`{configuration}` against `{reference}`: {measured} (target: within {limit:g}%): {said}"
               if records.by_configuration.get(configuration) else f"`{configuration}` not measured yet"
               for configuration, _, limit, reference in PAPER_N_TARGETS
               for _, measured, said in [target_row(records, configuration, "gap", limit, reference)]]
    seeds, fields = [run["perplexity"] for run in records.by_configuration.get(BASELINE, [])], study.PRETRAIN
    return {"n": N, "layers": fields["config_overrides"]["num_hidden_layers"], "budget": f"{BUDGET:,}",
            "hidden": fields["config_overrides"]["hidden_size"], "level": f"{level:.1f}", "runs": "; ".join(runs),
            "precision": precision_name(baseline["mixed_precision"]), "recipe": fields["mixed_precision"],
            "paper_n": 4 * N, "paper_n_targets": "; ".join(paper_n), "last": f"{LAST_STOP:,}", "seeds": len(seeds),
            "spread": f"{min(seeds):.1f} to {max(seeds):.1f}" if len(seeds) > 1 else "unmeasured",
            "last_stretch": (falls := paper_n_last_stretch(records)) and f" {falls}",
            "recipe_answer": recipe_answer(records.extended, level),
            "paper_n_recipe": paper_n_recipe(records), "convolution_default": convolution_default(records)}


def catch_up(configuration, seeds, baseline, level):
    """One configuration's clause of the card's answer: a single seed by its run's name, several by the
    configuration's with each stop's range over the seeds."""
    stops = [sorted((int(step), point["perplexity"]) for step, point in run["points"].items()) for _, run in seeds]
    shared = sorted(set.intersection(*({step for step, _ in s} for s in stops)))
    last = [step for step in shared if str(step) in baseline["points"]][-1:]
    at = [reached(run, level) for _, run in seeds]
    if all(at):
        times = f"about {statistics.mean(at) / BUDGET:.1f}x" + (
            f" (seeds {min(at) / BUDGET:.1f}x to {max(at) / BUDGET:.1f}x)" if len(at) > 1 else "")
    else:
        times = f"more than {min(s[-1][0] for s in stops) / BUDGET:g}x" + (
            f" ({sum(map(bool, at))} of {len(at)} seeds reached it)" if any(at) else "")
    ranges = {step: [dict(s)[step] for s in stops] for step in shared}
    path = ", ".join(f"{spread(values)} at {step:,}" for step, values in ranges.items())
    if last:
        theirs = baseline["points"][str(last[0])]["perplexity"]
        gaps = spread([gap(p, theirs) for p in ranges[last[0]]], "+.1f", "%")
        path += f"; at {last[0]:,} updates {gaps} against standard attention's {theirs:.1f}"
    running = not all(at) and any(s[-1][0] < LAST_STOP for s in stops)
    who = f"`{seeds[0][0]}`" if len(seeds) == 1 else f"`{configuration}` ({len(seeds)} seeds)"
    return (f"{who} needs {times} as many updates ({path})"
            + f", so far: its extension to {LAST_STOP:,} updates has not finished" * running)


def spread(values, fmt=".1f", unit=""):
    """One value, or the lowest to the highest of several (a configuration's seeds)."""
    low, high = min(values), max(values)
    return f"{low:{fmt}}{unit}" if low == high else f"{low:{fmt}}{unit} to {high:{fmt}}{unit}"


# The recipe goal (issue 66): a Linformer within this much of standard attention's perplexity at the budget, given at
# most this many times its updates
RECIPE_MARGIN, RECIPE_UPDATES = 1.05, 2


# When a run has finished training past the budget, by how it trains there: extended to fixed stops (n = N), or
# settled by the rule (the paper's n)
FINISHED = {"extension": lambda run: run["curve"][-1]["step"] >= LAST_STOP, "settling": lambda run: "settled" in run}
PLANNED = {"extension": study.EXTENDED, "settling": study.SETTLED}  # the runs each trains, begun or not


def reaching(runs, level, phase="extension"):
    """Each Linformer configuration's seeds among `runs` ({name: record}) against `level`: {configuration: [the first
    update at or below it, None for a seed whose `phase` finished above it]}, and {configuration: [seeds not there
    yet, their `phase` unfinished or not begun (the study plans them: PLANNED)]}. An unfinished seed is waited for,
    not counted as a miss, so that a configuration is not judged on the seeds that happen to be ahead."""
    reached_at, running = {}, {}
    for name, run in sorted(runs.items()):
        if (configuration := configuration_of(name)) not in (BASELINE, PAPER_N_BASELINE):
            at = reached(run, level)
            if at is None and not FINISHED[phase](run):
                running.setdefault(configuration, []).append(name.rsplit("_s", 1)[1])
            else:
                reached_at.setdefault(configuration, []).append(at)
    for name in sorted(set(PLANNED[phase]) - set(runs)):
        if (configuration := configuration_of(name)) in reached_at or configuration in running:
            running.setdefault(configuration, []).append(name.rsplit("_s", 1)[1])
    return reached_at, running


def not_there_yet(seeds, phase="extension"):
    """The clause naming a configuration's seeds not there yet whose `phase` has not finished ("" where none is): a
    record cannot tell whether a process still trains them."""
    return f"; seed{'s' * (len(seeds) > 1)} {' and '.join(seeds)} not there yet, {phase} not finished" * bool(seeds)


def fastest(runs, level, phase="extension"):
    """The Linformer configuration among `runs` that comes within RECIPE_MARGIN of the baseline's budget perplexity
    `level` in the fewest updates, as its factor over the budget (geometric mean over its seeds), interval (None for
    one seed), seeds not there yet (unfinished), the goal's verdict and its plan (`run`: n, k, projection); None
    where no configuration has."""
    reached_at, running = reaching(runs, RECIPE_MARGIN * level, phase)
    # a multiple of the budget is a ratio: its seeds are averaged, and their interval taken, on the log scale, so
    # that the interval stays positive and 2x above is as far as 0.5x below
    logs = {c: [math.log(at / BUDGET) for at in ats] for c, ats in reached_at.items() if all(ats)}
    if not logs:
        return None
    best = min(logs, key=lambda c: statistics.mean(logs[c]))
    mean, half = reporting.t_interval(logs[best])
    factor, waiting = math.exp(mean), running.get(best, [])
    run = next(r.get("run", {}) for name, r in runs.items() if configuration_of(name) == best)
    so_far = " so far" * bool(waiting)
    if half is None:
        interval = None
        said = (f"met on one seed{so_far}, not yet with an interval" if factor <= RECIPE_UPDATES
                else f"**missed** on one seed{so_far}")
    else:
        interval = (math.exp(mean - half), math.exp(mean + half))
        said = verdict(*interval, bound=RECIPE_UPDATES, above=False) + so_far
    return SimpleNamespace(configuration=best, run=run, factor=factor, interval=interval, seeds=len(logs[best]),
                           waiting=waiting, verdict=said)


def recipe_answer(runs, level, n=N, phase="extension"):
    """What to pretrain from scratch at n: the fastest configuration among `runs` (`fastest`), its seeds not there
    yet named, and whether that meets the goal."""
    best = fastest(runs, level, phase)
    if best is None:
        return (f"no Linformer configuration has come within {RECIPE_MARGIN - 1:.0%} of it yet, so there is no "
                f"recipe to name at n = {n}")
    if best.interval is None:
        spread = "one seed, so no interval"
    else:
        every = study.PRETRAIN["eval_steps"]  # seeds that agree to the evaluation give an interval of no width
        spread = (f"geometric mean of {best.seeds} seeds, [{best.interval[0]:.2f}, {best.interval[1]:.2f}] on the log "
                  f"scale, each read at evaluations {every:,} updates ({every / BUDGET:g}x) apart")
    return (f"pretrain `{best.configuration}` at n = {n}: it comes within {RECIPE_MARGIN - 1:.0%} of standard "
            f"attention's {BUDGET:,}-update perplexity after {best.factor:.2f}x its updates ({spread}"
            f"{not_there_yet(best.waiting, phase)}); goal, at most {RECIPE_UPDATES}x: " + best.verdict)


def convolution_readings(records):
    """Issue 66, item 4: the convolution held to the recipe goal by itself, at n = N (the extended runs) and at the
    paper's n (the settled runs), each at its fastest k: [(n, `fastest` of the convolution's configurations, or None
    before any reaches the level or before the level is known)]."""
    readings = []
    for n, runs, level, phase in ((N, records.extended, extended_baseline(records)[1], "extension"),
                                  (4 * N, records.settled, paper_n_level(records), "settling")):
        convolutions = {name: run for name, run in runs.items() if run.get("run", {}).get("projection") == "conv"}
        readings.append((n, fastest(convolutions, level, phase) if level is not None else None))
    return readings


def convolution_is_the_default(records, readings=None):
    """Whether the convolution meets the recipe goal at both n, the condition on which train_mlm.py pretrains a new
    Linformer with it by default (issue 66, item 4; tests hold train_mlm.DEMO_MODELS to it). `readings`:
    convolution_readings(records), where already read."""
    readings = readings or convolution_readings(records)
    return all(best is not None and best.verdict == reporting.MET for _, best in readings)


def convolution_default(records):
    """The card's sentence on train_mlm.py's default: the convolution's reading at each n, and what follows."""
    said, readings = [], convolution_readings(records)
    for n, best in readings:
        if best is None:
            said.append(f"at n = {n} none of its runs has come within {RECIPE_MARGIN - 1:.0%} yet")
            continue
        spread = "one seed" if best.interval is None else f"[{best.interval[0]:.2f}, {best.interval[1]:.2f}]"
        said.append(f"at n = {n} `{best.configuration}` after {best.factor:.2f}x the updates ({spread}): "
                    f"{best.verdict}")
    if convolution_is_the_default(records, readings):
        (n, best), _ = readings
        follows = (f"it meets the goal at both n, so `python train_mlm.py` pretrains a new Linformer with it by "
                   f"default (`projection_type=conv`, k = {best.run['k']} at its default n = {n}; docs/training.md "
                   f"says what to pass at n = {4 * N})")
    else:
        follows = ("it has not met the goal at both n, so train_mlm.py's default stays the paper's learned E/F "
                   "(`projection_type=linear`)")
    return f"The convolutional projection on its own, at its fastest k: {'; '.join(said)}; {follows}."


def paper_n_level(records):
    """Standard attention's seed 0 at the budget in its settled run (None before): the paper's n's recipe level, as
    the extended baseline's seed 0 is at n = N."""
    baseline = records.settled.get(f"{PAPER_N_BASELINE}_s0", {"points": {}})
    return baseline["points"].get(str(BUDGET), {}).get("perplexity")


def paper_n_recipe(records):
    """Issue 66, item 4 at the paper's n: the same answer read from the settled runs (on n-token blocks past the
    budget until the rule stopped them), against standard attention's seed 0 at the budget, as at n = N."""
    level = paper_n_level(records)
    if level is None:
        return f"At n = {4 * N} the same question waits for standard attention's settled run (issue 66, item 2)."
    answer = recipe_answer(records.settled, level, 4 * N, "settling")
    cap = study.SHORT_PHASE["steps"] + study.SETTLE["long_updates"]
    return (f"At n = {4 * N}, from the settled runs (at most {cap / BUDGET:g}x the budget; standard attention's "
            f"seed 0 at {BUDGET:,} updates: {level:.1f}): {answer}.")


def delay_or_ceiling(run, level, gaps):
    """Delay: the run reaches the baseline's perplexity at the study's budget within the extension. Ceiling: it
    has not by the last stop and its gap to the baseline did not shrink over the last stretch. Undecided: neither,
    or no baseline to reach yet (then "not within" would read as a miss)."""
    if level is None:
        return f"undecided: the baseline's extended run has no {BUDGET:,}-update point yet"
    if (at := reached(run, level)) is not None:
        return f"delay: the baseline's {BUDGET:,}-update perplexity after {at:,} updates"
    done, known = str(LAST_STOP) in run["points"], [g for g in gaps if g is not None]
    if done and len(known) >= 2 and known[-1] >= known[-2]:
        return f"ceiling: not within {LAST_STOP:,} updates, and the gap did not shrink over the last stretch"
    why = ("the gap is known at one stop only: no trend to read yet" if len(known) < 2 else
           "the gap still shrank over the last stretch" if known[-1] < known[-2] else
           "the gap grew over the last stretch, before the last stop")
    return (f"undecided: the baseline's level not reached within {max(map(int, run['points'])):,} updates"
            + " (its extension has not finished)" * (not done) + f"; {why}")


def longer(records):
    """The extended runs at each stop against the baseline's extended run at the same stop; and the baseline's own
    fall over each stretch, whether the yardstick itself has flattened."""
    steps, (baseline, level), rows = study.EXTENDED_STEPS, extended_baseline(records), []
    for name, run in records.extended.items():
        points, theirs = ([r["points"].get(str(step)) for step in steps] for r in (run, baseline))
        gaps = [gap(p["perplexity"], b["perplexity"]) if p and b else None for p, b in zip(points, theirs, strict=True)]
        rows.append([name, f"{precision_name(run['mixed_precision'])}, {next(p['hardware'] for p in points if p)}",
                     *[number(p and p["perplexity"], ".1f") for p in points], *[number(g, "+.1f", "%") for g in gaps],
                     *map(accuracy_cell, points),
                     "baseline" if run is baseline else delay_or_ceiling(run, level, gaps)])
    header = ["run", "precision, hardware", *(f"{what} at {step:,}" for what in ("perplexity", "gap", "RT %")
                                              for step in steps), "verdict"]
    stops = [(step, point["perplexity"]) for step in steps if (point := baseline["points"].get(str(step)))]
    return {"stops": ", ".join(f"{step:,}" for step in steps), "budget": f"{BUDGET:,}",
            "table": table(header, rows) if rows else "No extended run has reached a stop yet.",
            "falls": "; ".join(f"{100 * (1 - b / a):.1f}% from {start:,} to {end:,}"
                               for (start, a), (end, b) in pairwise(stops)) or "over no stretch yet"}


# --- a later start or a slower fall? ------------------------------------------------------------------------------
# A model has left the unigram plateau at its first evaluation below this share of the unigram reference; its fall
# is read this many updates after that point (each run from its own start, so a late start does not count as a fall)
PLATEAU_SHARE, FALL_AFTER = 0.7, (1_000, 3_000, 6_000)


def start_and_fall(records, run):
    """(the update a run left the plateau at, {updates after it: perplexity}), the start None if it never left; read
    on its extension where one exists (the same run trained further)."""
    extended, curve = records.extended.get(run["name"]), run["curve"]
    curve = extended["curve"] if extended and extended["curve"][-1]["step"] > curve[-1]["step"] else curve
    start = next((point["step"] for point in curve if point["perplexity"] < PLATEAU_SHARE * records.unigram), None)
    at = {point["step"]: point["perplexity"] for point in curve}
    return start, {after: at.get(start + after) for after in FALL_AFTER} if start is not None else {}


def start_or_fall(records):
    """Every run at n = N: where it left the plateau and how far it fell 1,000, 3,000 and 6,000 updates later; then
    each Linformer configuration against the baseline (start_or_fall_reading)."""
    if not records.unigram or not records.by_configuration.get(BASELINE):
        return None
    rows, measured = [], {}
    at_n = {configuration_of(spec["name"]) for spec in study.RUNS if spec.get("n") == N and not spec.get("short")}
    for configuration in (c for c in records.configurations if c in at_n):
        for run in records.by_configuration[configuration]:
            start, fall = start_and_fall(records, run)
            measured.setdefault(configuration, {})[run["seed"]] = (start, fall.get(FALL_AFTER[1]))
            rows.append([run["name"], number(start, ",d") if start is not None else "not left",
                         *(number(fall.get(after), ".1f") for after in FALL_AFTER)])
    readings = [start_or_fall_reading(configuration, seeds, measured[BASELINE])
                for configuration, seeds in measured.items() if configuration != BASELINE]
    return {"share": PLATEAU_SHARE, "n": N, "baseline": BASELINE, "after": f"{FALL_AFTER[1]:,}",
            "table": table(["run", "left the plateau at", *(f"perplexity {after:,} updates later" for after in
                                                            FALL_AFTER)], rows),
            "readings": "\n".join(f"- {reading}" for reading in readings)}


def start_or_fall_reading(configuration, seeds, baseline):
    """One configuration against the baseline, paired by seed ({seed: (start, perplexity 3,000 updates after it)}):
    a later start or a slower fall is said only where its 95% t-interval over seeds excludes no change."""
    shared = sorted(seed for seed in seeds if seed in baseline and None not in (*seeds[seed], *baseline[seed]))
    if not shared:
        why = ("it never left the plateau" if all(start is None for start, _ in seeds.values()) else
               f"its curve ends before {FALL_AFTER[1]:,} updates after its start")
        return f"`{configuration}`: not comparable yet ({why})"
    (delay, late), (ratio, slow) = (reporting.t_interval(values) for values in (
        [seeds[seed][0] - baseline[seed][0] for seed in shared],
        [math.log(seeds[seed][1] / baseline[seed][1]) for seed in shared]))
    if late is None:
        return (f"`{configuration}` (seed {shared[0]} only): starts {delay:+,.0f} updates from the baseline's, "
                f"{math.exp(ratio):.2f}x its perplexity {FALL_AFTER[1]:,} updates after its start; one seed: undecided")
    later, slower = delay - late > 0, ratio - slow > 0
    kind = {(True, True): "both a later start and a slower fall", (True, False): "a later start",
            (False, True): "a slower fall", (False, False): "neither, within the seeds' spread"}[later, slower]
    return (f"`{configuration}` ({len(shared)} seeds): starts {delay:+,.0f} updates from the baseline's "
            f"[{delay - late:+,.0f}, {delay + late:+,.0f}], {math.exp(ratio):.2f}x its perplexity {FALL_AFTER[1]:,} "
            f"updates after its start [{math.exp(ratio - slow):.2f}, {math.exp(ratio + slow):.2f}]: {kind}")


# --- the paper's n = 512, with a short phase first ---------------------------------------------------------------
def paper_n(records):
    """The runs with a short phase: where each phase left them, and each evaluation between the switch and the last."""
    ran, phase = [run for run in records.runs if "short_phase" in run], study.SHORT_PHASE
    between = {run["name"]: [p for p in run["curve"][:-1] if p["step"] > phase["steps"]] for run in ran}
    baseline = over_seeds(records, PAPER_N_BASELINE).perplexity
    rows = [[run["name"], left_plateau(records, run), f"{run['short_phase']['perplexity']:.1f}",
             f"{next(p['perplexity'] for p in run['curve'] if p['step'] == run['short_phase']['steps']):.1f}",
             ", ".join(f"{p['perplexity']:.1f}" for p in between[run["name"]]) or "-", f"{run['curve'][-1]['step']:,}",
             f"{run['perplexity']:.1f}", number(records.unigram and run["perplexity"] / records.unigram),
             number(gap(run["perplexity"], baseline), "+.1f", "%"), accuracy_cell(run)] for run in ran]
    return ran and {"n": 4 * N, "share": PLATEAU_SHARE, "block": phase["block_size"], "steps": f"{phase['steps']:,}",
                    "updates": f"{BUDGET:,}", "choice": paper_n_short_blocks(records), "baseline": PAPER_N_BASELINE,
                    "rows": body(rows), "between": ", ".join(f"{p['step']:,}" for p in between[ran[0]["name"]]),
                    "falls": paper_n_last_stretch(records)}


def paper_n_last_stretch(records):
    """How much each run the n = 512 targets judge fell over its last stretch between evaluations ("" before any
    ran): a target read while its curves still fall is a point on the way."""
    judged = [run for configuration in (PAPER_N_BASELINE, *(c for c, *_ in PAPER_N_TARGETS))
              for run in records.by_configuration.get(configuration, [])]
    if not judged:
        return ""
    falls = [100 * (1 - run["curve"][-1]["perplexity"] / run["curve"][-2]["perplexity"]) for run in judged]
    last = judged[0]["curve"]
    still = ("every run was still falling, so the targets read curves that have not levelled off" if min(falls) > 0
             else "not every run was still falling (a negative fall is a rise)")
    return (f"Over the last {last[-1]['step'] - last[-2]['step']} updates the validation perplexity of each run the "
            f"targets judge fell by {min(falls):.1f}% to {max(falls):.1f}%: {still}.")


def settled(records):
    """Issue 66, item 2: each run of study.SETTLED trained on past the budget until study.settled stopped it (or where
    it is now), and the n = 512 targets read again at those stops, paired by seed."""
    runs = [records.settled[name] for name in study.SETTLED if name in records.settled]
    if not runs:
        return None
    stops = {run["name"]: run["points"][str(run["settled"]["step"])] for run in runs  # a stop found is kept next
             if "settled" in run and str(run["settled"]["step"]) in run["points"]}
    rows, level, by_configuration = [], paper_n_level(records), stops_by_configuration(stops)
    for run in runs:
        alone = next((r for r in records.runs if r["name"] == run["name"]), None)
        budget, stop = run["points"].get(str(BUDGET)), stops.get(run["name"])
        last = run["curve"][-1]
        rows.append([run["name"], number(budget and budget["perplexity"], ".1f"),
                     number(alone and alone["perplexity"], ".1f"),
                     stopped_at(run["settled"]) if stop else f"not finished (last evaluated update {last['step']:,})",
                     f"{max(0, last['step'] - run['run']['short']['steps']):,}", f"{last['perplexity']:.1f}",
                     within_recipe_margin(run, level), accuracy_cell(stop) if stop else "-"])
    return {"window": f"{study.SETTLE['window']:,}", "fall": f"{study.SETTLE['fall']:.0%}",
            "conv_paired": settled_convolution(by_configuration),
            "long": f"{study.SETTLE['long_updates']:,}", "budget": f"{BUDGET:,}", "n": 4 * N,
            "margin": f"{RECIPE_MARGIN - 1:.0%}", "level": number(level, ".1f"),
            "rows": body(rows),
            "targets": body(settled_target(by_configuration, c, lim) for c, lim in settled_targets())}


def stops_by_configuration(stops):
    """The settled stops ({name: point}) as {configuration: [point with its run's name and pretraining seed]}: the
    stops stand in for the runs where the settled section compares configurations."""
    by_configuration = {}
    for name, point in stops.items():
        by_configuration.setdefault(configuration_of(name), []).append(
            {**point, "name": name, "seed": int(name.rsplit("_s", 1)[1])})
    return by_configuration


def settled_convolution(by_configuration):
    """Issue 66: the convolution at k = 128 against learned E/F at k = 128 at their stops, paired by seed as at n = N
    (each at its own stop), once two seeds of each have stopped."""
    (learned, _), _, (conv, _) = settled_targets()
    convolutions, layerwise = (by_configuration.get(c, []) for c in (conv, learned))
    return convolution_paired(convolutions, layerwise, learned) or (
        f"The convolution against learned E/F at k = {4 * K}, paired by seed at their stops, is read once two seeds of "
        f"each have stopped (so far: {len(convolutions)} of the convolution, {len(layerwise)} of learned E/F).")


def within_recipe_margin(run, level):
    """A settled Linformer's first update within RECIPE_MARGIN of `level` on n-token blocks, as a multiple of the
    budget ("-" for standard attention or before its level is known)."""
    if level is None or configuration_of(run["name"]) == PAPER_N_BASELINE:
        return "-"
    if (at := reached(run, RECIPE_MARGIN * level)) is None:
        return f"not by {run['curve'][-1]['step']:,}"
    return f"{at:,} ({at / BUDGET:.2f}x)"


def stopped_at(stop):
    """Where and why a settled run stopped; one the cap stopped says how much its last stretch still lowered its
    perplexity, since its gap at the stop may not be its last."""
    said = f"{stop['step']:,}: {stop['why']}"
    if stop["fall"] >= study.SETTLE["fall"]:
        said += f", still falling {stop['fall']:.1%} over its last {study.SETTLE['window']:,}"
    return said


def settled_targets():
    """(configuration, limit) of the n = 512 targets, and the convolution at k = 128 held to k = 128's."""
    conv = study.name_of(study.short_first(study.linformer(n=4 * N, k=4 * K, projection="conv")))
    return [*((c, limit) for c, _, limit, _ in PAPER_N_TARGETS), (conv, PAPER_N_TARGETS[0][2])]


def settled_target(by_configuration, configuration, limit):
    """One n = 512 target read at the settled stops (stops_by_configuration) by target_row, on the seeds both sides
    have stopped: paired by seed where two or more are, else as the targets table reads one seed a side. A seed one
    side stopped waits for its pair, named: seeds differ by their data's luck, which moves both models of a seed alike,
    so one side's extra seed would read as a gap."""
    sides = (configuration, PAPER_N_BASELINE)
    seeds = [{stop["seed"] for stop in by_configuration.get(side, [])} for side in sides]
    both = {side: [stop for stop in by_configuration.get(side, []) if stop["seed"] in seeds[0] & seeds[1]]
            for side in sides}
    row = target_row(SimpleNamespace(by_configuration={**by_configuration, **both}, unigram=None), configuration,
                     "gap", limit, PAPER_N_BASELINE)
    waiting = [f"seed {seed} of `{side}`" for side, mine, other in zip(sides, seeds, reversed(seeds), strict=True)
               for seed in sorted(mine - other)]
    if waiting and row[1] != "-":
        row[1] += f"; {' and '.join(waiting)} stopped, {'their pairs' if len(waiting) > 1 else 'its pair'} not yet"
    return row


def left_plateau(records, run):
    """The first update of a run's short phase that left the plateau (the start-or-fall section's PLATEAU_SHARE)."""
    return next((f"{p['step']:,}" for p in run["curve"]
                 if records.unigram and p["perplexity"] < PLATEAU_SHARE * records.unigram
                 and p["step"] <= study.SHORT_PHASE["steps"]), "-")


def paper_n_short_blocks(records):
    """Why the Linformers read the short phase exactly: the k = 128 run resampled against the same seed read exactly
    (its run, or before it finished its pilot) and standard attention, at the exact one's last short-block point."""
    k128, phase = study.linformer(n=4 * N, k=4 * K), study.SHORT_PHASE
    exact_name = study.name_of(study.short_first(k128))
    resampled, exact, standard = [(records.by_configuration.get(name) or [None])[0] for name in (
        study.name_of(study.short_first(k128, exact=False)), exact_name, PAPER_N_BASELINE)]
    pilot = next((run for run in records.pilots if run["name"].startswith(exact_name)), None)
    if None in (resampled, standard) or not (exact or pilot):
        return "(the run read exactly has not finished yet)."
    source = "its run" if exact else (f"the first updates of its run, recorded as the pilot `{pilot['name']}` before "
                                      "the run finished")
    runs = (resampled, exact or pilot, standard)
    step = min(runs[1]["curve"][-1]["step"], phase["steps"])  # the curve's point at the switch: n-token blocks
    at = [run["short_phase"]["perplexity"] if step == phase["steps"] else
          next(p["perplexity"] for p in run["curve"] if p["step"] == step) for run in runs]
    left = [left_plateau(records, run).replace("-", f"not reached by {min(run['curve'][-1]['step'], phase['steps']):,}")
            for run in runs]
    baseline = over_seeds(records, PAPER_N_BASELINE).perplexity
    return (f"the first update below {PLATEAU_SHARE}x the unigram reference was {left[0]} with E/F resampled, "
            f"{left[1]} read exactly ({source}), and {left[2]} for standard attention; at update {step:,}, on "
            f"{phase['block_size']}-token blocks, validation perplexity {at[0]:.1f}, {at[1]:.1f} and {at[2]:.1f} "
            f"(resampled, exact, standard). The resampled run's gap to the baseline after its last update, "
            f"{number(gap(resampled['perplexity'], baseline), '+.1f', '%')}, misses the k = 128 target under that "
            f"recipe.")


# --- does a peer implementation agree? (and the convolution in place of learned E/F) ----------------------------
def peer(records):
    """The peer and the convolution beside our k = K runs with learned E/F, and what precision alone changes."""
    peers, convolutions = (records.by_configuration.get(study.name_of(spec), [])
                           for spec in (study.peer(), study.linformer(projection="conv")))
    if not peers + convolutions:
        return None
    ours = [run for run in records.runs
            if study.learned_projections(run["run"]) and (run["run"]["n"], run["run"]["k"]) == (N, K)]
    layerwise, baseline = records.by_configuration.get(LINFORMER, []), over_seeds(records, BASELINE)
    found = [*(peer_finding(records, run, ours, layerwise) for run in (peers if ours else [])),
             precision_finding(records, layerwise),
             *([paired] if (paired := convolution_paired(convolutions, layerwise)) else
               (convolution_finding(run, layerwise) for run in (convolutions if len(layerwise) > 1 else [])))]
    rows = [[run["name"], f"{precision_name(run['config']['mixed_precision'])}, {run['hardware']}",
             f"{run['curve'][-1]['step']:,}",
             f"{run['perplexity']:.1f}", number(gap(run["perplexity"], baseline.perplexity), "+.1f", "%"),
             accuracy_cell(run)] for run in peers + convolutions + ours]
    return {"n": N, "k": K, "recipe": study.PRETRAIN["mixed_precision"], "found": "\n".join(found), "rows": body(rows)}


def peer_finding(records, run, ours, layerwise):
    """The peer's perplexity against our runs' spread: inside, the gap is the method's; far outside (ours needs a
    look) beyond the nearest end by more than the highest of the layerwise seeds is above their lowest."""
    spans, seeds = [r["perplexity"] for r in ours], [r["perplexity"] for r in layerwise]
    low, high, value = min(spans), max(spans), run["perplexity"]
    ratio, end = (value / high, "highest") if value > high else (value / low, "lowest")
    far = len(seeds) > 1 and max(ratio, 1 / ratio) > max(seeds) / min(seeds)
    said = ("inside the spread (the gap is the method's)" if low <= value <= high else
            f"{'far outside (ours needs a look)' if far else 'outside'}: {ratio:.2f}x the {end}")
    key_value = study.name_of(study.linformer(sharing="key_value"))
    return (f"- **Peer** `{run['name']}`: perplexity {value:.1f} after {run['curve'][-1]['step']:,} updates; our "
            f"{len(ours)} runs with learned E/F span {low:.1f}-{high:.1f}, `{key_value}` (the same sharing) "
            f"{perplexity_cell(over_seeds(records, key_value))}. Verdict: {said}; far outside would be beyond a factor "
            f"of {number(max(seeds) / min(seeds) if len(seeds) > 1 else None, '.2f')} either way (the highest over "
            f"the lowest of the {len(layerwise)} seeds of `{LINFORMER}`).")


def precision_finding(records, layerwise):
    """What precision alone changes: the layerwise Linformer's seed 0 trained again (its extended run) in another
    precision, against its run in the study's, over every evaluation both made."""
    again = records.extended.get(f"{LINFORMER}_s0", {"name": None})
    if not (first := next((run for run in layerwise if run["name"] == again["name"]), None)):
        return (f"- **Precision** (the column above): what precision alone changes is not measured yet: "
                f"`{LINFORMER}_s0` trained again in fp32 (`results/extended/{LINFORMER}_s0.json`) is not recorded.")
    theirs = {point["step"]: point["perplexity"] for point in first["curve"]}
    both = [(abs(p["perplexity"] / theirs[p["step"]] - 1), p["step"]) for p in again["curve"] if p["step"] in theirs]
    return (f"- **Precision** (the column above): what precision alone changes: `{first['name']}` trained again "
            f"with `--mixed_precision {again['mixed_precision']}` (`results/extended/{first['name']}.json`) differs "
            f"from its `{first['config']['mixed_precision']}` run by at most {100 * max(both)[0]:.1f}% in validation "
            f"perplexity (at update {max(both)[1]:,}) over every evaluation both made, to update {both[-1][1]:,}.")


def convolution_finding(run, layerwise):
    """The convolution against learned E/F, read as the Figure 3 section reads its one-seed runs: against where one
    more seed of the layerwise Linformer would fall (95% prediction interval; perplexity on the loss)."""
    def against(value, values, below):
        mean, half = reporting.t_interval(values, predict=True)
        return verdict(value - mean - half, value - mean + half, above=not below), mean - half, mean + half

    ppl, low, high = against(loss(run), [loss(r) for r in layerwise], below=True)
    learned = [a for r in layerwise if (a := accuracy(r)) is not None]
    acc, alow, ahigh = (against(accuracy(run), learned, below=False) if run["finetune"] and len(learned) > 1
                        else ("not measured", None, None))
    return (f"- **Convolution** `{run['name']}` against learned E/F (one more seed of `{LINFORMER}` would fall in "
            f"{math.exp(low):.1f}-{math.exp(high):.1f} perplexity, {number(alow and 100 * alow, '.1f')}-"
            f"{number(ahigh and 100 * ahigh, '.1f')}% accuracy; {len(layerwise)} seeds): convolution better in "
            f"perplexity: {ppl}; in Rotten Tomatoes accuracy: {acc} (met: better, **missed**: worse, undecided: a "
            f"tie).")


def convolution_paired(convolutions, layerwise, learned_name=LINFORMER):
    """The convolution against learned E/F (`learned_name`) paired by pretraining seed, once two seeds pair: both
    models of a seed read the same batches and masks, so the seed's luck cancels. Perplexity as a ratio (on the
    loss), accuracy as a difference in points, each the mean over seeds of the per-seed differences with its 95%
    t-interval."""
    learned = {run["seed"]: run for run in layerwise if "seed" in run}  # a record without one pairs with nothing
    pairs = [(run, learned[run["seed"]]) for run in convolutions if run.get("seed") in learned]
    if len(pairs) < 2:
        return None
    seeds = ", ".join(str(seed) for seed in sorted(conv["seed"] for conv, _ in pairs))
    ratio, spread = reporting.t_interval([loss(conv) - loss(learnt) for conv, learnt in pairs])
    tuned = [accuracy(conv) - accuracy(learnt) for conv, learnt in pairs if conv["finetune"] and learnt["finetune"]]
    points, half = reporting.t_interval(tuned)
    said = ("not measured on two seeds" if half is None else
            f"{100 * points:+.1f} points [{100 * (points - half):+.1f}, {100 * (points + half):+.1f}], convolution "
            f"better: {verdict(points - half, points + half)}")
    return (f"- **Convolution against learned E/F, paired by seed** (`{configuration_of(pairs[0][0]['name'])}` against "
            f"`{learned_name}`, seeds {seeds}): perplexity {math.exp(ratio):.2f}x [{math.exp(ratio - spread):.2f}, "
            f"{math.exp(ratio + spread):.2f}], "
            f"convolution better: {verdict(ratio - spread, ratio + spread, above=False)}; Rotten Tomatoes accuracy "
            f"{said} (met: better, **missed**: worse, undecided: a tie).")


# --- how the runs ran: cost, pilots, what is missing, commands ---------------------------------------------------
def cost(records):
    """Hours per hardware and each run's speed on each, a row per stretch of one hardware and one precision
    (run_study.py's hardware_segments). A record split without seconds (a state whose logs were lost) stays one
    stretch, its hardware named in full and no one speed. A run's finetuning counts where its pretraining ended."""
    spent_on, rows = {}, []  # hardware: its runs and seconds
    for run in records.runs:
        segments = run.get("hardware_segments") or []
        if len(segments) < 2 or any(segment["seconds"] is None for segment in segments):
            how = f"{run['hardware']}, {precision_name(run['config']['mixed_precision'])}"
            mixed = len({segment["hardware"] for segment in segments}) > 1
            parts = [(how, how, run["pretrain_seconds"], None if mixed else run["tokens_per_second"])]
        else:
            parts = [(how, f"{how}, updates {segment['first_step']:,}-{segment['last_step']:,}", segment["seconds"],
                      round(segment["tokens_seen"] / segment["seconds"])) for segment in segments
                     for how in [f"{segment['hardware']}, {precision_name(segment['precision'])}"]]
        for hardware, where, seconds, speed in parts:
            spent = spent_on.setdefault(hardware, {"runs": set(), "pretrain": 0.0, "finetune": 0.0})
            spent["runs"].add(run["name"])
            spent["pretrain"] += seconds
            rows.append([run["name"], where, number(speed, ","), f"{seconds / 60:.1f}"])
        spent_on[parts[-1][0]]["finetune"] += sum(f["seconds"] for f in run["finetune"].values())
    return records.runs and {"runs": body(rows), "hardware": body(
        [name, len(spent["runs"]), f"{spent['pretrain'] / 3600:.2f}", f"{spent['finetune'] / 3600:.2f}"]
        for name, spent in spent_on.items())}


def pilots(records):
    return records.pilots and {
        "rows": body([run["name"], run["what"], f"{run['tokens_seen']:,}", f"{run['tokens_per_second_median']:,}",
                      f"{run['final_perplexity']:.1f}", f"{run['final_vs_unigram']:.3f}", ", ".join(
                          f"{100 * f['accuracy']:.1f}% ({lr})" for lr, f in run.get("finetune", {}).items()) or "-"]
                     for run in records.pilots),
        "commands": "\n".join(f"- `{run['name']}`: `{run['pretrain_command']}`" + "".join(
            f"\n  - finetuning, {key}: `{f['command']}`" for key, f in run.get("finetune", {}).items()
            if "command" in f) for run in records.pilots)}


def missing(records):
    done = {run["name"] for run in records.runs}
    absent = [spec["name"] for spec in study.RUNS if spec["name"] not in done]
    unfinetuned = [run["name"] for run in records.runs
                   if len(run["finetune"]) < len(study.FINETUNE_SEEDS) and run["run"]["model_type"] != "peer"]
    return {"absent_count": len(absent), "planned": len(study.RUNS), "absent": ", ".join(absent) or "none",
            "finetuning_seeds": len(study.FINETUNE_SEEDS), "unfinetuned": ", ".join(unfinetuned) or "none"}


def commands(records):
    """Each run's commands behind the OMP_NUM_THREADS they ran on, which a resume must keep to continue bit for bit:
    the threads of its last CPU stretch in its hardware (where it finetuned too), else run_study.py's default, 1."""
    lines = []
    for run in records.runs:
        threads = ([1] + re.findall(r"CPU, (\d+) thread", run["hardware"]))[-1]
        lines.append(f"- `{run['name']}`: `OMP_NUM_THREADS={threads} {run['pretrain_command']}`" + "".join(
            f"\n  - finetuning seed {seed}: `OMP_NUM_THREADS={threads} {f['command']}`"
            for seed, f in sorted(run["finetune"].items())))
    return {"commands": "\n".join(lines)}


def efficiency(records):
    """model_card.md's efficiency summary, from the benchmarks' inference results."""
    path = REPO / "benchmarks/results/inference.json"
    found = json.loads(path.read_text()) if path.exists() else None
    return found and dict(
        found["machine"], layers=found["dims"]["num_hidden_layers"], hidden=found["dims"]["hidden_size"],
        dtype=found["args"]["dtype"], device=found["machine"]["device"].upper(),
        threads_argument=found["args"]["threads"], max_forward_s=f"{found['args']['max_forward_s']:g}", rows=body(
            [row["n"], row["k"], f"{row['time_saved_vs_eager']:.2f}x ({row['paper_time_saved']}x)",
             f"{row['time_saved_vs_sdpa']:.2f}x", f"{row['mem_saved_vs_eager']:.1f}x ({row['paper_mem_saved']}x)",
             f"{row['mem_saved_vs_sdpa']:.2f}x"]
            for row in found["rows"] if row["model"].startswith("linformer") and row["k"] in (128, 256)))


# The sections in page order: a part of the template, alone or with the function that fills it. CARD's are also
# model_card.md's results section.
CARD = [("longer_answer", longer_answer), ("recipe", recipe), ("news_references", news_references),
        ("rotten_tomatoes_reference", rotten_tomatoes_reference), ("every_configuration", every_configuration),
        ("targets", lambda records: {"rows": body(target_row(records, *target) for target in TARGETS)}),
        ("short_inputs_read_exactly", short_inputs_read_exactly), ("figure3_claims", figure3_claims),
        ("what_was_learnt", what_was_learnt)]
PAGE = [("longer", longer), ("start_or_fall", start_or_fall), ("peer", peer), ("paper_n", paper_n),
        ("settled", settled), ("cost", cost), ("pilots", pilots), ("missing", missing), ("commands", commands), "plot"]


def pages(records, card=REPO / "model_card.md"):
    """{path: text}: results.md, and `card` with its results block rewritten (sections a level down, paths from the
    repository root, the curves and the benchmarks' efficiency summary)."""
    shared = compose(TEMPLATE, CARD, records)
    block = re.sub("^## ", "### ", shared, flags=re.MULTILINE).replace("`results/", "`experiments/quality/results/")
    block += compose(TEMPLATE, ["curves", ("efficiency", efficiency), "card_end"], records)
    return {HERE / "results.md": compose(TEMPLATE, ["head"], records) + shared + compose(TEMPLATE, PAGE, records),
            card: splice(card.read_text(), SOURCE, block.rstrip("\n"))}


def drawn(curve):
    """A curve's points after the first update: tokens seen (millions), validation perplexity."""
    return [p["tokens_seen"] / 1e6 for p in curve[1:]], [p["perplexity"] for p in curve[1:]]


def plot(records, path):
    """Validation perplexity against tokens seen: one panel for each Figure 3 claim, one for the paper's n with a
    short phase first (its curves read short blocks until the switch), the last for the pilots."""
    about, phase, seeds = claimed(records), study.SHORT_PHASE, records.by_configuration
    short = [c for c in records.configurations if any("short" in run["run"] for run in seeds.get(c, []))]
    panels = [(f"k (n={N}, layerwise sharing)", about["k"]),
              (f"sharing (n={N}, k={K})", about["sharing"] + about["peer"]),  # dotted: the peer and the convolution
              (f"n (k={K}, layerwise sharing; dashed: standard attention at that n)", about["baselines"] + about["n"]),
              (f"n={4 * N}: {phase['block_size']}-token blocks until update {phase['steps']:,}, then {4 * N}", short),
              ("pilots (recipes, first validation blocks)", [])]
    references = [(records.unigram, "--", f"unigram, no context ({records.unigram:.0f})"),
                  (0.3 * records.unigram, ":", "0.3 x unigram (target)"),
                  (records.neighbours, "-.", f"two-neighbour count model ({records.neighbours:.0f})")
                  ] if records.unigram and records.neighbours else []  # written together
    with figure(path, 1, len(panels), figsize=(5.5 * len(panels), 5.5), sharey=True) as (fig, axes):
        for run in records.pilots:  # the last panel: how long each recipe sat on the unigram line
            axes[-1].plot(*drawn(run["curve"]), marker="o", ms=2, label=run["name"])
        switch = [p["tokens_seen"] / 1e6 for c in short for run in seeds[c] for p in run["curve"]
                  if p["step"] == phase["steps"]]
        for ax, (title, configurations) in zip(axes, panels, strict=True):
            if configurations is short and switch:  # where the short runs' validation blocks become n tokens long
                ax.axvline(statistics.mean(switch), color="gray", ls="-", lw=0.5, label="switch to n-token blocks")
            for configuration in [c for c in configurations if seeds.get(c)]:
                # Seeds share their evaluation updates, not exactly their token counts (blocks differ in padding):
                # the x-axis is the seeds' mean tokens seen at each update.
                steps = [p["step"] for p in seeds[configuration][0]["curve"]]
                same = [run["curve"] for run in seeds[configuration] if [p["step"] for p in run["curve"]] == steps]
                tokens = [statistics.mean(p["tokens_seen"] for p in at) / 1e6 for at in zip(*same, strict=True)][1:]
                curves = [[p["perplexity"] for p in at] for at in zip(*same, strict=True)][1:]  # per update
                line, = ax.plot(tokens, [math.exp(statistics.mean(map(math.log, v))) for v in curves],  # over the loss
                                marker="o", ms=3, label=f"{configuration} ({len(same)} seed{'s' * (len(same) > 1)})",
                                color="black" if configuration == BASELINE else None,
                                ls="--" if configuration in about["baselines"] and configuration != BASELINE else
                                ":" if configuration in about["peer"] else "-")
                if len(same) > 1:
                    ax.fill_between(tokens, [*map(min, curves)], [*map(max, curves)], color=line.get_color(), alpha=0.2)
                for name, run in records.extended.items():  # a run trained on past the budget, in its colour
                    if configuration_of(name) == configuration:
                        ax.plot(*drawn(run["curve"]), color=line.get_color(), ls="-.", lw=1,
                                label=f"{name}, extended ({precision_name(run['mixed_precision'])})")
            for level, style, label in references:
                ax.axhline(level, color="gray", ls=style, lw=1, label=label)
            ax.set(title=title, xlabel="tokens seen (millions)", yscale="log")
            ax.grid(True, which="both", alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=7)
        axes[0].set_ylabel("validation perplexity (news, 15% masked)")
        fig.suptitle("Masked-LM pretraining: validation perplexity vs tokens seen (before any update omitted; band: "
                     "min-max over seeds; dash-dot: a run extended past the budget, issue 47)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    try:
        records = load()
    except ValueError as error:  # a mistyped transcription of the paper: one line, exit status 2
        parser.error(str(error))
    print(write(pages(records)))
    plot(records, HERE / "perplexity_curves.png")


if __name__ == "__main__":
    main()
