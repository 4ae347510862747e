# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""The task table (GLUE's columns, label sets, metrics and submission format) and what finetuning does with a
task: labels, the classification objective, submission files."""

import types

import pytest
import torch

from linformer_training.arguments import UsageError
from linformer_training.metrics import GLUE_METRIC_KEYS, load_glue_metric
from linformer_training.tasks import (
    PAPER_TASKS,
    TASKS,
    ClassificationObjective,
    adapt_task,
    attach_labels,
    custom_task,
    get_task,
    own_task,
    split_metrics,
    submission,
)


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


# --- what finetune_glue.py does with a task -------------------------------------------------------


def test_adapt_task_renames_columns_checks_the_metric_and_reads_local_splits():
    mnli = get_task("mnli")
    local = adapt_task(mnli, ("p", "h"), "accuracy", local_files=True)
    assert local.text_columns == ("p", "h") and local.validation_splits == ("validation",)
    assert local.test_splits == {"test": "MNLI-m.tsv"}
    assert adapt_task(mnli) == mnli
    with pytest.raises(UsageError, match=r"--task_name mnli has 2 text column\(s\) \(premise, hypothesis\)"):
        adapt_task(mnli, ("text",))
    with pytest.raises(UsageError, match=r"--metric_for_best_model 'f1' is not computed for this task; "
                                         r"allowed: accuracy"):
        adapt_task(mnli, best_metric="f1")


def test_own_labels_are_sorted_named_by_their_text_and_never_missing():
    from datasets import Dataset

    task = own_task(Dataset.from_dict({"text": list("abcd"), "label": [2, 10, 2, 1]}), ("text",), "label")
    assert task.labels == ("1", "2", "10") and task.metric == "mnli"  # numbers sort as numbers
    for values, message in [([1.5, 2.0], "real numbers; pass --regression true"),
                            ([1.0, float("nan")], r"missing label in column 'label' for 1 example\(s\)"),
                            (["pos", ""], r"train split: missing label in column 'label' for 1 example\(s\) "
                                          r"\(the first is example 1"),
                            (["pos", None], "missing label")]:
        with pytest.raises(UsageError, match=message):
            own_task(Dataset.from_dict({"text": ["a", "b"], "label": values}), ("text",), "label")
    with pytest.raises(UsageError, match=r"train split: missing label column 'stars' \(--label_column\); its columns: "
                                         r"text, label"):
        own_task(Dataset.from_dict({"text": ["a"], "label": ["x"]}), ("text",), "stars")
    assert own_task(None, ("text",), "label", regression=True).is_regression
    assert own_task(None, ("text",), "label", trained_labels=["neg", "pos"]).labels == ("neg", "pos")


def test_attach_labels_maps_names_and_ids_and_leaves_unlabelled_test_splits_to_predict():
    from datasets import Dataset

    sst2, own = get_task("sst2"), custom_task(("text",), ["neg", "pos"])
    for values in (["positive", "negative"], [1, 0]):  # a known task's labels: by name or by id
        labelled, has = attach_labels(sst2, Dataset.from_dict({"sentence": ["a", "b"], "label": values}),
                                      "validation", "label")
        assert has and labelled["labels"] == [1, 0] and "label" not in labelled.column_names
    for task, dataset in ((own, Dataset.from_dict({"text": ["a", "b"]})),
                          (own, Dataset.from_dict({"text": ["a", "b"], "label": [None, None]})),
                          (sst2, Dataset.from_dict({"sentence": ["a", "b"], "label": [-1, -1]}))):  # GLUE's test sets
        unlabelled, has = attach_labels(task, dataset, "test", "label")
        assert not has and unlabelled.column_names == dataset.column_names[:1]
    with pytest.raises(UsageError, match="validation split: missing label column 'label'"):
        attach_labels(own, Dataset.from_dict({"text": ["a"]}), "validation", "label")
    with pytest.raises(UsageError, match=r"label 1 in column 'label' is not one of the task's 2 labels \(neg, pos\)$"):
        attach_labels(own, Dataset.from_dict({"text": ["a"], "label": [1]}), "train", "label")  # own labels: by name
    with pytest.raises(UsageError, match="test split: missing label in column 'label' for 1 example"):
        attach_labels(own, Dataset.from_dict({"text": ["a", "b"], "label": ["pos", ""]}), "test", "label")
    scores, has = attach_labels(get_task("stsb"), Dataset.from_dict({"sentence1": ["a"], "label": [3.5]}), "train",
                                "label")
    assert has and scores["labels"] == [3.5]


class _Accelerator:
    """What `predict` uses of an Accelerator, on one process."""

    is_local_main_process = True

    @staticmethod
    def gather_for_metrics(tensor):
        return tensor


class _Classifier(torch.nn.Module):
    """Logits that favour class `input_ids[:, 0] % 2`; loss 0.5 per batch."""

    def forward(self, input_ids, attention_mask=None, labels=None):
        logits = torch.nn.functional.one_hot(input_ids[:, 0] % 2, 2).float()
        return types.SimpleNamespace(logits=logits, loss=torch.tensor(0.5))


def test_classification_objective_counts_examples_and_scores_every_validation_split():
    objective = ClassificationObjective(get_task("mnli"), load_glue_metric("mnli"),
                                        other_loaders={"validation_mismatched": [
                                            {"input_ids": torch.tensor([[1], [0]]), "labels": torch.tensor([0, 0])}]})
    batch = {"input_ids": torch.tensor([[1], [0], [1]]), "labels": torch.tensor([1, 0, 0])}
    assert objective.count(batch).item() == 3 and objective.loss_sum(_Classifier(), batch).item() == pytest.approx(1.5)
    metrics = objective.evaluate(_Classifier(), [batch], _Accelerator())
    assert metrics == {"accuracy": pytest.approx(2 / 3), "validation_mismatched/accuracy": 0.5}
    assert split_metrics(metrics, ["validation_matched", "validation_mismatched"]) == {
        "validation_matched": {"accuracy": pytest.approx(2 / 3)}, "validation_mismatched": {"accuracy": 0.5}}


def test_submission_files_list_each_index_and_prediction():
    assert submission(get_task("mnli"), [7, 9], [2, 0]) == "index\tprediction\n7\tcontradiction\n9\tentailment\n"
    assert submission(get_task("stsb"), [0], [5.5]) == "index\tprediction\n0\t5.000\n"
