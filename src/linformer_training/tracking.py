# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Metrics go to Accelerate's trackers (TensorBoard by default) and to `metrics.jsonl`, which needs no viewer.

Accelerate quietly drops a tracker whose package is missing; here that is an error before training.
"""

import json
import time
from pathlib import Path

from . import checkpoints, processes
from .arguments import UsageError, did_you_mean


def resolve_trackers(report_to):
    """`report_to` ("tensorboard", "wandb,tensorboard", "all", "none") as Accelerator(log_with=...)."""
    from accelerate.tracking import LOGGER_TYPE_TO_CLASS, get_available_trackers

    names = [n.strip() for n in str(report_to).split(",") if n.strip()]
    if not names or names == ["none"]:
        return None
    if names == ["all"]:
        return "all"
    available = {str(t) for t in get_available_trackers()}
    for name in names:
        if name not in LOGGER_TYPE_TO_CLASS:
            allowed = [*LOGGER_TYPE_TO_CLASS, "all", "none"]
            raise UsageError("--report_to: " + did_you_mean("tracker", name, allowed))
        if name not in available:
            raise UsageError(f"--report_to {name}: its package is not installed (pip install {name}), "
                             f"or pass --report_to none")
    return names


def flatten(config, prefix=""):
    """TensorBoard's hparams take scalars only: nested keys become `a.b`, other values strings."""
    flat = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value if isinstance(value, (int, float, str, bool)) else str(value)
    return flat


class MetricsLog:
    """One JSON line per logged step in `path` (main process), plus the Accelerate trackers."""

    def __init__(self, accelerator, path, project, config):
        self.accelerator, self.path = accelerator, Path(path)
        accelerator.init_trackers(project, config=flatten(config))

    def keep_until(self, step, keep_evaluation=True):
        """On resume: drop records of steps this run will redo (and, without `keep_evaluation`, the evaluation of
        `step` itself, which the run measures again); a fresh run starts an empty log."""
        with processes.together(self.accelerator, f"writing {self.path.name}"):
            if self.accelerator.is_main_process and self.path.exists():
                kept = [r for r in read_jsonl(self.path) if r["step"] < step or r["step"] == step and
                        (keep_evaluation or "train_loss" in r)] if step else []
                self.write("".join(json.dumps(r) + "\n" for r in kept))

    def log(self, metrics, step):
        self.accelerator.log(metrics, step=step)
        with processes.together(self.accelerator, f"writing {self.path.name}"):  # a full disk ends every process
            if self.accelerator.is_main_process:
                self.write(json.dumps({"step": step, "time": round(time.time(), 3), **metrics}) + "\n", append=True)

    def write(self, text, append=False):
        """Whole lines or nothing: a line cut by a full disk would make the log unreadable for a resume."""
        checkpoints.write_text(self.path, text, self.path.parent, self.accelerator.num_processes, append)


def read_jsonl(path):
    with Path(path).open() as f:
        return [json.loads(line) for line in f if line.strip()]
