"""experiments/quality/results.md, the plot of validation perplexity against tokens seen (perplexity_curves.png) and
model_card.md's results section, from experiments/quality/results/*.json (run_study.py writes them); the prose is
results.template.md's. Works on whatever subset of the study exists, and lists what is missing.

    python -m experiments.quality.render
"""

import argparse
import json
import math
import re
import statistics
import sys
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import yaml
from scipy import stats

from benchmarks.reporting import body, compose, figure, number, prose, records, splice, status, table, verdict, write
from experiments.quality import study

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TEMPLATE = HERE / "results.template.md"
SOURCE = "python -m experiments.quality.render"  # the marker of its block in model_card.md
words = partial(prose, TEMPLATE)  # a part of the template, filled
BASELINE, N, K = study.BASELINE, study.N, study.K
# The targets: (run, kind, limit), each kind in the words of the template's target_<kind> part.
# Issue 47, item 2: the paper's n = 512 (4n here) against standard attention at that n, both with the short phase.
LONG_BASELINE = study.name_of(study.short_first(study.roberta(n=4 * N)))
LONG_TARGETS = [(study.name_of(study.short_first(study.linformer(n=4 * N, k=k))), "gap", limit, LONG_BASELINE)
                for k, limit in ((4 * K, 5.0), (8 * K, 3.0))]
TARGETS = [(BASELINE, "ratio", 0.3), (BASELINE, "accuracy", 68.0), (study.LINFORMER, "gap", 5.0),
           (study.LINFORMER, "points", 1.0), (study.name_of(study.linformer(k=2 * K)), "gap", 3.0),
           (LONG_BASELINE, "ratio", 0.3), *LONG_TARGETS]


def arch_of(name):
    """A run's configuration: its name without the seed."""
    return name.rsplit("_s", 1)[0]


def load(folder=HERE / "results"):
    """Everything the pages are written from, read once."""
    paper = yaml.safe_load((HERE / "paper_numbers.yaml").read_text())
    for row in paper["table2"]["rows"]:  # check the transcription: the paper prints each row's average
        if abs(statistics.mean(row["scores"]) - row["average"]) > 0.006:
            sys.exit(f"render.py: paper_numbers.yaml row {row['label']!r} (n={row['n']}): its scores do not average "
                     f"to its printed average {row['average']}: fix the transcription")
    reference, order = records(folder / "reference"), list(dict.fromkeys(arch_of(r["name"]) for r in study.RUNS))
    results = list(records(folder, "name", "perplexity", "curve", "hardware").values())
    return SimpleNamespace(  # exact_rt/ and extended/ hold NAME.json: records by run name
        results=results, pilots=list(records(folder / "pilots", "name", "what", "curve").values()), paper=paper,
        exact=records(folder / "exact_rt", "name", "finetune"), order=order, reference=reference,
        extended=records(folder / "extended", "name", "points", "curve"),
        groups={a: [r for r in results if arch_of(r["name"]) == a] for a in order},  # configuration -> its seeds
        unigram=reference.get("unigram", {}).get("unigram_perplexity"),
        neighbours=reference.get("neighbours", {}).get("neighbours_perplexity"))


# --- statistics over pretraining seeds (t-intervals: three seeds are too few to resample) ----------------------
def t_interval(values, predict=False):
    """(mean, half-width of its 95% t-interval; None for one value), or (None, None). `predict`: the half-width
    of where one more value would fall instead (the yardstick for a configuration run with one seed)."""
    if len(values) < 2:
        return (values[0] if values else None), None
    n = len(values)
    spread = statistics.stdev(values) * (1 + 1 / n) ** 0.5 if predict else statistics.stdev(values) / n ** 0.5
    return statistics.mean(values), stats.t.ppf(0.975, n - 1) * spread


def accuracy(r):
    """A pretraining seed's Rotten Tomatoes accuracy: the mean over its finetuning seeds (None before any)."""
    return statistics.mean(f["accuracy"] for f in r["finetune"].values()) if r["finetune"] else None


def accuracies(runs):
    return [a for r in runs if (a := accuracy(r)) is not None]


def rt_cell(r):
    """A run's (or an extended stop's) Rotten Tomatoes accuracy as a cell: percent, mean over finetuning seeds."""
    return number(100 * accuracy(r) if r and r["finetune"] else None, ".1f")


def losses(runs):
    return [math.log(r["perplexity"]) for r in runs]


def seeds(s, arch):
    """One configuration over its pretraining seeds: perplexity averaged as losses (exp of the mean loss, with the
    ends of its interval; perplexity is multiplicative, and one seed that leaves the unigram plateau late would
    dominate an arithmetic mean) and Rotten Tomatoes accuracy, each with its 95% interval."""
    runs = s.groups.get(arch, [])
    loss, half = t_interval(losses(runs))
    return SimpleNamespace(runs=runs, ppl=None if loss is None else math.exp(loss), acc=t_interval(accuracies(runs)),
                           bounds=None if half is None else (math.exp(loss - half), math.exp(loss + half)))


def welch(ours, theirs, to):
    """The 95% Welch t-interval of mean(ours) - mean(theirs), its ends mapped by `to`; None with fewer than two
    values on either side; values without any spread give the difference itself."""
    if min(len(ours), len(theirs)) < 2:
        return None
    ci = stats.ttest_ind(ours, theirs, equal_var=False).confidence_interval(0.95)
    if math.isfinite(ci.low) and math.isfinite(ci.high):
        return to(ci.low), to(ci.high)
    return (to(statistics.mean(ours) - statistics.mean(theirs)),) * 2


def paired(ours, theirs, to):
    """The 95% t-interval of the mean per-seed difference of {seed: value} `ours` - `theirs`, its ends mapped by
    `to`, when both sides ran the same two or more seeds; None otherwise. Runs of one seed train on the same
    batches and masks whatever the model (mlm.data_loader, content-seeded masks), so how early a seed's data lets
    a model leave the unigram plateau moves both sides alike: their difference is free of it, which an unpaired
    interval counts as noise twice."""
    if len(ours) < 2 or ours.keys() != theirs.keys():
        return None
    d = [ours[seed] - theirs[seed] for seed in sorted(ours)]
    if len(set(d)) == 1:  # no spread: the difference itself
        return (to(d[0]),) * 2
    ci = stats.ttest_1samp(d, 0).confidence_interval(0.95)
    return to(ci.low), to(ci.high)


def by_seed(runs, value):
    """{pretraining seed: value(run)} of the runs that have one (accuracy: finetuned ones)."""
    return {r["seed"]: v for r in runs if (v := value(r)) is not None}


def gap(value, reference):  # relative perplexity gap, in percent
    return None if value is None or reference is None else 100 * (value / reference - 1)


def perplexity(m):
    return number(m.ppl, ".1f") + (f" ({m.bounds[0]:.1f}-{m.bounds[1]:.1f})" if m.bounds else "")


def compared(s):
    """The configurations each of the paper's Figure 3 claims is about, standard attention at each n, and issue 47's
    peer and convolution (drawn beside the sharing modes, not part of that claim)."""
    names = {"k": f"{BASELINE}|linformer_n{N}_.*layerwise", "baselines": "roberta_n[0-9]+",
             "sharing": f"{BASELINE}|linformer_n{N}_k{K}_(none|headwise|key_value|layerwise)",
             "n": f"linformer_n[0-9]+_k{K}_layerwise", "peer": f"lucidrains_n{N}_k{K}_.*|linformer_n{N}_k{K}_.*_conv"}
    return {key: [a for a in s.order if re.fullmatch(pattern, a)] for key, pattern in names.items()}


# --- sections: each the values of its part of the template, None to leave it out ------------------------------
def budget(s):
    c, fields, per_update = study.PRETRAIN, study.PRETRAIN["config_overrides"], study.TOKENS_PER_UPDATE  # every run's
    return dict(c, **fields, dropout=fields.get("hidden_dropout_prob", "as configured"), updates=f"{c['max_steps']:,}",
                tokens_per_update=f"{per_update:,}", tokens=f"{c['max_steps'] * per_update:,}",
                masked=f"{100 * c['mlm_probability']:g}", eval_masked=f"{100 * c['eval_mlm_probability']:g}",
                warmup=f"{100 * c['warmup_ratio']:g}% warmup" if c.get("warmup_ratio")
                else f"{c.get('warmup_steps', 0)} warmup updates", vocabulary=study.TOKENIZER_VOCAB_SIZE,
                projection_init=study.linformer()["config_overrides"]["projection_init"],
                epochs=study.FINETUNE["num_train_epochs"], finetuning_rate=study.FINETUNE["learning_rate"],
                finetuning_seeds=len(study.FINETUNE_SEEDS),
                **{key: f"{c[key]:g}" for key in ("eval_mask_replace_prob", "eval_random_replace_prob")})


def configurations(s):
    table2 = {row["ours"]: row for row in s.paper["table2"]["rows"] if row.get("ours")}
    sst2, base, rows = s.paper["table2"]["columns"].index("SST-2"), seeds(s, BASELINE), []
    specs = {arch_of(r["name"]): r for r in study.RUNS}  # standard attention has no k and no sharing
    for arch in s.order:
        m, p, spec = seeds(s, arch), table2.get(arch), specs[arch]
        mean, half = m.acc
        rows.append([arch, spec["n"], spec.get("k", "-"), spec.get("sharing", "standard attention"),
                     f"{m.runs[0]['config']['num_parameters'] / 1e6:.2f}M" if m.runs else "-",
                     len(m.runs), perplexity(m), number(m.ppl and s.unigram and m.ppl / s.unigram),
                     number(gap(m.ppl, base.ppl), "+.1f", "%"),
                     number(mean and 100 * mean, ".1f") + ("" if half is None else f" ± {100 * half:.1f}")
                     + f" ({sum(len(r['finetune']) for r in m.runs)})",
                     *((p["scores"][sst2], f"{statistics.mean(p['scores']):.2f}") if p else ("-", "-"))])
    return {"rows": body(rows)}


def seed_spread(s):
    """The pooled standard deviation of the validation loss between pretraining seeds of one configuration, over
    every configuration run with several, and its degrees of freedom: what a comparison with one seed on a side
    borrows for its interval."""
    groups = [losses(runs) for runs in s.groups.values() if len(runs) > 1]
    df = sum(len(g) - 1 for g in groups)
    return df and (math.sqrt(sum(statistics.variance(g) * (len(g) - 1) for g in groups) / df), df)


def difference(s, ours, theirs, to):
    """The 95% interval of mean(ours) - mean(theirs), its ends mapped by `to`: Welch's over pretraining seeds, or
    with one seed on a side the seeds' pooled spread (`seed_spread`) around the difference of the means."""
    if ci := welch(ours, theirs, to):
        return ci
    if not (ours and theirs and (pooled := seed_spread(s))):
        return None
    d = statistics.mean(ours) - statistics.mean(theirs)
    half = stats.t.ppf(0.975, pooled[1]) * pooled[0] * math.sqrt(1 / len(ours) + 1 / len(theirs))
    return to(d - half), to(d + half)


def target(s, arch, kind, limit, reference=BASELINE):
    """One row of the targets table. A bound on a run is a plain condition; a comparison with the `reference`
    run is judged by its interval: `paired` over seeds both ran, else `difference` (perplexity on the loss)."""
    m, base = seeds(s, arch), seeds(s, reference)
    loss, ppl_gap = (lambda r: math.log(r["perplexity"])), (lambda x: 100 * (math.exp(x) - 1))
    pair = {"gap": (loss, ppl_gap), "points": (accuracy, lambda x: 100 * x)}.get(kind)
    matched = pair and paired(by_seed(m.runs, pair[0]), by_seed(base.runs, pair[0]), pair[1])
    value, ci, shown = {  # the value, its interval, and how the value is shown
        "ratio": lambda: (m.ppl and s.unigram and m.ppl / s.unigram, None, "{:.3f} x"),
        "accuracy": lambda: (m.acc[0] and 100 * m.acc[0], None, "{:.1f}%"),
        "gap": lambda: (gap(m.ppl, base.ppl), matched or difference(s, losses(m.runs), losses(base.runs), ppl_gap),
                        "{:+.1f}%"),
        "points": lambda: (None if None in (m.acc[0], base.acc[0]) else 100 * (m.acc[0] - base.acc[0]),
                           matched or welch(accuracies(m.runs), accuracies(base.runs), lambda x: 100 * x),
                           "{:+.1f} points"),
    }[kind]()
    what = f"{arch} " + words(f"target_{kind}", limit=f"{limit:g}",
                              reference="the baseline" if reference == BASELINE else f"`{reference}`")
    if value is None:
        return [what, "-", "not measured"]
    shown = shown.format(value) + (f" ({ci[0]:+.1f} to {ci[1]:+.1f})" if ci else "")
    if kind in ("ratio", "accuracy"):
        return [what, shown + f" ({len(m.runs)} pretraining seed{'s' * (len(m.runs) != 1)})",
                status(value <= limit if kind == "ratio" else value >= limit)]
    shown += f", {len(m.runs)} vs {len(base.runs)} pretraining seeds" + ", paired by seed" * bool(matched)
    if ci is None:  # one seed a side and no spread to borrow: a bare difference is no verdict
        return [what, shown, words("no_interval")]
    return [what, shown, verdict(*ci, limit, above=False) if kind == "gap" else verdict(*ci, -limit)]


def exact_short_path(s):
    """Rotten Tomatoes through the exact short path (run_study.py --exact_short_path), beside the projected one:
    the mean over finetuning seeds, then each seed."""
    def cell(finetune):
        accuracy = [100 * f["accuracy"] for f in (finetune or {}).values()]
        return f"{statistics.mean(accuracy):.1f}% ({' / '.join(f'{a:.1f}' for a in accuracy)})" if accuracy else "-"

    own = {r["name"]: r.get("finetune") for r in s.results}
    return s.exact and {"rows": body(
        [name, cell(own.get(name)), cell(r["finetune"]), cell(own.get(f"{BASELINE}_s{name.rsplit('_s', 1)[1]}"))]
        for name, r in s.exact.items())}


def listing(s, archs):
    """Configurations with their final perplexity, best first; a note on any within 10% of the unigram reference's
    or above it (no use of context learnt)."""
    ours = sorted((seeds(s, a).ppl, a) for a in archs if s.groups.get(a))
    return "; ".join(f"{a} {perplexity(seeds(s, a))}" + " (on the unigram line: no context learnt)" * bool(
        s.unigram and p > 0.9 * s.unigram) for p, a in ours) or "no runs yet"


def figure3(s):
    claims, archs = [], compared(s)
    mean, half = t_interval(losses(s.groups.get(study.LINFORMER, [])), predict=True)
    for key, claim in s.paper["figure3"].items():
        claims.append(words("claim", key=key, claim=claim, ours=listing(s, archs[key])))
        if key == "n":
            claims.append(words("claim_baselines", ours=listing(s, archs["baselines"])))
        single = [a for a in archs[key] if a.startswith("linformer_") and len(s.groups.get(a, [])) == 1]
        if key != "n" and single and half is not None:
            # One pretraining seed against where another seed of the multi-seed Linformer would fall: inside is a tie.
            low, high = math.exp(mean - half), math.exp(mean + half)
            side = {a: "inside" if low <= s.groups[a][0]["perplexity"] <= high else "outside" for a in single}
            claims.append(words("claim_one_seed", linformer=study.LINFORMER, low=f"{low:.1f}", high=f"{high:.1f}", **{
                where: ", ".join(a for a in single if side[a] == where) or "none" for where in ("inside", "outside")}))
    return {"claims": "\n".join(claims)}


def locality(r):
    """A run's E/F cells of the order-check table: means over its learnt matrices beside a Gaussian's."""
    e = r.get("projection_check", {}).get("projections", {})
    learnt = [v for key, v in e.items() if key != "random"]
    if not learnt:
        return ["-", "-", "-"]
    read, share = (statistics.mean(v[key] for v in learnt) for key in ("positions_read", "nearby_share"))
    # A matrix whose best stretch holds under 1.5 x a Gaussian's share has lost the locality it started with.
    mixed = sum(v["nearby_share"] < 1.5 * e["random"]["nearby_share"] for v in learnt)
    return [f"{read:.1f} ({e['random']['positions_read']:.1f})", f"{share:.3f} ({e['random']['nearby_share']:.3f})",
            f"{mixed} of {len(learnt)}"]


def order_check(s):
    checked = [(r, r["order_check"]) for r in s.results if "order_check" in r]
    return checked and {"blocks": checked[0][1]["blocks"], "rows": body(
        [r["name"], f"{o['perplexity_as_written']:.1f}", f"{o['perplexity_shuffled']:.1f}",
         f"{o['shuffled_over_written']:.2f}", *locality(r)] for r, o in checked)}


def longer_verdict(r, base_level, gaps):
    """Delay: the run reaches the baseline's perplexity at the study's budget within the extension. Ceiling: it
    has not by the last stop and its gap to the baseline did not shrink over the last stretch. Undecided: neither,
    or no baseline to reach yet (then "not within" would read as a miss)."""
    budget = f"{study.PRETRAIN['max_steps']:,}"
    if base_level is None:
        return words("no_baseline", budget=budget)
    if (at := reached(r, base_level)) is not None:
        return words("delay", budget=budget, at=f"{at:,}")
    done, known = str(max(study.EXTENDED_STEPS)) in r["points"], [g for g in gaps if g is not None]
    if done and len(known) >= 2 and known[-1] >= known[-2]:
        return words("ceiling", last=f"{max(study.EXTENDED_STEPS):,}")
    why = words("gap_unread" if len(known) < 2 else "gap_shrinks" if known[-1] < known[-2] else "gap_grows")
    return words("undecided", last=f"{max(map(int, r['points'])):,}", running="" if done else " (still running)", why=why)


def extended_baseline(s):
    """The baseline's extended record and its perplexity at the study's budget (None before that stop): the level
    every extended Linformer is read against."""
    base = s.extended.get(f"{BASELINE}_s0", {"points": {}})
    return base, base["points"].get(str(study.PRETRAIN["max_steps"]), {}).get("perplexity")


def reached(r, level):
    """The first evaluated update of a run at or below `level` (None if none)."""
    return next((p["step"] for p in r["curve"] if p["perplexity"] <= level), None)


def longer(s):
    """Issue 47: the extended runs at each stop, against the baseline's extended run at the same stop."""
    steps, (base, base_level) = study.EXTENDED_STEPS, extended_baseline(s)
    rows = []
    for name, r in s.extended.items():
        points, at = [r["points"].get(str(t)) for t in steps], [base["points"].get(str(t)) for t in steps]
        gaps = [gap(p["perplexity"], b["perplexity"]) if p and b else None for p, b in zip(points, at)]
        rows.append([name, f"{precision_name(r['mixed_precision'])}, {next(p['hardware'] for p in points if p)}",
                     *[number(p and p["perplexity"], ".1f") for p in points],
                     *[number(g, "+.1f", "%") for g in gaps],
                     *map(rt_cell, points),
                     "baseline" if r is base else longer_verdict(r, base_level, gaps)])
    header = ["run", "precision, hardware", *(f"{what} at {t:,}" for what in ("perplexity", "gap", "RT %")
                                              for t in steps), "verdict"]
    return {"stops": ", ".join(f"{t:,}" for t in steps), "budget": f"{study.PRETRAIN['max_steps']:,}",
            "table": table(header, rows) if rows else words("no_stop")}


def answer(s):
    """Issue 47, item 5: the card's practical answer. How many times the budget each extended Linformer needs to reach
    the extended baseline's perplexity at the budget (the baseline needs 1x), or more than its last stop, and its gap
    at the last stop both have; then the paper's n's targets as the targets table judges them."""
    budget, (base, level) = study.PRETRAIN["max_steps"], extended_baseline(s)
    if level is None:
        return None
    runs = []
    for name, r in s.extended.items():
        stops = sorted((int(t), p["perplexity"]) for t, p in r["points"].items())
        if r is base or not stops:
            continue
        at, (last, ppl) = reached(r, level), [(t, p) for t, p in stops if str(t) in base["points"]][-1]
        theirs = base["points"][str(last)]["perplexity"]
        running = not at and stops[-1][0] < max(study.EXTENDED_STEPS)  # "more than" its last stop, so far
        runs.append(words("answer_run", name=name, path=", ".join(f"{p:.1f} at {t:,}" for t, p in stops),
                          times=f"about {at / budget:.1f}x" if at else f"more than {stops[-1][0] / budget:g}x",
                          running=words("answer_running", last=f"{max(study.EXTENDED_STEPS):,}") if running else "",
                          at=f"{last:,}", gap=f"{gap(ppl, theirs):+.1f}%", theirs=f"{theirs:.1f}"))
    if not runs:
        return None
    long = []
    for arch, _, limit, reference in LONG_TARGETS:
        _, shown, said = target(s, arch, "gap", limit, reference)
        long.append(words("answer_long", arch=arch, limit=f"{limit:g}", reference=reference, shown=shown, verdict=said)
                    if s.groups.get(arch) else words("answer_unmeasured", arch=arch))
    baseline = [r["perplexity"] for r in s.groups.get(BASELINE, [])]
    return {"n": N, "layers": study.PRETRAIN["config_overrides"]["num_hidden_layers"], "budget": f"{budget:,}",
            "hidden": study.PRETRAIN["config_overrides"]["hidden_size"], "level": f"{level:.1f}",
            "precision": precision_name(base["mixed_precision"]), "runs": "; ".join(runs), "long": "; ".join(long),
            "last": f"{max(study.EXTENDED_STEPS):,}", "seeds": len(baseline), "recipe": study.PRETRAIN["mixed_precision"],
            "spread": f"{min(baseline):.1f} to {max(baseline):.1f}" if len(baseline) > 1 else "unmeasured",
            "long_n": 4 * N, "long_falls": (falls := still_falling(s)) and f" {falls}"}


def precision_name(mixed_precision):
    """A run's --mixed_precision as the pages name it ("no" trains in fp32)."""
    return "fp32" if mixed_precision == "no" else mixed_precision


def falls(s):
    """Whether the yardstick itself has flattened: the baseline's perplexity's fall over each stretch."""
    if not (base := s.extended.get(f"{BASELINE}_s0")):
        return None
    stops = [(t, base["points"][str(t)]["perplexity"]) for t in study.EXTENDED_STEPS if str(t) in base["points"]]
    return {"falls": "; ".join(f"{100 * (1 - b / a):.1f}% from {t0:,} to {t1:,}" for (t0, a), (t1, b)
                               in zip(stops, stops[1:])) or "over no stretch yet"}


def spread(value, ours, seeds):
    """Item 3's verdict on the peer's perplexity against our runs' (`ours`); far outside: beyond the nearest end by
    more than the highest of one configuration's seeds (`seeds`) is above its lowest."""
    low, high = min(ours), max(ours)
    if low <= value <= high:
        return words("inside")
    ratio, end = (value / high, "highest") if value > high else (value / low, "lowest")
    far = len(seeds) > 1 and max(ratio, 1 / ratio) > max(seeds) / min(seeds)
    return words("far_outside" if far else "outside", ratio=f"{ratio:.2f}", end=end)


def against(value, values, below):
    """One run's value against where one more of `values` (two or more) would fall (95% prediction interval), as
    figure3 reads the one-seed runs: met when better (`below` it, or above), **missed** when worse, undecided (a
    tie) inside."""
    mean, half = t_interval(values, predict=True)
    return verdict(value - mean - half, value - mean + half, above=not below), mean - half, mean + half


def peer_and_conv(s):
    """Issue 47, items 3-4: the peer among our k = K runs (inside: the gap is the method's; far outside: ours needs
    a look), what precision alone changes (runs trained in different ones), and the convolution against learned E/F
    (the multi-seed Linformer)."""
    peer, conv = (s.groups.get(study.name_of(a), []) for a in (study.peer(), study.linformer(projection="conv")))
    if not peer + conv:
        return None
    ours = [r for r in s.results if study.learned_projections(r["run"]) and (r["run"]["n"], r["run"]["k"]) == (N, K)]
    lw, fp32 = s.groups.get(study.LINFORMER, []), s.extended.get(f"{study.LINFORMER}_s0", {"name": None})
    spans, seeds_ppl = [r["perplexity"] for r in ours], [r["perplexity"] for r in lw]
    kv = study.name_of(study.linformer(sharing="key_value"))
    found = [words("peer_finding", name=r["name"], ppl=f"{r['perplexity']:.1f}", update=f"{r['curve'][-1]['step']:,}",
                   count=len(ours), low=f"{min(spans):.1f}", high=f"{max(spans):.1f}", linformer=study.LINFORMER,
                   key_value=kv, kv=perplexity(seeds(s, kv)), seeds=len(lw),
                   threshold=number(max(seeds_ppl) / min(seeds_ppl) if len(lw) > 1 else None, ".2f"),
                   verdict=spread(r["perplexity"], spans, seeds_ppl)) for r in (peer if ours else [])]
    if bf16 := next((r for r in lw if r["name"] == fp32["name"]), None):  # the yardstick of precision
        theirs = {p["step"]: p["perplexity"] for p in bf16["curve"]}
        both = [(abs(p["perplexity"] / theirs[p["step"]] - 1), p["step"]) for p in fp32["curve"]
                if p["step"] in theirs]
        found.append(words("precision", name=bf16["name"], again=fp32["mixed_precision"], theirs=bf16["config"]["mixed_precision"],
                           diff=f"{100 * max(both)[0]:.1f}", at=f"{max(both)[1]:,}", last=f"{both[-1][1]:,}"))
    else:
        found.append(words("no_precision", name=f"{study.LINFORMER}_s0"))
    for r in conv if len(lw) > 1 else []:
        ppl, low, high = against(math.log(r["perplexity"]), losses(lw), below=True)
        rt, learned = accuracies([r]), accuracies(lw)
        acc, alow, ahigh = against(rt[0], learned, False) if rt and len(learned) > 1 else ("not measured", None, None)
        found.append(words("conv_finding", name=r["name"], linformer=study.LINFORMER, seeds=len(lw), ppl=ppl,
                           acc=acc, low=f"{math.exp(low):.1f}", high=f"{math.exp(high):.1f}",
                           alow=number(alow and 100 * alow, ".1f"), ahigh=number(ahigh and 100 * ahigh, ".1f")))
    base = seeds(s, BASELINE)
    rows = [[r["name"], f"{r['config']['mixed_precision']}, {r['hardware']}", f"{r['curve'][-1]['step']:,}", f"{r['perplexity']:.1f}",
             number(gap(r["perplexity"], base.ppl), "+.1f", "%"),
             rt_cell(r)] for r in peer + conv + ours]
    return {"n": N, "k": K, "recipe": study.PRETRAIN["mixed_precision"], "found": "\n".join(found), "rows": body(rows)}


def short_phase(s):
    """Issue 47, item 2: the runs with a short phase (study.short_first), where each phase left them."""
    ran = [r for r in s.results if "short_phase" in r]
    if not ran:
        return None
    phase, base = study.SHORT_PHASE, seeds(s, LONG_BASELINE)
    # A run's evaluations after the switch to n-token blocks and before its last.
    between = lambda r: [p for p in r["curve"][:-1] if p["step"] > phase["steps"]]  # noqa: E731
    rows = [[r["name"], left_plateau(s, r), f"{r['short_phase']['perplexity']:.1f}",
             f"{next(p['perplexity'] for p in r['curve'] if p['step'] == r['short_phase']['steps']):.1f}",
             ", ".join(f"{p['perplexity']:.1f}" for p in between(r)) or "-",
             f"{r['curve'][-1]['step']:,}", f"{r['perplexity']:.1f}", number(s.unigram and r["perplexity"] / s.unigram),
             number(gap(r["perplexity"], base.ppl), "+.1f", "%"),
             rt_cell(r)] for r in ran]
    return {"n": 4 * N, "block": phase["block_size"], "steps": f"{phase['steps']:,}", "choice": short_choice(s),
            "updates": f"{study.PRETRAIN['max_steps']:,}", "baseline": LONG_BASELINE, "rows": body(rows),
            "between": ", ".join(f"{p['step']:,}" for p in between(ran[0])), "falls": still_falling(s)}


def still_falling(s):
    """How much each run the n = 512 targets judge fell over its last stretch between evaluations ("" before any
    ran): a target read while its curves still fall is a point on the way (the short-phase section and the card)."""
    judged = [r for arch in (LONG_BASELINE, *(arch for arch, *_ in LONG_TARGETS)) for r in s.groups.get(arch, [])]
    if not judged:
        return ""
    falls = [100 * (1 - r["curve"][-1]["perplexity"] / r["curve"][-2]["perplexity"]) for r in judged]
    last = judged[0]["curve"]
    return words("short_falls", stretch=last[-1]["step"] - last[-2]["step"], least=f"{min(falls):.1f}",
                 most=f"{max(falls):.1f}", still=words("still_falling" if min(falls) > 0 else "not_all_falling"))


def left_plateau(s, r):
    """The first update of a run's short phase whose validation perplexity is below half the unigram reference's."""
    return next((f"{p['step']:,}" for p in r["curve"] if s.unigram and p["perplexity"] < s.unigram / 2
                 and p["step"] <= study.SHORT_PHASE["steps"]), "-")


def short_choice(s):
    """Why the Linformers read the short phase exactly: the k = 128 run resampled against the same seed read
    exactly (its run, or before it finished the pilot of its first updates) and standard attention: where each left
    the plateau, and where each was at the exact one's last short-block point."""
    k128, phase = study.linformer(n=4 * N, k=4 * K), study.SHORT_PHASE
    exact_name = study.name_of(study.short_first(k128))
    resampled, exact, standard = [(s.groups.get(name) or [None])[0] for name in (
        study.name_of(study.short_first(k128, exact=False)), exact_name, LONG_BASELINE)]
    pilot = next((r for r in s.pilots if r["name"].startswith(exact_name)), None)
    if None in (resampled, standard) or not (exact or pilot):
        return words("short_choice_pending")
    exact = exact or pilot
    step = min(exact["curve"][-1]["step"], phase["steps"])  # the curve's point at the switch: n-token blocks
    runs = (resampled, exact, standard)
    at = [r["short_phase"]["perplexity"] if step == phase["steps"] else
          next(p["perplexity"] for p in r["curve"] if p["step"] == step) for r in runs]
    left = [left_plateau(s, r).replace("-", f"not reached by {min(r['curve'][-1]['step'], phase['steps']):,}")
            for r in runs]
    source = words("short_choice_pilot", pilot=pilot["name"]) if exact is pilot else words("short_choice_run")
    return words("short_choice", step=f"{step:,}", block=phase["block_size"], source=source,
                 gap=number(gap(resampled["perplexity"], seeds(s, LONG_BASELINE).ppl), "+.1f", "%"),
                 **dict(zip(("resample", "exact", "standard"), left)),
                 **dict(zip(("resample_ppl", "exact_ppl", "standard_ppl"), (f"{v:.1f}" for v in at))))


def stretches(r):
    """Where a run's pretraining ran, stretch by stretch (run_study.py's hardware_segments; a run that stayed on one
    machine is one stretch), each with its seconds and tokens/s. A record split without seconds (a state whose
    logs were lost) stays one stretch, its hardware named in full and no one speed."""
    segments = r.get("hardware_segments") or []
    if len(segments) < 2 or any(seg["seconds"] is None for seg in segments):
        mixed = len({seg["hardware"] for seg in segments}) > 1
        return [{"hardware": r["hardware"], "where": r["hardware"], "seconds": r["pretrain_seconds"],
                 "tokens_per_second": None if mixed else r["tokens_per_second"]}]
    return [{"hardware": seg["hardware"], "where": f"{seg['hardware']}, updates {seg['first_step']:,}-{seg['last_step']:,}",
             "seconds": seg["seconds"], "tokens_per_second": round(seg["tokens_seen"] / seg["seconds"])}
            for seg in segments]


def cost(s):
    """Hours per hardware and each run's speed on each; a run's finetuning is counted where its pretraining ended
    (run_study.py finetunes where it pretrains)."""
    groups, rows = {}, []
    for r in s.results:
        parts = stretches(r)
        for part in parts:
            group = groups.setdefault(part["hardware"], {"runs": set(), "pretrain": 0.0, "finetune": 0.0})
            group["runs"].add(r["name"])
            group["pretrain"] += part["seconds"]
            rows.append([r["name"], part["where"], number(part["tokens_per_second"], ","), f"{part['seconds'] / 60:.1f}"])
        groups[parts[-1]["hardware"]]["finetune"] += sum(f["seconds"] for f in r["finetune"].values())
    return s.results and {
        "hardware": body([hw, len(g["runs"]), f"{g['pretrain'] / 3600:.2f}", f"{g['finetune'] / 3600:.2f}"]
                         for hw, g in groups.items()),
        "runs": body(rows)}


def pilots(s):
    return s.pilots and {
        "rows": body([r["name"], r["what"], f"{r['tokens_seen']:,}", f"{r['tokens_per_second_median']:,}",
                      f"{r['final_perplexity']:.1f}", f"{r['final_vs_unigram']:.3f}", ", ".join(
                          f"{100 * f['accuracy']:.1f}% ({lr})" for lr, f in r.get("finetune", {}).items()) or "-"]
                     for r in s.pilots),
        "commands": "\n".join(f"- `{r['name']}`: `{r['pretrain_command']}`" + "".join(
            f"\n  - finetuning, {key}: `{f['command']}`" for key, f in r.get("finetune", {}).items() if "command" in f)
            for r in s.pilots)}


def missing(s):
    done = {r["name"] for r in s.results}
    absent = [r["name"] for r in study.RUNS if r["name"] not in done]
    unfinetuned = [r["name"] for r in s.results
                   if len(r["finetune"]) < len(study.FINETUNE_SEEDS) and r["run"]["model_type"] != "peer"]
    return {"absent_count": len(absent), "planned": len(study.RUNS), "absent": ", ".join(absent) or "none",
            "finetuning_seeds": len(study.FINETUNE_SEEDS), "unfinetuned": ", ".join(unfinetuned) or "none"}


def commands(s):
    """Each run's commands behind the OMP_NUM_THREADS they ran on, which a resume must keep to continue bit for bit:
    the threads of its last CPU stretch in its hardware (where it finetuned too), else run_study.py's default, 1."""
    lines = []
    for r in s.results:
        threads = ([1] + re.findall(r"CPU, (\d+) thread", r["hardware"]))[-1]
        lines.append(f"- `{r['name']}`: `OMP_NUM_THREADS={threads} {r['pretrain_command']}`" + "".join(
            f"\n  - finetuning seed {seed}: `OMP_NUM_THREADS={threads} {f['command']}`"
            for seed, f in sorted(r["finetune"].items())))
    return {"commands": "\n".join(lines)}


def efficiency(s):
    """model_card.md's efficiency summary, from the benchmarks' inference results."""
    path = REPO / "benchmarks/results/inference.json"
    b = json.loads(path.read_text()) if path.exists() else None
    return b and dict(
        b["machine"], layers=b["dims"]["num_hidden_layers"], hidden=b["dims"]["hidden_size"], dtype=b["args"]["dtype"],
        device=b["machine"]["device"].upper(), threads_argument=b["args"]["threads"],
        max_forward_s=f"{b['args']['max_forward_s']:g}", rows=body(
            [r["n"], r["k"], f"{r['time_saved_vs_eager']:.2f}x ({r['paper_time_saved']}x)",
             f"{r['time_saved_vs_sdpa']:.2f}x", f"{r['mem_saved_vs_eager']:.1f}x ({r['paper_mem_saved']}x)",
             f"{r['mem_saved_vs_sdpa']:.2f}x"]
            for r in b["rows"] if r["model"].startswith("linformer") and r["k"] in (128, 256)))


# The sections in order: a part of the template, alone or with the function that fills it from the records (None:
# left out). CARD's are also model_card.md's results section.
CARD = [("answer", answer), ("budget", budget), ("unigram", lambda s: s.unigram and {"unigram": f"{s.unigram:.1f}"}),
        ("neighbours", lambda s: s.unigram and s.neighbours and {"neighbours": f"{s.neighbours:.1f}"}),
        ("rotten_tomatoes", lambda s: (rt := s.reference.get("rotten_tomatoes")) and {
            "majority": f"{100 * rt['majority']['validation_accuracy']:.1f}",
            "tfidf": f"{100 * rt['tfidf_logistic_regression']['validation_accuracy']:.1f}"}),
        ("configurations", configurations), ("targets", lambda s: {"rows": body(target(s, *t) for t in TARGETS)}),
        ("exact_short_path", exact_short_path), ("figure3", figure3), ("order_check", order_check),
        ("unchecked", lambda s: any("order_check" in r for r in s.results) and (unchecked := [
            r["name"] for r in s.results if "order_check" not in r]) and {"unchecked": ", ".join(unchecked)})]
PAGE = [("longer", longer), ("falls", falls), ("peer", peer_and_conv), ("short_phase", short_phase), ("cost", cost),
        ("pilots", pilots), ("missing", missing),
        ("commands", commands), "plot"]


def pages(s, card=REPO / "model_card.md"):
    """{path: text}: results.md, and `card` with its results block rewritten (sections a level down, paths from the
    repository root, the curves and the benchmarks' efficiency summary)."""
    shared = compose(TEMPLATE, CARD, s)
    block = re.sub("^## ", "### ", shared, flags=re.MULTILINE).replace("`results/", "`experiments/quality/results/")
    block += compose(TEMPLATE, ["curves", ("efficiency", efficiency), "card_end"], s)
    return {HERE / "results.md": compose(TEMPLATE, ["head"], s) + shared + compose(TEMPLATE, PAGE, s),
            card: splice(card.read_text(), SOURCE, block.rstrip("\n"))}


def drawn(curve):
    """A curve's points after the first update: tokens seen (millions), validation perplexity."""
    return [p["tokens_seen"] / 1e6 for p in curve[1:]], [p["perplexity"] for p in curve[1:]]


def plot(s, path):
    """Validation perplexity against tokens seen: one panel for each Figure 3 claim, one for the paper's n with a
    short phase first (issue 47, item 2; its curves read short blocks until the switch), the last for the pilots."""
    archs, phase = compared(s), study.SHORT_PHASE
    short = [a for a in s.order if any("short" in r["run"] for r in s.groups.get(a, []))]
    panels = [(f"k (n={N}, layerwise sharing)", archs["k"]),
              (f"sharing (n={N}, k={K})", archs["sharing"] + archs["peer"]),  # dotted: issue 47's peer and conv
              (f"n (k={K}, layerwise sharing; dashed: standard attention at that n)", archs["baselines"] + archs["n"]),
              (f"n={4 * N}: {phase['block_size']}-token blocks until update {phase['steps']:,}, then {4 * N}", short),
              ("pilots (recipes, first validation blocks)", [])]
    references = [] if s.unigram is None else [(s.unigram, "--", f"unigram, no context ({s.unigram:.0f})"),
                                               (0.3 * s.unigram, ":", "0.3 x unigram (target)")]
    if s.neighbours is not None:
        references.append((s.neighbours, "-.", f"two-neighbour count model ({s.neighbours:.0f})"))
    with figure(path, 1, len(panels), figsize=(5.5 * len(panels), 5.5), sharey=True) as (fig, axes):
        for r in s.pilots:  # the last panel: how long each recipe sat on the unigram line
            axes[-1].plot(*drawn(r["curve"]), marker="o", ms=2, label=r["name"])
        switch = [p["tokens_seen"] / 1e6 for a in short for r in s.groups[a] for p in r["curve"]
                  if p["step"] == phase["steps"]]
        for ax, (title, configurations) in zip(axes, panels):
            if configurations is short and switch:  # where the short runs' validation blocks become n tokens long
                ax.axvline(statistics.mean(switch), color="gray", ls="-", lw=0.5, label="switch to n-token blocks")
            for arch in [a for a in configurations if s.groups.get(a)]:
                # Seeds share their evaluation updates, not exactly their token counts (blocks differ in padding):
                # the x-axis is the seeds' mean tokens seen at each update.
                steps = [p["step"] for p in s.groups[arch][0]["curve"]]
                same = [r["curve"] for r in s.groups[arch] if [p["step"] for p in r["curve"]] == steps]
                tokens = [statistics.mean(p["tokens_seen"] for p in at) / 1e6 for at in zip(*same)][1:]
                curves = [[p["perplexity"] for p in at] for at in zip(*same)][1:]  # per update, over the seeds
                line, = ax.plot(tokens, [math.exp(statistics.mean(map(math.log, v))) for v in curves],  # over the loss
                                marker="o", ms=3, label=f"{arch} ({len(same)} seed{'s' * (len(same) > 1)})",
                                color="black" if arch == BASELINE else None,
                                ls="--" if arch in archs["baselines"] and arch != BASELINE else
                                ":" if arch in archs["peer"] else "-")
                if len(same) > 1:
                    ax.fill_between(tokens, list(map(min, curves)), list(map(max, curves)), color=line.get_color(),
                                    alpha=0.2)
                for name, r in s.extended.items():  # issue 47: a run trained on past the budget, in its colour
                    if arch_of(name) == arch:
                        ax.plot(*drawn(r["curve"]), color=line.get_color(), ls="-.", lw=1,
                                label=f"{name}, extended ({precision_name(r['mixed_precision'])})")
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
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    s = load()
    print(write(pages(s)))
    plot(s, HERE / "perplexity_curves.png")


if __name__ == "__main__":
    main()
