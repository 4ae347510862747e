"""The task table: GLUE's columns, label sets, metrics and submission format."""

import pytest

from linformer_hf.glue_tasks import PAPER_TASKS, TASKS, custom_task, get_task
from linformer_hf.metrics import GLUE_METRIC_KEYS


def test_all_nine_glue_tasks_imdb_and_the_diagnostic_set_are_known():
    assert set(TASKS) == {"cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli", "ax", "imdb"}
    assert set(PAPER_TASKS) <= set(TASKS)
    for task in TASKS.values():
        assert task.best_metric in GLUE_METRIC_KEYS[task.metric]
        assert 1 <= len(task.text_columns) <= 2


@pytest.mark.parametrize("name, columns, labels, metric_keys", [
    ("cola", ("sentence",), ("unacceptable", "acceptable"), ("matthews_correlation",)),
    ("sst2", ("sentence",), ("negative", "positive"), ("accuracy",)),
    ("mrpc", ("sentence1", "sentence2"), ("not_equivalent", "equivalent"), ("accuracy", "f1")),
    ("stsb", ("sentence1", "sentence2"), None, ("pearson", "spearmanr")),
    ("qqp", ("question1", "question2"), ("not_duplicate", "duplicate"), ("accuracy", "f1")),
    ("mnli", ("premise", "hypothesis"), ("entailment", "neutral", "contradiction"), ("accuracy",)),
    ("qnli", ("question", "sentence"), ("entailment", "not_entailment"), ("accuracy",)),
    ("rte", ("sentence1", "sentence2"), ("entailment", "not_entailment"), ("accuracy",)),
    ("wnli", ("sentence1", "sentence2"), ("not_entailment", "entailment"), ("accuracy",)),
    ("imdb", ("text",), ("neg", "pos"), ("accuracy",)),
])
def test_columns_labels_and_metrics_match_the_hub_datasets(name, columns, labels, metric_keys):
    task = get_task(name)
    assert task.text_columns == columns
    assert task.labels == labels
    assert task.num_labels == (1 if labels is None else len(labels))
    assert GLUE_METRIC_KEYS[task.metric] == metric_keys


def test_mnli_is_evaluated_matched_and_mismatched_and_submitted_as_two_files():
    mnli = get_task("mnli")
    assert mnli.validation_splits == ("validation_matched", "validation_mismatched")
    assert mnli.test_splits == {"test_matched": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv"}
    assert get_task("ax").train_split is None and get_task("ax").test_splits == {"test": "AX.tsv"}
    assert get_task("imdb").validation_splits == ()  # held out of train by finetune_glue.py


def test_submission_format():
    assert get_task("mnli").format_prediction(2) == "contradiction"
    assert get_task("rte").format_prediction(1) == "not_entailment"
    assert get_task("qnli").format_prediction(0) == "entailment"
    assert get_task("sst2").format_prediction(1) == "1"
    assert get_task("wnli").format_prediction(1) == "1"
    assert get_task("cola").format_prediction(0.0) == "0"
    assert get_task("stsb").format_prediction(5.7) == "5.000"  # clipped to the scale
    assert get_task("stsb").format_prediction(-0.2) == "0.000"
    assert get_task("stsb").format_prediction(3.14159) == "3.142"
    files = [f for t in TASKS.values() for f in t.test_splits.values()]
    assert {"CoLA.tsv", "SST-2.tsv", "MRPC.tsv", "STS-B.tsv", "QQP.tsv", "MNLI-m.tsv", "MNLI-mm.tsv",
            "QNLI.tsv", "RTE.tsv", "WNLI.tsv", "AX.tsv"} <= set(files)


def test_unknown_task_names_the_allowed_ones():
    with pytest.raises(ValueError, match=r"--task_name 'sst-2' is unknown; allowed: cola, sst2"):
        get_task("sst-2")


def test_custom_tasks_pick_the_metric_set_by_label_count():
    binary = custom_task(("text",), ["neg", "pos"])
    assert (binary.metric, binary.best_metric, binary.num_labels) == ("mrpc", "accuracy", 2)
    assert binary.format_prediction(1) == "pos"  # written as the files name the label
    assert custom_task(("a", "b"), ["x", "y", "z"]).metric == "mnli"
    regression = custom_task(("text",), None)
    assert (regression.metric, regression.best_metric, regression.is_regression) == ("stsb", "pearson", True)
    assert regression.format_prediction(7.25) == "7.25"  # no STS-B clipping for own data
