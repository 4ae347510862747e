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
from benchmarks.reporting import MET, MISSED, UNDECIDED, paired_bootstrap, splice, status, table, verdict
from experiments.long_documents.release import training_facts  # the release card reads the same log

HERE = Path(__file__).resolve().parent
SYSTEMS = {"student": "student (Linformer, whole document)", "windows": "teacher, mean of 512-token windows",
           "start": "student before training (gates closed)",
           "blocks": "student trained on packed blocks (the recipe otherwise the same)",
           "k64": "student with k = 64 slots (the recipe otherwise the same)",
           "kv": "student with one E per layer instead of one for all layers (the recipe otherwise the same)",
           "int8": "release served as int8 ONNX (export_onnx.py, ONNX Runtime)"}
# The ablations: each a results/<name>.json of the same student architecture, compared with the student, paired:
# name -> (title, what it isolates, how it was made: the flags that differ from the recipe, or None).
ABLATIONS = {
    "start": ("What the training did (ablation: the same student before it)",
              "The student against its own starting point, the converted model with its gates closed (each 512-token "
              "window read exactly as the teacher reads it alone, no global slots; it differs from the windows "
              "baseline only in that windows after the first carry no [CLS]/[SEP] and pooling weighs every token "
              "once): the effect of the recipe's updates (document objective + windows anchor). Without the "
              "document objective (weight 0) the recipe would not move the student at all: with the gates closed "
              "its states are the windows teacher's, so the anchor losses and their gradients are zero (validation "
              "at step 0: cosine 1.0, every layer's error 0); this column is that ablation.",
              None),
    "blocks": ("What whole documents did (ablation: the same recipe on packed blocks)",
               "The student against the same recipe trained on inputs cut from packed blocks (documents back to "
               "back, so one input holds the ends and starts of several articles) instead of one document per "
               "input (`--inputs documents`): the effect of training on text whose whole is one document.",
               "distill.py ... --inputs blocks"),
    "k64": ("How many global slots (ablation: k = 64 instead of 128)",
            "The student against the same recipe converted with `--projected_dim 64`: half the slots each window "
            "reads of the whole document (about half the cost of the global path), on the tasks it was measured "
            "on.",
            "convert_to_linformer.py ... --projected_dim 64"),
    "kv": ("How much sharing (ablation: one projection per layer instead of one for all)",
           "The student against the same recipe converted with `--projection_sharing key_value` (each layer its own "
           "E, shared by keys and values and by every head) instead of `layerwise` (one E for all six layers): six "
           "times the projection parameters at the same cost, on the tasks it was measured on.",
           "convert_to_linformer.py ... --projection_sharing key_value"),
    "int8": ("How much serving in int8 costs (the release as a dynamically quantized ONNX graph)",
             "The student against the committed release (its weights in float16) exported by `export_onnx.py` and "
             "served by ONNX Runtime from `onnx/model_qint8.onnx` (weights int8, per channel; activations quantized "
             "per call): what a deployment on int8 gives up, on every task. A tie everywhere is the goal.",
             "export_onnx.py --model_name_or_path release/minilm-l6-linformer-n4096; evaluate.py --onnx "
             "onnx/model_qint8.onnx"),
}
RETRIEVAL = {"news_retrieval": "news retrieval (held-out articles > 1,024 tokens)",
             "moby_retrieval": "Moby-Dick chapter retrieval (chapters > 1,024 tokens; never trained on)"}
SYNTHETIC = ("passkey", "needle")
LENGTHS = (1024, 2048, 4096)


def load(results_dir):
    """{name: result} for every results/<name>.json; a system's tasks may come from several files."""
    out = {}
    for path in sorted(Path(results_dir).glob("*.json")):
        result = json.loads(path.read_text())
        out.setdefault(path.stem, result)
    return out


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
    return dict(ours=float(a.mean()), theirs=float(b.mean()), diff=diff, low=low, high=high, verdict=verdict(low, high),
                items=len(a), clusters=int(len(np.unique(clusters))))


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
        parts, met = [], True
        for dtype, times in cost["seconds"].items():
            med = {k: float(np.median(v)) for k, v in times.items()}
            full, windows = med["full attention"] / med["student"], med["windows"] / med["student"]
            met &= full >= 2 and windows >= 1
            parts.append(f"{dtype}: {med['student']:.2f} s, {full:.2f}x faster than full attention, "
                         f"{windows:.2f}x faster than the windows")
        rows.append(dict(goal="cost at 4096 tokens: >= 2x faster than the teacher with full attention, no slower "
                              "than the windows (fp32 and bf16)", measured="; ".join(parts), met=bool(met)))
    return rows


def verdicts(results, ours, theirs, them="them", list_ties=True):
    """One sentence: the tasks on which `ours` is above `theirs` (met), below (missed) or neither (undecided), each
    with its difference and interval (short_fidelity is a goal row, not a comparison). Without `list_ties`, the
    undecided are counted, not listed (the ablations: what matters there is where they differ)."""
    groups = {MET: [], UNDECIDED: [], MISSED: []}
    for task in results[ours]["tasks"]:
        if task == "short_fidelity" or task not in results[theirs]["tasks"]:
            continue
        c = compare(results, task, ours, theirs)
        groups[c["verdict"]].append(f"{task} ({c['ours']:.3f} vs {c['theirs']:.3f}, {c['diff']:+.3f} "
                                    f"[{c['low']:+.3f}, {c['high']:+.3f}])")
    n_ties, other = len(groups[UNDECIDED]), "the other" if groups[MET] or groups[MISSED] else "all"
    ties = ", ".join(groups[UNDECIDED]) if list_ties else f"{other} {n_ties} task" + "s" * (n_ties != 1)
    parts = [f"{word} on {items}" for word, items in ((MET, ", ".join(groups[MET])), (MISSED, ", ".join(groups[MISSED])),
                                                      (UNDECIDED, ties if groups[UNDECIDED] else "")) if items]
    return f"is above {them}: " + "; ".join(parts) if parts else "has no task in common"


def summary(results, rows):
    """The paragraph under the goals table in model_card.md: every comparison in words, generated,
    so that no figure there is typed by hand."""
    met = [r for r in rows if r["met"]]
    text = [f"{len(met)} of {len(rows)} goals met. Against the windows, the student "
            f"{verdicts(results, 'student', 'windows')}."]
    for name in ABLATIONS:
        if name in results:
            text.append(f"Against the {SYSTEMS[name]}, it "
                        f"{verdicts(results, 'student', name, them='it', list_ties=False)}.")
    return " ".join(text) + (f" (Difference [95% paired-bootstrap interval]; {MET}: the interval lies above 0, "
                             f"{MISSED}: below it, {UNDECIDED}: it holds 0, a tie.)")


def along_training(results_dir):
    """(name, news recall@1) of the checkpoints measured while training, from results/along_training/."""
    out = []
    for path in sorted((Path(results_dir) / "along_training").glob("*.json")):
        ranks = np.array(json.loads(path.read_text())["tasks"]["news_retrieval"]["ranks"])
        out.append((path.stem, float((ranks == 1).mean())))
    return out


def render(results, cost, facts, along=()):
    rows = goals(results, cost)
    student = results["student"]
    lines = [
        "# Reading a whole document against reading it in pieces",
        "",
        "Generated by `python -m experiments.long_documents.report` from `results/` (written by `evaluate.py`; "
        "do not edit by hand). CPU, float32, one document at a time. Every text here was read by no training "
        "run: held-out news articles (`experiments/conversion/heldout_news_ids.txt`), Moby-Dick (the recipe "
        "trains on news only), generated passkey/needle documents, Rotten Tomatoes.",
        "",
        f"Student `{student['model']}` (weights sha256 {student['weights_sha256']}); the windows baseline is "
        "all-MiniLM-L6-v2 on consecutive 510-token windows (plus [CLS]/[SEP]), embeddings averaged weighted by "
        "length; every system reads at most the first 4,094 tokens of a document. Intervals: paired bootstrap, "
        "95%, of student minus windows.",
        "",
        "## Goals",
        "",
        table(["goal", "measured (student vs windows)", "status"],
              [[r["goal"], r["measured"], status(r["met"])] for r in rows]),
        "",
        summary(results, rows),
        "",
    ]
    lines += ["## Tasks", "", table(
        ["task", "items (documents)"] + [SYSTEMS[s] for s in results if s in SYSTEMS],
        [[task, f"{len(outcomes(student, task)[1])} ({len(np.unique(outcomes(student, task)[1]))})"]
         + [f"{outcomes(results[s], task)[0].mean():.3f}" if task in results[s]["tasks"] else "-"
            for s in results if s in SYSTEMS]
         for task in student["tasks"] if task != "short_fidelity"]), ""]
    lines += [
        "Tasks (`evaluate.py` documents each): retrieval queries are 64-token spans from beyond token 512 of a "
        "document, 3 per document, embedded by the same system, ranked against every document by cosine "
        "(recall@1); outlets: 5-fold cross-validated logistic regression on standardised embeddings of 706 "
        "held-out articles (9 outlets); passkey/needle: 100 generated documents per length, one fact each at a "
        "random depth, the query asks for it (accuracy@1 among the 100).",
        "",
    ]
    if facts:
        curve = ", ".join(f"{d:.3f} at {s}" for s, d, _ in facts["evals"] if d is not None)
        lines += ["## Training", "",
                  f"{facts['updates']} updates in {facts['hours']:.2f} h on this CPU (2 cores, bf16 autocast), "
                  f"{facts['tokens']:,} tokens. Validation (news blocks, not held out from the recipe's split): "
                  f"recall@1 of each input for one of its own pieces among all validation inputs: {curve}.", ""]
    for name, (title, why, _) in ABLATIONS.items():
        if name in results:
            lines += [f"## {title}", "", why + " Paired as above.", "",
                      table(["task", f"student vs {SYSTEMS[name]}; difference [95% interval]", "student above it"],
                            [[task, fmt_compare(c), c["verdict"]] for task in student["tasks"]
                             if task != "short_fidelity" and task in results[name]["tasks"]
                             for c in [compare(results, task, "student", name)]]), ""]
    if along:
        lines += ["News retrieval (recall@1) along training, from checkpoints (`evaluate.py --tasks news_retrieval`): "
                  + "; ".join(f"{name}: {value:.3f}" for name, value in along) + ".", ""]
    missing = [f"{SYSTEMS[name]}" for name in ABLATIONS if name not in results]
    lines += ["Not run, for lack of CPU time: " + "".join(f"the {m}; " for m in missing)
              + "other gate rates, more updates, and seeds (each recipe was trained once, so an ablation's interval "
                "covers the evaluation items, not training noise).", ""]
    if cost:
        lines += ["## Cost", "", f"One {cost['tokens']}-token document (held-out articles back to back), batch 1, "
                  f"{cost['threads']} thread(s), "
                  f"median of {cost['repeats']} interleaved runs (`evaluate.py --cost`).", "",
                  table(["precision"] + list(next(iter(cost["seconds"].values()))),
                        [[d] + [f"{np.median(v):.3f} s" for v in t.values()] for d, t in cost["seconds"].items()]), ""]
    lines += ["## Reproduce", "", "```bash",
              "python -m experiments.long_documents.evaluate --system windows",
              "python -m experiments.long_documents.evaluate --system student --model STUDENT",
              "python -m experiments.long_documents.evaluate --cost --model STUDENT",
              "python -m experiments.long_documents.report --run RUN", "```", "",
              "An ablation is the recipe (`experiments/long_documents/build.sh`) with one change, evaluated as "
              "`evaluate.py --system student --model ITS_RUN --name NAME` (`--name start` on the converted model):", ""]
    lines += [f"- `{name}`: `{how}`" for name, (_, _, how) in ABLATIONS.items() if how and name in results]
    lines += [""]
    return "\n".join(lines), rows


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
    text, rows = render(results, cost, facts, along_training(results_dir))
    words = summary(results, rows)
    block = table(["goal", "measured (student vs windows; 95% paired-bootstrap interval)", "status"],
                  [[r["goal"], r["measured"], status(r["met"])] for r in rows]) + "\n\n" + words
    return {Path(out) / "results.md": text,
            Path(out) / "results.json": json.dumps({"goals": rows, "summary": words, "training": facts}, indent=1) + "\n",
            **{Path(path): splice(Path(path).read_text(encoding="utf-8"), SOURCE, block) for path in update}}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=HERE / "results")
    parser.add_argument("--run", help="the training run folder (its metrics.jsonl)")
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--update", nargs="*", default=[], help="files whose goals block to regenerate "
                                                                 "(model_card.md)")
    args = parser.parse_args(argv)
    written = pages(args.results, args.out, args.run, args.update)
    for path, text in written.items():
        path.write_text(text, encoding="utf-8")
    print("wrote " + ", ".join(map(str, written)))


if __name__ == "__main__":
    main()
