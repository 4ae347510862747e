# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Command-line arguments of every script: `transformers.HfArgumentParser` plus YAML recipes.

HfArgumentParser turns dataclasses into flags (types, Literal choices, `--flag true|false`). What it
lacks, and what this module adds, is small: a `--config recipe.yaml` whose keys are flags (the command
line wins), bounds for every number checked at construction (so a bad value is refused before any
data is read, whether the arguments come from the command line or from Python), and a one-line error
naming the closest known flag for an unknown one.
"""

import argparse
import dataclasses
import difflib
import math
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

import yaml
from transformers import HfArgumentParser, SchedulerType


class ScriptError(Exception):
    """An error a script reports as one line, not a traceback (bad input, a diverged run, ...)."""


class UsageError(ScriptError, ValueError):
    """Bad input from the user (a flag, a file, a config)."""


def arg(default, help, **kwargs):
    """A dataclass field with its one-line `--help` text."""
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help, **kwargs})
    return field(default=default, metadata={"help": help, **kwargs})


def did_you_mean(kind, key, allowed):
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f" (did you mean `{close[0]}`?)" if close else ""
    return f"unknown {kind} `{key}`{hint}; allowed: {', '.join(sorted(allowed))}"


_INTERVAL = re.compile(r"^\s*([\[(])\s*(\S+?)\s*,\s*(\S+?)\s*([\])])\s*$")


def _check_bound(name, value, interval):
    low_bracket, low, high, high_bracket = _INTERVAL.match(interval).groups()
    low, high = float(low), float(high)
    above = value > low if low_bracket == "(" else value >= low
    inside = above and (value < high if high_bracket == ")" else value <= high)
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and inside):
        raise UsageError(f"--{name} {value}: must be in {interval.replace('inf', '∞')}")


def _literal_choices(tp):
    if typing.get_origin(tp) is Literal:
        return typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        for inner in typing.get_args(tp):
            if typing.get_origin(inner) is Literal:
                return typing.get_args(inner)
    return None


def _merged(cls, attribute):
    merged = {}
    for base in reversed(cls.__mro__):
        merged.update(getattr(base, attribute, {}) if attribute in vars(base) else {})
    return merged


@dataclass
class Arguments:
    """Base of every script's arguments: validates bounds and choices however the object is built.

    `bounds` maps each numeric field to an interval such as "[1, inf)" or "(0, 1)" (None always passes).
    """

    bounds: ClassVar[dict[str, str]] = {}

    def __post_init__(self):
        hints = typing.get_type_hints(type(self))
        for name, interval in _merged(type(self), "bounds").items():
            value = getattr(self, name)
            for item in value if isinstance(value, list) else [value]:
                if item is not None:
                    _check_bound(name, item, interval)
        for f in dataclasses.fields(self):
            choices = _literal_choices(hints[f.name])
            value = getattr(self, f.name)
            if choices and value is not None and value not in choices:
                raise UsageError(f"--{f.name} {value}: allowed: {', '.join(map(str, choices))}")
        if isinstance(getattr(self, "config_overrides", None), str):
            parse_overrides(self.config_overrides)  # a syntax error surfaces now, not after data preparation

    def to_dict(self):
        return dataclasses.asdict(self)


def numeric_fields(cls):
    """Names of the int/float fields, which must all have bounds (checked by the tests)."""
    hints = typing.get_type_hints(cls)
    numeric = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        parts = typing.get_args(tp) if typing.get_origin(tp) in (typing.Union, types.UnionType) else (tp,)
        parts = [typing.get_args(p)[0] if typing.get_origin(p) is list else p for p in parts]
        if any(p in (int, float) for p in parts):
            numeric.append(f.name)
    return numeric


# ---------------------------------------------------------------------------------------------------
# Parsing: YAML recipe (optionally `base: other.yaml`) < command line.
# ---------------------------------------------------------------------------------------------------


def read_recipe(path, seen=()):
    """A recipe's keys; `base: other.yaml` (relative to the file) is read first, then overridden."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"--config {path}: no such file")
    if path.resolve() in seen:
        raise UsageError(f"--config {path}: its `base` chain loops back to itself")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise UsageError(f"--config {path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise UsageError(f"--config {path}: expected a mapping of flag names to values")
    base = data.pop("base", None)
    return data if base is None else {**read_recipe(path.parent / base, seen + (path.resolve(),)), **data}


def _recipe_to_argv(recipe):
    """Recipe values as command-line tokens, so that argparse checks them exactly like flags."""
    argv, nulls = [], {}
    for key, value in recipe.items():
        if value is None:
            nulls[key] = None
        elif isinstance(value, dict):
            argv += [f"--{key}", format_overrides(value)]
        elif isinstance(value, list):
            argv += [f"--{key}", *("none" if v is None else str(v) for v in value)]
        elif isinstance(value, bool):
            argv += [f"--{key}", str(value).lower()]
        else:
            argv += [f"--{key}", str(value)]
    return argv, nulls


def parse_args(cls, argv=None, prog=None):
    """A `cls` instance from `--config` (YAML) and flags; any error exits with one line (status 2)."""
    # A one-line usage: argparse would print every flag (40+ lines) before a one-line error, and as the head
    # of --help; the description (the class docstring) follows it there, the flags after.
    parser = HfArgumentParser(cls, prog=prog, description=(cls.__doc__ or "").strip(), allow_abbrev=False,
                              usage="%(prog)s [--config RECIPE.yaml] [--FLAG VALUE ...]   (--help lists every flag)",
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="YAML recipe whose keys are these flags; flags given here win")
    argv = list(sys.argv[1:] if argv is None else argv)
    fields = {f.name for f in dataclasses.fields(cls)}
    try:
        config = parser.parse_known_args(argv)[0].config
        recipe = read_recipe(config) if config else {}
        for key in recipe:
            if key not in fields:
                raise UsageError(f"--config {config}: " + did_you_mean("key", key, fields))
        if "config_overrides" in recipe and "config_overrides" in fields:  # command line merges onto the recipe
            cli = parser.parse_known_args(argv)[0].config_overrides
            recipe["config_overrides"] = {**parse_overrides(recipe["config_overrides"]), **parse_overrides(cli)}
            argv = _without_flag(argv, "--config_overrides")
        recipe_argv, nulls = _recipe_to_argv(recipe)
        parser.set_defaults(**nulls)
        *parsed, unknown = parser.parse_args_into_dataclasses(recipe_argv + argv, return_remaining_strings=True)
    except (UsageError, ValueError, TypeError) as e:
        parser.error(str(e))
    if unknown:
        flag = unknown[0].split("=", 1)[0]
        parser.error(did_you_mean("flag", flag.lstrip("-"), fields) if flag.startswith("--")
                     else f"unexpected value {unknown[0]!r}")
    return parsed[0]


def _without_flag(argv, flag):
    out, skip = [], False
    for token in argv:
        if skip:
            skip = False
        elif token == flag:
            skip = True
        elif not token.startswith(flag + "="):
            out.append(token)
    return out


# ---------------------------------------------------------------------------------------------------
# Model-config overrides: the one way to change a config field from the command line or a recipe.
# ---------------------------------------------------------------------------------------------------


def parse_overrides(text):
    """`"k=v,k2=[1,2]"` (values read as YAML) -> dict; a mapping is returned as it is."""
    if text is None or isinstance(text, dict):
        return dict(text or {})
    pairs, depth, start = [], 0, 0
    for i, char in enumerate(text + ","):
        depth += char in "[{" and 1 or (char in "]}" and -1 or 0)
        if char == "," and depth == 0:
            if text[start:i].strip():
                pairs.append(text[start:i].strip())
            start = i + 1
    overrides = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--config_overrides {text!r}: expected key=value pairs separated by commas")
        overrides[key.strip()] = yaml.safe_load(value)
    return overrides


def format_overrides(overrides):
    return ",".join(f"{k}={yaml.safe_dump(v, default_flow_style=True).strip().removesuffix('...').strip()}"
                    for k, v in overrides.items())


def apply_overrides(config, overrides, flag="--config_overrides"):
    """`config` with `overrides` applied and validated by its class. `config` is a PreTrainedConfig, or a
    config class for a new config (then fields derived from others, like a position table sized for
    `max_seq_length`, follow the overrides)."""
    config_class = config if isinstance(config, type) else type(config)
    base = {} if isinstance(config, type) else config.to_dict()
    allowed = set(config_class().to_dict()) | set(base)
    for key in overrides:
        if key not in allowed:
            raise UsageError(f"{flag}: " + did_you_mean(f"{config_class.__name__} field", key, allowed))
    try:
        return config_class(**{**base, **overrides})
    except (ValueError, TypeError) as e:
        raise UsageError(f"{flag}: {e}") from None


# ---------------------------------------------------------------------------------------------------
# The argument groups the training scripts share.
# ---------------------------------------------------------------------------------------------------

# transformers' schedules that need nothing beyond warmup and length: the others need arguments (a minimum
# learning rate, decay steps) or a metric at every step, and would fail after the first update.
SCHEDULERS = tuple(t.value for t in SchedulerType if t.value not in (
    "reduce_lr_on_plateau", "greedy", "cosine_with_min_lr", "cosine_warmup_with_min_lr", "warmup_stable_decay"))


@dataclass
class OptimizerArguments(Arguments):
    """AdamW with warmup and decay, one scheduler step per update; batch sizes and precision."""

    per_device_train_batch_size: int = arg(16, "sequences per process per forward pass")
    per_device_eval_batch_size: int = arg(64, "sequences per process per evaluation batch")
    gradient_accumulation_steps: int | None = arg(None, "forward passes per update (default: from --total_batch_size, "
                                                        "else 1)")
    total_batch_size: int | None = arg(None, "sequences per update: per-device batch x processes x accumulation")
    learning_rate: float = arg(1e-3, "peak learning rate")
    weight_decay: float = arg(0.01, "AdamW weight decay (not applied to biases and norms)")
    adam_beta1: float = arg(0.9, "AdamW beta1")
    adam_beta2: float = arg(0.98, "AdamW beta2 (RoBERTa: 0.98)")
    adam_epsilon: float = arg(1e-6, "AdamW epsilon (RoBERTa: 1e-6)")
    max_grad_norm: float = arg(1.0, "clip the gradient norm to this (0: no clipping)")
    lr_scheduler_type: Literal[SCHEDULERS] = arg("linear", "learning-rate schedule after warmup")
    warmup_steps: int = arg(0, "updates of linear warmup (used when --warmup_ratio is 0)")
    warmup_ratio: float = arg(0.0, "fraction of the updates spent warming up (overrides --warmup_steps)")
    max_steps: int | None = arg(None, "updates to train for")
    mixed_precision: Literal["no", "fp16", "bf16"] | None = arg(
        None, "autocast precision (default: Accelerate's config / `accelerate launch --mixed_precision`)")
    seed: int = arg(42, "seed of weights, data order, masks and dropout")

    bounds = {"per_device_train_batch_size": "[1, inf)", "per_device_eval_batch_size": "[1, inf)",
              "gradient_accumulation_steps": "[1, inf)", "total_batch_size": "[1, inf)",
              "learning_rate": "(0, inf)", "weight_decay": "[0, inf)", "adam_beta1": "[0, 1)",
              "adam_beta2": "[0, 1)", "adam_epsilon": "(0, inf)", "max_grad_norm": "[0, inf)",
              "warmup_steps": "[0, inf)", "warmup_ratio": "[0, 1)", "max_steps": "[1, inf)",
              "seed": "[0, 4294967295]"}

    def __post_init__(self):
        super().__post_init__()
        if self.max_steps:  # otherwise known once the data is read (epochs)
            self.num_warmup_steps(self.max_steps)

    def num_warmup_steps(self, max_steps):
        """Warmup updates of a run of `max_steps`; refused if they leave none for the decay, naming the flag
        that set them (a default --warmup_ratio is no --warmup_steps the user gave)."""
        warmup = math.ceil(self.warmup_ratio * max_steps) if self.warmup_ratio else self.warmup_steps
        if warmup >= max_steps and self.lr_scheduler_type not in ("constant", "constant_with_warmup"):
            source = (f"--warmup_ratio {self.warmup_ratio:g} ({warmup} warmup update(s))" if self.warmup_ratio
                      else f"--warmup_steps {warmup}")
            raise UsageError(f"{source} leaves no updates for the {self.lr_scheduler_type} decay of a run of "
                             f"{max_steps} update(s); lower it, train longer, or use --lr_scheduler_type "
                             f"constant_with_warmup")
        return warmup


@dataclass
class LinformerRateArguments(Arguments):
    """Rates of their own for the parts of a Linformer that start far from trained while the rest starts trained
    (a converted model): E/F begin as window means, the global-slot gates closed, at zero."""

    projection_learning_rate: float | None = arg(None, "peak learning rate of the E/F projections "
                                                       "(default: --learning_rate)")
    gate_learning_rate: float | None = arg(None, "peak learning rate of the global-slot gates of a model with "
                                                 "attention_type='windowed' (default: --learning_rate); they start "
                                                 "closed and must open within the run")

    bounds = {"projection_learning_rate": "(0, inf)", "gate_learning_rate": "(0, inf)"}


@dataclass
class RunArguments(Arguments):
    """Where results go, how often to log, evaluate and checkpoint, how to resume, and the Hub."""

    output_dir: str = arg("outputs/run", "folder for the final model, checkpoints and logs")
    overwrite_output_dir: bool = arg(False, "replace a non-empty --output_dir whole (otherwise refused)")
    logging_steps: int = arg(10, "log the training loss every N updates")
    eval_steps: int | None = arg(None, "evaluate every N updates (0: only at the end)")
    checkpointing_steps: int = arg(0, "save a resumable checkpoint every N updates (0: none)")
    save_total_limit: int | None = arg(2, "keep the newest N checkpoints (None: all)")
    resume_from_checkpoint: str | None = arg(None, "`latest` or a checkpoint folder")
    allow_inexact_resume: bool = arg(False, "resume even if a process's RNG state is missing (not bit-exact)")
    allow_missing_manifest: bool = arg(False, "resume a checkpoint without manifest.json, written by a version "
                                              "older than manifests (otherwise it counts as damaged)")
    report_to: str = arg("tensorboard", "trackers: tensorboard, wandb, ..., comma-separated, `all` or `none`")
    push_to_hub: bool = arg(False, "upload the final model to the Hub (needs --hub_model_id)")
    hub_model_id: str | None = arg(None, "Hub repository ORG/NAME")
    hub_private_repo: bool = arg(False, "create the Hub repository as private")

    bounds = {"logging_steps": "[1, inf)", "eval_steps": "[0, inf)", "checkpointing_steps": "[0, inf)",
              "save_total_limit": "[1, inf)"}

    def __post_init__(self):
        super().__post_init__()
        if self.push_to_hub and not self.hub_model_id:
            raise UsageError("--push_to_hub needs --hub_model_id ORG/NAME")


@dataclass
class CorpusArguments(Arguments):
    """A text corpus (Hub datasets and/or local files) packed into blocks of tokens."""

    dataset_name: list[str] | None = arg(None, "Hub dataset(s); several are mixed")
    dataset_config_name: list[str] | None = arg(None, "one config per --dataset_name (`none`: no config)")
    train_file: list[str] | None = arg(None, "local text/json(l)/parquet/csv/tsv files or globs, optionally compressed")
    validation_file: list[str] | None = arg(None, "local validation files (default: hold out part of train)")
    text_column_name: str | None = arg(None, "column holding the text (default: `text`, or the only string column)")
    validation_split_percentage: float = arg(5.0, "percent of train documents held out when there is no validation "
                                                  "split (0: none held out, and nothing is evaluated)")
    streaming: bool = arg(False, "read the corpus lazily (Hub or local), for corpora larger than the disk cache")
    streaming_validation_docs: int = arg(1000, "streaming: the first N documents are the validation split")
    streaming_shuffle_buffer: int = arg(10000, "streaming: documents in the shuffle buffer")
    mix_probabilities: list[float] | None = arg(None, "sampling probability of each corpus (default: concatenate)")
    block_size: int | None = arg(None, "tokens per packed block (default: the model's longest input)")
    preprocessing_num_workers: int | None = arg(None, "processes for tokenization")
    dataloader_num_workers: int = arg(0, "DataLoader worker processes")
    max_eval_samples: int | None = arg(None, "evaluate on at most N validation blocks")

    bounds = {"validation_split_percentage": "[0, 100)", "streaming_validation_docs": "[1, inf)",
              "streaming_shuffle_buffer": "[1, inf)", "mix_probabilities": "(0, 1]", "block_size": "[2, inf)",
              "preprocessing_num_workers": "[1, inf)", "dataloader_num_workers": "[0, inf)",
              "max_eval_samples": "[1, inf)"}

    def __post_init__(self):
        super().__post_init__()
        if self.dataset_config_name:
            self.dataset_config_name = [None if c in ("none", "null", "") else c for c in self.dataset_config_name]
        if self.mix_probabilities and abs(sum(self.mix_probabilities) - 1) > 1e-6:
            raise UsageError(f"--mix_probabilities {self.mix_probabilities}: must sum to 1")

    def corpus_sources(self):
        """Where the corpus comes from, by the names `corpus.check_sources` takes."""
        return {"dataset_name": self.dataset_name, "dataset_config_name": self.dataset_config_name,
                "train_file": self.train_file, "validation_file": self.validation_file,
                "mix_probabilities": self.mix_probabilities}

    def corpus_options(self):
        """The corpus as `corpus.load_corpus` reads it, by name: its sources and how its validation split is drawn
        (the seed is the run's)."""
        return {**self.corpus_sources(), "text_column_name": self.text_column_name,
                "validation_split_percentage": self.validation_split_percentage, "streaming": self.streaming,
                "streaming_validation_docs": self.streaming_validation_docs}
