# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""The conversion report from its result files alone: results.json, results.md (its prose in results.template.md,
every figure from the results, the findings' too) and the plots.

    python -m experiments.conversion.render              # from experiments/conversion/results/
    python -m experiments.conversion.render --out DIR    # from DIR/results/

compute.py measures and writes one file per variant under results/, then calls this.
"""

import json
from functools import partial
from pathlib import Path

import numpy as np

from benchmarks.reporting import body, compose, figure, lines, number
from experiments.conversion import GRID, INITS, name_of
from experiments.shared import LONG_N, SOURCE_N, render_main

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "results.template.md"
# The source's own retrieval, each way it reads a long article: key -> (row of the table, what it reads, plot label).
SOURCE_READS = {"truncated": ("source, truncated", "first 512 tokens", "source 512"),
                "windows": ("source, mean of 512-token windows", "whole article", "source windows"),
                "extended": ("source, positions repeated to 4096, full attention", "up to 4096 tokens",
                             "source ext. 4096")}


def write_report(out, results):
    (out / "results.json").write_text(json.dumps(summary(results), indent=1) + "\n")
    make_plots(out, results)
    (out / "results.md").write_text(page(results))


def variants(results):
    return sorted((r for name, r in results.items() if name.startswith("n")),
                  key=lambda r: (r["n"], r["k"], INITS.index(r["init"])))


def summary(results):
    return dict(source=results.get("source", {}), speed_memory=results.get("speed_memory"), variants={
        name_of(r["n"], r["k"], r["init"]): {key: value for key, value in r.items() if key != "cosine_by_text"}
        for r in variants(results)})


def at(results, n, k, init, *path):
    """One figure of a variant (its results file, then the keys of `path`), None where it was not measured."""
    value = results.get(name_of(n, k, init))
    for key in path:
        value = None if value is None else value.get(key)
    return value


def cosine(results, n, k, init, bucket):
    return at(results, n, k, init, "cosine", bucket, "mean")


def series(results, init, bucket):
    """The mean cosine at n = 512 for every k, as the findings list it."""
    return ", ".join(f"k={k}: {v:.3f}" for n, k in GRID
                     if n == SOURCE_N and (v := cosine(results, n, k, init, bucket)) is not None)


# --- findings: sentences whose figures all come from the results, each left out until they exist ---------------
def exact(results):
    shortest = [r["cosine"]["<=k"]["min"] for r in variants(results)
                if r["init"] != "window_mean_no_short_path" and "<=k" in r.get("cosine", {})]
    return shortest and {"least": f"{min(shortest):.4f}",
                         "without": series(results, "window_mean_no_short_path", "<=k")}


def probe_finding(results):
    figures = [results.get("source", {}).get("probe_accuracy"),
               *(at(results, SOURCE_N, 32, i, "probe_accuracy") for i in ("window_mean", "window_mean_no_short_path"))]
    return None not in figures and dict(zip(("source", "exact", "without"), (f"{v:.3f}" for v in figures), strict=True))


def lossy(results):
    return cosine(results, SOURCE_N, 128, "window_mean", "k..512") is not None and {
        init: series(results, init, "k..512") for init in ("window_mean", "random")}


def default_init(results):
    wins = [(cosine(results, n, k, "window_mean", "k..512"), cosine(results, n, k, "random", "k..512")) for n, k in GRID
            if n == SOURCE_N and cosine(results, n, k, "random", "k..512") is not None]
    return bool(lossy(results) and wins and all(w > r for w, r in wins))


def alternative(results, init):
    """A length-aware use of E against window_mean, wherever both were measured."""
    pairs = [(f"n={n} k={k} {b}: {a:.3f} vs {w:.3f}", a > w) for n, k in GRID for b in ("k..512", ">512")
             if (a := cosine(results, n, k, init, b)) is not None for w in [cosine(results, n, k, "window_mean", b)]]
    higher, lower = ([text for text, up in pairs if up == side] for side in (True, False))
    return pairs and {"alternative": init, "better": len(higher), "pairs": len(pairs),
                      "higher": f" ({'; '.join(higher)})" if higher else "",
                      "lower": f"; not higher in {'; '.join(lower)}" if lower else ""}


def retrieval_finding(results):
    source = results.get("source", {}).get("retrieval", {})
    ours = [(f"n={n} k={k} {i}", r) for n, k in GRID for i in INITS if (r := at(results, n, k, i, "retrieval"))]
    best_name, best = max(ours, key=lambda item: (item[1]["recall_at_1"], item[1]["mrr"])) if ours else (None, None)

    def shown(r):
        return f"{r['recall_at_1']:.3f} / {r['mrr']:.3f}"

    at_long = [f"{i} {shown(r)}" for i in ("window_mean", "resample", "mean_pool")
               if (r := at(results, LONG_N, 256, i, "retrieval"))]
    return source and ours and {**{key: shown(source[key]) for key in SOURCE_READS}, "best_name": best_name,
                                "best": shown(best),
                                "at_long": f"; at n = {LONG_N}, k = 256: " + ", ".join(at_long) if at_long else ""}


def speed_finding(results):
    if not (measured := results.get("speed_memory")):
        return None
    models = measured["models"]
    reference = next(name for name in models if name.startswith("source"))
    base = models[reference]["seconds"]["median"]
    return {"tokens": measured["tokens"], "reference": reference, "seconds": f"{base:.2f}",
            "memory": f"{models[reference]['peak_bytes'] / 2**20:.0f}", "others": "; ".join(
                f"{name}: {m['seconds']['median']:.2f} s ({base / m['seconds']['median']:.2f}x faster), "
                f"{m['peak_bytes'] / 2**20:.0f} MiB" for name, m in models.items() if name != reference)}


FINDINGS = [("exact", exact), ("probe_finding", probe_finding), ("lossy", lossy), ("default_init", default_init),
            ("alternative", partial(alternative, init="resample")),
            ("default_scaling", lambda r: (a := alternative(r, "resample")) and 2 * a["better"] > a["pairs"] and a),
            ("alternative", partial(alternative, init="mean_pool")), ("retrieval_finding", retrieval_finding),
            ("speed_finding", speed_finding)]


# --- the tables ----------------------------------------------------------------------------------------------------
def cosines(results):
    def cell(c):
        return "-" if c is None else f"{c['mean']:.3f} ({c['min']:.2f}, {c['count']} texts)"

    return {"rows": body([r["n"], r["k"], r["init"], *(cell(r["cosine"].get(b)) for b in ("<=k", "k..512", ">512"))]
                         for r in variants(results))}


def layers(results):
    return {"rows": body([n, k, init, bucket, *(f"{e:.3f}" for e in errors)] for n, k in GRID
                         for init in ("window_mean", "resample", "mean_pool", "random") for bucket in ("k..512", ">512")
                         if (errors := at(results, n, k, init, "layer_error", bucket)))}


def probe(results):
    return {"source": number(results.get("source", {}).get("probe_accuracy")),
            "rows": body([n, k, *(number(at(results, n, k, i, "probe_accuracy")) for i in INITS)] for n, k in GRID)}


def retrieval(results):
    def figures(r):
        return [f"{r[key]:.3f}" for key in ("recall_at_1", "recall_at_5", "mrr")]

    source = results.get("source", {}).get("retrieval", {})
    return {"rows": body([*([row, reads, *figures(source[key])] for key, (row, reads, _) in SOURCE_READS.items()
                            if source.get(key)),
                          *([f"Linformer n={r['n']} k={r['k']} {r['init']}", f"up to {r['n']} tokens",
                             *figures(r["retrieval"])] for r in variants(results) if r.get("retrieval"))])}


def speed(results):
    measured = results.get("speed_memory")
    return measured and dict(measured, rows=body(
        [name, f"{s['median']:.2f} ({s['min']:.2f}–{s['max']:.2f})", f"{r['peak_bytes'] / 2**20:.0f} MiB"]
        for name, r in measured["models"].items() for s in [r["seconds"]]))


def page(results):
    """results.md from the result files alone."""
    findings = compose(TEMPLATE, FINDINGS, results)
    return compose(TEMPLATE, ["head", ("meta", lambda r: r.get("source", {}).get("meta")), "projections",
                              ("findings", lambda r: findings and {"findings": findings}), ("cosine", cosines),
                              ("layers", layers), ("probe", probe), ("retrieval", retrieval), ("speed", speed),
                              "reproduce"], results)


def make_plots(out, results):
    rows, bins = variants(results), np.unique(np.round(np.geomspace(8, LONG_N, 22)).astype(int))

    def by_length(r):  # the mean cosine of each bin of lengths, at the bin's geometric mean length
        lengths, values = np.array(r["cosine_by_text"]).T
        which = np.digitize(lengths, bins)
        return ([np.exp(np.log(lengths[which == b]).mean()) for b in np.unique(which)],
                [values[which == b].mean() for b in np.unique(which)])

    with figure(out / "cosine_by_length.png", 1, 2, figsize=(12, 4.5), sharey=True) as (fig, axes):
        lines(axes[0], {f"k={r['k']}": by_length(r) for r in rows if r["n"] == SOURCE_N and r["init"] == "window_mean"},
              xscale="log", xlabel="input length (tokens)", title="n = 512, window_mean, by k",
              ylabel="cosine of mean-pooled embedding to the source")
        inits = sorted((r for r in rows if (r["n"], r["k"]) in ((512, 128), (LONG_N, 256))),
                       key=lambda r: (r["n"], r["k"], r["init"]))
        lines(axes[1], {f"n={r['n']} k={r['k']} {r['init']}": by_length(r) for r in inits}, xscale="log",
              xlabel="input length (tokens)", title="init, n = 512 k = 128 and n = 4096 k = 256")
        for ax in axes:  # after the log scale: on the linear one the line would widen the margins
            ax.axvline(SOURCE_N, color="grey", lw=0.5, ls="--")

    with figure(out / "layer_error.png", figsize=(7, 4.5)) as (fig, ax):
        lines(ax, {f"n={r['n']} k={r['k']} ({bucket})": (range(len(errors)), errors) for r in rows
                   if r["init"] == "window_mean" for bucket in ["k..512" if r["n"] == SOURCE_N else ">512"]
                   if (errors := r.get("layer_error", {}).get(bucket))},
              xlabel="layer (0 = embeddings)", ylabel="relative error of hidden states",
              title="window_mean, texts longer than k")

    source = results.get("source", {}).get("retrieval", {})
    bars = [(label, source[key]) for key, (*_, label) in SOURCE_READS.items() if source.get(key)]
    bars += [(f"n={r['n']} k={r['k']}\n{r['init']}", r["retrieval"]) for r in rows if r.get("retrieval")]
    with figure(out / "retrieval.png", figsize=(9, 4.5)) as (fig, ax):
        x = np.arange(len(bars))
        ax.bar(x - 0.2, [r["recall_at_1"] for _, r in bars], 0.4, label="recall@1")
        ax.bar(x + 0.2, [r["mrr"] for _, r in bars], 0.4, label="MRR")
        ax.set_xticks(x, [label for label, _ in bars], rotation=60, ha="right", fontsize=7)
        ax.legend()
        ax.set_title("retrieval of held-out articles > 1,024 tokens from a 64-token span beyond token 512")


def main(argv=None):
    render_main(__doc__, HERE, write_report, argv)


if __name__ == "__main__":
    main()
