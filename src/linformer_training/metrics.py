# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""GLUE's official metrics, computed here; an `evaluate` metric script runs only when the user names one.

The GLUE metric script is a thin layer over scikit-learn (accuracy, F1, Matthews correlation) and scipy
(Pearson, Spearman); `glue_local` calls the same functions with the same conventions (STS-B scores as
float32, labels as int64, F1 of class 1), so a result does not depend on which computed it. It is the
default because `evaluate.load("glue")` is code from elsewhere: it runs a `glue/glue.py` found in the
current directory before it asks the Hub, and the Hub's script otherwise (which fails offline).
"""

import logging

import numpy as np

from .arguments import UsageError

logger = logging.getLogger(__name__)

# The metric set of each configuration of the GLUE metric, by the keys it returns.
GLUE_METRIC_KEYS = {
    "cola": ("matthews_correlation",),
    "stsb": ("pearson", "spearmanr"),
    "mrpc": ("accuracy", "f1"),
    "qqp": ("accuracy", "f1"),
    **{name: ("accuracy",) for name in ("sst2", "mnli", "mnli_matched", "mnli_mismatched", "qnli", "rte", "wnli")},
}


def glue_local(config_name: str, predictions, references) -> dict[str, float]:
    """What `evaluate.load("glue", config_name).compute(...)` returns, computed here."""
    # Imported here, not with the module: scikit-learn's metrics and scipy.stats take about a second to import, paid
    # at the start of every finetune_glue.py process (and every process that reads GLUE_METRIC_KEYS) otherwise.
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    if config_name not in GLUE_METRIC_KEYS:
        raise KeyError(f"unknown GLUE metric config {config_name!r}; allowed: {', '.join(GLUE_METRIC_KEYS)}")
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
    if config_name == "stsb":  # the GLUE metric stores STS-B scores as float32
        p, r = np.asarray(predictions, np.float32), np.asarray(references, np.float32)
        return {"pearson": float(pearsonr(p, r).statistic), "spearmanr": float(spearmanr(p, r).statistic)}
    p, r = np.asarray(predictions, np.int64), np.asarray(references, np.int64)
    if config_name == "cola":
        return {"matthews_correlation": float(matthews_corrcoef(r, p))}
    if config_name in ("mrpc", "qqp"):
        # zero_division=0: the value scikit-learn returns anyway when class 1 is never predicted nor
        # true, without its warning.
        return {"accuracy": float(accuracy_score(r, p)), "f1": float(f1_score(r, p, zero_division=0.0))}
    return {"accuracy": float(accuracy_score(r, p))}


def load_glue_metric(config_name: str, script: str | None = None):
    """A function (predictions, references) -> dict for one GLUE metric config: `glue_local`, or with `script`
    (--metric_script: a path or Hub name the user gave) that `evaluate` metric script's `compute`."""
    if config_name not in GLUE_METRIC_KEYS:
        raise KeyError(f"unknown GLUE metric config {config_name!r}; allowed: {', '.join(GLUE_METRIC_KEYS)}")
    if script is None:
        return lambda predictions, references: glue_local(config_name, predictions, references)
    try:
        import evaluate

        metric = evaluate.load(script, config_name)
    except Exception as error:  # noqa: BLE001  offline, no such script, a script that fails
        raise UsageError(f"--metric_script {script}: cannot load it ({type(error).__name__}: "
                         f"{str(error).splitlines()[0] if str(error) else ''}); leave it unset to compute the GLUE "
                         f"metric here") from None
    logger.info("GLUE metric %s from the metric script %s", config_name, script)
    return lambda predictions, references: {
        k: float(v) for k, v in metric.compute(predictions=predictions, references=references).items()}
