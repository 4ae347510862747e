# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""The GLUE metrics: the keys and values of the GLUE metric on inputs worked out by hand, the same numbers
from a metric script the user names, and no script run that the user did not name."""

import math
import sys
import types

import numpy as np
import pytest

from linformer_training import metrics
from linformer_training.arguments import UsageError

# Worked by hand. Binary: TP 2, FP 1, TN 1, FN 1 -> MCC (2*1 - 1*1) / sqrt(3*3*2*2) = 1/6.
BINARY_PREDS, BINARY_REFS = [1, 1, 0, 0, 1], [1, 0, 0, 1, 1]
# Three classes: confusion trace 2 of 4, true and predicted counts (1, 1, 2) -> (2*4 - 6) / (16 - 6) = 0.2.
MULTI_PREDS, MULTI_REFS = [0, 1, 2, 2], [0, 2, 1, 2]


def test_accuracy_and_f1_of_class_one():
    assert metrics.glue_local("mrpc", [1, 0, 1, 1], [1, 0, 0, 1]) == {"accuracy": 0.75, "f1": pytest.approx(0.8)}
    assert metrics.glue_local("qqp", BINARY_PREDS, BINARY_REFS) == {"accuracy": 0.6, "f1": pytest.approx(2 / 3)}
    # Class 0 is not what F1 scores: all-correct zeros give F1 0 (nothing predicted or true in class 1).
    assert metrics.glue_local("mrpc", [0] * 4, [0] * 4) == {"accuracy": 1.0, "f1": 0.0}
    assert metrics.glue_local("sst2", [1, 0], [1, 1]) == {"accuracy": 0.5}


def test_matthews_correlation_binary_multiclass_and_undefined():
    assert metrics.glue_local("cola", BINARY_PREDS, BINARY_REFS)["matthews_correlation"] == pytest.approx(1 / 6)
    assert metrics.glue_local("cola", MULTI_PREDS, MULTI_REFS)["matthews_correlation"] == pytest.approx(0.2)
    assert metrics.glue_local("cola", [1, 0, 1], [1, 0, 1]) == {"matthews_correlation": 1.0}
    assert metrics.glue_local("cola", [1, 0, 1], [0, 1, 0])["matthews_correlation"] == pytest.approx(-1.0)
    assert metrics.glue_local("cola", [0] * 5, [0, 1, 0, 1, 1]) == {"matthews_correlation": 0.0}  # undefined: 0


@pytest.mark.parametrize("preds, refs, pearson, spearman", [
    ([1, 2, 3, 4], [2, 4, 6, 8], 1.0, 1.0),
    ([1, 2, 3, 4], [1, 3, 2, 4], 0.8, 0.8),  # covariance 4 / variance 5; same ranks
    ([1, 1, 2, 3], [1, 2, 2, 3], None, 3.75 / 4.5),  # ties share the mean of their ranks
    (list(range(10)), [x ** 3 for x in range(10)], None, 1.0),  # monotone: Spearman 1, Pearson below
])
def test_pearson_and_spearman(preds, refs, pearson, spearman):
    result = metrics.glue_local("stsb", preds, refs)
    assert set(result) == {"pearson", "spearmanr"} and all(type(v) is float for v in result.values())
    assert result["spearmanr"] == pytest.approx(spearman)
    if pearson is not None:
        assert result["pearson"] == pytest.approx(pearson)
    else:
        assert 0 < result["pearson"] < 0.999


def test_stsb_scores_are_compared_as_float32():
    """A difference below float32's resolution vanishes, as in the GLUE metric (float32 features)."""
    refs, preds, nudged = [1.0, 2.0, 3.0], [1.0, 2.0, 3.5], [1.0, 2.0 + 1e-9, 3.5]
    assert metrics.glue_local("stsb", nudged, refs) == metrics.glue_local("stsb", preds, refs)
    assert metrics.glue_local("stsb", nudged, refs)["pearson"] < 1


def test_every_config_returns_the_glue_metric_keys_in_order():
    for name, keys in metrics.GLUE_METRIC_KEYS.items():
        preds, refs = ([0.5, 1.5, 2.5, 4.0], [1.0, 1.0, 3.0, 4.5]) if name == "stsb" else (BINARY_PREDS, BINARY_REFS)
        result = metrics.glue_local(name, preds, refs)
        assert tuple(result) == keys and all(type(v) is float and math.isfinite(v) for v in result.values())


def fake_evaluate(monkeypatch, loads):
    """An `evaluate` module whose GLUE metric returns numpy scalars, as the real one does, each `glue_local`'s
    plus 0.25 (figures the local metric cannot give, so a result shows which computed it); `loads=False` makes it
    fail like an offline `evaluate.load`."""
    calls = []

    def load(path, config_name):
        calls.append((path, config_name))
        if not loads:
            raise ConnectionError("Couldn't reach 'glue' on the Hub (LocalEntryNotFoundError)")

        def compute(predictions, references):
            figures = metrics.glue_local(config_name, predictions, references)
            return {k: np.float64(v + 0.25) for k, v in figures.items()}

        return types.SimpleNamespace(compute=compute)

    monkeypatch.setitem(sys.modules, "evaluate", types.SimpleNamespace(load=load))
    return calls


@pytest.mark.parametrize("config, preds, refs", [
    ("mrpc", BINARY_PREDS, BINARY_REFS), ("cola", MULTI_PREDS, MULTI_REFS), ("stsb", [0.1, 2.0, 1.5], [0.0, 2.5, 1.0]),
])
def test_a_named_metric_script_computes_the_figures(monkeypatch, config, preds, refs):
    calls = fake_evaluate(monkeypatch, loads=True)
    local = metrics.load_glue_metric(config)(preds, refs)
    assert calls == []  # the default never asks evaluate
    via_script = metrics.load_glue_metric(config, script="evaluate-metric/glue")(preds, refs)
    assert calls == [("evaluate-metric/glue", config)]
    assert via_script == {k: v + 0.25 for k, v in local.items()}  # the script's figures, not the local ones
    assert all(type(v) is float for v in via_script.values())  # JSON-able, not numpy


def test_a_named_script_that_cannot_load_is_one_line_naming_the_flag(monkeypatch):
    fake_evaluate(monkeypatch, loads=False)
    with pytest.raises(UsageError, match=r"^--metric_script glue: cannot load it \(ConnectionError: Couldn't reach "
                                         r"'glue' on the Hub .*\); leave it unset to compute the GLUE metric here$"):
        metrics.load_glue_metric("mrpc", script="glue")  # asked for explicitly: no silent fallback


def test_no_code_from_the_working_directory_runs_by_default(monkeypatch, tmp_path):
    """`evaluate.load("glue")` runs a glue/glue.py in the current directory before it asks the Hub (issue 33):
    the default computes the metric here and runs nothing."""
    pytest.importorskip("evaluate")
    marker = tmp_path / "script_ran"
    (tmp_path / "glue").mkdir()
    (tmp_path / "glue" / "glue.py").write_text(f"open({str(marker)!r}, 'w').close()\nraise SystemExit('ran')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    compute = metrics.load_glue_metric("mrpc")
    assert compute([1, 0, 1, 1], [1, 0, 0, 1]) == {"accuracy": 0.75, "f1": pytest.approx(0.8)}
    assert not marker.exists()


def test_bad_metric_requests_are_rejected():
    with pytest.raises(KeyError, match="allowed: cola"):
        metrics.glue_local("squad", [1], [1])
    with pytest.raises(KeyError, match="allowed: cola"):
        metrics.load_glue_metric("squad")
    with pytest.raises(ValueError, match="3 predictions for 2 references"):
        metrics.glue_local("sst2", [1, 0, 1], [1, 0])
