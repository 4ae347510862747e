# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""experiments/long_documents/report.py: paired intervals, verdicts, goal rows, ablation sections and the generated
goals block of model_card.md, from synthetic result files (nothing is measured here)."""

import json
import re

import numpy as np
import pytest

from benchmarks import reporting
from experiments.long_documents import report

TASKS = ["news_retrieval", "moby_retrieval", "outlets", "rt_probe"] + [
    f"{kind}_{n}" for kind in report.SYNTHETIC for n in report.LENGTHS]


def result(correct_rate, seed, fidelity=(1.0, 1e-6)):
    """A results/<system>.json: retrieval as ranks (3 queries per document), the rest as 0/1 outcomes."""
    rng = np.random.default_rng(seed)
    tasks = {}
    for task in TASKS:
        hits = rng.random(300) < correct_rate
        if task.endswith("retrieval"):
            tasks[task] = {"ranks": np.where(hits, 1, 2).tolist(), "documents": 100}
        else:
            tasks[task] = {"correct": hits.astype(int).tolist()}
    tasks["rt_probe"]["longest"] = 80
    tasks["short_fidelity"] = {"cosine": [fidelity[0]] * 5, "max_abs_hidden_difference": [fidelity[1]] * 5,
                               "lengths": [8, 100, 200, 400, 500]}
    return {"model": "runs/x", "weights_sha256": "0" * 16, "tasks": tasks}


def test_goals_verdicts_ablations_and_summary_come_from_the_files():
    results = {"student": result(0.9, 1), "windows": result(0.5, 2), "start": result(0.9, 1),
               "blocks": result(0.5, 3, fidelity=(0.99, 1e-3))}
    cost = {"tokens": 4096, "threads": 2, "repeats": 3,
            "seconds": {"fp32": {"student": [1.0] * 3, "full attention": [2.5] * 3, "windows": [1.1] * 3},
                        "bf16": {"student": [0.6] * 3, "full attention": [1.5] * 3, "windows": [0.5] * 3}}}
    text, rows, said = report.render(results, cost, facts=None)
    assert said == report.summary(results, rows) and report.goals_block(rows, said) in text  # the card's block
    status = {r["goal"].split(":")[0]: r["met"] for r in rows}
    assert status["inputs <= 512 tokens"] and status["long news retrieval (held-out), recall@1"]
    assert not status["Rotten Tomatoes, linear probe and finetuned"]  # 90 vs 50: far from "within 1 point"
    results["windows"]["tasks"]["rt_probe"] = results["student"]["tasks"]["rt_probe"]
    rt = [r for r in report.goals(results, None) if r["goal"].startswith("Rotten")][0]
    assert rt["met"] and "every snippet has at most 80 tokens" in rt["measured"]
    del results["student"]["tasks"]["rt_probe"]["longest"]  # not known to take the exact path: not claimed
    assert not [r for r in report.goals(results, None) if r["goal"].startswith("Rotten")][0]["met"]
    assert not status["cost at 4096 tokens"]  # bf16 is slower than the windows
    assert "fp32: 1.00 s, 2.50x faster than full attention, 1.10x faster than the windows" in text
    for heading in ("## What the training did", "## What whole documents did"):  # the two ablations' sections
        assert heading in text
    assert "## How many global slots" not in text  # an ablation with no results has no section
    words = report.summary(results, rows)
    assert words.startswith(f"{sum(r['met'] for r in rows)} of {len(rows)} goals met.")
    assert "Against the windows, the student is above them: met on news_retrieval" in words
    # The same outcomes: an ablation's ties are counted, not listed.
    assert re.search(r"Against the student before training \(gates closed\), it is above it: undecided on all \d+ "
                     r"tasks\.", words)
    assert "missed on" not in words.split("Against the student before")[1]


def test_main_writes_results_and_the_goals_block_of_the_pages_it_updates(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    for name, rate, seed in (("student", 0.7, 1), ("windows", 0.5, 2)):
        (folder / f"{name}.json").write_text(json.dumps(result(rate, seed)))
    page = tmp_path / "README.md"
    begin = reporting.BEGIN.format(report.SOURCE)
    page.write_text(f"before\n{begin}\nold table\n{reporting.END}\nafter\n")
    report.main(["--results", str(folder), "--out", str(tmp_path), "--update", str(page)])
    written = json.loads((tmp_path / "results.json").read_text())
    assert page.read_text().startswith(f"before\n{begin}\n| goal | measured (student vs windows; 95% paired-bootstrap "
                                       "interval) | status |\n|---|---|---|\n| inputs <= 512 tokens")
    assert page.read_text().endswith(f"\n\n{written['summary']}\n{reporting.END}\nafter\n")
    assert written["summary"] in (tmp_path / "results.md").read_text()
    assert [r["goal"] for r in written["goals"]][0].startswith("inputs <= 512 tokens")


def test_retrieval_queries_must_split_evenly_over_their_documents():
    """The bootstrap resamples whole documents, read from the queries' order: uneven counts would misplace them."""
    with pytest.raises(ValueError, match=r"news_retrieval: 7 queries over 3 documents is not the same number each"):
        report.outcomes({"tasks": {"news_retrieval": {"ranks": [1] * 7, "documents": 3}}}, "news_retrieval")
