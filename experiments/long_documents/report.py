# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
"""Render results.md (and results.json, the goals with their figures) from what evaluate.py wrote to
results/. Nothing is measured here.

    python -m experiments.long_documents.report --run runs/long-minilm-n4096

Every comparison of the student with the windows is paired (the same queries, articles or documents) and
carries a 95% bootstrap interval of the difference (10,000 resamples; retrieval queries are resampled by
document, since the three queries of one document are not independent), judged in benchmarks/reporting.py's
words: "the student is above" is met, missed, or undecided (a tie) when the interval holds 0.
"""

import argparse
import json
from pathlib import Path

import numpy as np
from benchmarks.reporting import MET, MISSED, UNDECIDED, paired_bootstrap, parts, splice, status, table, verdict
from experiments.long_documents.release import training_facts  # the release card reads the same log

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "results.template.md"  # the page's prose, one part per section
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
        values = np.array(t["correct"], dtype=float)
        return values, np.arange(len(values))
    ranks = np.array(t["ranks"])
    per_doc = len(ranks) // t["documents"]
    return (ranks == 1).astype(float), np.arange(len(ranks)) // per_doc


def compare(results, task, ours="student", theirs="windows"):
    a, clusters = outcomes(results[ours], task)
    b, _ = outcomes(results[theirs], task)
    diff, low, high = paired_bootstrap(a, b, clusters)
    return dict(ours=float(a.mean()), theirs=float(b.mean()), diff=diff, low=low, high=high, verdict=verdict(low, high))


def fmt_compare(c):
    return (f"{c['ours']:.3f} vs {c['theirs']:.3f}; difference {c['diff']:+.3f} "
            f"[{c['low']:+.3f}, {c['high']:+.3f}]")


def short_goal(results):
    f = results["student"]["tasks"]["short_fidelity"]
    cos, diff = np.array(f["cosine"]), np.array(f["max_abs_hidden_difference"])
    met = bool(cos.min() >= 0.9999 and diff.max() <= 1e-5)
    return dict(goal="inputs <= 512 tokens: the source exactly (cosine >= 0.9999 to the fp32 source; hidden states "
                     "within 1e-5 of the source with the same stored weights)",
                measured=f"least cosine {cos.min():.6f} over {len(cos)} texts of {min(f['lengths'])}-"
                         f"{max(f['lengths'])} tokens in padded batches; largest hidden difference {diff.max():.1e}",
                met=met)


def goals(results, cost):
    rows = [short_goal(results)]
    for task, goal in (("news_retrieval", "long news retrieval (held-out), recall@1: beats windows"),
                       ("outlets", "outlet classification (held-out), accuracy: beats windows"),
                       ("moby_retrieval", "a long-document task never trained on (Moby-Dick chapter retrieval, "
                                          "recall@1): beats windows")):
        c = compare(results, task)
        rows.append(dict(goal=goal, measured=fmt_compare(c), met=c["verdict"] == MET))
    for kind in SYNTHETIC:
        c = compare(results, f"{kind}_4096")
        shorter = "; ".join(f"{n}: {outcomes(results['student'], f'{kind}_{n}')[0].mean():.2f} vs "
                            f"{outcomes(results['windows'], f'{kind}_{n}')[0].mean():.2f}" for n in LENGTHS[:-1])
        rows.append(dict(goal=f"{kind} retrieval at 4k tokens (LongEmbed-style, accuracy@1): beats windows",
                         measured=f"{fmt_compare(c)} ({shorter})", met=c["verdict"] == MET))
    c = compare(results, "rt_probe")
    longest = results["student"]["tasks"]["rt_probe"].get("longest")
    measured = f"linear probe {100 * c['ours']:.1f} vs {100 * c['theirs']:.1f}"
    exact = longest is not None and longest <= 512 and rows[0]["met"]
    if exact:  # every snippet takes the exact path: finetuning the student is finetuning the teacher (not run)
        measured += (f"; finetuned: not run, equal by construction (every snippet has at most {longest} tokens, "
                     "so the student reads it exactly as the teacher, first row, and the long path it does not "
                     "use gets no gradient)")
    rows.append(dict(goal="Rotten Tomatoes, linear probe and finetuned: within 1 point of the teacher",
                     measured=measured, met=abs(c["diff"]) <= 0.01 and exact))
    if cost:
        timings, met = [], True
        for dtype, times in cost["seconds"].items():
            med = {k: float(np.median(v)) for k, v in times.items()}
            full, windows = med["full attention"] / med["student"], med["windows"] / med["student"]
            met &= full >= 2 and windows >= 1
            timings.append(f"{dtype}: {med['student']:.2f} s, {full:.2f}x faster than full attention, "
                         f"{windows:.2f}x faster than the windows")
        rows.append(dict(goal="cost at 4096 tokens: >= 2x faster than the teacher with full attention, no slower "
                              "than the windows (fp32 and bf16)", measured="; ".join(timings), met=bool(met)))
    return rows


def verdicts(results, ours, theirs, them="them", list_ties=True):
    """One sentence: the tasks on which `ours` is above `theirs` (met), below (missed) or neither (undecided), each
    with its difference and interval (short_fidelity is a goal row, not a comparison). Without `list_ties`, the
    undecided are counted, not listed (the ablations: what matters there is where they differ)."""
    groups = {MET: [], MISSED: [], UNDECIDED: []}
    for task in results[ours]["tasks"]:
        if task != "short_fidelity" and task in results[theirs]["tasks"]:
            c = compare(results, task, ours, theirs)
            groups[c["verdict"]].append(f"{task} ({c['ours']:.3f} vs {c['theirs']:.3f}, {c['diff']:+.3f} "
                                        f"[{c['low']:+.3f}, {c['high']:+.3f}])")
    ties, other = len(groups[UNDECIDED]), "the other" if groups[MET] or groups[MISSED] else "all"
    if ties and not list_ties:
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


def render(results, cost, facts, along=()):
    """(results.md, goal rows): the parts of the template the results call for, filled with what they measured."""
    rows, student, part = goals(results, cost), results["student"], parts(TEMPLATE)
    systems = [s for s in results if s in SYSTEMS]
    tasks = [task for task in student["tasks"] if task != "short_fidelity"]
    page = [part["head"].substitute(
        model=student["model"], sha256=student["weights_sha256"], summary=summary(results, rows),
        goals=table(["goal", "measured (student vs windows)", "status"],
                    [[r["goal"], r["measured"], status(r["met"])] for r in rows]),
        tasks=table(["task", "items (documents)"] + [SYSTEMS[s] for s in systems],
                    [[task, f"{len(outcomes(student, task)[1])} ({len(np.unique(outcomes(student, task)[1]))})"]
                     + [f"{outcomes(results[s], task)[0].mean():.3f}" if task in results[s]["tasks"] else "-"
                        for s in systems] for task in tasks]))]
    if facts:
        page.append(part["training"].substitute(
            updates=facts["updates"], hours=f"{facts['hours']:.2f}", tokens=f"{facts['tokens']:,}",
            curve=", ".join(f"{d:.3f} at {s}" for s, d, _ in facts["evals"] if d is not None)))
    for name in (name for name in ABLATIONS if name in results):
        page.append(part[name].substitute(table=table(
            ["task", f"student vs {SYSTEMS[name]}; difference [95% interval]", "student above it"],
            [[task, fmt_compare(c), c["verdict"]] for task in tasks if task in results[name]["tasks"]
             for c in [compare(results, task, "student", name)]])))
    if along:
        page.append(part["along"].substitute(along="; ".join(f"{name}: {value:.3f}" for name, value in along)))
    missing = "".join(f"the {SYSTEMS[name]}; " for name in ABLATIONS if name not in results)
    page.append(part["not_run"].substitute(missing=missing))
    if cost:
        page.append(part["cost"].substitute(cost, table=table(
            ["precision"] + list(next(iter(cost["seconds"].values()))),
            [[d] + [f"{np.median(v):.3f} s" for v in t.values()] for d, t in cost["seconds"].items()])))
    page.append(part["reproduce"].substitute(
        ablations="\n".join(f"- `{name}`: `{how}`" for name, how in ABLATIONS.items() if how and name in results)))
    return "".join(page), rows


SOURCE = "python -m experiments.long_documents.report"  # the marker of its block in model_card.md


def pages(results_dir=HERE / "results", out=HERE, run=None, update=()):
    """{path: text} of every page this report writes: results.md, results.json (the goals and the training facts
    the release card reads) and the goals block of each page in `update` (model_card.md)."""
    results = load(results_dir)
    cost = results.pop("cost", None)
    facts = training_facts(run) if run and (Path(run) / "metrics.jsonl").is_file() else None
    recorded = Path(out) / "results.json"
    if facts is None and recorded.is_file():  # the run folder is gone: the facts its log gave, as recorded
        facts = json.loads(recorded.read_text()).get("training")
    along = [(name, outcomes(result, "news_retrieval")[0].mean())  # checkpoints measured while training
             for name, result in load(Path(results_dir) / "along_training").items()]
    text, rows = render(results, cost, facts, along)
    words = summary(results, rows)
    block = table(["goal", "measured (student vs windows; 95% paired-bootstrap interval)", "status"],
                  [[r["goal"], r["measured"], status(r["met"])] for r in rows]) + "\n\n" + words
    record = {"goals": rows, "summary": words, "training": facts}
    return {Path(out) / "results.md": text, Path(out) / "results.json": json.dumps(record, indent=1) + "\n",
            **{Path(path): splice(Path(path).read_text(encoding="utf-8"), SOURCE, block) for path in update}}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=HERE / "results")
    parser.add_argument("--run", help="the training run folder (its metrics.jsonl)")
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--update", nargs="*", default=[], help="files whose goals block to regenerate (model_card.md)")
    args = parser.parse_args(argv)
    written = pages(args.results, args.out, args.run, args.update)
    for path, text in written.items():
        path.write_text(text, encoding="utf-8")
    print("wrote " + ", ".join(map(str, written)))


if __name__ == "__main__":
    main()
