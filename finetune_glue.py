"""Finetune and evaluate an encoder (Linformer, RoBERTa, BERT, ...) on GLUE, IMDB or your own labelled text.

    python finetune_glue.py --model_name_or_path outputs/linformer-base --task_name sst2
    python finetune_glue.py --model_name_or_path roberta-base --task_name imdb --max_seq_length 512
    python finetune_glue.py --model_name_or_path ckpt --train_file train.csv --validation_file dev.csv \
        --text_column sentence --label_column label
    accelerate launch finetune_glue.py --model_name_or_path ckpt --task_name qqp --mixed_precision bf16

Writes to --output_dir the best model (by the task's validation metric, save_pretrained: safetensors,
tokenizer and, for Linformer, its modeling code), eval_results.json (metrics per split and how many
examples were truncated), test predictions in the GLUE submission format under predictions/, and the
training log (log.jsonl, TensorBoard under runs/). `--do_train false` only evaluates and predicts.
Bad input (task, columns, labels, lengths, tokenizer) is rejected before any training starts.
"""

import dataclasses
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from accelerate import Accelerator
from accelerate.utils import ProjectConfiguration, set_seed
from datasets import ClassLabel, DatasetDict, load_dataset
from torch.utils.data import DataLoader
from tqdm.auto import tqdm
from transformers import (AutoConfig, AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding,
                          SchedulerType, get_scheduler)

import linformer_hf  # noqa: F401  (registers Linformer with the Auto classes)
from linformer_hf import script_utils
from linformer_hf.glue_tasks import TASKS, custom_task, get_task
from linformer_hf.metrics import GLUE_METRIC_KEYS, load_glue_metric
from linformer_hf.script_utils import UsageError


@dataclass
class FinetuneConfig:
    """Finetune and evaluate a sequence classifier on GLUE, IMDB or local CSV/JSON(L)/parquet files.

    The paper gives no finetuning hyperparameters; the defaults are those of RoBERTa (Liu et al. 2019,
    Appendix C), whose setup it pretrains with: AdamW (betas 0.9/0.98, eps 1e-6, weight decay 0.1),
    learning rate 2e-5 with a 6% warmup then linear decay, batch 32, a few epochs, best epoch kept.
    """

    model_name_or_path: str = field(default="", metadata={"help": "pretrained checkpoint: local folder or Hub name"})
    tokenizer_name: str | None = field(default=None, metadata={"help": "tokenizer, if not the checkpoint's own"})
    trust_remote_code: bool = False
    config_overrides: str | None = field(default=None, metadata={
        "help": "comma-separated key=value settings applied to the checkpoint's config before the model is "
                "built, e.g. projection_length_scaling=sqrt,hidden_dropout_prob=0.2"})
    # Data: a known task (GLUE, IMDB) from the Hub or from local files, or your own files.
    task_name: str | None = field(default=None, metadata={"help": f"one of {', '.join(TASKS)}"})
    dataset_name: str | None = field(default=None, metadata={"help": "override the task's Hub dataset"})
    dataset_config_name: str | None = None
    train_file: str | None = field(default=None, metadata={"help": ".csv, .tsv, .json, .jsonl or .parquet"})
    validation_file: str | None = None
    test_file: str | None = None
    text_column: str | None = field(default=None, metadata={"help": "text column (required for own data)"})
    text_pair_column: str | None = field(default=None, metadata={"help": "second text column, for pairs"})
    label_column: str = "label"
    regression: bool = field(default=False, metadata={"help": "own data: labels are real numbers"})
    num_labels: int | None = field(default=None, metadata={"help": "if set, must match the labels found"})
    validation_split_percentage: float = field(
        default=5.0, metadata={"help": "percent of train held out for model selection when there is no validation split"})
    max_seq_length: int | None = field(default=None, metadata={"help": "default and maximum: the model's limit"})
    truncation: Literal["longest_first", "only_first", "only_second", "none"] = field(
        default="longest_first", metadata={"help": "how longer inputs are cut (counted and reported); none: error"})
    max_train_samples: int | None = None
    max_eval_samples: int | None = None
    max_predict_samples: int | None = None
    # What to do.
    do_train: bool = True
    do_eval: bool = True
    do_predict: bool = True
    # Optimisation.
    learning_rate: float = 2e-5
    weight_decay: float = 0.1
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_epsilon: float = 1e-6
    max_grad_norm: float = 1.0
    num_train_epochs: int = 3
    max_train_steps: int | None = field(default=None, metadata={"help": "overrides num_train_epochs"})
    warmup_ratio: float = 0.06
    lr_scheduler_type: str = "linear"
    per_device_train_batch_size: int = 32
    per_device_eval_batch_size: int = 64
    gradient_accumulation_steps: int = 1
    mixed_precision: Literal["no", "fp16", "bf16"] = "no"
    seed: int = 42
    # Model selection.
    eval_steps: int | None = field(default=None, metadata={"help": "evaluate every N updates (default: each epoch)"})
    metric_for_best_model: str | None = field(default=None, metadata={"help": "default: the task's metric"})
    early_stopping_patience: int | None = field(
        default=None, metadata={"help": "stop after N evaluations without improvement"})
    ignore_mismatched_sizes: bool = field(
        default=False, metadata={"help": "replace a classification head that has a different number of labels"})
    metric_backend: Literal["auto", "evaluate", "local"] = "auto"
    # Output.
    output_dir: str = "outputs/finetune"
    logging_steps: int = 50
    report_to: str = "tensorboard"
    push_to_hub: bool = False
    hub_model_id: str | None = field(default=None, metadata={"help": "default: the output folder's name"})


FILE_FORMATS = {".csv": ("csv", {}), ".tsv": ("csv", {"delimiter": "\t", "quoting": 3}),
                ".json": ("json", {}), ".jsonl": ("json", {}), ".parquet": ("parquet", {})}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "vocab.txt", "spiece.model",
                   "sentencepiece.bpe.model", "tokenizer.model")
ROBERTA_LIKE = ("roberta", "xlm-roberta", "camembert", "longformer", "data2vec-text", "xmod")


def check_args(cfg):
    """Argument errors that need no data and no model."""
    if not cfg.model_name_or_path:
        raise UsageError("--model_name_or_path is required (a local checkpoint folder or a Hub model name)")
    files = {"train": cfg.train_file, "validation": cfg.validation_file, "test": cfg.test_file}
    if cfg.task_name is None and not any(files.values()):
        raise UsageError(f"pass --task_name (one of {', '.join(TASKS)}) or --train_file/--validation_file/--test_file")
    if cfg.task_name is None and cfg.text_column is None:
        raise UsageError("your own data needs --text_column (and --text_pair_column for sentence pairs)")
    if cfg.task_name is not None and cfg.regression:
        raise UsageError(f"--regression is for your own data; --task_name {cfg.task_name} defines its labels")
    if not (cfg.do_train or cfg.do_eval or cfg.do_predict):
        raise UsageError("nothing to do: --do_train, --do_eval and --do_predict are all false")
    if cfg.push_to_hub and not cfg.do_train:
        raise UsageError("--push_to_hub uploads the finetuned model, so it needs --do_train true")
    if cfg.do_train and cfg.task_name is None and not cfg.train_file:
        raise UsageError("--do_train needs --train_file (or pass --do_train false to only evaluate/predict)")
    for flag in ("num_train_epochs", "per_device_train_batch_size", "per_device_eval_batch_size",
                 "gradient_accumulation_steps", "logging_steps"):
        if getattr(cfg, flag) < 1:
            raise UsageError(f"--{flag} must be at least 1")
    if cfg.lr_scheduler_type not in {t.value for t in SchedulerType}:
        raise UsageError(f"--lr_scheduler_type {cfg.lr_scheduler_type!r} is unknown; allowed: "
                         f"{', '.join(t.value for t in SchedulerType)}")
    if cfg.max_seq_length is not None and cfg.max_seq_length < 8:
        raise UsageError("--max_seq_length must be at least 8 tokens")
    if not 0 <= cfg.validation_split_percentage < 100:
        raise UsageError("--validation_split_percentage must be in [0, 100)")
    for split, path in files.items():
        if path and not Path(path).is_file():
            raise UsageError(f"--{split}_file {path}: no such file")
        if path and Path(path).suffix.lower() not in FILE_FORMATS:
            raise UsageError(f"--{split}_file {path}: unsupported format; allowed: {', '.join(FILE_FORMATS)}")


def load_raw(cfg, task):
    """Local files as splits `train`/`validation`/`test`, or the task's dataset with its own split names."""
    files = {"train": cfg.train_file, "validation": cfg.validation_file, "test": cfg.test_file}
    if any(files.values()):
        raw = DatasetDict()
        for split, path in files.items():
            if path:
                builder, kwargs = FILE_FORMATS[Path(path).suffix.lower()]
                raw[split] = load_dataset(builder, data_files=str(path), split="train", **kwargs)
        return raw
    name = [n for n in ((cfg.dataset_name, cfg.dataset_config_name) if cfg.dataset_name else task.dataset) if n]
    try:
        return load_dataset(*name)
    except Exception as error:  # offline, unknown name, ...
        raise UsageError(f"could not load dataset {'/'.join(name)} ({type(error).__name__}: {error}); without "
                         f"the Hub, pass the task's data as --train_file/--validation_file/--test_file") from error


def model_length_limit(config):
    """Longest input the model accepts: Linformer's n, else its position table (RoBERTa's is offset)."""
    if getattr(config, "max_seq_length", None):
        return config.max_seq_length
    if config.model_type in ROBERTA_LIKE:
        return config.max_position_embeddings - config.pad_token_id - 1
    return config.max_position_embeddings


def own_task(cfg, raw, model_config):
    """The task of the user's files. Class labels: the train split's values, sorted (or, with no training,
    those the finetuned checkpoint was trained on), named by their text."""
    columns = (cfg.text_column,) + ((cfg.text_pair_column,) if cfg.text_pair_column else ())
    if cfg.regression:
        return custom_task(columns, None)
    if not cfg.do_train:
        return custom_task(columns, [model_config.id2label[i] for i in range(model_config.num_labels)])
    if cfg.label_column not in raw["train"].column_names:
        raise UsageError(f"train split has no label column {cfg.label_column!r} (--label_column); its columns: "
                         f"{', '.join(raw['train'].column_names)}")
    values = set(raw["train"][cfg.label_column])
    if any(isinstance(v, float) for v in values):
        raise UsageError(f"the labels in {cfg.label_column!r} are real numbers; pass --regression true for regression")
    if None in values:
        raise UsageError(f"train split: column {cfg.label_column!r} has empty labels")
    return custom_task(columns, [str(v) for v in sorted(values, key=lambda v: (isinstance(v, str), v))])


def check_model_fits(cfg, task, model_config, head):
    """The checkpoint's head (if it has one) and --num_labels must agree with the task's labels."""
    if cfg.num_labels is not None and cfg.num_labels != task.num_labels:
        raise UsageError(f"--num_labels {cfg.num_labels} does not match the task's {task.num_labels} label(s): "
                         f"{', '.join(task.labels or ['one real-valued score'])}")
    if head and model_config.num_labels != task.num_labels and not (cfg.do_train and cfg.ignore_mismatched_sizes):
        raise UsageError(f"{cfg.model_name_or_path} has a classification head for {model_config.num_labels} "
                         f"label(s) but the task has {task.num_labels}; " + (
                             "pass --ignore_mismatched_sizes true to train a new head" if cfg.do_train
                             else "it was not finetuned on this task"))
    trained = [model_config.id2label[i] for i in range(model_config.num_labels)]
    if (not cfg.do_train and task.labels and trained != list(task.labels)
            and not all(name == f"LABEL_{i}" for i, name in enumerate(trained))):
        raise UsageError(f"{cfg.model_name_or_path} predicts the labels {trained}, the task has "
                         f"{list(task.labels)}: it was not finetuned on this task")


def label_ids(values, labels, split, column, allow_ids):
    """Class labels as ids: by name (own data's numeric labels are named by their text) or, where
    `allow_ids`, as ids 0..K-1 (-1 = unlabelled). Anything else is a clear error."""
    names = {name: i for i, name in enumerate(labels)}
    out = []
    for value in values:
        if str(value) in names:
            out.append(names[str(value)])
        elif allow_ids and isinstance(value, (int, np.integer)) and not isinstance(value, bool) and \
                -1 <= value < len(labels):
            out.append(int(value))
        else:
            raise UsageError(f"{split} split: label {value!r} in column {column!r} is not one of the task's "
                             f"{len(labels)} labels ({', '.join(labels)})"
                             + (f" nor a label id 0..{len(labels) - 1}" if allow_ids else ""))
    return out


def prepare_labels(cfg, task, raw, splits):
    """Turn each split's label column into `labels` (ids or floats). Returns the labelled splits; a test
    split without labels (no column, or GLUE's all -1) is only predicted."""
    labelled = []
    for split in splits:
        if cfg.label_column not in raw[split].column_names:
            if split not in task.test_splits:
                raise UsageError(f"{split} split has no label column {cfg.label_column!r} (--label_column); "
                                 f"its columns: {', '.join(raw[split].column_names)}")
            continue
        feature, values = raw[split].features[cfg.label_column], list(raw[split][cfg.label_column])
        if isinstance(feature, ClassLabel) and task.labels and list(feature.names) != list(task.labels):
            raise UsageError(f"{split} split has labels {feature.names}, the {task.name} task {list(task.labels)}")
        if task.is_regression:
            if any(not isinstance(v, (int, float)) for v in values):
                raise UsageError(f"{split} split: column {cfg.label_column!r} must hold numbers for regression")
            values = np.asarray(values, dtype=np.float32)
        else:
            default_names = all(name == f"LABEL_{i}" for i, name in enumerate(task.labels))
            values = np.asarray(label_ids(values, task.labels, split, cfg.label_column,
                                          allow_ids=task.name != "custom" or default_names))
        raw[split] = raw[split].remove_columns(cfg.label_column)
        if (values == -1).all():  # GLUE's unlabelled test splits
            continue
        if not task.is_regression and (values == -1).any():
            raise UsageError(f"{split} split: {(values == -1).sum()} rows have label -1 (unlabelled)")
        raw[split] = raw[split].add_column("labels", values.tolist())
        labelled.append(split)
    return labelled


def tokenize_split(dataset, split, tokenizer, columns, max_len, truncation, keep_token_types):
    """Tokenize without padding; inputs over max_len tokens are cut by `truncation` and flagged."""

    def encode(batch):
        texts = [batch[c] for c in columns]
        for column, values in zip(columns, texts):
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

    return dataset.map(encode, batched=True, remove_columns=[c for c in dataset.column_names if c != "labels"],
                       desc=f"tokenizing {split}")


def predict(accelerator, model, loader, is_regression, desc):
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


def main(argv=None):
    cfg = script_utils.parse_config(FinetuneConfig, argv, prog="finetune_glue.py")
    check_args(cfg)
    try:
        task = get_task(cfg.task_name) if cfg.task_name else None
    except ValueError as error:
        raise UsageError(str(error)) from None
    trackers = script_utils.resolve_trackers(cfg.report_to)
    output_dir = script_utils.ensure_writable_dir(cfg.output_dir)
    if task and cfg.do_train and task.train_split is None:
        raise UsageError(f"--task_name {task.name} has no training data: finetune on mnli, then predict "
                         f"{task.name} with that checkpoint and --do_train false")

    # The checkpoint, its tokenizer and its length limit, before any data is touched.
    try:
        model_config = AutoConfig.from_pretrained(cfg.model_name_or_path, trust_remote_code=cfg.trust_remote_code)
    except (OSError, ValueError) as error:
        raise UsageError(f"--model_name_or_path {cfg.model_name_or_path}: cannot load its config ({error})") from None
    if cfg.config_overrides:
        try:
            model_config.update_from_string(cfg.config_overrides)
            model_config = type(model_config).from_dict(model_config.to_dict())  # re-validates the whole config
        except (ValueError, TypeError) as error:
            raise UsageError(f"--config_overrides {cfg.config_overrides!r}: {error}") from None
    tokenizer_source = cfg.tokenizer_name or cfg.model_name_or_path
    if Path(tokenizer_source).is_dir() and not any((Path(tokenizer_source) / f).is_file() for f in TOKENIZER_FILES):
        raise UsageError(f"{tokenizer_source} has no tokenizer (none of {', '.join(TOKENIZER_FILES)}); save the "
                         f"tokenizer it was pretrained with next to it, or pass --tokenizer_name")
    try:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_source, trust_remote_code=cfg.trust_remote_code)
    except (OSError, ValueError, TypeError, KeyError) as error:
        raise UsageError(f"no tokenizer at {tokenizer_source} ({str(error).splitlines()[0]}); save one "
                         f"with the checkpoint or pass --tokenizer_name") from None
    head = any(a.endswith("ForSequenceClassification") for a in model_config.architectures or [])
    if not cfg.do_train and not head:
        raise UsageError(f"--do_train false needs a finetuned checkpoint; {cfg.model_name_or_path} has no "
                         f"sequence-classification head")
    limit = model_length_limit(model_config)
    max_len = cfg.max_seq_length or limit
    if max_len > limit:
        raise UsageError(f"--max_seq_length {max_len} is above what {cfg.model_name_or_path} accepts; "
                         f"allowed: at most {limit}")

    # The task: its data, splits, columns and labels.
    accelerator = Accelerator(
        mixed_precision=cfg.mixed_precision, gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        log_with=trackers, project_config=ProjectConfiguration(output_dir, logging_dir=output_dir / "runs"))
    say = accelerator.print
    if task is not None:
        check_model_fits(cfg, task, model_config, head)
    with accelerator.main_process_first():
        raw = load_raw(cfg, task)
    if task is None:
        task = own_task(cfg, raw, model_config)
        check_model_fits(cfg, task, model_config, head)
    if cfg.text_column:
        pair = (cfg.text_pair_column,) if cfg.text_pair_column else ()
        if len(pair) + 1 != len(task.text_columns):
            raise UsageError(f"--task_name {task.name} has {len(task.text_columns)} text column(s) "
                             f"({', '.join(task.text_columns)}); rename both with --text_column and --text_pair_column")
        task = dataclasses.replace(task, text_columns=(cfg.text_column, *pair))
    if cfg.metric_for_best_model:
        task = dataclasses.replace(task, best_metric=cfg.metric_for_best_model)
    if task.best_metric not in GLUE_METRIC_KEYS[task.metric]:
        raise UsageError(f"--metric_for_best_model {task.best_metric!r} is not computed for this task; "
                         f"allowed: {', '.join(GLUE_METRIC_KEYS[task.metric])}")
    if cfg.truncation == "only_second" and len(task.text_columns) == 1:
        raise UsageError("--truncation only_second needs sentence pairs (--text_pair_column)")
    if any([cfg.train_file, cfg.validation_file, cfg.test_file]):  # local files have plain split names
        test_file = next(iter(task.test_splits.values()))
        task = dataclasses.replace(task, validation_splits=("validation",), test_splits={"test": test_file})
    if (cfg.do_train and cfg.validation_split_percentage and "train" in raw
            and not any(s in raw for s in task.validation_splits)):
        parts = raw["train"].train_test_split(test_size=cfg.validation_split_percentage / 100, seed=cfg.seed)
        raw["train"], raw["validation"] = parts["train"], parts["test"]
        task = dataclasses.replace(task, validation_splits=("validation",))
        say(f"no validation split: held out {len(raw['validation']):,} train examples "
            f"(--validation_split_percentage {cfg.validation_split_percentage:g})")
    splits = [task.train_split] if cfg.do_train else []
    splits += [s for s in task.validation_splits if s in raw] if cfg.do_train or cfg.do_eval else []
    splits += [s for s in task.test_splits if s in raw] if cfg.do_predict else []
    for split in splits:
        if split not in raw:
            raise UsageError(f"the data has no {split!r} split; it has: {', '.join(raw)}")
        for column in task.text_columns:
            if column not in raw[split].column_names:
                raise UsageError(f"{split} split has no text column {column!r} (--text_column/--text_pair_column); "
                                 f"its columns: {', '.join(raw[split].column_names)}")
        n = (cfg.max_train_samples if split == task.train_split else
             cfg.max_predict_samples if split in task.test_splits else cfg.max_eval_samples)
        if n:
            raw[split] = raw[split].select(range(min(n, len(raw[split]))))
    if not splits:
        raise UsageError(f"nothing to evaluate or predict: the data has only the splits {', '.join(raw)}")
    test_index = {s: list(raw[s]["idx"]) if "idx" in raw[s].column_names else list(range(len(raw[s])))
                  for s in splits if s in task.test_splits}
    labelled = prepare_labels(cfg, task, raw, splits)
    eval_names = [s for s in task.validation_splits if s in labelled and s in splits]

    # Tokenize, counting what had to be truncated.
    keep_token_types = getattr(model_config, "type_vocab_size", 1) > 1
    data, truncated = {}, {}
    with accelerator.main_process_first():
        for split in splits:
            data[split] = tokenize_split(raw[split], split, tokenizer, task.text_columns, max_len, cfg.truncation,
                                         keep_token_types)
            truncated[split] = int(sum(data[split]["truncated"]))
            data[split] = data[split].remove_columns("truncated")
            say(f"{split}: {len(data[split]):,} examples; {truncated[split]:,} "
                f"({truncated[split] / max(len(data[split]), 1):.1%}) longer than {max_len} tokens"
                + (f", truncated ({cfg.truncation})" if truncated[split] else ""))
    if cfg.truncation == "none" and any(truncated.values()):
        raise UsageError(f"--truncation none: {sum(truncated.values()):,} examples are longer than --max_seq_length "
                         f"{max_len} (the model accepts {limit}); raise it or allow --truncation longest_first, "
                         f"only_first or only_second")

    # The model: a new head for the task, or (no training) the finetuned one.
    if cfg.do_train:
        model_config.num_labels = task.num_labels
        model_config.problem_type = "regression" if task.is_regression else "single_label_classification"
        if task.labels:
            model_config.id2label = dict(enumerate(task.labels))
            model_config.label2id = {name: i for i, name in enumerate(task.labels)}
        model_config.finetuning_task = task.name
    set_seed(cfg.seed)
    model = AutoModelForSequenceClassification.from_pretrained(
        cfg.model_name_or_path, config=model_config, trust_remote_code=cfg.trust_remote_code,
        ignore_mismatched_sizes=cfg.ignore_mismatched_sizes)

    collate = DataCollatorWithPadding(tokenizer)
    loaders = {s: DataLoader(data[s], batch_size=cfg.per_device_eval_batch_size, collate_fn=collate)
               for s in splits if not (cfg.do_train and s == task.train_split)}
    metric = load_glue_metric(task.metric, cfg.metric_backend)
    jsonl = output_dir / "log.jsonl"
    script_utils.init_trackers(accelerator, "finetune_glue", script_utils.config_to_dict(cfg))

    def evaluate_splits(step):
        results = {}
        for split in eval_names:
            preds, refs = predict(accelerator, model, loaders[split], task.is_regression, f"evaluating {split}")
            results[split] = {**metric(preds, refs), "num_examples": len(refs)}
            script_utils.log_metrics(accelerator, {f"{split}/{k}": v for k, v in results[split].items()}, step, jsonl)
        return results

    def save():
        accelerator.wait_for_everyone()
        accelerator.unwrap_model(model).save_pretrained(output_dir, is_main_process=accelerator.is_main_process,
                                                        save_function=accelerator.save)
        if accelerator.is_main_process:
            tokenizer.save_pretrained(output_dir)

    results = {"task": task.name, "model_name_or_path": cfg.model_name_or_path, "max_seq_length": max_len,
               "truncated": truncated}
    if cfg.do_train:
        train_loader = DataLoader(data[task.train_split], batch_size=cfg.per_device_train_batch_size, shuffle=True,
                                  collate_fn=collate)
        decay = [p for n, p in model.named_parameters() if p.ndim > 1]  # no decay on biases and norms
        no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
        optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=cfg.learning_rate, betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_epsilon)
        model, optimizer, train_loader, *prepared = accelerator.prepare(model, optimizer, train_loader,
                                                                        *loaders.values())
        loaders = dict(zip(loaders, prepared))
        updates_per_epoch = math.ceil(len(train_loader) / cfg.gradient_accumulation_steps)
        max_steps = cfg.max_train_steps or cfg.num_train_epochs * updates_per_epoch
        # A prepared scheduler is stepped once per process at each update, hence the factor.
        scheduler = accelerator.prepare(get_scheduler(
            cfg.lr_scheduler_type, optimizer,
            num_warmup_steps=math.ceil(cfg.warmup_ratio * max_steps) * accelerator.num_processes,
            num_training_steps=max_steps * accelerator.num_processes))
        batch_size = cfg.per_device_train_batch_size * cfg.gradient_accumulation_steps * accelerator.num_processes
        say(f"finetuning on {len(data[task.train_split]):,} examples: {max_steps:,} updates of {batch_size}, "
            f"selecting on {eval_names[0] if eval_names else 'nothing (keeps the last model)'} {task.best_metric}")

        best = {"split": eval_names[0] if eval_names else None, "metric": task.best_metric, "value": None, "step": 0}
        step, stale, losses, done = 0, 0, [], False
        progress = tqdm(total=max_steps, desc="finetuning", disable=not accelerator.is_local_main_process)
        for epoch in range(1, math.ceil(max_steps / updates_per_epoch) + 1):
            model.train()
            for batch in train_loader:
                with accelerator.accumulate(model):
                    loss = model(**batch).loss
                    accelerator.backward(loss)
                    if accelerator.sync_gradients and cfg.max_grad_norm > 0:
                        accelerator.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()
                losses.append(loss.detach())
                if not accelerator.sync_gradients:
                    continue
                step += 1
                progress.update(1)
                if step % cfg.logging_steps == 0 or step == max_steps:
                    train_loss = accelerator.gather(torch.stack(losses)).mean().item()
                    losses = []
                    progress.set_postfix(loss=f"{train_loss:.4f}")
                    script_utils.log_metrics(accelerator, {"train/loss": train_loss, "train/epoch": epoch,
                                                           "train/lr": scheduler.get_last_lr()[0]}, step, jsonl)
                done = step >= max_steps
                if eval_names and (done or (step % cfg.eval_steps == 0 if cfg.eval_steps
                                            else step % updates_per_epoch == 0)):
                    scores = evaluate_splits(step)
                    value = scores[best["split"]][task.best_metric]
                    if best["value"] is None or value > best["value"]:
                        best.update(value=value, step=step, epoch=epoch)
                        results.update(scores)
                        stale = 0
                        save()
                    else:
                        stale += 1
                    say(f"step {step}: {best['split']} {task.best_metric} {value:.4f} "
                        f"(best {best['value']:.4f} at step {best['step']})")
                    model.train()
                    if cfg.early_stopping_patience and stale >= cfg.early_stopping_patience:
                        say(f"early stopping: {stale} evaluations without improvement")
                        done = True
                if done:
                    break
            if done:
                break
        progress.close()
        results["best"] = best
        if best["value"] is None:  # nothing to select on: keep the last model
            save()
        elif best["step"] != step:  # later evaluations were worse: predict with the best weights
            accelerator.wait_for_everyone()
            best_weights = AutoModelForSequenceClassification.from_pretrained(
                output_dir, trust_remote_code=cfg.trust_remote_code).state_dict()
            accelerator.unwrap_model(model).load_state_dict(best_weights)
    else:
        model, *prepared = accelerator.prepare(model, *loaders.values())
        loaders = dict(zip(loaders, prepared))
        if cfg.do_eval:
            results.update(evaluate_splits(0))

    # Test splits: submission files, and metrics where they are labelled (IMDB, own data).
    for split in [s for s in splits if s in task.test_splits]:
        preds, refs = predict(accelerator, model, loaders[split], task.is_regression, f"predicting {split}")
        if refs is not None:
            results[split] = {**metric(preds, refs), "num_examples": len(refs)}
        if accelerator.is_main_process:
            path = output_dir / "predictions" / task.test_splits[split]
            path.parent.mkdir(exist_ok=True)
            rows = [f"{i}\t{task.format_prediction(p)}" for i, p in zip(test_index[split], preds)]
            path.write_text("index\tprediction\n" + "".join(row + "\n" for row in rows))
            say(f"wrote {len(rows):,} {split} predictions to {path}")
    for split, scores in results.items():
        if isinstance(scores, dict) and "num_examples" in scores:
            say(f"{split}: " + ", ".join(f"{k} {v:.4f}" for k, v in scores.items() if k != "num_examples"))
    if accelerator.is_main_process:
        (output_dir / "eval_results.json").write_text(json.dumps(results, indent=2) + "\n")
        (output_dir / "finetune_config.json").write_text(json.dumps(script_utils.config_to_dict(cfg), indent=2) + "\n")
        if cfg.push_to_hub:
            repo_id = cfg.hub_model_id or output_dir.resolve().name
            try:
                accelerator.unwrap_model(model).push_to_hub(repo_id, commit_message=f"Finetuned on {task.name}")
                tokenizer.push_to_hub(repo_id)
            except Exception as error:  # offline, no token, no rights: the local save stands
                raise script_utils.push_failed(repo_id, output_dir, error) from None
            say(f"pushed to the Hub as {repo_id}")
    accelerator.end_training()
    return results


if __name__ == "__main__":
    try:
        main()
    except UsageError as error:
        sys.exit(f"finetune_glue.py: error: {error}")
