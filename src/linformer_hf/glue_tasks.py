"""The downstream tasks finetune_glue.py knows: where each one's data lives, which columns hold the
text, what its labels are, how it is scored and how its test predictions are submitted.

Label names follow the Hub's `nyu-mll/glue` and `stanfordnlp/imdb` datasets (so label ids match
theirs), metrics follow the GLUE metric of `evaluate` (see metrics.py), and submission files follow
the GLUE server: `index<TAB>prediction`, with label names for MNLI, QNLI, RTE and AX, 0/1 for the
other classification tasks and a score in [0, 5] for STS-B.
"""

from dataclasses import dataclass, field

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
        raise ValueError(f"--task_name {name!r} is unknown; allowed: {', '.join(TASKS)} "
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
