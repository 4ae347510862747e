# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""What the scripts need to know about a model config (and where a model's files are), said once."""

from pathlib import Path

from transformers import CONFIG_MAPPING

from .arguments import UsageError, apply_overrides

# RoBERTa-family configs number positions after the pad id, so their position table is 2 rows longer.
OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert", "longformer", "data2vec-text", "xmod")
# The standard-attention encoders convert_to_linformer.py turns into a Linformer (and distill.py's teachers).
SOURCE_TYPES = ("bert", "roberta", "xlm-roberta", "camembert")


def input_limit(config):
    """The longest input (in tokens) a model of this config accepts."""
    if getattr(config, "max_seq_length", None):  # Linformer: n
        return config.max_seq_length
    if config.model_type in OFFSET_POSITIONS:
        return config.max_position_embeddings - config.pad_token_id - 1
    return config.max_position_embeddings


def input_length(flag, value, config, whose="the model's", remedy=None):
    """`value` of `flag` (tokens per input), which defaults to, and may not exceed, the longest input of `config`."""
    limit = input_limit(config)
    if value and value > limit:
        raise UsageError(f"{flag} {value} exceeds {whose} longest input n={limit}" + (f" ({remedy})" if remedy else ""))
    return value or limit


def new_config(model_type, overrides, tokenizer=None):
    """A from-scratch config of `model_type` with `overrides`; fields they leave unset follow the tokenizer."""
    if model_type not in CONFIG_MAPPING:
        raise UsageError(f"--model_type {model_type}: not registered (is linformer_hf installed?)")
    overrides = dict(overrides)
    if tokenizer is not None:
        overrides.setdefault("vocab_size", len(tokenizer))
        for name in ("pad", "bos", "eos"):
            if getattr(tokenizer, f"{name}_token_id") is not None:
                overrides.setdefault(f"{name}_token_id", getattr(tokenizer, f"{name}_token_id"))
    return apply_overrides(CONFIG_MAPPING[model_type], overrides)


def check_local_path(name, flag):
    """A model or tokenizer name that can only mean a local folder, and names none, is refused at once: from
    `from_pretrained` it would be tried as a Hub id and fail after half a minute of retries with "couldn't
    connect". Local means absolute, starting with `.` or `~`, more than one `/` (a Hub id has one), or a first
    part that is a folder here (`runs/lin-k256` while `runs/` exists)."""
    name = str(name)
    if not name or Path(name).expanduser().exists():
        return
    parts = Path(name).parts
    if name.startswith((".", "/", "~")) or name.count("/") > 1 or "\\" in name:
        reason = ""
    elif len(parts) > 1 and Path(parts[0]).is_dir():
        reason = f" (read as a local path: ./{parts[0]} is a folder here)"
    else:
        return
    raise UsageError(f"{flag} {name}: no such folder{reason}; check the path, or create it first (a Hub id is "
                     f"ORG/NAME)")


def model_file(source, name):
    """Local path of the file `name` of a model folder or Hub repo, or None when the source has no such file."""
    from transformers.utils import cached_file

    try:
        return cached_file(source, name, _raise_exceptions_for_missing_entries=False,
                           _raise_exceptions_for_connection_errors=False)
    except OSError:
        return None


def is_projection(name):
    """Whether a parameter is a Linformer E/F projection (`encoder.projections.*`)."""
    return ".projections." in f".{name}"


def is_gate(name):
    """Whether a parameter is a global-slot gate (`attention_type="windowed"` models)."""
    return name.endswith(".global_gate")


def is_long_path(name):
    """Whether only inputs read through the projections use a parameter: E/F, the long-input adapters and the
    gates of the global slots. Training only these leaves the model its teacher, exactly, on every input it
    reads exactly."""
    return is_projection(name) or is_adapter(name) or is_gate(name)


def is_adapter(name):
    """Whether a parameter is part of a long-input adapter (`LinformerLongInputLinear.adapter_*`)."""
    return name.rpartition(".")[2].startswith("adapter_")
