"""The local GLUE metrics must give the numbers scikit-learn/scipy (what the Hub's GLUE metric calls) give."""

import numpy as np
import pytest

from linformer_hf import metrics

sklearn_metrics = pytest.importorskip("sklearn.metrics")
stats = pytest.importorskip("scipy.stats")

rng = np.random.default_rng(0)
BINARY = [(rng.integers(0, 2, 200), rng.integers(0, 2, 200)),
          (np.array([1, 1, 0, 0, 1]), np.array([1, 0, 0, 1, 1])),
          (np.zeros(10, int), np.ones(10, int)),  # nothing predicted positive
          (np.zeros(10, int), np.zeros(10, int))]  # no positives at all: F1 and MCC are 0 by convention
MULTI = [(rng.integers(0, 3, 300), rng.integers(0, 3, 300)), (np.array([0, 1, 2, 2]), np.array([0, 2, 1, 2]))]
SCORES = [(rng.normal(size=100), rng.normal(size=100)),
          (rng.integers(0, 6, 80).astype(float), rng.integers(0, 6, 80).astype(float)),  # many ties
          (np.arange(10.0), np.arange(10.0) ** 3)]  # monotone: Spearman 1, Pearson < 1


@pytest.mark.parametrize("preds, refs", BINARY)
def test_binary_metrics_match_sklearn(preds, refs):
    assert metrics.accuracy(preds, refs) == pytest.approx(sklearn_metrics.accuracy_score(refs, preds), abs=1e-12)
    assert metrics.f1(preds, refs) == pytest.approx(sklearn_metrics.f1_score(refs, preds, zero_division=0), abs=1e-12)
    assert metrics.matthews_correlation(preds, refs) == pytest.approx(
        sklearn_metrics.matthews_corrcoef(refs, preds), abs=1e-12)


@pytest.mark.parametrize("preds, refs", MULTI)
def test_multiclass_matthews_matches_sklearn(preds, refs):
    assert metrics.matthews_correlation(preds, refs) == pytest.approx(
        sklearn_metrics.matthews_corrcoef(refs, preds), abs=1e-12)


@pytest.mark.parametrize("x, y", SCORES)
def test_correlations_match_scipy(x, y):
    np.testing.assert_allclose(metrics.average_ranks(x), stats.rankdata(x))
    assert metrics.pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
    assert metrics.spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)


def test_glue_local_returns_the_glue_metric_keys_and_values():
    preds, refs = BINARY[0]
    assert metrics.glue_local("cola", preds, refs) == {
        "matthews_correlation": pytest.approx(sklearn_metrics.matthews_corrcoef(refs, preds), abs=1e-12)}
    assert metrics.glue_local("qqp", preds, refs) == {
        "accuracy": pytest.approx(sklearn_metrics.accuracy_score(refs, preds), abs=1e-12),
        "f1": pytest.approx(sklearn_metrics.f1_score(refs, preds), abs=1e-12)}
    assert set(metrics.glue_local("mnli", *MULTI[0])) == {"accuracy"}
    x, y = SCORES[0]
    x32, y32 = x.astype(np.float32), y.astype(np.float32)  # the GLUE metric stores STS-B scores as float32
    assert metrics.glue_local("stsb", x, y) == {"pearson": pytest.approx(stats.pearsonr(x32, y32)[0], abs=1e-7),
                                                "spearmanr": pytest.approx(stats.spearmanr(x32, y32)[0], abs=1e-12)}
    for name, keys in metrics.GLUE_METRIC_KEYS.items():
        assert tuple(metrics.glue_local(name, *SCORES[1] if name == "stsb" else BINARY[0])) == keys


def test_load_glue_metric_falls_back_to_local_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    compute = metrics.load_glue_metric("mrpc")  # evaluate cannot fetch the GLUE script offline
    assert compute([1, 0, 1, 1], [1, 0, 0, 1]) == {"accuracy": 0.75, "f1": pytest.approx(0.8)}
    assert metrics.load_glue_metric("sst2", backend="local")([1, 0], [1, 1]) == {"accuracy": 0.5}


def test_bad_metric_requests_are_rejected():
    with pytest.raises(KeyError, match="allowed: cola"):
        metrics.glue_local("squad", [1], [1])
    with pytest.raises(ValueError, match="allowed: auto, evaluate, local"):
        metrics.load_glue_metric("sst2", backend="sklearn")
    with pytest.raises(ValueError, match="3 predictions for 2 references"):
        metrics.glue_local("sst2", [1, 0, 1], [1, 0])
