# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
"""experiments/distillation/render.py on fabricated results: the report is generated
from the result files alone, so its tables, goal verdicts and plots can be checked without any model."""

import json
from pathlib import Path

from experiments.distillation import compute, render


def fidelity(k_512):
    return dict(measure="fidelity", stamp=dict(model="s"), seconds=1.0,
                cosine={"<=k": dict(mean=1.0, min=1.0, count=3), "k..512": dict(mean=k_512, min=k_512 - 0.05, count=2),
                        ">512 vs windows": dict(mean=0.8, min=0.7, count=1),
                        ">512 vs extended": dict(mean=0.7, min=0.6, count=1)},
                cosine_by_text=[[20, 1.0, "chunk"], [300, k_512, "chunk"], [900, 0.8, "windows"],
                                [900, 0.7, "extended"]],
                layer_error={"k..512": [0.0, 0.1, 0.2], ">512 vs windows": [0.0, 0.2, 0.3]})


def retrieval(mrr):
    return dict(measure="retrieval", stamp=dict(model="s"), recall_at_1=mrr - 0.05, recall_at_5=1.0, mrr=mrr,
                documents=10)


def outlet(accuracy):
    return dict(measure="outlet", stamp=dict(model="s"), accuracy=accuracy, fold_accuracy=[accuracy] * 5,
                accuracy_long=accuracy - 0.1, articles=90, long_articles=40, folds=5,
                classes={"a.com": 45, "b.com": 45}, majority=0.5, dropped={"c.com": 3})


def fabricated(folder, student_fidelity, student_finetune):
    files = {
        "data": dict(heldout=706, chunks=4, long_docs=1, retrieval_docs=10, retrieval_doc_ids=[1], outlet_ids=[1, 2],
                     models=dict(teacher=dict(path="teacher", sha256="t"), student=dict(path="student", sha256="s")),
                     torch="2", threads=1, machine="x86_64 2 cores"),
        "fidelity_student": fidelity(student_fidelity),
        "fidelity_converted": dict(fidelity(0.8), stamp=dict(model="c")),
        "probe_teacher": dict(measure="probe", stamp=dict(model="t"), accuracy=0.75, train=100, validation=50),
        "probe_student": dict(measure="probe", stamp=dict(model="s"), accuracy=0.745, train=100, validation=50),
        "retrieval_teacher_truncated": retrieval(0.8), "retrieval_teacher_windows": retrieval(0.9),
        "retrieval_student": retrieval(0.95),
        "outlet_teacher_truncated": outlet(0.8), "outlet_teacher_windows": outlet(0.82), "outlet_student": outlet(0.81),
        "cost": dict(measure="cost", stamp=dict(model="s"), tokens=4096, repeats=3, threads=1, models={
            "student (Linformer)": dict(system="student", seconds=dict(median=1.0, min=0.9, max=1.1), peak_bytes=2**26),
            "teacher, full attention": dict(system="extended", seconds=dict(median=3.0, min=2.9, max=3.1),
                                            peak_bytes=2**26),
            "teacher, windows": dict(system="windows", seconds=dict(median=1.3, min=1.2, max=1.4),
                                     peak_bytes=2**23)}),
    }
    for system, accuracies in (("teacher", (0.80, 0.81, 0.82)), ("student", student_finetune)):
        for seed, accuracy in enumerate(accuracies):
            files[f"finetune_{system}_s{seed}"] = dict(
                measure="finetune", stamp=dict(model=system[0]), seed=seed, accuracy=accuracy,
                command=f"python finetune_glue.py --model_name_or_path {system} --seed {seed} --output_dir /tmp/x")
    (folder / "results").mkdir(parents=True)
    for name, content in files.items():
        (folder / "results" / f"{name}.json").write_text(json.dumps(content))


def goal_rows(markdown):
    section = markdown.split("## Goals")[1].split("## Findings")[0]
    return [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| goal")]


def test_report_only_writes_tables_plots_and_verdicts_from_the_files(tmp_path):
    fabricated(tmp_path, student_fidelity=0.98, student_finetune=(0.80, 0.805, 0.81))
    render.main(["--out", str(tmp_path)])
    markdown = (tmp_path / "results.md").read_text()
    for text in ("## 1. Fidelity to the teacher", "| student (distilled) | 1.000 (1.00, 3) | 0.980 (0.93, 2) |",
                 "## 2. Short text: Rotten Tomatoes", "| teacher | 3 | 81.0 ± 1.0 | 80.0, 81.0, 82.0 |",
                 "--output_dir OUT", "## 3. Long documents", "2 outlets", "dropped: c.com",
                 "## 4. Cost per document", "| 3.00x |", "![fidelity](fidelity.png)"):
        assert text in markdown, text
    rows = goal_rows(markdown)
    assert len(rows) == 6
    verdicts = [row.rsplit("|", 2)[1].strip() for row in rows]
    # fidelity 0.98 >= 0.97; probe -0.5 and finetune -0.5 points; retrieval beats both; outlets 0.81 < 0.82; 3x
    assert verdicts == ["**met**", "**met**", "**met**", "**met**", "**missed**", "**met**"]
    assert (tmp_path / "fidelity.png").stat().st_size > 10_000
    assert (tmp_path / "long_documents.png").stat().st_size > 10_000
    summary = json.loads((tmp_path / "results.json").read_text())
    assert [g["met"] for g in summary["goals"]] == [True, True, True, True, False, True]
    assert "cosine_by_text" not in summary["fidelity_student"]


def test_a_missed_goal_says_missed_and_a_missing_one_says_so(tmp_path):
    fabricated(tmp_path, student_fidelity=0.90, student_finetune=(0.78, 0.79, 0.80))
    (tmp_path / "results" / "cost.json").unlink()
    render.main(["--out", str(tmp_path)])
    rows = goal_rows((tmp_path / "results.md").read_text())
    assert "0.900 (2 texts) | **missed** |" in rows[0]
    assert "-2.0 points) | **missed** |" in rows[2]
    assert rows[5].endswith("| – | not measured yet |")


def test_systems_selects_whose_rows_are_measured():
    """--systems teacher converted must plan no row that needs the trained student (they run while it
    trains), and the default plans every system's rows."""
    from types import SimpleNamespace

    args = SimpleNamespace(chunks=4, long_chunks=1, retrieval_docs=10, probe_train=10, probe_validation=10,
                           outlet_min_articles=2, outlet_max_per_class=0, outlet_folds=2, finetune_seeds=[0],
                           finetune_max_train_samples=8, finetune_max_eval_samples=8, threads=1, repeats=1,
                           teacher="t", student="s", converted="c", only=None, data_dir=Path("."))
    prints = {s: dict(sha256=s) for s in ("teacher", "student", "converted")}

    def names(systems):
        return {item[0] for item in compute.plan(SimpleNamespace(**vars(args), systems=systems), prints,
                                                lambda what: None)}
    early = names(["teacher", "converted"])
    assert early and all("student" not in name and name != "cost" for name in early)
    assert {"fidelity_converted", "probe_teacher", "retrieval_teacher_windows", "finetune_teacher_s0"} <= early
    everything = names(list(compute.SYSTEM_ROWS))
    assert {"cost", "fidelity_student", "finetune_student_s0", "outlet_student"} <= everything - early
    assert names(["student"]) == everything - early
