# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Trackers are checked up front; metrics.jsonl keeps one line per logged step, trimmed on resume."""

import pytest

from linformer_training import tracking
from linformer_training.arguments import UsageError


def test_resolve_trackers():
    assert tracking.resolve_trackers("none") is None
    assert tracking.resolve_trackers("tensorboard") == ["tensorboard"]
    with pytest.raises(UsageError, match="--report_to: unknown tracker `tensorbord`"):
        tracking.resolve_trackers("tensorbord")


def test_flatten_for_tensorboard():
    assert tracking.flatten({"a": {"b": 1, "c": [1, 2]}, "d": None}) == {"a.b": 1, "a.c": "[1, 2]", "d": "None"}


@pytest.fixture
def accelerator():
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    yield Accelerator(cpu=True)
    AcceleratorState._reset_state(reset_partial_state=True)


def test_metrics_log_appends_and_trims(tmp_path, accelerator):
    log = tracking.MetricsLog(accelerator, tmp_path / "metrics.jsonl", "demo", {"lr": 1.0})
    for step in (1, 2, 3):
        log.log({"train_loss": 1.0 / step}, step)
    rows = tracking.read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3] and rows[0]["train_loss"] == 1.0 and "time" in rows[0]
    log.keep_until(2)  # a run resumed at step 2 redoes step 3
    assert [r["step"] for r in tracking.read_jsonl(tmp_path / "metrics.jsonl")] == [1, 2]
    log.keep_until(0)  # a fresh run starts an empty log
    assert tracking.read_jsonl(tmp_path / "metrics.jsonl") == []
