"""GLUE's official metrics, computed by `evaluate` when it can load them and locally otherwise.

The GLUE metric script is not inside the `evaluate` wheel: `evaluate.load("glue", ...)` fetches it
from the Hub, which fails offline. The local versions below are plain numpy implementations of the
same formulas (scikit-learn's F1 and Matthews correlation, scipy's Pearson and Spearman), so a
result does not depend on which path computed it; tests/test_metrics.py checks the agreement.
"""

import logging

import numpy as np

logger = logging.getLogger(__name__)

# The metric set of each configuration of the GLUE metric, by the keys it returns.
GLUE_METRIC_KEYS = {
    "cola": ("matthews_correlation",),
    "stsb": ("pearson", "spearmanr"),
    "mrpc": ("accuracy", "f1"),
    "qqp": ("accuracy", "f1"),
    **{name: ("accuracy",) for name in ("sst2", "mnli", "mnli_matched", "mnli_mismatched", "qnli", "rte", "wnli")},
}


def accuracy(predictions, references) -> float:
    return float((np.asarray(predictions) == np.asarray(references)).mean())


def f1(predictions, references) -> float:
    """Binary F1 of class 1 (scikit-learn's default); 0.0 when class 1 is neither predicted nor true."""
    p, r = np.asarray(predictions) == 1, np.asarray(references) == 1
    tp, errors = np.sum(p & r), np.sum(p != r)
    return float(2 * tp / (2 * tp + errors)) if tp + errors else 0.0


def matthews_correlation(predictions, references) -> float:
    """Multi-class Matthews correlation (Gorodkin's R_K), from the confusion matrix; 0.0 if undefined."""
    classes, pairs = np.unique(np.concatenate([references, predictions]), return_inverse=True)
    truth, pred = np.split(pairs, 2)
    confusion = np.zeros((len(classes), len(classes)), dtype=np.float64)
    np.add.at(confusion, (truth, pred), 1)
    n, correct = confusion.sum(), np.trace(confusion)
    true_counts, pred_counts = confusion.sum(axis=1), confusion.sum(axis=0)
    cov_tp = correct * n - true_counts @ pred_counts
    cov_pp = n * n - pred_counts @ pred_counts
    cov_tt = n * n - true_counts @ true_counts
    if cov_pp * cov_tt == 0:
        return 0.0
    return float(cov_tp / np.sqrt(cov_tt * cov_pp))


def pearson(x, y) -> float:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    x, y = x - x.mean(), y - y.mean()
    r = (x / np.linalg.norm(x)) @ (y / np.linalg.norm(y))
    return float(np.clip(r, -1.0, 1.0))


def average_ranks(x) -> np.ndarray:
    """Ranks starting at 1, ties sharing the mean of the ranks they span (as Spearman needs)."""
    x = np.asarray(x)
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])
    ends = np.r_[starts[1:], len(x)]  # exclusive
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return ranks


def spearman(x, y) -> float:
    return pearson(average_ranks(x), average_ranks(y))


def glue_local(config_name: str, predictions, references) -> dict[str, float]:
    """What `evaluate.load("glue", config_name).compute(...)` returns, computed here."""
    if config_name not in GLUE_METRIC_KEYS:
        raise KeyError(f"unknown GLUE metric config {config_name!r}; allowed: {', '.join(GLUE_METRIC_KEYS)}")
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
    if config_name == "stsb":  # the GLUE metric stores STS-B scores as float32
        p, r = np.asarray(predictions, np.float32), np.asarray(references, np.float32)
        return {"pearson": pearson(p, r), "spearmanr": spearman(p, r)}
    p, r = np.asarray(predictions, np.int64), np.asarray(references, np.int64)
    if config_name == "cola":
        return {"matthews_correlation": matthews_correlation(p, r)}
    if config_name in ("mrpc", "qqp"):
        return {"accuracy": accuracy(p, r), "f1": f1(p, r)}
    return {"accuracy": accuracy(p, r)}


def load_glue_metric(config_name: str, backend: str = "auto"):
    """A function (predictions, references) -> dict for one GLUE metric config.

    backend: "evaluate" (the Hub's GLUE metric, fails offline), "local", or "auto" (evaluate when it
    loads, else local, saying so once).
    """
    if backend not in ("auto", "evaluate", "local"):
        raise ValueError(f"metric backend {backend!r} is invalid; allowed: auto, evaluate, local")
    if config_name not in GLUE_METRIC_KEYS:
        raise KeyError(f"unknown GLUE metric config {config_name!r}; allowed: {', '.join(GLUE_METRIC_KEYS)}")
    if backend != "local":
        try:
            import evaluate

            metric = evaluate.load("glue", config_name)

            def compute(predictions, references):
                return {k: float(v) for k, v in metric.compute(predictions=predictions, references=references).items()}

            return compute
        except Exception as error:  # offline, Hub down, missing scikit-learn/scipy, ...
            if backend == "evaluate":
                raise
            logger.warning("evaluate could not load the GLUE metric (%s: %s); computing it locally",
                           type(error).__name__, str(error).splitlines()[0] if str(error) else "")
    return lambda predictions, references: glue_local(config_name, predictions, references)
