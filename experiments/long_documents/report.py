# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Render results.md (its prose in results.template.md) and results.json (the goals with their figures) from what
evaluate.py wrote to results/. Nothing is measured here.

    python -m experiments.long_documents.report --run runs/long-minilm-n4096

Every comparison of the student with the windows is paired (the same queries, articles or documents) and
carries a 95% bootstrap interval of the difference (10,000 resamples; retrieval queries are resampled by
document, since the three queries of one document are not independent), judged in benchmarks/reporting.py's
words: "the student is above" is met, missed, or undecided (a tie) when the interval holds 0.
"""

import argparse
import json
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from benchmarks.reporting import (
    MET,
    MISSED,
    UNDECIDED,
    compose,
    interval,
    paired_bootstrap,
    prose,
    records,
    splice,
    status,
    table,
    verdict,
    write,
)
from experiments.long_documents.release import training_facts  # the release card reads the same log

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "results.template.md"  # the page's prose, one part per section
SOURCE = "python -m experiments.long_documents.report"  # the marker of its block in model_card.md
SYSTEMS = {"student": "student (Linformer, whole document)", "windows": "teacher, mean of 512-token windows",
           "start": "student before training (gates closed)",
           "blocks": "student trained on packed blocks (the recipe otherwise the same)",
           "k64": "student with k = 64 slots (the recipe otherwise the same)",
           "kv": "student with one E per layer instead of one for all layers (the recipe otherwise the same)",
           "int8": "release served as int8 ONNX (export_onnx.py, ONNX Runtime)"}
# The ablations: each a results/<name>.json of the same student architecture, compared with the student, paired (what
# each isolates, and how it was made, are the template's).
ABLATIONS = ("start", "blocks", "k64", "kv", "int8")
GOALS = ["goal", "measured (student vs windows; 95% paired-bootstrap interval)", "status"]  # the goals table's header
SYNTHETIC = ("passkey", "needle")
LENGTHS = (1024, 2048, 4096)


def outcomes(result, task):
    """Per item 0/1 outcomes and the cluster (document) of each item."""
    t = result["tasks"][task]
    if "correct" in t:
        return np.array(t["correct"], dtype=float), np.arange(len(t["correct"]))
    ranks = np.array(t["ranks"])
    if len(ranks) % t["documents"]:  # evaluate.py asks each document the same number of queries, in document order
        raise ValueError(f"{task}: {len(ranks)} queries over {t['documents']} documents is not the same number each: "
                         "the bootstrap's document clusters would be wrong")
    return (ranks == 1).astype(float), np.arange(len(ranks)) // (len(ranks) // t["documents"])


def compare(results, task, theirs="windows"):
    """The student minus `theirs` on a task, paired: the means, the difference and its verdict, as a sentence says
    them and as a table cell shows them."""
    (a, clusters), (b, _) = outcomes(results["student"], task), outcomes(results[theirs], task)
    diff, low, high = paired_bootstrap(a, b, clusters)
    pair, difference = f"{a.mean():.3f} vs {b.mean():.3f}", interval(diff, low, high)
    return SimpleNamespace(ours=a.mean(), theirs=b.mean(), diff=diff, verdict=verdict(low, high),
                           said=f"{pair}, {difference}", shown=f"{pair}; difference {difference}")


def comparisons(results, theirs):
    """(task, comparison) for every task the student and `theirs` both ran (short_fidelity is a goal, no task)."""
    return [(task, compare(results, task, theirs)) for task in results["student"]["tasks"]
            if task != "short_fidelity" and task in results[theirs]["tasks"]]


def goals(results, cost):
    """The goal rows, {goal, measured, met} (results.json keeps them for the release card), each goal in the words
    of the template's goal_* part."""
    words = partial(prose, TEMPLATE)

    def row(goal, measured, met):
        return dict(goal=words("goal_" + goal), measured=measured, met=met)

    f = results["student"]["tasks"]["short_fidelity"]
    cos, diff = np.array(f["cosine"]), np.array(f["max_abs_hidden_difference"])
    rows = [row("fidelity", words("fidelity", least=f"{cos.min():.6f}", texts=len(cos), difference=f"{diff.max():.1e}",
                                  lengths=f"{min(f['lengths'])}-{max(f['lengths'])}"),
                bool(cos.min() >= 0.9999 and diff.max() <= 1e-5))]

    def rate(system, task):
        return outcomes(results[system], task)[0].mean()

    for task in ("news_retrieval", "outlets", "moby_retrieval", *(f"{kind}_4096" for kind in SYNTHETIC)):
        c, kind = compare(results, task), task.removesuffix("_4096")
        shorter = kind in SYNTHETIC and "; ".join(
            f"{n}: {rate('student', f'{kind}_{n}'):.2f} vs {rate('windows', f'{kind}_{n}'):.2f}" for n in LENGTHS[:-1])
        rows.append(row(kind, c.shown + (f" ({shorter})" if shorter else ""), c.verdict == MET))
    c, longest = compare(results, "rt_probe"), results["student"]["tasks"]["rt_probe"].get("longest")
    exact = longest is not None and longest <= 512 and rows[0]["met"]  # finetuning it is finetuning the teacher
    rows.append(row("rt_probe", f"linear probe {100 * c.ours:.1f} vs {100 * c.theirs:.1f}"
                    + (words("rt_exact", longest=longest) if exact else ""), abs(c.diff) <= 0.01 and exact))
    if cost:
        speed = {dtype: (m["student"], m["full attention"] / m["student"], m["windows"] / m["student"])
                 for dtype, times in cost["seconds"].items() for m in [{k: np.median(v) for k, v in times.items()}]}
        rows.append(row("cost", "; ".join(f"{dtype}: {s:.2f} s, {f:.2f}x faster than full attention, {w:.2f}x faster "
                                          "than the windows" for dtype, (s, f, w) in speed.items()),
                        all(f >= 2 and w >= 1 for _, f, w in speed.values())))
    return rows


def verdicts(results, theirs, them="them", list_ties=True):
    """One sentence: the tasks on which the student is above `theirs` (met), below (missed) or neither (undecided),
    each with its difference and interval. Without `list_ties`, the undecided are counted, not listed (the
    ablations: what matters there is where they differ)."""
    groups = {MET: [], MISSED: [], UNDECIDED: []}
    for task, c in comparisons(results, theirs):
        groups[c.verdict].append(f"{task} ({c.said})")
    if (ties := len(groups[UNDECIDED])) and not list_ties:
        other = "the other" if groups[MET] or groups[MISSED] else "all"
        groups[UNDECIDED] = [f"{other} {ties} task" + "s" * (ties != 1)]
    said = [f"{word} on {', '.join(tasks)}" for word, tasks in groups.items() if tasks]
    return f"is above {them}: " + "; ".join(said) if said else "has no task in common"


def summary(results, rows):
    """The paragraph under the goals table (here and in model_card.md): every comparison in words, generated so
    that no figure there is typed by hand."""
    text = [f"{sum(r['met'] for r in rows)} of {len(rows)} goals met. Against the windows, the student "
            f"{verdicts(results, 'windows')}."]
    text += [f"Against the {SYSTEMS[name]}, it {verdicts(results, name, them='it', list_ties=False)}."
             for name in ABLATIONS if name in results]
    return " ".join(text) + (f" (Difference [95% paired-bootstrap interval]; {MET}: the interval lies above 0, "
                             f"{MISSED}: below it, {UNDECIDED}: it holds 0, a tie.)")


def head(results, goals_block):
    tasks = [t for t in results["student"]["tasks"] if t != "short_fidelity"]
    systems = [s for s in results if s in SYSTEMS]
    return dict(model=results["student"]["model"], sha256=results["student"]["weights_sha256"], goals=goals_block,
                tasks=table(["task", "items (documents)"] + [SYSTEMS[s] for s in systems], [
                    [task, f"{len(clusters)} ({len(np.unique(clusters))})"] + [
                        f"{outcomes(results[s], task)[0].mean():.3f}" if task in results[s]["tasks"] else "-"
                        for s in systems] for task in tasks for clusters in [outcomes(results["student"], task)[1]]]))


def ablation(results, name):
    return name in results and {"table": table(
        ["task", f"student vs {SYSTEMS[name]}; difference [95% interval]", "student above it"],
        [[task, c.shown, c.verdict] for task, c in comparisons(results, name)])}


def goals_block(rows, said):
    """The goals table and its summary: the same on the page and in model_card.md."""
    return table(GOALS, [[r["goal"], r["measured"], status(r["met"])] for r in rows]) + "\n\n" + said


def render(results, cost, facts, along=()):
    """(results.md, goal rows, their summary; every bootstrap run once): the parts of the template the results call
    for, filled with what they measured."""
    rows = goals(results, cost)
    said = summary(results, rows)
    return compose(TEMPLATE, [
        ("head", lambda: head(results, goals_block(rows, said))),
        ("training", lambda: facts and dict(facts, hours=f"{facts['hours']:.2f}", tokens=f"{facts['tokens']:,}",
                                              curve=", ".join(f"{d:.3f} at {s}" for s, d, _ in facts["evals"]
                                                              if d is not None))),
        *((name, partial(ablation, results, name)) for name in ABLATIONS),
        ("along", lambda: along and {"along": "; ".join(f"{name}: {value:.3f}" for name, value in along)}),
        ("not_run", lambda: {"missing": "".join(f"the {SYSTEMS[name]}; " for name in ABLATIONS
                                                  if name not in results)}),
        ("cost", lambda: cost and dict(cost, table=table(["precision"] + list(next(iter(cost["seconds"].values()))), [
            [d] + [f"{np.median(v):.3f} s" for v in t.values()] for d, t in cost["seconds"].items()]))),
        "reproduce"]), rows, said


def pages(results_dir=HERE / "results", out=HERE, run=None, update=()):
    """{path: text} of every page this report writes: results.md, results.json (the goals and the training facts
    the release card reads) and the goals block of each page in `update` (model_card.md)."""
    results = records(results_dir)  # systems, ablations, and the cost
    cost = results.pop("cost", None)
    facts = training_facts(run) if run and (Path(run) / "metrics.jsonl").is_file() else None
    if facts is None and (Path(out) / "results.json").is_file():  # the run folder is gone: the facts as recorded
        facts = json.loads((Path(out) / "results.json").read_text()).get("training")
    along = [(name, outcomes(result, "news_retrieval")[0].mean())  # checkpoints measured while training
             for name, result in records(Path(results_dir) / "along_training").items()]
    text, rows, said = render(results, cost, facts, along)
    return {Path(out) / "results.md": text,
            Path(out) / "results.json": json.dumps(dict(goals=rows, summary=said, training=facts), indent=1) + "\n",
            **{Path(path): splice(Path(path).read_text(encoding="utf-8"), SOURCE, goals_block(rows, said))
               for path in update}}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=HERE / "results")
    parser.add_argument("--run", help="the training run folder (its metrics.jsonl)")
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--update", nargs="*", default=[], help="files whose goals block to regenerate (model_card.md)")
    args = parser.parse_args(argv)
    print(write(pages(args.results, args.out, args.run, args.update)))


if __name__ == "__main__":
    main()
