# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""The GPU time a Linformer needs to reach standard attention's quality (issue 67, item 3), from measured parts.

updates: the quality study's extended runs (experiments/quality/results/extended/), each the first evaluated update
whose validation perplexity is at or below the standard-attention baseline's after the study's budget (its 10,000
updates, read off the baseline's own extended run), or "more than" its last update where it never got there;
seconds per update: the same bodies and tokens per update timed on a GPU (`gpu_check`'s `training_cuda_bf16_study*`
results), each model alone on the GPU and interleaved with the baseline, each run's from a result of its own sharing
and projection type. Their product over the baseline's is the GPU
time ratio. Projected to RoBERTa-base size at long n with item 1's step times (`training_cuda_bf16`), under the one
assumption PROJECTION states. The study's n = 512 runs are left out while its curves still fall
(render.paper_n_last_stretch).
"""

import statistics

from experiments.quality import render, study

PROJECTION = ("Projected: the fewest updates any configuration of the study's Linformers with learned E/F needed (the "
              "geometric mean over its seeds; the projection "
              "the long-n step times measure), as a multiple of standard attention's, is assumed to hold for k = 128 "
              "and 256 at RoBERTa-base size and n = 4,096 and 16,384 alike, which the study did not measure (it "
              "trained 2 layers x hidden 128 at n = 128).")


# The projected rows' two readings of a RoBERTa-base-size update (benchmarks/report.py says which is which)
EVERY_POSITION, MASKED_ONLY = "logits at every position", "logits at the masked positions"


def updates_to_reach(s=None):
    """[(run name, record, updates or None, last evaluated update)] of the extended Linformers, the baseline's
    perplexity at the budget they are read against, and the budget (the baseline's updates)."""
    s = s or render.load()
    base, level = render.extended_baseline(s)
    runs = [(name, r, render.reached(r, level), r["curve"][-1]["step"])
            for name, r in s.extended.items() if r is not base] if level is not None else []
    return runs, level, study.PRETRAIN["max_steps"]


def step_of(results, n, k=None, sharing="layerwise", projection="linear"):
    """Seconds per update of one model in the study's step-time results (None: not measured). A Linformer's step is
    read only from a result of its own sharing and projection type: a convolution's run never borrows the step time
    of learned E/F."""
    for r in results:
        if k is not None and (r["args"].get("sharing", "layerwise"), r["args"].get("projection", "linear")) != (
                sharing, projection):
            continue
        row = next((x for x in r["rows"] if x["n"] == n and x["k"] == k and
                    x["model"] == ("roberta-sdpa" if k is None else "linformer-sdpa")), None)
        if row:
            return row["step_s"]
    return None


def rows(study_results, race=None, s=None, one_process=None):
    """The table's rows, one per run: measured (n = 128) then projected (RoBERTa-base size) from `race`'s steps
    (logits at every position, as train_mlm.py computes them across processes) and, where measured, from
    `one_process`'s (logits at the masked positions, its step on one GPU); and the configurations whose seeds all got
    there (configurations())."""
    s = s or render.load()
    runs, level, budget = updates_to_reach(s)
    base_step = step_of(study_results, study.N)
    out = []
    for name, r, at, last in runs:
        n, k, projection = r["run"]["n"], r["run"]["k"], r["run"].get("projection", "linear")
        ratio = at / budget if at else None
        lin = step_of(study_results, n, k, r["run"]["sharing"], projection)
        steps = lin / base_step if lin and base_step else None
        gpu = ratio * steps if ratio and steps else None
        out.append(dict(n=n, k=k, projection=projection, what=name, updates=at, last=last, update_ratio=ratio,
                        at_least=last / budget, step_s=lin, base_step_s=base_step, gpu_ratio=gpu, level=level,
                        projected=False, gpu_at_least=last / budget * steps if steps and not at else None))
    summaries = configurations(out, s, level)
    ratios = [c["update_ratio"] for c in summaries if c["projection"] == "linear"]
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
                                base_step_s=base and 1 / base["tokens_per_s"], gpu_ratio=gpu, level=level,
                                projected=True, logits=label))
    return out, summaries


def configurations(out, s, level):
    """One summary per Linformer configuration whose seeds all got to the baseline's perplexity (its seeds still
    training are named, not counted): the geometric mean of its seeds' update ratios (ratios average on the log
    scale, as the quality page's recipe answer reads them) and, where the GPU timed its step, the GPU time ratio it
    gives. A configuration is read by its mean, never by its luckiest seed."""
    if level is None:
        return []
    reached_at, running = render.reaching(s.extended, level)
    summaries = []
    for configuration, ats in reached_at.items():
        if not all(ats):
            continue
        # every seed of a configuration has the same n, k, projection and step time: its first row speaks for them
        row = next(r for r in out if not r["projected"] and render.configuration_of(r["what"]) == configuration)
        ratios = [at / study.PRETRAIN["max_steps"] for at in ats]
        mean = statistics.geometric_mean(ratios)
        steps = row["step_s"] / row["base_step_s"] if row["step_s"] and row["base_step_s"] else None
        summaries.append(dict(configuration=configuration, n=row["n"], k=row["k"], projection=row["projection"],
                              ratios=ratios, update_ratio=mean, gpu_ratio=mean * steps if steps else None,
                              waiting=running.get(configuration, [])))
    return summaries


def seeds_words(summary):
    """How many pretraining seeds a configuration's ratio is read from, as the answer sentence says it."""
    ratios = summary["ratios"]
    said = "one pretraining seed" if len(ratios) == 1 else (
        f"the geometric mean of {len(ratios)} pretraining seeds, {min(ratios):.2f}x to {max(ratios):.2f}x the updates")
    return said + render.not_there_yet(summary["waiting"])
