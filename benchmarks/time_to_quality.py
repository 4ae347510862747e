# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""The GPU time a Linformer needs to reach standard attention's quality (issue 67, item 3), from measured parts.

updates: the quality study's runs past its budget, each the first evaluated update whose validation perplexity is at
or below standard attention's seed 0 after the budget, or "more than" its last update where it never got there: at
n = 128 the extended runs (experiments/quality/results/extended/), at the paper's n = 512 the settled ones
(results/settled/, read on 512-token blocks only); seconds per update: the same bodies and tokens per update timed on
a GPU (`gpu_check`'s `training_cuda_bf16_study*` results), each model alone on the GPU and interleaved with the
baseline, each run's from a result of its own sharing and projection type, and the baseline's step it is divided by
from that same result (standard attention's own step differed by as much as a fifth between calls). A run's GPU
seconds over the baseline's at the budget is its GPU time ratio; at n = 512 both include the short phase, costed as
SHORT_PHASE_COST states.
Projected to RoBERTa-base size at long n with item 1's step times (`training_cuda_bf16`), under the one assumption
PROJECTION states.
"""

import statistics

from experiments.quality import render, study

PROJECTION = ("Projected: the fewest updates any configuration of the study's Linformers with learned E/F needed (the "
              "geometric mean over its seeds; the projection "
              "the long-n step times measure), as a multiple of standard attention's, is assumed to hold for k = 128 "
              "and 256 at RoBERTa-base size and n = 4,096 and 16,384 alike, which the study did not measure (it "
              "trained 2 layers x hidden 128 at n = 128).")


SHORT_PHASE_COST = (f"At n = {4 * study.N} a run's short phase (its first {study.SHORT_PHASE['steps']:,} updates, "
                    f"on {study.SHORT_PHASE['block_size']}-token blocks, read by exact attention in a Linformer) is "
                    f"costed at standard attention's n = {study.N} step, for the Linformers too: the GPU timed no "
                    "Linformer reading short blocks exactly.")

# The projected rows' two readings of a RoBERTa-base-size update (benchmarks/report.py says which is which)
EVERY_POSITION, MASKED_ONLY = "logits at every position", "logits at the masked positions"


# Where the runs past the budget are and the level they are read against: extended to fixed stops at n = N, settled
# by the rule at the paper's n (each level is standard attention's seed 0 at the budget in the same phase)
PHASES = {"extension": (lambda s: s.extended, lambda s: render.extended_baseline(s)[1]),
          "settling": (lambda s: s.settled, render.paper_n_level)}


def updates_to_reach(s=None, phase="extension"):
    """[(run name, record, updates or None, last evaluated update)] of the Linformers `phase` trained past the
    budget, the baseline's perplexity at the budget they are read against, and the budget (the baseline's updates)."""
    s = s or render.load()
    records, level_of = PHASES[phase]
    level = level_of(s)
    runs = [(name, r, render.reached(r, level), r["curve"][-1]["step"]) for name, r in records(s).items()
            if render.configuration_of(name) not in (render.BASELINE, render.PAPER_N_BASELINE)
            ] if level is not None else []
    return runs, level, study.PRETRAIN["max_steps"]


def gpu_seconds(updates, step, short):
    """The GPU seconds of `updates` updates at `step` seconds each, after a short phase of short = (updates, seconds
    each) where the run had one (None: it had not)."""
    if short is None:
        return updates * step
    short_updates, short_step = short
    return short_updates * short_step + (updates - short_updates) * step


def steps_of(results, n, k, sharing="layerwise", projection="linear"):
    """The seconds per update a Linformer's ratio is read from, all from the one result that timed it (each model
    interleaved with standard attention in that call): the Linformer's at n, standard attention's at n, and standard
    attention's at study.N (what a short phase is costed at, SHORT_PHASE_COST); None where that result lacks one. A
    Linformer's step is read only from a result of its own sharing and projection type: a convolution's run never
    borrows the step time of learned E/F, nor its baseline the step of another call."""
    def step(r, n, k):
        row = next((x for x in r["rows"] if x["n"] == n and x["k"] == k and
                    x["model"] == ("roberta-sdpa" if k is None else "linformer-sdpa")), None)
        return row["step_s"] if row else None

    for r in results:
        if (r["args"].get("sharing", "layerwise"), r["args"].get("projection", "linear")) != (sharing, projection):
            continue
        if lin := step(r, n, k):
            return lin, step(r, n, None), step(r, study.N, None)
    return None, None, None


def rows(study_results, race=None, s=None, one_process=None):
    """The table's rows, one per run: measured (n = 128, then the paper's n) then projected (RoBERTa-base size) from
    `race`'s steps (logits at every position, as train_mlm.py computes them across processes) and, where measured,
    from `one_process`'s (logits at the masked positions, its step on one GPU); and the configurations whose seeds all
    got there (configurations())."""
    s = s or render.load()
    out, summaries = [], []
    for phase in PHASES:
        runs, level, budget = updates_to_reach(s, phase)
        measured = []
        for name, r, at, last in runs:
            n, k, projection = r["run"]["n"], r["run"]["k"], r["run"].get("projection", "linear")
            lin, base, short_base = steps_of(study_results, n, k, r["run"]["sharing"], projection)
            # a short phase reads short blocks by exact attention: SHORT_PHASE_COST's one assumption
            short = (r["run"]["short"]["steps"], short_base) if "short" in r["run"] else None
            known = lin and base and (short is None or short[1])
            baseline = gpu_seconds(budget, base, short) if known else None
            measured.append(dict(
                n=n, k=k, projection=projection, what=name, updates=at, last=last,
                update_ratio=at / budget if at else None, at_least=last / budget, step_s=lin, base_step_s=base,
                gpu_ratio=gpu_seconds(at, lin, short) / baseline if known and at else None, level=level,
                projected=False, phase=phase,
                gpu_at_least=gpu_seconds(last, lin, short) / baseline if known and not at else None))
        out += measured
        summaries += configurations(measured, s, level, phase)
    # the projection reads the study's body at n = N, where a Linformer trained every update
    ratios = [c["update_ratio"] for c in summaries if c["projection"] == "linear" and c["n"] == study.N]
    for label, result in ((EVERY_POSITION, race), (MASKED_ONLY, one_process)):
        for n in (4096, 16384):
            for k in (128, 256):
                lin, base = (next((x for x in (result or {}).get("rows", []) if x["n"] == n and x["k"] == kk
                                   and x["model"] == model), None) for kk, model in ((k, "linformer-sdpa"),
                                                                                      (None, "roberta-sdpa")))
                if label == MASKED_ONLY and not lin:
                    continue  # a second reading only where it was measured
                # per token: the two may run at different batches (each the largest that fits)
                per_token = base["tokens_per_s"] / lin["tokens_per_s"] if lin and base else None
                gpu = min(ratios) * per_token if ratios and per_token else None
                out.append(dict(n=n, k=k, projection="linear", what=f"RoBERTa-base size, k = {k}, {label}",
                                updates=None, last=None, at_least=None, gpu_at_least=None,
                                update_ratio=min(ratios) if ratios else None, step_s=lin and 1 / lin["tokens_per_s"],
                                base_step_s=base and 1 / base["tokens_per_s"], gpu_ratio=gpu, level=None,
                                projected=True, logits=label))
    return out, summaries


def configurations(measured, s, level, phase="extension"):
    """One summary per Linformer configuration among `phase`'s `measured` rows whose seeds all got to the baseline's
    perplexity (its seeds still training are named, not counted): the geometric mean of its seeds' update ratios and,
    where the GPU timed its steps, of their GPU time ratios (ratios average on the log scale, as the quality page's
    recipe answer reads them). A configuration is read by its mean, never by its luckiest seed."""
    if level is None:
        return []
    reached_at, running = render.reaching(PHASES[phase][0](s), level, phase)
    summaries = []
    for configuration, ats in reached_at.items():
        if not all(ats):
            continue
        # the seeds that got there (all of those not still training)
        seeds = [r for r in measured if render.configuration_of(r["what"]) == configuration and r["updates"]]
        gpu, ratios = [r["gpu_ratio"] for r in seeds], [at / study.PRETRAIN["max_steps"] for at in ats]
        summaries.append(dict(configuration=configuration, n=seeds[0]["n"], k=seeds[0]["k"],
                              projection=seeds[0]["projection"], ratios=ratios,
                              update_ratio=statistics.geometric_mean(ratios),
                              gpu_ratio=statistics.geometric_mean(gpu) if all(gpu) else None,
                              waiting=running.get(configuration, []), phase=phase))
    return summaries


def seeds_words(summary):
    """How many pretraining seeds a configuration's ratio is read from, as the answer sentence says it."""
    ratios = summary["ratios"]
    said = "one pretraining seed" if len(ratios) == 1 else (
        f"the geometric mean of {len(ratios)} pretraining seeds, {min(ratios):.2f}x to {max(ratios):.2f}x the updates")
    return said + render.not_there_yet(summary["waiting"], summary["phase"])
