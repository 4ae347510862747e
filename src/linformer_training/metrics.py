# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
"""GLUE's official metrics, computed by `evaluate` when it can load them and locally otherwise.

The GLUE metric script is not inside the `evaluate` wheel: `evaluate.load("glue", ...)` fetches it
from the Hub, which fails offline. That script is a thin layer over scikit-learn (accuracy, F1,
Matthews correlation) and scipy (Pearson, Spearman); the local path calls the same functions with the
same conventions (STS-B scores as float32, labels as int64, F1 of class 1), so a result does not depend
on which path computed it.
"""

import logging

import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

logger = logging.getLogger(__name__)

# The metric set of each configuration of the GLUE metric, by the keys it returns.
GLUE_METRIC_KEYS = {
    "cola": ("matthews_correlation",),
    "stsb": ("pearson", "spearmanr"),
    "mrpc": ("accuracy", "f1"),
    "qqp": ("accuracy", "f1"),
    **{name: ("accuracy",) for name in ("sst2", "mnli", "mnli_matched", "mnli_mismatched", "qnli", "rte", "wnli")},
}
BACKENDS = ("auto", "evaluate", "local")


def glue_local(config_name: str, predictions, references) -> dict[str, float]:
    """What `evaluate.load("glue", config_name).compute(...)` returns, computed here."""
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


def load_glue_metric(config_name: str, backend: str = "auto"):
    """A function (predictions, references) -> dict for one GLUE metric config.

    backend: "evaluate" (the Hub's GLUE metric, fails offline), "local", or "auto" (evaluate when it
    loads, else local, saying so once).
    """
    if backend not in BACKENDS:
        raise ValueError(f"metric backend {backend!r} is invalid; allowed: {', '.join(BACKENDS)}")
    if config_name not in GLUE_METRIC_KEYS:
        raise KeyError(f"unknown GLUE metric config {config_name!r}; allowed: {', '.join(GLUE_METRIC_KEYS)}")
    if backend != "local":
        try:
            import evaluate

            metric = evaluate.load("glue", config_name)
        except Exception as error:  # offline, Hub down, ...
            if backend == "evaluate":
                raise
            logger.warning("evaluate could not load the GLUE metric (%s: %s); computing it locally",
                           type(error).__name__, str(error).splitlines()[0] if str(error) else "")
        else:
            return lambda predictions, references: {
                k: float(v) for k, v in metric.compute(predictions=predictions, references=references).items()}
    return lambda predictions, references: glue_local(config_name, predictions, references)
