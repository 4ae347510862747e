# Copyright 2026 The linformer-hf authors. Licensed under the Apache License, Version 2.0.
"""Finetune and evaluate an encoder (Linformer, RoBERTa, BERT, ...) on GLUE, IMDB or your own labelled text.

    python finetune_glue.py --model_name_or_path outputs/linformer-base --task_name sst2
    python finetune_glue.py --model_name_or_path roberta-base --task_name imdb --max_seq_length 512
    python finetune_glue.py --model_name_or_path ckpt --train_file train.csv --validation_file dev.csv \
        --text_column sentence --label_column label
    accelerate launch finetune_glue.py --model_name_or_path ckpt --task_name qqp --mixed_precision bf16

Writes to --output_dir the best model (by the task's validation metric, save_pretrained: safetensors,
tokenizer and, for Linformer, its modeling code) with a model card, eval_results.json (metrics per split
and how many examples were truncated) and test predictions in the GLUE submission format under
predictions/, all published together once training ends; beside them the run's metrics.jsonl,
TensorBoard logs/ and train_config.yaml. `--do_train false` only evaluates and predicts. The training
loop is train_mlm.py's (linformer_training.loop), so checkpoints and `--resume_from_checkpoint latest`
work the same way. Bad input (task, columns, labels, lengths, tokenizer, weights) is rejected before
any training starts.
"""

import dataclasses
import importlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import datasets
import torch
import yaml
from accelerate.utils import set_seed
from datasets import load_dataset
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    DataCollatorWithPadding,
    PreTrainedConfig,
    PreTrainedTokenizerBase,
)
from transformers.trainer_pt_utils import LengthGroupedSampler

from linformer_training import checkpoints, loop, models, outputs, processes, tasks, tokenization
from linformer_training.arguments import (
    OptimizerArguments,
    RunArguments,
    ScriptError,
    UsageError,
    apply_overrides,
    arg,
    parse_args,
    parse_overrides,
)
from linformer_training.corpus import load_files, resolve_files
from linformer_training.metrics import load_glue_metric
from linformer_training.tasks import TASKS
from linformer_training.tracking import MetricsLog

importlib.import_module("linformer_hf")  # registers Linformer with the Auto classes

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
BEST_DIR = "best"  # under checkpoints/: survives a resume, is never rotated, is not uploaded


@dataclass
class FinetuneArguments(OptimizerArguments, RunArguments):
    """Finetune and evaluate a sequence classifier on GLUE, IMDB or local CSV/TSV/JSON(L)/parquet files.

    The paper gives no finetuning hyperparameters; the defaults are those of RoBERTa (Liu et al. 2019,
    Appendix C), whose setup it pretrains with: AdamW (betas 0.9/0.98, eps 1e-6, weight decay 0.1),
    learning rate 2e-5 with a 6% warmup then linear decay, batch 32, a few epochs, best epoch kept.
    """

    model_name_or_path: str = arg("", "pretrained checkpoint: local folder or Hub name (required)")
    tokenizer_name: str | None = arg(None, "tokenizer, if not the checkpoint's own")
    trust_remote_code: bool = arg(False, "run model/tokenizer code that ships with the checkpoint")
    config_overrides: str | None = arg(None, "checkpoint config fields changed before the model is built, e.g. "
                                             "projection_length_scaling=sqrt,hidden_dropout_prob=0.2")
    # Data: a known task (GLUE, IMDB) from the Hub or from local files, or your own files.
    task_name: Literal[tuple(TASKS)] | None = arg(None, "a known task (unset: your own --train_file etc.)")
    dataset_name: str | None = arg(None, "Hub dataset in place of the task's own")
    dataset_config_name: str | None = arg(None, "configuration of --dataset_name")
    train_file: str | None = arg(None, "training data: .csv, .tsv, .json(l), .parquet, .txt (optionally compressed)")
    validation_file: str | None = arg(None, "validation data, selects the model (default: held out of train)")
    test_file: str | None = arg(None, "test data: predicted, and scored when labelled")
    text_column: str | None = arg(None, "text column (required for your own data; renames a task's first one)")
    text_pair_column: str | None = arg(None, "second text column, for sentence pairs")
    label_column: str = arg("label", "label column")
    regression: bool = arg(False, "your own data: labels are real numbers")
    num_labels: int | None = arg(None, "if set, must match the number of labels found")
    validation_split_percentage: float = arg(5.0, "percent of train held out for model selection when there "
                                                  "is no validation split (0: none; the last model is kept)")
    max_seq_length: int | None = arg(None, "tokens per input (default and maximum: the model's longest input)")
    truncation: Literal["longest_first", "only_first", "only_second", "none"] = arg(
        "longest_first", "how longer inputs are cut (counted and reported); none: an error")
    max_train_samples: int | None = arg(None, "use the first N training examples")
    max_eval_samples: int | None = arg(None, "use the first N examples of each validation split")
    max_predict_samples: int | None = arg(None, "use the first N examples of each test split")
    do_train: bool = arg(True, "finetune (false: evaluate and predict with a finetuned checkpoint)")
    do_eval: bool = arg(True, "score the validation split(s)")
    do_predict: bool = arg(True, "predict the test split(s) into predictions/")
    num_train_epochs: int = arg(3, "epochs to train for (unless --max_steps)")
    max_steps: int | None = arg(None, "updates to train for (default: --num_train_epochs epochs)")
    metric_for_best_model: str | None = arg(None, "validation metric that selects the model (default: the task's)")
    early_stopping_patience: int | None = arg(None, "stop after N evaluations without improvement")
    ignore_mismatched_sizes: bool = arg(False, "replace a classification head that has a different number of labels")
    metric_script: str | None = arg(
        None, "GLUE metric: computed here with scikit-learn/scipy (the GLUE script's conventions) unless this names "
              "an `evaluate` metric script to run instead, a path or a Hub name (e.g. evaluate-metric/glue)")
    # RoBERTa's finetuning values of shared flags.
    learning_rate: float = arg(2e-5, "peak learning rate")
    weight_decay: float = arg(0.1, "AdamW weight decay (not applied to biases and norms)")
    warmup_ratio: float = arg(0.06, "fraction of the updates spent warming up (overrides --warmup_steps)")
    per_device_train_batch_size: int = arg(32, "examples per process per forward pass")
    per_device_eval_batch_size: int = arg(64, "examples per process per evaluation batch")
    group_by_length: bool = arg(False, "batch training examples of like length (transformers' length-grouped "
                                       "order, drawn anew each epoch): less padding where lengths vary")
    eval_steps: int | None = arg(None, "evaluate every N updates (default: once per epoch; 0: only at the end)")
    output_dir: str = arg("outputs/finetune", "folder for the final model, results, checkpoints and logs")
    logging_steps: int = arg(50, "log the training loss every N updates")

    bounds = {"num_labels": "[1, inf)", "validation_split_percentage": "[0, 100)", "max_seq_length": "[8, inf)",
              "max_train_samples": "[1, inf)", "max_eval_samples": "[1, inf)", "max_predict_samples": "[1, inf)",
              "num_train_epochs": "[1, inf)", "early_stopping_patience": "[1, inf)"}

    def __post_init__(self):
        super().__post_init__()
        if not self.model_name_or_path:
            raise UsageError("--model_name_or_path is required (a local checkpoint folder or a Hub model name)")
        if self.task_name is None and not self.data_files():
            raise UsageError(f"pass --task_name (one of {', '.join(TASKS)}) or "
                             f"--train_file/--validation_file/--test_file")
        if self.task_name is None and self.text_column is None:
            raise UsageError("your own data needs --text_column (and --text_pair_column for sentence pairs)")
        if self.text_pair_column and not self.text_column:
            raise UsageError("--text_pair_column needs --text_column (the first text of each pair)")
        if self.task_name is not None and self.regression:
            raise UsageError(f"--regression is for your own data; --task_name {self.task_name} defines its labels")
        if not (self.do_train or self.do_eval or self.do_predict):
            raise UsageError("nothing to do: --do_train, --do_eval and --do_predict are all false")
        if self.push_to_hub and not self.do_train:
            raise UsageError("--push_to_hub uploads the finetuned model, so it needs --do_train true")
        if self.resume_from_checkpoint and not self.do_train:
            raise UsageError("--resume_from_checkpoint continues training, so it needs --do_train true")
        if self.do_train and self.task_name is None and not self.train_file:
            raise UsageError("--do_train needs --train_file (or pass --do_train false to only evaluate/predict)")
        task = self.known_task()
        texts = task.text_columns if task else self.text_columns()
        if len(set(texts)) < len(texts):
            raise UsageError(f"--text_pair_column {texts[1]} is the --text_column too: a pair needs two columns")
        if self.label_column in texts:
            raise UsageError(f"--label_column {self.label_column} is a text column too ({', '.join(texts)}): the "
                             f"labels need a column of their own")
        if task is not None and self.do_train and task.train_split is None:
            raise UsageError(f"--task_name {task.name} has no training data: finetune on mnli, then predict "
                             f"{task.name} with that checkpoint and --do_train false")
        if self.truncation == "only_second" and len(task.text_columns if task else self.text_columns()) == 1:
            raise UsageError("--truncation only_second needs sentence pairs (--text_pair_column)")

    def data_files(self):
        return {split: path for split, path in (("train", self.train_file), ("validation", self.validation_file),
                                                ("test", self.test_file)) if path}

    def text_columns(self):
        return (self.text_column, *((self.text_pair_column,) if self.text_pair_column else ()))

    def known_task(self):
        """The --task_name task as this run reads it (its columns renamed, from local files, ...); None
        for your own data, whose labels are only known once the data is read."""
        if self.task_name is None:
            return None
        return tasks.adapt_task(TASKS[self.task_name], self.text_columns() if self.text_column else None,
                                self.metric_for_best_model, local_files=bool(self.data_files()))


@dataclass
class Splits:
    """A task's tokenized splits by role; the first evaluated split selects the model."""

    task: tasks.Task
    data: dict  # split -> tokenized Dataset (`labels` where labelled)
    train: str | None
    evaluated: list  # labelled validation splits
    predicted: list  # test splits
    truncated: dict  # split -> examples longer than --max_seq_length
    test_index: dict  # test split -> the ids its submission file lists


# ---------------------------------------------------------------------------------------------------
# Before any data: the checkpoint (config, weights, tokenizer, length) and the input files
# ---------------------------------------------------------------------------------------------------


@dataclass
class FinetuneSetup(loop.Setup):
    """What this script settles before reading data (`check_inputs`)."""

    data_files: dict  # split -> its local files (empty: the task's Hub dataset)
    config: PreTrainedConfig  # the checkpoint's, with --config_overrides
    has_head: bool  # the checkpoint has a sequence-classification head
    tokenizer: PreTrainedTokenizerBase
    max_seq_length: int


def check_inputs(args, accelerator, accumulation):
    """Every error that needs no data: the input files, the checkpoint (config, weights, tokenizer, input length),
    the output folder."""
    data_files = check_data_files(args)
    config, has_head = load_model_config(args)
    tokenizer = load_tokenizer(args, config)
    max_seq_length = models.input_length("--max_seq_length", args.max_seq_length, config,
                                         f"{args.model_name_or_path}'s")
    output_dir, checkpoint = checkpoints.open_run(args, accelerator, accumulation)
    return FinetuneSetup(accelerator=accelerator, accumulation=accumulation, output_dir=output_dir,
                         checkpoint=checkpoint, data_files=data_files, config=config, has_head=has_head,
                         tokenizer=tokenizer, max_seq_length=max_seq_length)


def check_data_files(args):
    """Each local file exists, is not empty and is of a known type (split -> its path)."""
    return {split: resolve_files([path], f"--{split}_file")[1] for split, path in args.data_files().items()}


def load_model_config(args):
    """The checkpoint's config with --config_overrides, and whether it has a sequence-classification head."""
    name = args.model_name_or_path
    models.check_local_path(name, "--model_name_or_path")
    try:
        config = AutoConfig.from_pretrained(name, trust_remote_code=args.trust_remote_code)
    except (OSError, ValueError) as error:
        raise UsageError(f"--model_name_or_path {name}: cannot load its config ({error})") from None
    if Path(name).is_dir() and not any((Path(name) / f).is_file() for f in WEIGHT_FILES):
        raise UsageError(f"--model_name_or_path {name} has no weights (none of {', '.join(WEIGHT_FILES)}); "
                         f"point it at a folder written by save_pretrained")
    if Path(name).is_dir():
        checkpoints.check_model_folder(name, "--model_name_or_path")
    overrides = parse_overrides(args.config_overrides)
    config = apply_overrides(config, overrides) if overrides else config
    head = any(a.endswith("ForSequenceClassification") for a in config.architectures or [])
    if not args.do_train and not head:
        raise UsageError(f"--do_train false needs a finetuned checkpoint; {name} has no sequence-classification head")
    return config, head


def load_tokenizer(args, config):
    """The checkpoint's tokenizer (or --tokenizer_name), which must fit the model's embedding table."""
    source = args.tokenizer_name or args.model_name_or_path
    flag = "--tokenizer_name" if args.tokenizer_name else "--model_name_or_path"
    tokenizer = tokenization.load_tokenizer(source, flag, trust_remote_code=args.trust_remote_code)
    vocab_size = getattr(config, "vocab_size", None)
    if vocab_size is not None and len(tokenizer) > vocab_size:
        raise UsageError(f"the tokenizer of {source} has {len(tokenizer):,} tokens but {args.model_name_or_path} "
                         f"embeds only vocab_size={vocab_size:,}: its larger ids have no embedding. Pass "
                         f"--tokenizer_name with the tokenizer the checkpoint was pretrained with")
    return tokenizer


# ---------------------------------------------------------------------------------------------------
# Data: the task, its splits, labels and tokens
# ---------------------------------------------------------------------------------------------------


def read_splits(args, task, files):
    """Local files as splits train/validation/test (each file of its own type), or the task's Hub dataset."""
    if files:
        return datasets.DatasetDict({split: load_files({split: paths})[split] for split, paths in files.items()})
    name = [n for n in ((args.dataset_name, args.dataset_config_name) if args.dataset_name else task.dataset) if n]
    try:
        return load_dataset(*name)
    except Exception as error:  # offline, unknown name, ...
        raise UsageError(f"could not load dataset {'/'.join(name)} ({type(error).__name__}: {error}); without "
                         f"the Hub, pass the task's data as --train_file/--validation_file/--test_file") from error


def define_task(args, raw, setup):
    """Your own data's task, from its train labels (or, predicting only, the labels the checkpoint knows)."""
    config = setup.config
    trained = None if args.do_train else [config.id2label[i] for i in range(config.num_labels)]
    task = tasks.own_task(raw.get("train"), args.text_columns(), args.label_column, args.regression, trained)
    task = tasks.adapt_task(task, best_metric=args.metric_for_best_model)
    tasks.check_model_fits(task, config, setup.has_head, args)
    return task


def hold_out_validation(args, task, raw, accelerator):
    """Training without a validation split holds one out of train, for model selection."""
    if not (args.do_train and args.validation_split_percentage and "train" in raw
            and not any(s in raw for s in task.validation_splits)):
        return task, raw
    parts = raw["train"].train_test_split(test_size=args.validation_split_percentage / 100, seed=args.seed)
    accelerator.print(f"no validation split: held out {len(parts['test']):,} train examples "
                      f"(--validation_split_percentage {args.validation_split_percentage:g})")
    raw = datasets.DatasetDict({**raw, "train": parts["train"], "validation": parts["test"]})
    return dataclasses.replace(task, validation_splits=("validation",)), raw


def choose_splits(args, task, raw):
    """The splits this run uses by role, each checked for its text columns and cut to --max_*_samples."""
    train = [task.train_split] if args.do_train else []
    validation = [s for s in task.validation_splits if s in raw] if args.do_train or args.do_eval else []
    test = [s for s in task.test_splits if s in raw] if args.do_predict else []
    limits = {**{s: args.max_predict_samples for s in test}, **{s: args.max_eval_samples for s in validation},
              **{s: args.max_train_samples for s in train}}
    chosen = {}
    for split in [*train, *validation, *test]:
        if split not in raw:
            raise UsageError(f"the data has no {split!r} split; it has: {', '.join(raw)}")
        for column in task.text_columns:
            if column not in raw[split].column_names:
                raise UsageError(f"{split} split has no text column {column!r} (--text_column/--text_pair_column); "
                                 f"its columns: {', '.join(raw[split].column_names)}")
        limit = limits[split]
        chosen[split] = raw[split].select(range(min(limit, len(raw[split])))) if limit else raw[split]
    if not chosen:
        raise UsageError(f"nothing to evaluate or predict: the data has only the splits {', '.join(raw)}")
    return chosen, (train[0] if train else None), validation, test


def tokenize_splits(args, setup, task, labelled):
    """Every split tokenized, with how many of its examples were longer than --max_seq_length (reported)."""
    config, max_len = setup.config, setup.max_seq_length
    keep_token_types = getattr(config, "type_vocab_size", 1) > 1
    data, truncated = {}, {}
    for split, dataset in labelled.items():
        data[split], truncated[split] = tasks.tokenize_split(dataset, split, setup.tokenizer, task.text_columns,
                                                             max_len, args.truncation, keep_token_types)
        setup.accelerator.print(f"{split}: {len(data[split]):,} examples; {truncated[split]:,} "
                          f"({truncated[split] / max(len(data[split]), 1):.1%}) longer than {max_len} tokens"
                          + (f", truncated ({args.truncation})" if truncated[split] else ""))
    if args.truncation == "none" and any(truncated.values()):
        raise UsageError(f"--truncation none: {sum(truncated.values()):,} examples are longer than --max_seq_length "
                         f"{max_len} (the model accepts {models.input_limit(config)}); raise it or allow --truncation "
                         f"longest_first, only_first or only_second")
    return data, truncated


def prepare_data(args, setup):
    """The task and its labelled, tokenized splits. The main process goes first (it fills the caches)."""
    task = args.known_task()
    if task is not None:
        tasks.check_model_fits(task, setup.config, setup.has_head, args)  # before any data is read
    with processes.main_process_first(setup.accelerator, "preparing the data"):
        raw = read_splits(args, task, setup.data_files)
        task = task or define_task(args, raw, setup)
        task, raw = hold_out_validation(args, task, raw, setup.accelerator)
        chosen, train, validation, test = choose_splits(args, task, raw)
        test_index = {s: list(chosen[s]["idx"]) if "idx" in chosen[s].column_names else list(range(len(chosen[s])))
                      for s in test}
        labelled = {split: tasks.attach_labels(task, dataset, split, args.label_column)
                    for split, dataset in chosen.items()}  # every label checked before any tokenizing
        data, truncated = tokenize_splits(args, setup, task, {s: d for s, (d, _) in labelled.items()})
    evaluated = [s for s in validation if labelled[s][1]]
    return Splits(task, data, train, evaluated, test, truncated, test_index)


# ---------------------------------------------------------------------------------------------------
# Model, run, and the best model so far
# ---------------------------------------------------------------------------------------------------


def build_model(args, task, config):
    """A new head for the task on the pretrained encoder, or (predicting only) the finetuned model."""
    if args.do_train:
        config.num_labels = task.num_labels
        config.problem_type = "regression" if task.is_regression else "single_label_classification"
        if task.labels:
            config.id2label = dict(enumerate(task.labels))
            config.label2id = {name: i for i, name in enumerate(task.labels)}
        config.finetuning_task = task.name
    set_seed(args.seed)  # the new head's initialisation
    return AutoModelForSequenceClassification.from_pretrained(
        args.model_name_or_path, config=config, trust_remote_code=args.trust_remote_code,
        ignore_mismatched_sizes=args.ignore_mismatched_sizes)


def eval_loader(args, dataset, tokenizer):
    return loop.data_loader(dataset, args.seed, batch_size=args.per_device_eval_batch_size,
                            collate_fn=DataCollatorWithPadding(tokenizer))


class EpochLengthGroupedSampler(LengthGroupedSampler):
    """transformers' length-grouped order with its generator seeded from --seed and the epoch, which Accelerate's
    loader passes to `set_epoch`: a resumed run draws the batches the uninterrupted one drew."""

    def __init__(self, batch_size, lengths, seed):
        super().__init__(batch_size, lengths=lengths)
        self.seed = seed
        self.set_epoch(0)

    def set_epoch(self, epoch):
        self.generator = torch.Generator().manual_seed(self.seed + epoch)


def train_loader_of(args, dataset, tokenizer):
    """Shuffled batches, or (--group_by_length) batches of like length, which pad far less when lengths vary
    as whole articles' do."""
    collate = DataCollatorWithPadding(tokenizer)
    if not args.group_by_length:
        return loop.data_loader(dataset, args.seed, batch_size=args.per_device_train_batch_size, shuffle=True,
                                collate_fn=collate)
    sampler = EpochLengthGroupedSampler(args.per_device_train_batch_size, [len(ids) for ids in dataset["input_ids"]],
                                        args.seed)
    return loop.data_loader(dataset, args.seed, batch_size=args.per_device_train_batch_size, sampler=sampler,
                            collate_fn=collate)


def build_run(args, setup, model, splits, metric):
    """The model and its splits, prepared with the optimizer and schedule, as one `loop.Run` that keeps the best
    model: evaluated every --eval_steps updates, or once per epoch."""
    train_loader = train_loader_of(args, splits.data[splits.train], setup.tokenizer)
    eval_loaders = [eval_loader(args, splits.data[split], setup.tokenizer) for split in splits.evaluated]
    prepared = loop.prepare(args, setup, model, train_loader, eval_loaders, epochs=args.num_train_epochs)
    # Nothing to select on without an evaluated split: the last model is kept.
    eval_steps = (None if not splits.evaluated else prepared.updates_per_epoch if args.eval_steps is None
                  else args.eval_steps)
    others = dict(zip(splits.evaluated[1:], prepared.eval_loaders[1:], strict=True))
    run = loop.new_run(args, setup, prepared, objective=tasks.ClassificationObjective(splits.task, metric, others),
                       project="finetune_glue", eval_steps=eval_steps, tokenizer=setup.tokenizer,
                       metric_for_best_model=splits.task.best_metric if splits.evaluated else None,
                       early_stopping_patience=args.early_stopping_patience, on_best=save_best_model)
    selection = (f"{splits.evaluated[0]} {splits.task.best_metric}" if splits.evaluated
                 else "nothing (keeps the last model)")
    per_update = args.per_device_train_batch_size * setup.accelerator.num_processes * setup.accumulation
    run.say(f"finetuning on {len(splits.data[splits.train]):,} examples: {run.max_steps:,} updates of "
            f"{per_update}, selecting on {selection}")
    return run


def best_dir(run):
    return run.output_dir / checkpoints.CHECKPOINTS_DIR / BEST_DIR


def save_best_model(run):
    """`on_best`: the model, its step and its metrics into checkpoints/best, swapped in whole (a crash
    leaves the previous best or the new one, never a mix)."""
    accelerator, state, folder = run.accelerator, run.state, best_dir(run)
    unwrapped = accelerator.unwrap_model(run.model)
    checkpoints.check_finite(unwrapped, f"best model at step {state.step}")
    tmp = folder.with_name(f".tmp-{BEST_DIR}")
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
    accelerator.wait_for_everyone()
    what = f"the best model (step {state.step})"
    with processes.together(accelerator, f"saving {what}"), \
            checkpoints.writing(what, tmp, run.output_dir, accelerator.num_processes):
        outputs.save_pretrained(accelerator, run.model, tmp)  # gathered whole from every process's shard
        if accelerator.is_main_process:
            record = {"step": state.step, "epoch": state.epoch + 1, "metrics": state.last_eval}
            (tmp / "best.json").write_text(json.dumps(record, indent=2))
            checkpoints.publish(tmp, folder, whole=True)


def restore_best_model(run):
    """The best evaluation's record ({step, epoch, metrics}; None without evaluation), its weights loaded
    back into the model unless the last update was the best."""
    state, folder = run.state, best_dir(run)
    if state.best_step is None:
        return None
    record = json.loads((folder / "best.json").read_text()) if (folder / "best.json").is_file() else {}
    if record.get("step") != state.best_step:
        raise ScriptError(f"{folder} holds the model of step {record.get('step')}, not the best one (step "
                          f"{state.best_step}); it was changed or removed since that step. The last model is in "
                          f"the checkpoints, if any")
    if state.best_step != state.step:
        best = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=run.args.trust_remote_code)
        outputs.load_full_state_dict(run.model, best.state_dict())
        run.say(f"predicting with the best model, of step {state.best_step} ({run.metric_for_best_model} "
                f"{state.best_metric:.4f})")
    return record


def remove_best_model(run):
    """Once the final folder holds the best model, its copy under checkpoints/ has done its job."""
    if run.accelerator.is_main_process:
        shutil.rmtree(best_dir(run), ignore_errors=True)
        folder = run.output_dir / checkpoints.CHECKPOINTS_DIR
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


# ---------------------------------------------------------------------------------------------------
# Evaluation, predictions and what the run leaves behind
# ---------------------------------------------------------------------------------------------------


def evaluate_only(args, setup, model, splits, metric):
    """Without training: the finetuned model as it is, on the labelled validation splits (logged at step 0)."""
    accelerator = setup.accelerator
    model = accelerator.prepare(model)
    if not splits.evaluated:
        return model, {}
    loaders = [accelerator.prepare(eval_loader(args, splits.data[s], setup.tokenizer)) for s in splits.evaluated]
    others = dict(zip(splits.evaluated[1:], loaders[1:], strict=True))
    scores = tasks.ClassificationObjective(splits.task, metric, others).evaluate(model, loaders[0], accelerator)
    MetricsLog(accelerator, setup.output_dir / "metrics.jsonl", "finetune_glue", args.to_dict()).log(scores, 0)
    return model, scores


def predict_tests(args, setup, model, splits, metric):
    """Test predictions as submission files (predictions/NAME.tsv), and scores where a test split is
    labelled (IMDB, your own data)."""
    accelerator = setup.accelerator
    scores, files = {}, {}
    for split in splits.predicted:
        loader = accelerator.prepare(eval_loader(args, splits.data[split], setup.tokenizer))
        preds, refs = tasks.predict(model, loader, accelerator, splits.task.is_regression, f"predicting {split}")
        if refs is not None:
            scores[split] = {**metric(preds, refs), "num_examples": len(refs)}
        files[f"predictions/{splits.task.test_splits[split]}"] = tasks.submission(splits.task, splits.test_index[split],
                                                                                 preds)
    return scores, files


def collect_results(args, setup, splits, scores, best):
    """eval_results.json without the test splits' metrics (they follow): the setup, each validation split's
    metrics (of the selected model) and the selection itself when training."""
    results = {"task": splits.task.name, "model_name_or_path": args.model_name_or_path,
               "max_seq_length": setup.max_seq_length, "truncated": splits.truncated}
    if scores:
        for split, metrics in tasks.split_metrics(scores, splits.evaluated).items():
            results[split] = {**metrics, "num_examples": len(splits.data[split])}
    if args.do_train:
        results["best"] = {"split": splits.evaluated[0] if splits.evaluated else None,
                           "metric": splits.task.best_metric, "value": None, "step": 0}
        if best is not None:
            results["best"].update(value=best["metrics"][splits.task.best_metric], step=best["step"],
                                   epoch=best["epoch"])
    return results


def report(accelerator, results):
    for split, scores in results.items():
        if isinstance(scores, dict) and "num_examples" in scores:
            accelerator.print(f"{split}: " + ", ".join(f"{k} {v:.4f}" for k, v in scores.items()
                                                       if k != "num_examples"))


def model_card(run, splits, results):
    """The final folder's README.md: what was finetuned on what, its scores, how to use it, the recipe."""
    args, task = run.args, splits.task
    config = run.accelerator.unwrap_model(run.model).config
    rows = "\n".join(f"| {split} | {name} | {value:.4f} |" for split, scores in results.items()
                     if isinstance(scores, dict) and "num_examples" in scores
                     for name, value in scores.items() if name != "num_examples")
    from_hub = not Path(args.model_name_or_path).exists()  # a local path is no valid `base_model`
    dataset = args.dataset_name or (task.dataset[0] if task.dataset and not args.data_files() else None)
    best = results["best"]
    kept = (f"the model kept is the best by {best['split']} {best['metric']} (step {best['step']})"
            if best["value"] is not None else "the model kept is the last one (no validation split to select on)")
    return outputs.model_card(
        title=args.hub_model_id or Path(args.output_dir).name, pipeline_tag="text-classification",
        tags=[config.model_type, "text-classification", *([task.name] if task.name != "custom" else [])],
        datasets=[dataset] if dataset else None, base_model=args.model_name_or_path if from_hub else None,
        arguments=run.arguments(),
        intro=f"A {config.model_type} sequence classifier finetuned from `{args.model_name_or_path}` on "
              f"{task.name if task.name != 'custom' else 'local files'} with `finetune_glue.py` from linformer-hf "
              f"(RoBERTa's finetuning recipe), inputs up to {results['max_seq_length']} tokens; {kept}.",
        sections={"Results": f"| split | metric | value |\n| --- | --- | --- |\n{rows}",
                  "Use": outputs.pipeline_use("text-classification", args.hub_model_id or args.output_dir,
                                              "A fine, quiet film.")})


def write_results(args, setup, files):
    """Predict-only: the results, predictions and arguments, written into a temporary folder and then moved
    in, so that a killed run leaves no results without their predictions."""
    accelerator, out = setup.accelerator, setup.output_dir
    tmp = out / ".results.tmp"
    with processes.together(accelerator, "writing the results"), \
            checkpoints.writing("the results", tmp, out, accelerator.num_processes):
        if accelerator.is_main_process:
            shutil.rmtree(tmp, ignore_errors=True)
            outputs.write_files(tmp, {**files, "predict_config.yaml": yaml.safe_dump(args.to_dict(), sort_keys=False)})
            checkpoints.publish(tmp, out)


def predict_only(args, setup, model, splits, metric):
    """--do_train false: the finetuned model's scores and predictions, published together."""
    model, scores = evaluate_only(args, setup, model, splits, metric)
    test_scores, predictions = predict_tests(args, setup, model, splits, metric)
    results = {**collect_results(args, setup, splits, scores, best=None), **test_scores}
    report(setup.accelerator, results)
    write_results(args, setup, {"eval_results.json": results, **predictions})
    setup.accelerator.print(f"Done: results in {setup.output_dir}")
    outputs.end(setup.accelerator)
    return results


def main(argv=None):
    args = parse_args(FinetuneArguments, argv, prog="finetune_glue.py")
    accelerator, accumulation = loop.start(args)
    setup = check_inputs(args, accelerator, accumulation)
    splits = prepare_data(args, setup)
    metric = load_glue_metric(splits.task.metric, args.metric_script)
    model = build_model(args, splits.task, setup.config)
    if not args.do_train:
        return predict_only(args, setup, model, splits, metric)
    run = build_run(args, setup, model, splits, metric)
    loop.fit(run, setup.checkpoint, evaluate_start=False, task=splits.task.name, max_seq_length=setup.max_seq_length)
    best = restore_best_model(run)
    test_scores, predictions = predict_tests(args, setup, run.model, splits, metric)
    results = {**collect_results(args, setup, splits, best["metrics"] if best else {}, best), **test_scores}
    report(accelerator, results)
    outputs.finish(run, model_card(run, splits, results), f"Finetuned on {splits.task.name}",
                   extra_files={"eval_results.json": results, **predictions})
    remove_best_model(run)
    return results


if __name__ == "__main__":
    processes.run_script(main, "finetune_glue.py")
