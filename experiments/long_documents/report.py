# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
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
from benchmarks.reporting import MET, MISSED, UNDECIDED, compose, paired_bootstrap, splice, status, table, verdict, write
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
# each isolates is its part of the template): name -> how it was made, the flags that differ from the recipe, or None.
ABLATIONS = {"start": None, "blocks": "distill.py ... --inputs blocks",
             "k64": "convert_to_linformer.py ... --projected_dim 64",
             "kv": "convert_to_linformer.py ... --projection_sharing key_value",
             "int8": "export_onnx.py --model_name_or_path release/minilm-l6-linformer-n4096; evaluate.py --onnx "
                     "onnx/model_qint8.onnx"}
SYNTHETIC = ("passkey", "needle")
LENGTHS = (1024, 2048, 4096)


def load(results_dir):
    """{name: result} for every results/<name>.json (a system, an ablation, or the cost)."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(Path(results_dir).glob("*.json"))}


def outcomes(result, task):
    """Per item 0/1 outcomes and the cluster (document) of each item."""
    t = result["tasks"][task]
    if "correct" in t:
        return np.array(t["correct"], dtype=float), np.arange(len(t["correct"]))
    ranks = np.array(t["ranks"])
    return (ranks == 1).astype(float), np.arange(len(ranks)) // (len(ranks) // t["documents"])


def compare(results, task, ours="student", theirs="windows"):
    """Ours minus theirs on a task, paired: the means, the difference with its interval and verdict, and as a
    table cell shows them."""
    (a, clusters), (b, _) = outcomes(results[ours], task), outcomes(results[theirs], task)
    diff, low, high = paired_bootstrap(a, b, clusters)
    return SimpleNamespace(ours=a.mean(), theirs=b.mean(), diff=diff, low=low, high=high, verdict=verdict(low, high),
                           shown=f"{a.mean():.3f} vs {b.mean():.3f}; difference {diff:+.3f} [{low:+.3f}, {high:+.3f}]")


def goals(results, cost):
    f = results["student"]["tasks"]["short_fidelity"]
    cos, diff = np.array(f["cosine"]), np.array(f["max_abs_hidden_difference"])
    rows = [dict(goal="inputs <= 512 tokens: the source exactly (cosine >= 0.9999 to the fp32 source; hidden states "
                      "within 1e-5 of the source with the same stored weights)",
                 measured=f"least cosine {cos.min():.6f} over {len(cos)} texts of {min(f['lengths'])}-"
                          f"{max(f['lengths'])} tokens in padded batches; largest hidden difference {diff.max():.1e}",
                 met=bool(cos.min() >= 0.9999 and diff.max() <= 1e-5))]
    rate = lambda system, task: outcomes(results[system], task)[0].mean()  # noqa: E731
    for task, goal in (("news_retrieval", "long news retrieval (held-out), recall@1"),
                       ("outlets", "outlet classification (held-out), accuracy"),
                       ("moby_retrieval", "a long-document task never trained on (Moby-Dick chapter retrieval, "
                                          "recall@1)"),
                       *((f"{kind}_4096", f"{kind} retrieval at 4k tokens (LongEmbed-style, accuracy@1)")
                         for kind in SYNTHETIC)):
        c, kind = compare(results, task), task.removesuffix("_4096")
        shorter = "; ".join(f"{n}: {rate('student', f'{kind}_{n}'):.2f} vs {rate('windows', f'{kind}_{n}'):.2f}"
                            for n in LENGTHS[:-1]) if kind in SYNTHETIC else ""
        rows.append(dict(goal=f"{goal}: beats windows", measured=c.shown + (f" ({shorter})" if shorter else ""),
                         met=c.verdict == MET))
    c, longest = compare(results, "rt_probe"), results["student"]["tasks"]["rt_probe"].get("longest")
    exact = longest is not None and longest <= 512 and rows[0]["met"]
    rows.append(dict(goal="Rotten Tomatoes, linear probe and finetuned: within 1 point of the teacher",
                     measured=f"linear probe {100 * c.ours:.1f} vs {100 * c.theirs:.1f}" + (
                         # every snippet takes the exact path: finetuning the student is finetuning the teacher
                         f"; finetuned: not run, equal by construction (every snippet has at most {longest} tokens, so "
                         "the student reads it exactly as the teacher, first row, and the long path it does not use "
                         "gets no gradient)" if exact else ""), met=abs(c.diff) <= 0.01 and exact))
    if cost:
        medians = {dtype: {k: float(np.median(v)) for k, v in times.items()} for dtype, times in cost["seconds"].items()}
        speed = {dtype: (m["full attention"] / m["student"], m["windows"] / m["student"])
                 for dtype, m in medians.items()}
        rows.append(dict(goal="cost at 4096 tokens: >= 2x faster than the teacher with full attention, no slower "
                              "than the windows (fp32 and bf16)",
                         measured="; ".join(f"{dtype}: {medians[dtype]['student']:.2f} s, {f:.2f}x faster than full "
                                            f"attention, {w:.2f}x faster than the windows"
                                            for dtype, (f, w) in speed.items()),
                         met=all(f >= 2 and w >= 1 for f, w in speed.values())))
    return rows


def verdicts(results, ours, theirs, them="them", list_ties=True):
    """One sentence: the tasks on which `ours` is above `theirs` (met), below (missed) or neither (undecided), each
    with its difference and interval (short_fidelity is a goal row, not a comparison). Without `list_ties`, the
    undecided are counted, not listed (the ablations: what matters there is where they differ)."""
    groups = {MET: [], MISSED: [], UNDECIDED: []}
    for task in (t for t in results[ours]["tasks"] if t != "short_fidelity" and t in results[theirs]["tasks"]):
        c = compare(results, task, ours, theirs)
        groups[c.verdict].append(f"{task} ({c.ours:.3f} vs {c.theirs:.3f}, {c.diff:+.3f} [{c.low:+.3f}, {c.high:+.3f}])")
    if (ties := len(groups[UNDECIDED])) and not list_ties:
        other = "the other" if groups[MET] or groups[MISSED] else "all"
        groups[UNDECIDED] = [f"{other} {ties} task" + "s" * (ties != 1)]
    said = [f"{word} on {', '.join(tasks)}" for word, tasks in groups.items() if tasks]
    return f"is above {them}: " + "; ".join(said) if said else "has no task in common"


def summary(results, rows):
    """The paragraph under the goals table in model_card.md: every comparison in words, generated,
    so that no figure there is typed by hand."""
    text = [f"{sum(r['met'] for r in rows)} of {len(rows)} goals met. Against the windows, the student "
            f"{verdicts(results, 'student', 'windows')}."]
    text += [f"Against the {SYSTEMS[name]}, it {verdicts(results, 'student', name, them='it', list_ties=False)}."
             for name in ABLATIONS if name in results]
    return " ".join(text) + (f" (Difference [95% paired-bootstrap interval]; {MET}: the interval lies above 0, "
                             f"{MISSED}: below it, {UNDECIDED}: it holds 0, a tie.)")


def head(results, rows):
    tasks = [t for t in results["student"]["tasks"] if t != "short_fidelity"]
    systems = [s for s in results if s in SYSTEMS]
    return dict(model=results["student"]["model"], sha256=results["student"]["weights_sha256"],
                summary=summary(results, rows),
                goals=table(["goal", "measured (student vs windows)", "status"],
                            [[g["goal"], g["measured"], status(g["met"])] for g in rows]),
                tasks=table(["task", "items (documents)"] + [SYSTEMS[s] for s in systems], [
                    [task, f"{len(clusters)} ({len(np.unique(clusters))})"] + [
                        f"{outcomes(results[s], task)[0].mean():.3f}" if task in results[s]["tasks"] else "-"
                        for s in systems] for task in tasks for clusters in [outcomes(results["student"], task)[1]]]))


def ablation(results, name):
    return name in results and {"table": table(
        ["task", f"student vs {SYSTEMS[name]}; difference [95% interval]", "student above it"],
        [[task, c.shown, c.verdict] for task in results["student"]["tasks"]
         if task != "short_fidelity" and task in results[name]["tasks"]
         for c in [compare(results, task, "student", name)]])}


def render(results, cost, facts, along=()):
    """(results.md, goal rows): the parts of the template the results call for, filled with what they measured."""
    rows = goals(results, cost)
    return compose(TEMPLATE, [
        ("head", lambda: head(results, rows)),
        ("training", lambda: facts and dict(facts, hours=f"{facts['hours']:.2f}", tokens=f"{facts['tokens']:,}",
                                              curve=", ".join(f"{d:.3f} at {s}" for s, d, _ in facts["evals"]
                                                              if d is not None))),
        *((name, partial(ablation, results, name)) for name in ABLATIONS),
        ("along", lambda: along and {"along": "; ".join(f"{name}: {value:.3f}" for name, value in along)}),
        ("not_run", lambda: {"missing": "".join(f"the {SYSTEMS[name]}; " for name in ABLATIONS
                                                  if name not in results)}),
        ("cost", lambda: cost and dict(cost, table=table(["precision"] + list(next(iter(cost["seconds"].values()))), [
            [d] + [f"{np.median(v):.3f} s" for v in t.values()] for d, t in cost["seconds"].items()]))),
        ("reproduce", lambda: {"ablations": "\n".join(f"- `{name}`: `{how}`" for name, how in ABLATIONS.items()
                                                     if how and name in results)})]), rows


def pages(results_dir=HERE / "results", out=HERE, run=None, update=()):
    """{path: text} of every page this report writes: results.md, results.json (the goals and the training facts
    the release card reads) and the goals block of each page in `update` (model_card.md)."""
    results = load(results_dir)
    cost = results.pop("cost", None)
    facts = training_facts(run) if run and (Path(run) / "metrics.jsonl").is_file() else None
    if facts is None and (Path(out) / "results.json").is_file():  # the run folder is gone: the facts as recorded
        facts = json.loads((Path(out) / "results.json").read_text()).get("training")
    along = [(name, outcomes(result, "news_retrieval")[0].mean())  # checkpoints measured while training
             for name, result in load(Path(results_dir) / "along_training").items()]
    text, rows = render(results, cost, facts, along)
    words = summary(results, rows)
    block = table(["goal", "measured (student vs windows; 95% paired-bootstrap interval)", "status"],
                  [[r["goal"], r["measured"], status(r["met"])] for r in rows]) + "\n\n" + words
    return {Path(out) / "results.md": text,
            Path(out) / "results.json": json.dumps(dict(goals=rows, summary=words, training=facts), indent=1) + "\n",
            **{Path(path): splice(Path(path).read_text(encoding="utf-8"), SOURCE, block) for path in update}}


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
