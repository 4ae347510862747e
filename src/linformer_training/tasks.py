# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""The downstream tasks finetune_glue.py knows: where each one's data lives, which columns hold the
text, what its labels are, how it is scored and how its test predictions are submitted; and what turns
a task's raw splits into labelled, tokenized ones and a model's outputs into scores and submissions.

Label names follow the Hub's `nyu-mll/glue` and `stanfordnlp/imdb` datasets (so label ids match
theirs), metrics follow the GLUE metric of `evaluate` (see metrics.py), and submission files follow
the GLUE server: `index<TAB>prediction`, with label names for MNLI, QNLI, RTE and AX, 0/1 for the
other classification tasks and a score in [0, 5] for STS-B.
"""

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import torch
from datasets import ClassLabel
from tqdm.auto import tqdm

from .arguments import UsageError
from .metrics import GLUE_METRIC_KEYS

MNLI_LABELS = ("entailment", "neutral", "contradiction")
RTE_LABELS = ("entailment", "not_entailment")


@dataclass(frozen=True)
class Task:
    name: str
    dataset: tuple[str, ...]  # positional arguments of datasets.load_dataset
    text_columns: tuple[str, ...]  # one column (single sentences) or two (pairs)
    labels: tuple[str, ...] | None  # class names in label-id order; None means regression
    metric: str  # configuration of the GLUE metric that scores it (metrics.GLUE_METRIC_KEYS)
    best_metric: str  # the metric model selection and early stopping watch
    validation_splits: tuple[str, ...] = ("validation",)  # the first one selects the model
    test_splits: dict[str, str] = field(default_factory=dict)  # split -> submission file name
    submit_label_names: bool = False  # write label names (not ids) in the submission file
    train_split: str | None = "train"

    @property
    def is_regression(self) -> bool:
        return self.labels is None

    @property
    def num_labels(self) -> int:
        return 1 if self.labels is None else len(self.labels)

    def format_prediction(self, prediction) -> str:
        """One prediction as the submission file wants it."""
        if self.is_regression:
            return f"{min(max(float(prediction), 0.0), 5.0):.3f}" if self.name == "stsb" else f"{float(prediction):.6g}"
        return self.labels[int(prediction)] if self.submit_label_names else str(int(prediction))


def _glue(name, columns, labels, metric, best, file, **kw):
    return Task(name, ("nyu-mll/glue", name), columns, labels, metric, best, test_splits={"test": file}, **kw)


TASKS = {
    task.name: task
    for task in (
        _glue("cola", ("sentence",), ("unacceptable", "acceptable"), "cola", "matthews_correlation", "CoLA.tsv"),
        _glue("sst2", ("sentence",), ("negative", "positive"), "sst2", "accuracy", "SST-2.tsv"),
        _glue("mrpc", ("sentence1", "sentence2"), ("not_equivalent", "equivalent"), "mrpc", "f1", "MRPC.tsv"),
        _glue("stsb", ("sentence1", "sentence2"), None, "stsb", "pearson", "STS-B.tsv"),
        _glue("qqp", ("question1", "question2"), ("not_duplicate", "duplicate"), "qqp", "accuracy", "QQP.tsv"),
        Task("mnli", ("nyu-mll/glue", "mnli"), ("premise", "hypothesis"), MNLI_LABELS, "mnli", "accuracy",
             validation_splits=("validation_matched", "validation_mismatched"),
             test_splits={"test_matched": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv"},
             submit_label_names=True),
        _glue("qnli", ("question", "sentence"), RTE_LABELS, "qnli", "accuracy", "QNLI.tsv", submit_label_names=True),
        _glue("rte", ("sentence1", "sentence2"), RTE_LABELS, "rte", "accuracy", "RTE.tsv", submit_label_names=True),
        _glue("wnli", ("sentence1", "sentence2"), ("not_entailment", "entailment"), "wnli", "accuracy", "WNLI.tsv"),
        # GLUE's diagnostic set: test only, predicted by a model finetuned on MNLI.
        _glue("ax", ("premise", "hypothesis"), MNLI_LABELS, "mnli", "accuracy", "AX.tsv",
              submit_label_names=True, validation_splits=(), train_split=None),
        # IMDB has no validation split: finetune_glue.py holds one out of train; test is labelled.
        Task("imdb", ("stanfordnlp/imdb",), ("text",), ("neg", "pos"), "sst2", "accuracy",
             validation_splits=(), test_splits={"test": "IMDB.tsv"}),
    )
}

# The paper's downstream table (Wang et al. 2020, Table 3).
PAPER_TASKS = ("sst2", "imdb", "qnli", "qqp")


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise UsageError(f"--task_name {name!r} is unknown; allowed: {', '.join(TASKS)} "
                         f"(or leave it unset and pass --train_file/--validation_file for your own data)")
    return TASKS[name]


def custom_task(text_columns, labels) -> Task:
    """A task for the user's own files. labels: class names in id order, or None for regression.

    Predictions are written as the labels appear in the files. Scored with the matching GLUE metric
    set: binary -> accuracy and F1 (of label id 1), more classes -> accuracy, regression -> Pearson and
    Spearman.
    """
    if labels is None:
        metric, best = "stsb", "pearson"
    else:
        metric, best = ("mrpc" if len(labels) == 2 else "mnli"), "accuracy"
    return Task("custom", (), tuple(text_columns), None if labels is None else tuple(labels), metric, best,
                test_splits={"test": "predictions.tsv"}, submit_label_names=True)


def adapt_task(task, text_columns=None, best_metric=None, local_files=False) -> Task:
    """The task as one run sees it: its text columns renamed, another selection metric, or read from
    local files (whose splits are plain train/validation/test, whatever the Hub calls them)."""
    if text_columns:
        if len(text_columns) != len(task.text_columns):
            raise UsageError(f"--task_name {task.name} has {len(task.text_columns)} text column(s) "
                             f"({', '.join(task.text_columns)}); rename both with --text_column and --text_pair_column")
        task = dataclasses.replace(task, text_columns=tuple(text_columns))
    task = dataclasses.replace(task, best_metric=best_metric or task.best_metric)
    if task.best_metric not in GLUE_METRIC_KEYS[task.metric]:
        raise UsageError(f"--metric_for_best_model {task.best_metric!r} is not computed for this task; "
                         f"allowed: {', '.join(GLUE_METRIC_KEYS[task.metric])}")
    if local_files:
        task = dataclasses.replace(task, validation_splits=("validation",),
                                   test_splits={"test": next(iter(task.test_splits.values()))})
    return task


# ---------------------------------------------------------------------------------------------------
# Labels
# ---------------------------------------------------------------------------------------------------


def is_missing(value) -> bool:
    """An empty cell: JSON null, an empty CSV cell (CSV files are read with "NA" etc. kept as text), NaN."""
    return value is None or (isinstance(value, str) and not value.strip()) or (
        isinstance(value, float) and math.isnan(value))


def check_label_column(dataset, split, column):
    if column not in dataset.column_names:
        raise UsageError(f"{split} split: missing label column {column!r} (--label_column); its columns: "
                         f"{', '.join(dataset.column_names)}")


def check_no_missing_labels(values, split, column):
    missing = [i for i, value in enumerate(values) if is_missing(value)]
    if missing:
        raise UsageError(f"{split} split: missing label in column {column!r} for {len(missing):,} example(s) "
                         f"(the first is example {missing[0]}, counting from 0); label every example or drop it")


def own_task(train, text_columns, label_column, regression=False, trained_labels=None) -> Task:
    """The task of the user's files. Class labels are the train split's values, sorted and named by their
    text; predicting only, they are those the finetuned checkpoint was trained on."""
    if regression:
        return custom_task(text_columns, None)
    if trained_labels is not None:
        return custom_task(text_columns, trained_labels)
    check_label_column(train, "train", label_column)
    values = train[label_column]
    check_no_missing_labels(values, "train", label_column)  # before the type check: NaN is a float
    distinct = set(values)
    if any(isinstance(v, float) for v in distinct):
        raise UsageError(f"train split: the labels in {label_column!r} are real numbers; pass --regression true "
                         f"for regression")
    if -1 in distinct:  # read as a class of its own, it would silently train the unlabelled rows as one
        raise UsageError(f"train split: {sum(v == -1 for v in values):,} example(s) have label -1 in "
                         f"{label_column!r}, which GLUE and `datasets` use for 'unlabelled'; drop them, or if -1 is a "
                         f"class, name the classes (e.g. negative/neutral/positive)")
    return custom_task(text_columns, [str(v) for v in sorted(distinct, key=lambda v: (isinstance(v, str), v))])


def check_model_fits(task, model_config, head, args):
    """The checkpoint's head (if it has one) and --num_labels must agree with the task's labels. `args`: the
    finetuning run's --model_name_or_path, --num_labels, --do_train and --ignore_mismatched_sizes."""
    model_name, num_labels, do_train = args.model_name_or_path, args.num_labels, args.do_train
    ignore_mismatched_sizes = args.ignore_mismatched_sizes
    if num_labels is not None and num_labels != task.num_labels:
        raise UsageError(f"--num_labels {num_labels} does not match the task's {task.num_labels} label(s): "
                         f"{', '.join(task.labels or ['one real-valued score'])}")
    if head and model_config.num_labels != task.num_labels and not (do_train and ignore_mismatched_sizes):
        raise UsageError(f"{model_name} has a classification head for {model_config.num_labels} label(s) but the "
                         f"task has {task.num_labels}; " + ("pass --ignore_mismatched_sizes true to train a new head"
                                                            if do_train else "it was not finetuned on this task"))
    trained = [model_config.id2label[i] for i in range(model_config.num_labels)]
    if (not do_train and task.labels and trained != list(task.labels)
            and not all(name == f"LABEL_{i}" for i, name in enumerate(trained))):
        raise UsageError(f"{model_name} predicts the labels {trained}, the task has {list(task.labels)}: it was "
                         f"not finetuned on this task")


def label_ids(values, labels, split, column, allow_ids):
    """Class labels as ids: by name (own data's numeric labels are named by their text) or, where
    `allow_ids`, as ids 0..K-1 (-1 = unlabelled). Anything else is a clear error."""
    names = {name: i for i, name in enumerate(labels)}
    out = []
    for value in values:
        if str(value) in names:
            out.append(names[str(value)])
        elif (allow_ids and isinstance(value, (int, np.integer)) and not isinstance(value, bool)
              and -1 <= value < len(labels)):
            out.append(int(value))
        else:
            raise UsageError(f"{split} split: label {value!r} in column {column!r} is not one of the task's "
                             f"{len(labels)} labels ({', '.join(labels)})"
                             + (f" nor a label id 0..{len(labels) - 1}" if allow_ids else ""))
    return out


def attach_labels(task, dataset, split, column):
    """(dataset, labelled): the split with its label column turned into `labels` (ids, or floats for
    regression); an unlabelled test split (no label column, only empty cells, or GLUE's -1) comes back
    without labels, to be predicted only."""
    if column not in dataset.column_names:
        if split in task.test_splits:
            return dataset, False
        check_label_column(dataset, split, column)
    feature, values = dataset.features[column], list(dataset[column])
    dataset = dataset.remove_columns(column)
    if split in task.test_splits and all(is_missing(v) for v in values):
        return dataset, False
    check_no_missing_labels(values, split, column)
    if isinstance(feature, ClassLabel) and task.labels and list(feature.names) != list(task.labels):
        raise UsageError(f"{split} split has labels {feature.names}, the {task.name} task {list(task.labels)}")
    if task.is_regression:
        if any(not isinstance(v, (int, float)) or isinstance(v, bool) for v in values):
            raise UsageError(f"{split} split: column {column!r} must hold numbers for regression")
        values = np.asarray(values, dtype=np.float32)
    else:
        default_names = all(name == f"LABEL_{i}" for i, name in enumerate(task.labels))
        values = np.asarray(label_ids(values, task.labels, split, column,
                                      allow_ids=task.name != "custom" or default_names))
    if (values == -1).all():  # GLUE's unlabelled test splits
        return dataset, False
    if not task.is_regression and (values == -1).any():
        raise UsageError(f"{split} split: {(values == -1).sum()} rows have label -1 (unlabelled)")
    return dataset.add_column("labels", values.tolist()), True


# ---------------------------------------------------------------------------------------------------
# Tokenization, prediction, scoring, submission
# ---------------------------------------------------------------------------------------------------


def tokenize_split(dataset, split, tokenizer, columns, max_len, truncation, keep_token_types):
    """Tokenize without padding; inputs over max_len tokens are cut by `truncation` and counted.
    Returns (dataset, how many examples were longer than max_len)."""

    def encode(batch):
        texts = [batch[c] for c in columns]
        for column, values in zip(columns, texts, strict=True):
            if not all(isinstance(v, str) for v in values):
                raise UsageError(f"{split} split: text column {column!r} has an empty or non-text value")
        # An input is too long exactly when cutting it at max_len + 1 still leaves max_len + 1 tokens.
        enc = tokenizer(*texts, truncation="longest_first", max_length=max_len + 1)
        long = [i for i, ids in enumerate(enc["input_ids"]) if len(ids) > max_len]
        if long:
            strategy = "longest_first" if truncation == "none" else truncation  # "none" fails after counting
            cut = tokenizer(*[[t[i] for i in long] for t in texts], truncation=strategy, max_length=max_len)
            for key in enc:
                for j, i in enumerate(long):
                    enc[key][i] = cut[key][j]
        if not keep_token_types:  # RoBERTa-style models have one token type
            enc.pop("token_type_ids", None)
        flagged = set(long)
        return {**enc, "truncated": [i in flagged for i in range(len(texts[0]))]}

    encoded = dataset.map(encode, batched=True, remove_columns=[c for c in dataset.column_names if c != "labels"],
                          desc=f"tokenizing {split}")
    return encoded.remove_columns("truncated"), int(sum(encoded["truncated"]))


def predict(model, loader, accelerator, is_regression, desc="predicting"):
    """Predictions (and labels, if the split has them) for a whole split, gathered over processes."""
    model.eval()
    preds, refs = [], []
    for batch in tqdm(loader, desc=desc, leave=False, disable=not accelerator.is_local_main_process):
        labels = batch.pop("labels", None)
        with torch.no_grad():
            logits = accelerator.gather_for_metrics(model(**batch).logits)
        preds.append((logits.squeeze(-1) if is_regression else logits.argmax(-1)).float().cpu().numpy())
        if labels is not None:
            refs.append(accelerator.gather_for_metrics(labels).cpu().numpy())
    return np.concatenate(preds), (np.concatenate(refs) if refs else None)


class ClassificationObjective:
    """Sequence classification (or regression) for `loop.train`: the loss averaged over examples, scored
    by the task's GLUE metric. The loop's validation loader gives the metrics that select the model, under
    their plain names; `other_loaders` (MNLI's mismatched split) are reported as `split/metric`."""

    def __init__(self, task, metric, other_loaders=None):
        self.task, self.metric, self.other_loaders = task, metric, dict(other_loaders or {})

    def count(self, batch):
        return torch.tensor(len(batch["labels"]))

    def loss_sum(self, model, batch):
        return model(**batch).loss * len(batch["labels"])

    def score(self, model, loader, accelerator, desc="evaluating"):
        return self.metric(*predict(model, loader, accelerator, self.task.is_regression, desc))

    def evaluate(self, model, loader, accelerator):
        metrics = self.score(model, loader, accelerator)
        for split, other in self.other_loaders.items():
            scores = self.score(model, other, accelerator, f"evaluating {split}")
            metrics.update({f"{split}/{k}": v for k, v in scores.items()})
        return metrics


def split_metrics(metrics, splits):
    """`evaluate`'s flat metrics per split: plain names belong to the first split, `split/name` to that one."""
    per_split = {split: {} for split in splits}
    for key, value in metrics.items():
        split, _, name = key.rpartition("/")
        per_split[split or splits[0]][name] = value
    return per_split


def submission(task, index, predictions) -> str:
    """A GLUE-server submission file: a header, then `index<TAB>prediction` per example."""
    rows = zip(index, predictions, strict=True)
    return "index\tprediction\n" + "".join(f"{i}\t{task.format_prediction(p)}\n" for i, p in rows)
