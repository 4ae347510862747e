# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""train_mlm.py end to end on CPU: recipes, bad input, a short run, resume after a kill, 2-process DDP."""

import dataclasses
import errno
import json
import logging
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import accelerate
import pytest
import torch
from conftest import REPO, Payload, error_of, free_port, kill_session, run_group, updates_made, write_jsonl
from safetensors.torch import load_file, save_file

import train_mlm
from linformer_training import checkpoints, loop
from linformer_training.arguments import UsageError, parse_args
from linformer_training.models import input_limit
from linformer_training.tracking import read_jsonl

MICRO = """\
model_type: {model_type}
config_overrides: {model}
train_file: [{corpus}]
tokenizer_vocab_size: 400
per_device_train_batch_size: 8
learning_rate: 3.0e-3
warmup_steps: 2
eval_steps: 0
logging_steps: 1
checkpointing_steps: 0
report_to: none
"""
SIZE = "hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4, intermediate_size: 64"
LINFORMER = "{" + SIZE + ", max_seq_length: 64, projected_dim: 16}"
ROBERTA = "{" + SIZE + ", max_position_embeddings: 66}"  # n=64, positions numbered after pad id 1
NO_DROPOUT = ["--config_overrides", "hidden_dropout_prob=0,attention_probs_dropout_prob=0"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The first 15 sections of the bundled Moby Dick (about 1,000 blocks of 64 tokens)."""
    path = tmp_path_factory.mktemp("corpus") / "moby15.jsonl"
    lines = (REPO / "data" / "moby_dick" / "chapters.jsonl").read_text().splitlines()[:15]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def micro(corpus, tmp_path_factory):
    folder = tmp_path_factory.mktemp("recipes")
    for name, model_type, model in [("micro", "linformer", LINFORMER), ("micro_roberta", "roberta", ROBERTA)]:
        (folder / f"{name}.yaml").write_text(MICRO.format(model_type=model_type, model=model, corpus=corpus))
    return folder


pytestmark = pytest.mark.usefixtures("fresh_accelerate_state")


def run(micro, out, *flags, recipe="micro"):
    return train_mlm.main(["--config", str(micro / f"{recipe}.yaml"), "--output_dir", str(out), *flags])


def losses(out, key="train_loss"):
    return [r[key] for r in read_jsonl(Path(out) / "metrics.jsonl") if key in r]


# --- recipes ---------------------------------------------------------------------------------------


def test_no_arguments_is_the_tiny_recipe_with_the_convolution():
    """tiny.yaml keeps the paper's learned E/F at k = 32 (the quality study's records start from it); with no
    arguments the same model trains with the default projection, the convolution at k = 64."""
    defaults = parse_args(train_mlm.MLMArguments, [])
    tiny = parse_args(train_mlm.MLMArguments, ["--config", str(REPO / "configs" / "tiny.yaml"),
                                               "--config_overrides", "projection_type=conv,projected_dim=64"])
    assert train_mlm.model_config(defaults).to_dict() == train_mlm.model_config(tiny).to_dict()
    assert dataclasses.replace(defaults, config_overrides=None) == dataclasses.replace(tiny, config_overrides=None)
    paper = train_mlm.model_config(parse_args(train_mlm.MLMArguments, ["--config", str(REPO / "configs/tiny.yaml")]))
    assert (paper.projection_type, paper.projected_dim) == ("linear", 32)
    assert Path(defaults.train_file[0]) == REPO / "data" / "moby_dick" / "chapters.jsonl"
    assert defaults.model_type == "linformer" and defaults.tokenizer_name is None


def test_a_new_linformer_pretrains_with_the_projection_the_quality_study_makes_the_default():
    """Issue 66, item 4: the convolution is the default for a new model exactly when the committed records find it
    within 5% of standard attention's perplexity in at most twice its updates at both n, at the k/n of its fastest
    configuration at the default n; learned E/F otherwise. New records that change the verdict fail this until the
    default follows them."""
    from experiments.quality import render

    records = render.load()
    config = train_mlm.model_config(parse_args(train_mlm.MLMArguments, []))
    if not render.convolution_is_the_default(records):
        assert config.projection_type == "linear"
        return
    (n, best), _ = render.convolution_readings(records)
    assert (config.projection_type, config.max_seq_length, config.projected_dim) == ("conv", n, best.run["k"])
    assert config.projection_sharing == best.run["sharing"]


@pytest.mark.parametrize("overrides, field", [("max_seq_length=100", "projected_dim"),
                                               ("projection_init=window_mean", "projection_init")])
def test_a_field_the_default_convolution_refuses_names_the_way_to_learned_projections(overrides, field):
    args = parse_args(train_mlm.MLMArguments, ["--config_overrides", overrides])
    with pytest.raises(UsageError, match=f"{field}.*projection_type='conv' is train_mlm.py's default for a new "
                                         "Linformer: add projection_type=linear") as error:
        train_mlm.model_config(args)
    assert "\n" not in str(error.value)
    linear = parse_args(train_mlm.MLMArguments, ["--config_overrides", f"{overrides},projection_type=linear"])
    assert train_mlm.model_config(linear).projection_type == "linear"
    chosen = parse_args(train_mlm.MLMArguments, ["--config_overrides", f"{overrides},projection_type=conv"])
    with pytest.raises(UsageError) as error:  # a convolution asked for by name gets the config's own message only
        train_mlm.model_config(chosen)
    assert "train_mlm.py's default" not in str(error.value)


RECIPES = sorted((REPO / "configs").glob("*.yaml"))  # train_mlm.py recipes (distill.py's are in configs/distill/)


@pytest.mark.parametrize("recipe", RECIPES, ids=[p.stem for p in RECIPES])
def test_every_recipe_parses_into_a_valid_model(recipe):
    args = parse_args(train_mlm.MLMArguments, ["--config", str(recipe)])
    config = train_mlm.model_config(args)
    n = input_limit(config)
    assert (args.block_size or n) <= n
    assert args.adam_beta2 == 0.98 and args.adam_epsilon == 1e-6 and args.weight_decay == 0.01
    if args.model_type == "linformer":
        assert all(k <= n for k in config.projected_dims)


def test_paper_recipes_cover_the_grid():
    """RoBERTa-base size with n=512, k in {128, 256} x every sharing mode; n=1024..4096 with k=256;
    a standard-attention RoBERTa of the same size, trained the same way."""
    found = set()
    for recipe in RECIPES:
        args = parse_args(train_mlm.MLMArguments, ["--config", str(recipe)])
        config = train_mlm.model_config(args)
        if config.hidden_size != 768:
            continue
        if args.model_type == "roberta":
            found.add(("roberta", input_limit(config)))
        else:
            found.add((config.max_seq_length, config.projected_dim, config.projection_sharing))
    for k in (128, 256):
        for sharing in ("none", "headwise", "key_value", "layerwise"):
            assert (512, k, sharing) in found
    for n in (1024, 2048, 4096):
        assert any(f[:2] == (n, 256) for f in found)
    assert ("roberta", 512) in found


# --- bad input and faults: one table, a row per case (issue 13) ----------------------------------


@pytest.fixture(scope="module")
def finished(micro, tmp_path_factory):
    """A finished 4-update run with checkpoints at updates 2 and 4, copied by each case that damages it."""
    from accelerate.state import AcceleratorState, GradientState

    out = tmp_path_factory.mktemp("finished") / "run"
    run(micro, out, "--max_steps", "4", "--checkpointing_steps", "2", "--save_total_limit", "2")
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    return out


def overwrite_tail(path, size=4096):
    """4 KiB of 0xFF at the end of a file: a header that still parses, weights that are NaN."""
    data = bytearray(path.read_bytes())
    data[-size:] = b"\xff" * size
    path.write_bytes(bytes(data))


def truncate(path):
    path.write_bytes(path.read_bytes()[:100])


def finite_garbage(path, size=4096, at=None):
    """4 KiB of float32 sevens at the end of a file (or from byte `at`): every tensor still decodes, finite."""
    data = bytearray(path.read_bytes())
    start = len(data) - size if at is None else at
    data[start:start + size] = torch.full((size // 4,), 7.0).numpy().tobytes()
    path.write_bytes(bytes(data))


LATEST, PREVIOUS = "checkpoints/checkpoint_4", "checkpoints/checkpoint_2"
DAMAGE = {  # what is done to a copy of the finished run before the command
    "nan weights": lambda out: overwrite_tail(out / LATEST / "model.safetensors"),
    "truncated weights": lambda out: truncate(out / LATEST / "model.safetensors"),
    "truncated optimizer": lambda out: truncate(out / LATEST / "optimizer.bin"),
    "no scheduler": lambda out: (out / LATEST / "scheduler.bin").unlink(),
    "bad state": lambda out: (out / LATEST / "trainer_state.json").write_text("{"),
    "no rng": lambda out: [(out / c / "random_states_0.pkl").unlink() for c in (LATEST, PREVIOUS)],
    "all damaged": lambda out: [truncate(out / c / "model.safetensors") for c in (LATEST, PREVIOUS)],
    "no checkpoints": lambda out: shutil.rmtree(out / "checkpoints"),
    "finite weights": lambda out: finite_garbage(out / LATEST / "model.safetensors"),
    "foreign rng": lambda out: torch.save({"step": 4}, out / LATEST / "random_states_0.pkl"),
    "finite optimizer": lambda out: finite_garbage(out / LATEST / "optimizer.bin", size=64,  # tensor data, not zip
                                                   at=(out / LATEST / "optimizer.bin").stat().st_size // 2),
    # issue 33
    "no manifest": lambda out: (out / LATEST / "manifest.json").unlink(),
    "no manifest, finite weights": lambda out: [(out / LATEST / "manifest.json").unlink(),
                                                finite_garbage(out / LATEST / "model.safetensors")],
    "custom state": lambda out: [torch.save({"x": torch.ones(2)}, out / LATEST / "custom_checkpoint_0.pkl"),
                                 checkpoints.write_manifest(out / LATEST)],
    "linked checkpoint": lambda out: [(out / PREVIOUS).rename(out.parent / "elsewhere"),
                                      (out / PREVIOUS).symlink_to(out.parent / "elsewhere")],
    "linked log": lambda out: [(out / "metrics.jsonl").rename(out.parent / "elsewhere.jsonl"),
                               (out / "metrics.jsonl").symlink_to(out.parent / "elsewhere.jsonl")],
}


class FullDisk:
    """A file that takes `budget[0]` more bytes (shared by every file opened on the same full disk), then writes
    what fits and fails with ENOSPC, as a write to a full disk does."""

    def __init__(self, file, budget):
        self.file, self.budget = file, budget

    def write(self, data):
        fits = data[:max(self.budget[0], 0)]
        self.budget[0] -= len(data)
        self.file.write(fits)
        if len(fits) < len(data):
            self.file.flush()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return len(data)

    def __getattr__(self, name):
        return getattr(self.file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()


def full_disk(name, budget):
    """Fault: the disk fills up while `name` (a file name) is written, after `budget` bytes of it."""
    def install(monkeypatch, out):
        import builtins
        import io

        real, left = builtins.open, [budget]

        def opener(file, mode="r", *args, **kwargs):
            handle = real(file, mode, *args, **kwargs)
            writing = any(m in mode for m in "wax") and Path(str(file)).name == name
            return FullDisk(handle, left) if writing else handle

        monkeypatch.setattr(builtins, "open", opener)
        monkeypatch.setattr(io, "open", opener)
    return install


def tokenizer_disk_full(monkeypatch, out):
    """Fault: the disk fills up while the trained tokenizer is saved: tokenizers writes part of tokenizer.json,
    then raises a bare Exception with the OS error in its text."""
    from transformers import PreTrainedTokenizerBase

    def save_pretrained(self, folder, *args, **kwargs):
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / "tokenizer.json").write_text('{"version": "1.0", "trunc')
        raise Exception("No space left on device (os error 28)")

    monkeypatch.setattr(PreTrainedTokenizerBase, "save_pretrained", save_pretrained)


def optimizer_disk_full(monkeypatch, out):
    """Fault: the disk fills up while the checkpoint of step 4 writes optimizer.bin: torch's stream writer
    reports it only as "unexpected pos" (seen on a 300 KiB tmpfs), and 12 KiB are left."""
    import shutil as shutil_module

    import accelerate.checkpointing

    real_save, real_usage = accelerate.checkpointing.save, shutil_module.disk_usage

    def save(obj, file, *args, **kwargs):
        if "checkpoint_4" in str(file) and Path(file).name == "optimizer.bin":
            Path(file).write_bytes(b"PK\x03\x04" + b"\0" * 100)
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 130816 vs 130708")
        return real_save(obj, file, *args, **kwargs)

    def usage(path):
        full = real_usage(path)
        return type(full)(full.total, full.total - 12 * 1024, 12 * 1024) if str(out) in str(path) else full

    monkeypatch.setattr(accelerate.checkpointing, "save", save)
    monkeypatch.setattr(shutil_module, "disk_usage", usage)


FAULTS = {  # installed (monkeypatch, out) before the command of a fresh run
    "disk full: tokenizer": tokenizer_disk_full,
    "disk full: first metrics line": full_disk("metrics.jsonl", 40),
    "disk full: metrics mid-run": full_disk("metrics.jsonl", 1500),
    "disk full: train_config.yaml": full_disk(".tmp-train_config.yaml", 100),
    "disk full: optimizer.bin": optimizer_disk_full,
}
RESUME = ["--resume_from_checkpoint", "latest", "--max_steps", "6"]
FALLBACK = r"checkpoint_4 is damaged: .*; trying the previous checkpoint[\s\S]*Resumed from .*checkpoint_2: step 2"
CASES = [  # case, damage (a DAMAGE key) or None, flags, expected output (regex), whether it must fail
    ("diverging run", None, ["--learning_rate", "1e6", "--max_steps", "6", "--warmup_steps", "1"],
     r"step \d: the (training loss|gradient norm) is (nan|inf).*last good checkpoint: none", True),
    ("nan weights in latest checkpoint", "nan weights", RESUME, FALLBACK + r"[\s\S]*Done: 6 updates", False),
    ("truncated weights", "truncated weights", RESUME, FALLBACK, False),
    ("truncated optimizer", "truncated optimizer", RESUME, FALLBACK, False),
    ("missing scheduler", "no scheduler", RESUME, FALLBACK, False),
    ("invalid trainer_state.json", "bad state", RESUME, FALLBACK, False),
    ("missing RNG state", "no rng", RESUME, "random_states_0.pkl missing.*pass --allow_inexact_resume true", True),
    ("missing RNG state, accepted", "no rng", RESUME + ["--allow_inexact_resume", "true"],
     r"Resumed from .*checkpoint_4", False),
    ("every checkpoint damaged", "all damaged", RESUME,
     "no checkpoint can be resumed: .*checkpoint_4.*checkpoint_2", True),
    ("damaged checkpoint named by path", "truncated weights",
     ["--resume_from_checkpoint", "{out}/" + LATEST, "--max_steps", "6"],
     r"checkpoint .*checkpoint_4 is damaged", True),
    ("finished folder, no checkpoints", "no checkpoints", ["--max_steps", "6"],
     r"--output_dir .* is not empty; pass --overwrite_output_dir to replace it$", True),
    ("earlier run with checkpoints", "nan weights", ["--max_steps", "6"],
     "is not empty; pass --overwrite_output_dir .*, or --resume_from_checkpoint latest", True),
    ("keep_last_checkpoints", None, ["--keep_last_checkpoints", "-1"], "unknown flag `keep_last_checkpoints`", True),
    ("save_total_limit -1", None, ["--save_total_limit", "-1"], r"--save_total_limit -1: must be in \[1, ∞\)", True),
    ("max_steps -5", None, ["--max_steps", "-5"], r"--max_steps -5: must be in \[1, ∞\)", True),
    ("learning_rate -1", None, ["--learning_rate", "-1"], r"--learning_rate -1.0: must be in \(0, ∞\)", True),
    ("learning_rate 0", None, ["--learning_rate", "0"], r"--learning_rate 0.0: must be in \(0, ∞\)", True),
    ("mlm_probability 1.5", None, ["--mlm_probability", "1.5"], r"--mlm_probability 1.5: must be in \(0, 1\)", True),
    ("validation_split_percentage 150", None, ["--validation_split_percentage", "150"],
     r"--validation_split_percentage 150.0: must be in \[0, 100\)", True),
    ("gradient_accumulation_steps -2", None, ["--gradient_accumulation_steps", "-2"],
     r"--gradient_accumulation_steps -2: must be in \[1, ∞\)", True),
    ("fp16 on CPU", None, ["--mixed_precision", "fp16"],
     "--mixed_precision fp16: needs a GPU; on CPU use bf16 or no", True),
    ("unknown config field", None, ["--config_overrides", "hiden_size=64"], "did you mean `hidden_size`", True),
    ("vocab_size 0", None, ["--config_overrides", "vocab_size=0", "--tokenizer_vocab_size", "261"],
     "`vocab_size`=0 is invalid", True),
    ("negative dropout", None, ["--config_overrides", "hidden_dropout_prob=-0.1"],
     "`hidden_dropout_prob`=-0.1 is invalid", True),
    ("whitespace-only corpus", None, ["--train_file", "{data}/blank.jsonl"], "the train split has no text", True),
    ("header-only CSV", None, ["--train_file", "{data}/header.csv"], "header.csv: no rows", True),
    ("0-byte CSV", None, ["--train_file", "{data}/empty.csv"], "empty.csv: file is empty", True),
    ("missing file", None, ["--train_file", "{data}/nope.jsonl"], r"--train_file .*nope.jsonl: no such file", True),
    ("block above n", None, ["--block_size", "128"], "--block_size 128 exceeds the model's longest input n=64", True),
    ("k above n", None, ["--config_overrides", "projected_dim=128"], r"`projected_dim`=128 is invalid", True),
    ("unwritable output", None, ["--output_dir", "{data}/a_file/out"], "--output_dir .*not a writable folder", True),
    ("batch arithmetic", None, ["--total_batch_size", "12"], "--total_batch_size 12 is not a multiple of", True),
    ("push without id", None, ["--push_to_hub"], "--push_to_hub needs --hub_model_id", True),
    ("not a checkpoint", None, ["--resume_from_checkpoint", "{data}"],
     "--resume_from_checkpoint .*not a complete checkpoint", True),
    ("tokenizer too big", None, ["--config_overrides", "vocab_size=100"],
     "vocab_size=100 is below --tokenizer_vocab_size 400", True),
    ("unknown tracker", None, ["--report_to", "tensorbord"], "--report_to: unknown tracker `tensorbord`", True),
    ("all warmup", None, ["--max_steps", "2"], "--warmup_steps 2 leaves no updates for the polynomial decay", True),
    # issue 23: damage that still decodes is found by the checkpoint's manifest, before any training
    ("finite garbage in the weights", "finite weights", RESUME,
     FALLBACK.replace(": .*;", ": model.safetensors does not match its SHA-256 in manifest.json.*;") +
     r"[\s\S]*Done: 6 updates", False),
    ("another run's RNG state", "foreign rng", RESUME,
     FALLBACK.replace(": .*;", r": random_states_0.pkl has \d+ bytes, manifest.json says \d+;"), False),
    ("finite garbage in the optimizer", "finite optimizer", RESUME,
     FALLBACK.replace(": .*;", ": optimizer.bin does not match its SHA-256.*;"), False),
    # issue 23: the bad inputs that ended in a traceback, an unclear message or silence
    ("invalid JSON", None, ["--train_file", "{data}/broken.jsonl"],
     r"cannot read .*broken.jsonl: JSON parse error: Missing a comma .* in row 1", True),
    ("non-UTF-8 text file", None, ["--train_file", "{data}/latin1.txt"],
     r"cannot read .*latin1.txt: not UTF-8 text", True),
    ("non-UTF-8 JSON lines", None, ["--train_file", "{data}/latin1.jsonl"],
     r"--train_file: the train split is not UTF-8 text .*iconv", True),
    ("integer texts", None, ["--train_file", "{data}/numbers.jsonl"],
     r"--train_file: column `text` holds int64 values, not text", True),
    *[(f"scheduler {name}", None, ["--lr_scheduler_type", name],
       rf"argument --lr_scheduler_type.*: invalid choice: '{name}' \(choose from 'linear'", True)
      for name in ("reduce_lr_on_plateau", "cosine_with_min_lr", "warmup_stable_decay")],
    ("output_dir is a file", None, ["--output_dir", "{data}/a_file"],
     r"--output_dir .*a_file: is a file; pass a folder", True),
    ("batch above the data", None, ["--per_device_train_batch_size", "100000"],
     r"--per_device_train_batch_size 100000 x 1 process\(es\) x 1 accumulation step\(s\) = 100000 sequences per "
     r"update, but the training set has only [\d,]+; lower", True),
    ("no `text` field: the column read is said", None, ["--train_file", "{data}/body.jsonl", "--max_steps", "3"],
     r"--train_file: no `text` column; reading its only string column, `body`, as the text", False),
    ("rows without text: counted and said", None, ["--train_file", "{data}/holes.jsonl", "--max_steps", "3"],
     r"--train_file: 3 of the train split's 18 documents have no text \(the field missing, null or blank\)", False),
    # issue 33: a missing manifest is damage unless the user says an older version wrote the checkpoint
    ("checkpoint without its manifest", "no manifest", RESUME,
     FALLBACK.replace(": .*;", r": manifest.json is missing \(this version writes one into every checkpoint\); if a "
                               r"version older than manifests wrote it, pass --allow_missing_manifest true;")
     + r"[\s\S]*Done: 6 updates", False),
    ("no manifest and garbage in the weights", "no manifest, finite weights", RESUME,
     FALLBACK.replace(": .*;", ": manifest.json is missing .*;"), False),
    ("no manifest, older version said", "no manifest", RESUME + ["--allow_missing_manifest", "true"],
     r"checkpoint_4 has no manifest.json \(--allow_missing_manifest: an older version wrote it\)[\s\S]*Resumed from "
     r".*checkpoint_4: step 4", False),
    ("a custom state listed in the manifest", "custom state", RESUME,
     FALLBACK.replace(": .*;", r": custom_checkpoint_0.pkl is a custom state no linformer-hf run writes \(Accelerate "
                               r"would stop on it\);"), False),
    # issue 33: links out of the output folder are never followed, deleted through or written through
    ("a checkpoint that is a link", "linked checkpoint", RESUME + ["--checkpointing_steps", "2"],
     r"^--output_dir .*out: checkpoints/checkpoint_2 is a symbolic link \(to .*elsewhere\); a run removes and "
     r"rewrites what is inside its output folder, never through a link: replace the link with a copy \(cp -rL\) or "
     r"remove it$", True),
    ("a log that is a link", "linked log", RESUME, r"^--output_dir .*out: metrics.jsonl is a symbolic link", True),
    ("a link, overwritten", "linked log", ["--overwrite_output_dir", "--max_steps", "4"],
     r"^--output_dir .*out: metrics.jsonl is a symbolic link", True),
    # issue 33: a full disk at every write is one line, leaves nothing half-written, names the intact checkpoint
    ("disk full: tokenizer", "disk full: tokenizer", ["--max_steps", "4"],
     r"^could not write the trained tokenizer into .*out \(No space left on device\); nothing was published\. Last "
     r"good checkpoint: none$", True),
    ("disk full: first metrics line", "disk full: first metrics line", ["--max_steps", "4"],
     r"^could not write .*out/metrics.jsonl \(No space left on device\); it is as it was before\. Last good "
     r"checkpoint: none$", True),
    ("disk full: metrics mid-run", "disk full: metrics mid-run", ["--max_steps", "8", "--checkpointing_steps", "2"],
     r"^could not write .*out/metrics.jsonl \(No space left on device\); it is as it was before\. Last good "
     r"checkpoint: .*out/checkpoints/checkpoint_\d$", True),
    ("disk full: train_config.yaml", "disk full: train_config.yaml", ["--max_steps", "4"],
     r"^could not write .*out/train_config.yaml \(No space left on device\); it is as it was before", True),
    ("disk full: optimizer.bin", "disk full: optimizer.bin", ["--max_steps", "6", "--checkpointing_steps", "2"],
     r"^could not write the checkpoint of step 4 into .*out/checkpoints \(No space left on device: 12 KiB free; the "
     r"writer said: \[enforce fail at inline_container.cc:672\] \. unexpected pos 130816 vs 130708\); nothing was "
     r"published\. Last good checkpoint: .*out/checkpoints/checkpoint_2$", True),
    # issue 33: what passed silently
    ("dataset not in the offline cache", None, ["--dataset_name", "nosuch/corpus"],
     r"^--dataset_name nosuch/corpus: cannot load it \(ConnectionError: .*\); without the Hub only datasets already "
     r"in the cache load: download it once online, or pass local files with --train_file$", True),
    ("tokenizer_vocab_size 100", None, ["--tokenizer_vocab_size", "100"],
     r"--tokenizer_vocab_size 100: a byte-level BPE has at least 261 tokens \(256 bytes and 5 special tokens\); "
     r"pass 261 or more$", True),
    ("mlm_probability 1e-9", None, ["--mlm_probability", "1e-9"],
     r"^--mlm_probability 1e-09 masks 5e-07 of an update's 504 tokens on average: most updates would have nothing "
     r"to learn from; pass at least 0.002 \(RoBERTa: 0.15\)$", True),
    ("validation masks nothing", None, ["--eval_mlm_probability", "1e-9"],
     r"^validation: no token was masked at the rate 1e-09 \(--eval_mlm_probability, else --mlm_probability\), so "
     r"its loss would read 0 and its perplexity 1; raise the rate$", True),
    ("mask and random shares over 1", None, ["--eval_mask_replace_prob", "0.95"],
     r"--eval_mask_replace_prob 0.95 \+ --eval_random_replace_prob 0.1 exceed 1: they are shares of the same masked "
     r"tokens \(BERT: 0.8 \+ 0.1, the rest kept\)$", True),
    ("validation_split_percentage 0: no evaluation, said", None,
     ["--validation_split_percentage", "0", "--max_steps", "3"],
     r"No validation split \(--validation_split_percentage 0, no --validation_file\): nothing is evaluated", False),
]


@pytest.mark.parametrize("case, damage, flags, expected, fails", CASES, ids=[c[0] for c in CASES])
def test_bad_input_and_faults(case, damage, flags, expected, fails, tmp_path, micro, finished, corpus, capsys, caplog,
                              monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    write_jsonl(data / "blank.jsonl", [{"text": "  "}, {"text": "\t"}])
    (data / "broken.jsonl").write_text('{"text": "a"}\n{"text": "b"\n')
    (data / "latin1.txt").write_bytes("Call me Ishmael, caf\xe9.\n".encode("latin-1"))
    (data / "latin1.jsonl").write_bytes('{"text": "Call me Ishmael, caf\xe9."}\n'.encode("latin-1"))
    write_jsonl(data / "numbers.jsonl", [{"text": 5}, {"text": 7}])
    texts = [json.loads(line)["text"] for line in corpus.read_text().splitlines()]
    write_jsonl(data / "body.jsonl", [{"n": i, "body": t} for i, t in enumerate(texts)])
    write_jsonl(data / "holes.jsonl", [{"text": t} for t in texts] + [{"title": "x"}, {"text": None}, {"text": " "}])
    (data / "header.csv").write_text("text\n")
    (data / "empty.csv").write_text("")
    (data / "a_file").write_text("x")
    out = tmp_path / "out"
    fault = FAULTS.get(damage)
    if fault:
        fault(monkeypatch, out)
        damage = None  # a fresh run: nothing there before it
    elif damage:
        shutil.copytree(finished, out)
        DAMAGE[damage](out)
    before = sorted(p.relative_to(out) for p in out.rglob("*")) if out.exists() else []
    elsewhere = {p: p.read_bytes() for p in tmp_path.glob("elsewhere*/**/*") if p.is_file()} | \
        {p: p.read_bytes() for p in tmp_path.glob("elsewhere*") if p.is_file()}
    flags = [f.format(out=out, data=data) for f in flags]

    def call():
        return run(micro, out, *flags)

    if fails:
        message = error_of(call, capsys)
        assert re.search(expected, message), message
        if damage and "damaged" not in case and "RNG" not in case:  # refused before touching the folder
            assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
        if not damage:  # nothing written, nothing non-finite saved (a fault may strike after a checkpoint)
            assert not (out / "model.safetensors").exists()
            assert fault or not list(out.glob("checkpoints/checkpoint_*"))
        # Nothing half-written where a resume or from_pretrained would find it.
        monkeypatch.undo()
        assert not list(out.glob(".tmp-*")) and not list(out.glob("checkpoints/.tmp-*"))
        if (out / "tokenizer").exists():
            json.loads((out / "tokenizer" / "tokenizer.json").read_text())
        if (out / "metrics.jsonl").is_file() and not (out / "metrics.jsonl").is_symlink():
            read_jsonl(out / "metrics.jsonl")
    else:
        caplog.set_level(logging.WARNING)
        run(micro, out, *flags)
        text = caplog.text + capsys.readouterr().out
        assert re.search(expected, text), text
        assert (out / "model.safetensors").exists() and (out / "config.json").exists()
    assert {p: p.read_bytes() for p in elsewhere} == elsewhere  # nothing outside the output folder changed


def test_a_poisoned_checkpoint_is_refused_without_running_its_payload(tmp_path, micro, finished, capsys, caplog):
    """A downloaded folder whose checkpoint_4 holds a pickle payload in optimizer.bin, with a manifest to
    match: named, it is refused as damaged; as `latest`, the run falls back to checkpoint_2. The payload
    never runs (it does under a plain torch.load)."""
    out, marker = tmp_path / "out", tmp_path / "payload_ran"
    shutil.copytree(finished, out)
    torch.save({"state": Payload(marker)}, out / LATEST / "optimizer.bin")
    checkpoints.write_manifest(out / LATEST)
    message = error_of(lambda: run(micro, out, "--resume_from_checkpoint", str(out / LATEST), "--max_steps", "6"),
                       capsys)
    assert re.search(r"checkpoint_4 is damaged: optimizer.bin is missing or unreadable \(UnpicklingError: holds "
                     r"pickled Python objects \(io.open\), which are never unpickled here\)", message), message
    assert "weights_only=False" not in message and "can still be loaded" not in message
    caplog.set_level(logging.WARNING)
    run(micro, out, *RESUME)
    assert re.search(FALLBACK, caplog.text + capsys.readouterr().out)
    assert not marker.exists()
    torch.load(out / LATEST / "optimizer.bin", weights_only=False)
    assert marker.exists()  # the payload was live


HOLDER = """
import sys, time, types
from linformer_training import checkpoints
checkpoints.lock_output_dir(sys.argv[1], types.SimpleNamespace(is_main_process=True, num_processes=1))
print("locked", flush=True)
time.sleep(600)
"""


def test_a_folder_in_use_refuses_a_second_run_until_its_run_dies(tmp_path, micro, finished, capsys):
    """A run holds its output folder (here a process that took the lock as a run does, then killed with -9):
    another run, a resume or an overwrite of that folder stops at once, naming the holder, and touches
    nothing; once the holder is dead the folder is free again."""
    out = tmp_path / "out"
    shutil.copytree(finished, out)
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if not p.name.startswith(".lock")}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        in_use = rf"^--output_dir {out} is in use by another run \(PID {holder.pid} on host {socket.gethostname()}\)"
        for flags in ([], ["--overwrite_output_dir"], RESUME):
            fresh_state()
            message = error_of(lambda flags=flags: run(micro, out, "--max_steps", "4", *flags), capsys)
            assert re.search(in_use, message), message
        assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if not p.name.startswith(".lock")} == before
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    fresh_state()
    run(micro, out, "--max_steps", "3", "--overwrite_output_dir")
    assert (out / "model.safetensors").exists() and not (out / "checkpoints").exists()


def test_a_full_disk_says_what_was_being_written_and_publishes_nothing(tmp_path, micro, capsys, monkeypatch):
    """The writer fails with ENOSPC (as on a full disk) at the second checkpoint, then at the final save:
    one line each, naming what was being written and the checkpoint that is intact; nothing half-written
    is left where a resume or a from_pretrained would find it."""
    import errno

    import accelerate.utils.other
    import transformers.modeling_utils

    def full_disk(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"\0" * 100)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(filename))

    real = accelerate.utils.other.safe_save_file
    monkeypatch.setattr(accelerate.utils.other, "safe_save_file",
                        lambda t, f, metadata=None:
                        (full_disk if "checkpoint_4" in str(f) else real)(t, f, metadata=metadata))
    out = tmp_path / "out"
    message = error_of(lambda: run(micro, out, "--max_steps", "6", "--checkpointing_steps", "2"), capsys)
    assert message == (f"could not write the checkpoint of step 4 into {out / 'checkpoints'} (No space left on "
                       f"device); nothing was published. Last good checkpoint: {out / LATEST.replace('4', '2')}")
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["checkpoint_2"]

    monkeypatch.setattr(accelerate.utils.other, "safe_save_file", real)
    monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", full_disk)
    fresh_state()
    message = error_of(lambda: run(micro, out, "--max_steps", "4", "--checkpointing_steps", "2",
                                   "--resume_from_checkpoint", "latest"), capsys)
    assert message == (f"could not write the final model into {out} (No space left on device); nothing was "
                       f"published. Last good checkpoint: {out / LATEST}")
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".lock")) == \
        ["checkpoints", "metrics.jsonl", "train_config.yaml"]  # no model file, no config.json, no .final.tmp


def test_unknown_flag_and_recipe_key_are_errors(tmp_path, micro, capsys):
    with pytest.raises(SystemExit):
        run(micro, tmp_path, "--max_train_steps", "5")
    assert "unknown flag `max_train_steps` (did you mean `max_steps`?)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run(micro, tmp_path, "--max_stpes", "5")
    assert "unknown flag `max_stpes` (did you mean `max_steps`?)" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("base: " + str(micro / "micro.yaml") + "\nlearning_rte: 0.1\n")
    with pytest.raises(SystemExit):
        train_mlm.main(["--config", str(bad)])
    assert "unknown key `learning_rte`" in capsys.readouterr().err


def test_command_line_error_is_one_line_not_a_traceback(tmp_path):
    result = subprocess.run([sys.executable, str(REPO / "train_mlm.py"), "--block_size", "4096",
                             "--output_dir", str(tmp_path)], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode != 0
    assert "train_mlm.py: error: --block_size 4096 exceeds the model's longest input n=128" in result.stderr
    assert "Traceback" not in result.stderr


# --- training --------------------------------------------------------------------------------------


def test_short_run_learns_and_saves_a_loadable_model(tmp_path, micro):
    from transformers import AutoModelForMaskedLM, AutoTokenizer, pipeline

    out = tmp_path / "run"
    final = run(micro, out, "--max_steps", "30", "--eval_steps", "15", "--checkpointing_steps", "10",
                "--save_total_limit", "2", "--report_to", "tensorboard")
    rows = read_jsonl(out / "metrics.jsonl")
    evals = [r for r in rows if "eval_perplexity" in r]
    assert [r["step"] for r in evals] == [0, 15, 30]  # untrained, periodic, final
    assert evals[-1]["eval_perplexity"] < 0.5 * evals[0]["eval_perplexity"]
    assert final["eval_perplexity"] == evals[-1]["eval_perplexity"]
    train = [r for r in rows if "train_loss" in r]
    assert [r["step"] for r in train] == list(range(1, 31))
    assert all(r["tokens_per_second"] > 0 and r["peak_memory_gb"] > 0 for r in train)
    assert train[-1]["tokens_seen"] >= 30 * 8 * 60
    assert [p.name for p in checkpoints.list_checkpoints(out)] == ["checkpoint_20", "checkpoint_30"]
    assert list((out / "logs").rglob("events.out.tfevents*"))  # TensorBoard

    card = (out / "README.md").read_text()
    assert "pipeline_tag: fill-mask" in card and "eval_perplexity" in card and "projected_dim=16" in card
    assert (out / "model.safetensors").exists() and (out / "modeling_linformer.py").exists()
    model = AutoModelForMaskedLM.from_pretrained(out)
    assert type(model).__name__ == "LinformerForMaskedLM" and model.config.projected_dim == 16
    assert len(AutoTokenizer.from_pretrained(out)) <= model.config.vocab_size
    predictions = pipeline("fill-mask", model=str(out))("Call me <mask>.")
    assert len(predictions) == 5 and all(p["sequence"].startswith("Call me") for p in predictions)


def test_a_new_models_vocabulary_can_be_padded_past_its_tokenizer(tmp_path, micro):
    """docs/training.md's GPU tip: `--config_overrides vocab_size=N` above the tokenizer's size (a multiple of 64)
    merges with the recipe's overrides and trains; the tokenizer keeps its own size, and the rows past it are never
    an input (the collator's random tokens are drawn from the tokenizer) nor a label."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    out = tmp_path / "padded"
    run(micro, out, "--max_steps", "3", "--config_overrides", "vocab_size=448")
    model, tokenizer = AutoModelForMaskedLM.from_pretrained(out), AutoTokenizer.from_pretrained(out)
    assert model.config.vocab_size == 448 and model.config.hidden_size == 32  # the recipe's size kept
    assert model.get_output_embeddings().weight.shape[0] == 448 and len(tokenizer) == 400
    args = parse_args(train_mlm.MLMArguments, ["--mask_replace_prob", "0", "--random_replace_prob", "1"])
    blocks = torch.tensor([tokenizer("Call me Ishmael. " * 40)["input_ids"][:64]] * 32)
    batch = train_mlm.masking(tokenizer, args, validation=False)([{"input_ids": row} for row in blocks])
    replaced = batch["labels"] != -100
    assert replaced.sum() > 100 and (batch["input_ids"] < len(tokenizer)).all()  # every random token a real one
    assert (batch["labels"][replaced] < len(tokenizer)).all()


def test_validation_masks_at_its_own_rate(tmp_path, micro):
    """--eval_mlm_probability fixes the validation masks whatever the training rate: an untrained model
    scores the same before any update as one trained at that rate, and not as one validated at the training rate."""
    def first_eval(name, *flags):
        run(micro, tmp_path / name, "--max_steps", "3", *flags)
        return losses(tmp_path / name, "eval_loss")[0]

    at_15 = first_eval("15", "--mlm_probability", "0.15")
    assert first_eval("40_15", "--mlm_probability", "0.4", "--eval_mlm_probability", "0.15") == at_15
    assert first_eval("40", "--mlm_probability", "0.4") != at_15
    with pytest.raises(SystemExit):
        run(micro, tmp_path / "bad", "--eval_mlm_probability", "1.0")


def test_validation_can_hide_every_masked_token(tmp_path, micro):
    """--eval_mask_replace_prob 1 --eval_random_replace_prob 0: every token validation scores is <mask> in its
    input, so no kept token answers itself (with 80/10/10 a model that copies its input and knows only unigram
    frequencies scored half the unigram perplexity); training keeps its 80/10/10, and the same positions are masked."""
    from linformer_training.corpus import load_corpus
    from linformer_training.mlm import pack
    from linformer_training.tokenization import train_tokenizer

    args = parse_args(train_mlm.MLMArguments, ["--config", str(micro / "micro.yaml"), "--eval_mask_replace_prob", "1",
                                               "--eval_random_replace_prob", "0"])
    docs = load_corpus(train_file=args.train_file)["train"]
    tok = train_tokenizer(docs, 400)
    examples = [{"input_ids": ids} for ids in pack(docs, tok, 64)["input_ids"][:64]]
    scored = {}
    for validation in (False, True):
        collate = train_mlm.masking(tok, args, validation)
        collate.mask_seed = 0  # the same positions in both, to compare what replaces them
        batch = collate(examples)
        chosen = batch["labels"] != -100
        scored[validation] = chosen
        share = (batch["input_ids"][chosen] == tok.mask_token_id).float().mean().item()
        assert (share == 1.0) if validation else (0.7 < share < 0.9)
    assert torch.equal(scored[False], scored[True]) and scored[True].sum() > 100


def test_gradient_accumulation_matches_one_big_batch(tmp_path, micro):
    """An update is 8 sequences whether as one batch of 8 or two of 4: the loss is normalised over
    the update's masked tokens, so the two runs follow the same trajectory."""
    run(micro, tmp_path / "big", "--max_steps", "3", *NO_DROPOUT)
    run(micro, tmp_path / "accum", "--max_steps", "3", "--per_device_train_batch_size", "4",
        "--total_batch_size", "8", *NO_DROPOUT)
    assert losses(tmp_path / "big") == pytest.approx(losses(tmp_path / "accum"), rel=1e-5)
    big, accum = load_file(tmp_path / "big" / "model.safetensors"), load_file(tmp_path / "accum" / "model.safetensors")
    assert all(torch.allclose(big[k], accum[k], atol=1e-6) for k in big)


def test_roberta_baseline_trains_with_the_same_script(tmp_path, micro):
    from transformers import AutoModelForMaskedLM

    run(micro, tmp_path, "--max_steps", "4", recipe="micro_roberta")
    assert type(AutoModelForMaskedLM.from_pretrained(tmp_path)).__name__ == "RobertaForMaskedLM"
    with pytest.raises(UsageError, match="--block_size 128 exceeds the model's longest input n=64"):
        run(micro, tmp_path / "too_long", "--block_size", "128", recipe="micro_roberta")


def test_bf16_mixed_precision_on_cpu(tmp_path, micro):
    """`--mixed_precision bf16` runs on CPU (Accelerate's autocast): finite losses, a checkpoint that
    verifies, and a final model in float32 (the weights are kept in full precision) that loads."""
    from accelerate.state import AcceleratorState, GradientState
    from transformers import AutoModelForMaskedLM

    fp32, bf16 = tmp_path / "fp32", tmp_path / "bf16"
    run(micro, fp32, "--max_steps", "3", "--eval_steps", "0")
    AcceleratorState._reset_state(reset_partial_state=True)  # the precision is fixed once per Accelerate state
    GradientState._reset_state()
    final = run(micro, bf16, "--max_steps", "3", "--checkpointing_steps", "2", "--eval_steps", "0",
                "--mixed_precision", "bf16")
    assert "mixed_precision: bf16" in (bf16 / "train_config.yaml").read_text()
    train = losses(bf16)
    assert len(train) == 3 and all(math.isfinite(x) for x in train) and math.isfinite(final["eval_loss"])
    # bf16 rounds activations, so the run is close to the fp32 one, not equal to it.
    assert train == pytest.approx(losses(fp32), rel=0.02) and train != losses(fp32)
    assert checkpoints.verify_checkpoint(bf16 / "checkpoints" / "checkpoint_2", 1)["step"] == 2
    model = AutoModelForMaskedLM.from_pretrained(bf16)
    assert all(p.dtype == torch.float32 and torch.isfinite(p).all() for p in model.parameters())


def fresh_state():
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()


FP16_INIT_SCALE = 2.0**20


@pytest.fixture
def fp16_on_cpu(monkeypatch):
    """Test-only: on CPU Accelerate gives fp16 neither autocast nor a gradient scaler, and the loop refuses
    it; here the Accelerator gets both, as on a GPU, so the loop's loss-scaling path runs on CPU. The scale
    starts high enough (FP16_INIT_SCALE) for the first updates to overflow, as they do in real fp16 runs."""
    from linformer_training import loop

    make = loop.make_accelerator

    def fp16(args, log_with=None):
        accelerator = make(dataclasses.replace(args, mixed_precision="no"), log_with)
        accelerator.state._mixed_precision = "fp16"
        accelerator.native_amp = True
        accelerator.scaler = torch.amp.GradScaler("cpu", init_scale=FP16_INIT_SCALE)
        return accelerator

    monkeypatch.setattr(loop, "make_accelerator", fp16)


def test_fp16_loss_scaling_skips_overflows_and_resumes_exactly(tmp_path, micro, fp16_on_cpu, capsys, monkeypatch):
    """fp16 with a gradient scaler: overflowing updates are skipped and said, the schedule advances only on
    applied updates, the scaler's state is in every checkpoint, and resuming from one reaches the same
    weights bit for bit (a scaler restarted at FP16_INIT_SCALE would skip again and end elsewhere)."""
    from accelerate.utils import SCALER_NAME

    straight = tmp_path / "straight"
    run(micro, straight, "--max_steps", "8", "--checkpointing_steps", "4", "--lr_scheduler_type", "linear")
    said = capsys.readouterr().out
    rows = [r for r in read_jsonl(straight / "metrics.jsonl") if "loss_scale" in r]
    skipped = rows[-1]["skipped_updates"]
    assert 0 < skipped < 4 and said.count("fp16 gradients overflowed") == skipped, said
    assert rows[0]["loss_scale"] == FP16_INIT_SCALE / 2 and rows[-1]["loss_scale"] == FP16_INIT_SCALE / 2**skipped
    skips = [b["skipped_updates"] - a["skipped_updates"]
             for a, b in zip([{"skipped_updates": 0}] + rows, rows, strict=False)]  # consecutive rows: one short
    assert [math.isnan(r["train_loss"]) for r in rows] == [s == 1 for s in skips]  # one row per update
    step_8 = straight / "checkpoints" / "checkpoint_8"
    assert json.loads((step_8 / checkpoints.STATE_FILE).read_text())["skipped_updates"] == skipped
    schedule = torch.load(step_8 / "scheduler.bin", weights_only=False)
    assert schedule["last_epoch"] == 8 - skipped  # one schedule step per applied update
    step_4 = straight / "checkpoints" / "checkpoint_4"
    assert torch.load(step_4 / SCALER_NAME, weights_only=False)["scale"] == rows[3]["loss_scale"]

    fresh_state()
    resumed = tmp_path / "resumed"
    shutil.copytree(step_4, resumed / "checkpoints" / "checkpoint_4")
    with updates_made(monkeypatch) as steps:
        run(micro, resumed, "--max_steps", "8", "--checkpointing_steps", "4", "--lr_scheduler_type", "linear",
            "--resume_from_checkpoint", "latest")
    assert steps == [4, 5, 6, 7]  # from checkpoint_4, with its scaler: not again from the start
    one, two = load_file(straight / "model.safetensors"), load_file(resumed / "model.safetensors")
    assert all(torch.equal(one[k], two[k]) for k in one)


def test_fp16_divergence_stops_when_the_loss_scale_collapses(tmp_path, micro, fp16_on_cpu, capsys):
    """A diverged fp16 run overflows at every scale: many skipped updates, then the NaN error, nothing saved."""
    message = error_of(lambda: run(micro, tmp_path, "--learning_rate", "1e6", "--warmup_steps", "1",
                                   "--max_steps", "300"), capsys)
    assert re.search(r"step \d+: the gradients overflow fp16 at every loss scale down to .*last good "
                     r"checkpoint: none\)\. Lower --learning_rate, or use bf16", message), message
    assert not (tmp_path / "model.safetensors").exists()


def test_streaming_corpus(tmp_path, micro):
    run(micro, tmp_path, "--max_steps", "3", "--streaming", "--tokenizer_train_docs", "10",
        "--streaming_validation_docs", "2")
    assert len(losses(tmp_path)) == 3 and (tmp_path / "model.safetensors").exists()


def test_offline_push_fails_after_the_local_save(tmp_path, micro, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UsageError, match="--push_to_hub: uploading to someone/tiny on .* failed .*Nothing is lost"):
        run(micro, tmp_path, "--max_steps", "3", "--push_to_hub", "--hub_model_id", "someone/tiny")
    assert (tmp_path / "model.safetensors").exists() and (tmp_path / "README.md").exists()


@pytest.mark.parametrize("checkpointing_steps", ["4", "0"], ids=["checkpoint", "final_model"])
def test_non_finite_weights_are_refused_before_any_save(tmp_path, micro, monkeypatch, capsys, checkpointing_steps):
    """Weights that went NaN in the update before a save (a loss still finite) stop the run at the save, with
    nothing written: not the checkpoint at step 4, not the final model."""
    real = loop.train_update

    def poisoned(run, group):
        result = real(run, group)
        if run.state.step == 3:  # the update that makes step 4, after its finite loss
            with torch.no_grad():
                next(run.model.parameters()).view(-1)[0] = float("nan")
        return result

    monkeypatch.setattr(loop, "train_update", poisoned)
    message = error_of(lambda: run(micro, tmp_path, "--max_steps", "4", "--checkpointing_steps", checkpointing_steps,
                                   "--validation_split_percentage", "0"), capsys)  # no evaluation to see it first
    where = "checkpoint at step 4" if checkpointing_steps == "4" else "final model"
    assert message.startswith(f"{where}: weight ") and message.endswith("holds NaN/inf; nothing was saved"), message
    assert not list(tmp_path.glob("checkpoints/checkpoint_*")) and not (tmp_path / "model.safetensors").exists()


# --- never lose work: resume after a kill ----------------------------------------------------------


def test_resume_latest_continues_and_refuses_another_layout(tmp_path, micro, monkeypatch):
    run(micro, tmp_path, "--max_steps", "4", "--checkpointing_steps", "2", "--save_total_limit", "1")
    assert [p.name for p in checkpoints.list_checkpoints(tmp_path)] == ["checkpoint_4"]
    with pytest.raises(UsageError, match="written with .*'per_device_train_batch_size': 8.*resume with the same"):
        run(micro, tmp_path, "--max_steps", "6", "--resume_from_checkpoint", "latest",
            "--per_device_train_batch_size", "4", "--total_batch_size", "8")
    with updates_made(monkeypatch) as steps:
        run(micro, tmp_path, "--max_steps", "6", "--resume_from_checkpoint", "latest", "--checkpointing_steps", "2")
    assert steps == [4, 5]
    assert [r["step"] for r in read_jsonl(tmp_path / "metrics.jsonl") if "train_loss" in r] == [1, 2, 3, 4, 5, 6]
    state = json.loads((tmp_path / "checkpoints" / "checkpoint_6" / checkpoints.STATE_FILE).read_text())
    assert state["tokens_seen"] > 6 * 8 * 50


# --- continued pretraining (--model_name_or_path) -------------------------------------------------


def test_continuing_a_finished_model_starts_where_it_ended(tmp_path, micro):
    """--model_name_or_path loads the weights and the tokenizer: with the same validation masks, its first
    evaluation is the finished run's last one, and it trains on from there."""
    first = run(micro, tmp_path / "first", "--max_steps", "6", *NO_DROPOUT)
    second = run(micro, tmp_path / "second", "--model_name_or_path", str(tmp_path / "first"), "--max_steps", "4",
                 "--tokenizer_vocab_size", "8", *NO_DROPOUT)  # unused: a tokenizer to train would be refused
    assert losses(tmp_path / "second", "eval_loss")[0] == pytest.approx(first["eval_loss"], rel=1e-6)
    assert second["eval_loss"] < first["eval_loss"]
    assert "continued from" in (tmp_path / "second" / "README.md").read_text()


def test_resuming_a_finished_run_measures_what_it_publishes(tmp_path, micro, finished):
    """A finished run resumed with nothing left to train evaluates the weights it publishes again: here its last
    checkpoint's weights were changed (halved: finite, so only a measurement can tell) by someone who also
    recomputed the manifest. The figures returned, logged (one evaluation at that step, not two) and written
    to eval_results.json are the changed weights', not the finished run's."""
    from safetensors.torch import load_file, save_file

    out = tmp_path / "run"
    shutil.copytree(finished, out)
    old = [r for r in read_jsonl(out / "metrics.jsonl") if "eval_loss" in r and r["step"] == 4]
    last = out / "checkpoints" / "checkpoint_4"
    weights = last / "model.safetensors"
    save_file({k: v * 0.5 for k, v in load_file(weights).items()}, weights, metadata={"format": "pt"})
    checkpoints.write_manifest(last)
    resumed = run(micro, out, "--max_steps", "4", "--checkpointing_steps", "2", "--save_total_limit", "2",
                  "--resume_from_checkpoint", "latest")
    evaluations = [r for r in read_jsonl(out / "metrics.jsonl") if "eval_loss" in r and r["step"] == 4]
    assert len(old) == 1 and len(evaluations) == 1 and evaluations[0]["eval_loss"] != old[0]["eval_loss"]
    assert resumed["eval_loss"] == evaluations[0]["eval_loss"]
    assert json.loads((out / "eval_results.json").read_text())["eval_loss"] == resumed["eval_loss"]
    assert [r["step"] for r in read_jsonl(out / "metrics.jsonl") if "train_loss" in r] == \
        [r["step"] for r in read_jsonl(finished / "metrics.jsonl") if "train_loss" in r]


@pytest.fixture(scope="module")
def bare_bert(tmp_path_factory):
    """A small BERT encoder without a masked-LM head (as a sentence-transformers model ships), with a
    WordPiece tokenizer: what continued pretraining from a real encoder starts from."""
    from tokenizers import Tokenizer, pre_tokenizers, trainers
    from tokenizers import models as tok_models
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = tmp_path_factory.mktemp("bare_bert")
    text = (REPO / "data" / "moby_dick" / "chapters.jsonl").read_text().splitlines()[:15]
    wordpiece = Tokenizer(tok_models.WordPiece(unk_token="[UNK]"))
    wordpiece.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wordpiece.train_from_iterator([json.loads(line)["text"] for line in text], trainers.WordPieceTrainer(
        vocab_size=500, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    tokenizer = BertTokenizerFast(tokenizer_object=wordpiece, unk_token="[UNK]", pad_token="[PAD]",
                                  cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=64, max_position_embeddings=64, pad_token_id=0)).save_pretrained(folder)
    return folder


def test_a_bare_encoder_gets_a_new_head_trained_at_its_own_rate(tmp_path, corpus, bare_bert, capsys, monkeypatch):
    from transformers import AutoModelForMaskedLM, BertModel

    args = train_mlm.parse_args(train_mlm.MLMArguments, ["--model_name_or_path", str(bare_bert),
                                                         "--head_learning_rate", "0.05"])
    model = train_mlm.load_model(args, train_mlm.model_config(args), accelerate.Accelerator(cpu=True))
    assert "has no masked-LM head: new, untrained cls.predictions.bias" in capsys.readouterr().out
    source = BertModel.from_pretrained(bare_bert).state_dict()
    assert all(torch.equal(source[name], tensor) for name, tensor in model.bert.state_dict().items())
    optimizer = loop.build_optimizer(model, args, train_mlm.own_rates(model, args))
    head = {id(p) for p in model.cls.parameters()} - {id(model.bert.embeddings.word_embeddings.weight)}
    rates = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}
    assert {rates[i] for i in head} == {0.05} and rates[id(model.bert.encoder.layer[0].output.dense.weight)] == 1e-3
    assert rates[id(model.bert.embeddings.word_embeddings.weight)] == 1e-3  # the tied decoder is the encoder's

    checked = []  # the checkpoint's config is built, and its weights verified, once per run
    verify = train_mlm.checkpoints.check_model_folder
    monkeypatch.setattr(train_mlm.checkpoints, "check_model_folder",
                        lambda folder, flag: checked.append(folder) or verify(folder, flag))
    continue_bert(bare_bert, tmp_path, corpus, "--head_learning_rate", "0.01")
    assert checked == [str(bare_bert)]
    assert type(AutoModelForMaskedLM.from_pretrained(tmp_path)).__name__ == "BertForMaskedLM"
    assert losses(tmp_path, "eval_loss")[-1] < losses(tmp_path, "eval_loss")[0]


def test_gates_and_projections_take_their_own_rates_only_when_given(micro):
    from transformers import AutoModelForMaskedLM

    def rates(*flags):
        args = train_mlm.parse_args(train_mlm.MLMArguments,
                                    ["--config", str(micro / "micro.yaml"), "--config_overrides",
                                     "attention_type=windowed,exact_attention_length=16", *flags])
        model = AutoModelForMaskedLM.from_config(train_mlm.model_config(args))
        optimizer = loop.build_optimizer(model, args, train_mlm.own_rates(model, args))
        by_id = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}
        return {name: by_id[id(p)] for name, p in model.named_parameters()}, len(optimizer.param_groups)

    plain, groups = rates()
    assert set(plain.values()) == {3e-3} and groups == 2  # as checkpoints written before these flags hold them
    own, groups = rates("--gate_learning_rate", "0.01", "--projection_learning_rate", "1e-4", "--head_learning_rate",
                        "5e-3")
    gates = [n for n in own if n.endswith(".global_gate")]
    projections = [n for n in own if ".projections." in f".{n}"]
    assert gates and projections and groups == 5
    assert {own[n] for n in gates} == {0.01} and {own[n] for n in projections} == {1e-4}
    assert own["lm_head.dense.weight"] == 5e-3 and own["linformer.encoder.layer.0.attention.self.query.weight"] == 3e-3


def continue_bert(source, out, corpus, *flags):
    return train_mlm.main(["--model_name_or_path", str(source), "--max_steps", "4", "--warmup_steps", "1",
                           "--block_size", "64", "--train_file", str(corpus), "--output_dir", str(out),
                           "--report_to", "none", *flags])


def test_a_checkpoint_that_cannot_be_continued_is_refused_in_one_line(tmp_path, corpus, bare_bert, capsys):
    with pytest.raises(UsageError, match="--model_name_or_path .*nowhere: no such local folder|--model_name_or_path"
                                         " ./nowhere"):
        continue_bert("./nowhere", tmp_path / "a", corpus)
    broken = tmp_path / "broken"
    shutil.copytree(bare_bert, broken)
    weights = load_file(broken / "model.safetensors")
    save_file({k: v for k, v in weights.items() if "layer.1." not in k}, broken / "model.safetensors")
    with pytest.raises(UsageError, match=r"lacks \d+ encoder tensor\(s\) .*layer.1.*only a masked-LM head may start "
                                         "new"):
        continue_bert(broken, tmp_path / "b", corpus)
    with pytest.raises(SystemExit):
        continue_bert(bare_bert, tmp_path / "c", corpus, "--head_learning_rate", "0")
    assert "error: --head_learning_rate 0" in capsys.readouterr().err
    with pytest.raises(UsageError, match="--model_type roberta: --model_name_or_path .* is a bert model, and continues "
                                         "as one"):  # a recipe's or a flag's architecture is not silently dropped
        continue_bert(bare_bert, tmp_path / "d", corpus, "--model_type", "roberta")


def test_a_non_finite_validation_loss_names_the_step_and_the_weight(tmp_path):
    """A model whose weights went NaN (a student distilled from a diverged run, say) is reported at the step of the
    evaluation with the first weight that holds NaN, not as a bare "eval_loss is nan" (issue 33)."""
    import types

    from linformer_training import loop

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    with torch.no_grad():
        model[1].bias[0] = float("nan")
    accelerator = types.SimpleNamespace(unwrap_model=lambda m: m, num_processes=1)
    run = types.SimpleNamespace(model=model, accelerator=accelerator, output_dir=tmp_path, eval_loader=None,
                                state=loop.TrainState(step=7),
                                objective=types.SimpleNamespace(evaluate=lambda *a: {"eval_loss": math.nan}))
    with pytest.raises(checkpoints.NonFiniteError, match=r"^step 7: validation eval_loss is nan: weight 1.bias holds "
                                                         r"NaN/inf \(last good checkpoint: none\)$"):
        loop.evaluate(run)


def test_a_resumed_logging_window_averages_all_of_its_updates(tmp_path, micro):
    """Logging every 3 updates, checkpointing every 2: the run resumed from step 4 logs at step 6 the mean loss of
    updates 4, 5 and 6 (update 4's from the checkpoint), bit for bit what the uninterrupted run logs; before issue
    33 it averaged only 5 and 6."""
    flags = ["--max_steps", "6", "--logging_steps", "3", "--checkpointing_steps", "2", "--save_total_limit", "3"]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    run(micro, straight, *flags)
    state = json.loads((straight / "checkpoints" / "checkpoint_4" / checkpoints.STATE_FILE).read_text())
    assert state["window_updates"] == 1 and "window_start" not in state
    shutil.copytree(straight / "checkpoints" / "checkpoint_4", resumed / "checkpoints" / "checkpoint_4")
    fresh_state()
    run(micro, resumed, *flags, "--resume_from_checkpoint", "latest")
    assert [r["step"] for r in read_jsonl(resumed / "metrics.jsonl") if "train_loss" in r] == [6]
    assert losses(resumed) == losses(straight)[-1:]


def script(*flags):
    return [sys.executable, str(REPO / "train_mlm.py"), *flags]


@pytest.mark.slow
def test_resume_after_kill_reaches_the_same_weights(tmp_path, micro):
    """Kill a run after its checkpoint at step 3; resuming it to step 6 must give the weights of an
    uninterrupted 6-step run, bit for bit (dropout on: the RNG state is restored too). A constant
    learning rate lets the killed run have a longer horizon, so that it is still training when killed."""
    common = ["--config", str(micro / "micro.yaml"), "--lr_scheduler_type", "constant_with_warmup",
              "--checkpointing_steps", "3"]
    subprocess.run(script(*common, "--max_steps", "6", "--output_dir", str(tmp_path / "straight")),
                   check=True, capture_output=True)

    killed = tmp_path / "killed"
    proc = subprocess.Popen(script(*common, "--max_steps", "100000", "--output_dir", str(killed)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not (killed / "checkpoints" / "checkpoint_3" / checkpoints.STATE_FILE).exists():
        assert proc.poll() is None and time.time() < deadline, "the run ended before its first checkpoint"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL

    resumed = subprocess.run(script(*common, "--max_steps", "6", "--output_dir", str(killed),
                                    "--resume_from_checkpoint", str(killed / "checkpoints" / "checkpoint_3")),
                             check=True, capture_output=True, text=True)
    assert "Resumed from" in resumed.stdout and "step 3" in resumed.stdout
    straight, again = load_file(tmp_path / "straight" / "model.safetensors"), load_file(killed / "model.safetensors")
    assert straight.keys() == again.keys() and all(torch.equal(straight[k], again[k]) for k in straight)
    assert losses(killed) == losses(tmp_path / "straight")  # the log has each step once, as before


# --- distributed: 2-process data parallel through accelerate launch --------------------------------


@pytest.mark.slow
def test_two_processes_match_one_process(tmp_path, micro):
    """`accelerate launch` with 2 CPU processes (gloo) and 4 sequences each = 1 process with 8: same
    losses and weights (dropout off, as it draws different numbers on each process), and both ranks
    end with identical weights (the script checks and says so)."""
    run(micro, tmp_path / "one", "--max_steps", "4", *NO_DROPOUT)
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1"}
    result = run_group(
        [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
         "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
         "--main_process_port", str(free_port()),
         *script("--config", str(micro / "micro.yaml"), "--max_steps", "4", "--per_device_train_batch_size", "4",
                 "--checkpointing_steps", "2", "--output_dir", str(tmp_path / "two"), *NO_DROPOUT)[1:]],
        env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "2 process(es), 8 sequences per update" in result.stdout
    assert "Weights identical on all 2 processes" in result.stdout
    assert losses(tmp_path / "two") == pytest.approx(losses(tmp_path / "one"), rel=1e-5)
    assert losses(tmp_path / "two", "eval_loss") == pytest.approx(losses(tmp_path / "one", "eval_loss"), rel=1e-5)
    one, two = load_file(tmp_path / "one" / "model.safetensors"), load_file(tmp_path / "two" / "model.safetensors")
    assert all(torch.allclose(one[k], two[k], atol=1e-6) for k in one)
    step_2 = tmp_path / "two" / "checkpoints" / "checkpoint_2"
    assert (step_2 / "random_states_0.pkl").exists() and (step_2 / "random_states_1.pkl").exists()

    # An error found on the main process only (the tokenizer is checked there first) stops both ranks
    # with the message, instead of leaving rank 1 waiting at a barrier.
    result = run_group(
        [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
         "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
         "--main_process_port", str(free_port()),
         *script("--config", str(micro / "micro.yaml"), "--config_overrides", "vocab_size=100",
                 "--output_dir", str(tmp_path / "bad"))[1:]],
        env=env, timeout=300)
    assert result.returncode != 0 and "is below --tokenizer_vocab_size" in result.stderr


def launch(*args, env_extra=None, timeout=600):
    """`accelerate launch` on 2 CPU processes; `args` are the launcher's flags, then the script and its flags."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env_extra or {})}
    return run_group([sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2",
                      "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                      "--main_process_port", str(free_port()), *args], env=env, timeout=timeout, cwd=REPO)


def launch_without_agent(tmp_path, *command, timeout=300):
    """`python COMMAND` as 2 CPU processes started the way srun or a hand-written launcher starts them: no
    torchrun agent ends the others when one fails, so only the run itself can. Returns, per process, its exit
    code, its stderr, and when it exited (seconds)."""
    port, start = str(free_port()), time.monotonic()
    procs = []
    for rank in range(2):
        env = {**os.environ, "OMP_NUM_THREADS": "1", "ACCELERATE_USE_CPU": "1", "RANK": str(rank),
               "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": port}
        with (tmp_path / f"stderr_{rank}").open("w") as err:
            procs.append(subprocess.Popen([sys.executable, *command], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                                          stderr=err, start_new_session=True))
    ended = [None, None]
    try:
        while None in ended:
            for rank, proc in enumerate(procs):
                if ended[rank] is None and proc.poll() is not None:
                    ended[rank] = time.monotonic() - start
            if time.monotonic() - start > timeout:
                raise AssertionError(f"still running after {timeout} s: {ended}")
            time.sleep(0.1)
    finally:
        for proc in procs:
            kill_session(proc)
    return [(proc.returncode, (tmp_path / f"stderr_{rank}").read_text(), ended[rank])
            for rank, proc in enumerate(procs)]


@pytest.mark.slow
@pytest.mark.parametrize("case", ["bad data on the main process", "failed save on the main process"])
def test_a_failure_on_one_process_ends_every_process(case, tmp_path, micro):
    """An error on the main process alone (its turn in main_process_first, its writes of the final model)
    ends the other process too, at once and with a line naming what failed where: not a wait at a barrier
    (NCCL: until a 10-minute timeout) nor gloo's "Connection closed by peer" traceback."""
    flags = ["--config", str(micro / "micro.yaml"), "--max_steps", "3", "--output_dir", str(tmp_path / "out")]
    if case == "bad data on the main process":
        broken = tmp_path / "broken.jsonl"
        broken.write_text('{"text": "fine"}\n{"text": broken\n')
        command = ["train_mlm.py", *flags, "--train_file", str(broken)]
        mine, theirs = r"cannot read .*broken.jsonl", "preparing the data failed on process 0"
    else:
        command = [str(REPO / "tests" / "fail_on_rank0.py"), "linformer_training.checkpoints:publish", "train_mlm.py",
                   *flags]
        mine = "could not write the final model .*No space left on device"
        theirs = "saving the final model failed on process 0"
    (code_0, err_0, end_0), (code_1, err_1, end_1) = launch_without_agent(tmp_path, *command)
    assert code_0 != 0 and re.search(f"train_mlm.py: error: {mine}", err_0), err_0[-3000:]
    assert code_1 != 0 and f"train_mlm.py: error: {theirs} (see its error); process 1 stopped too" in err_1, \
        err_1[-3000:]
    assert "Traceback" not in err_1 and abs(end_0 - end_1) < 30


FSDP2 = ["--use_fsdp", "--fsdp_version", "2", "--fsdp_sync_module_states", "false"]


@pytest.mark.slow
def test_fsdp_on_cpu_processes_is_refused_not_run_as_something_else(tmp_path, micro):
    """Accelerate turns FSDP on for GPUs only. On CPU processes `--use_fsdp` would train with data
    parallelism (ACCELERATE_USE_CPU=1), or as 2 unrelated 1-process runs writing the same folder (without
    it): both stop with a one-line error before anything is written."""
    flags = ["--config", str(micro / "micro.yaml"), "--max_steps", "3"]
    for env, expected in [({"ACCELERATE_USE_CPU": "1"},
                           "FSDP was requested .* Accelerate runs this as MULTI_CPU on cpu"),
                          ({}, "launched as 2 processes, but Accelerate set up 1 .*each would train alone")]:
        out = tmp_path / f"out{len(env)}"
        result = launch(*FSDP2, "train_mlm.py", *flags, "--output_dir", str(out), env_extra=env, timeout=300)
        assert result.returncode != 0 and re.search("train_mlm.py: error: " + expected, result.stderr), \
            result.stderr[-3000:]
        assert not out.exists()


def test_the_documented_cpu_launch_starts_two_processes(tmp_path, micro):
    """docs/training.md's multi-process CPU command, run as written (the tiny recipe appended), trains on 2
    processes."""
    doc = (REPO / "docs" / "training.md").read_text()
    (line,) = [doc_line for doc_line in doc.splitlines()
               if doc_line.startswith("ACCELERATE_USE_CPU=1 accelerate launch")]
    words = line.split()
    env, launcher = dict(w.split("=") for w in words[:1]), words[3:words.index("train_mlm.py")]
    result = launch(*[w for w in launcher if w not in ("--num_processes", "2")], "train_mlm.py",
                    *words[words.index("train_mlm.py") + 1:], "--config", str(micro / "micro.yaml"), "--max_steps", "4",
                    "--output_dir", str(tmp_path / "ddp"), env_extra=env, timeout=300)
    assert "--num_processes 2" in line and result.returncode == 0, result.stderr[-3000:]
    assert "2 process(es)" in result.stdout


def test_a_launch_that_asked_for_more_processes_than_it_started_says_so(tmp_path, micro):
    """`accelerate launch --num_processes 2 --cpu` starts one process (Accelerate's single-process launcher
    ignores the count) and would train alone without a word: it stops with a one-line error giving the CPU form
    that starts two, before anything is written."""
    out = tmp_path / "out"
    result = launch("--cpu", "train_mlm.py", "--config", str(micro / "micro.yaml"), "--max_steps", "3",
                    "--output_dir", str(out), timeout=300)
    assert result.returncode != 0 and not out.exists()
    assert re.search(r"train_mlm.py: error: accelerate launch was asked for 2 processes but started 1: .*"
                     r"ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2", result.stderr), \
        result.stderr[-3000:]


@pytest.mark.slow
def test_fsdp2_trains_checkpoints_resumes_exactly_and_saves_a_plain_folder(tmp_path, micro):
    """FSDP2 on 2 CPU processes (gloo) with activation checkpointing of every layer, layerwise-shared
    projection: the same losses and weights as 1 process with the whole batch (dropout off); sharded
    checkpoints that verify; resuming from step 2 gives bit-identical weights at step 4; the final folder is
    a normal `save_pretrained` folder (remote code, tied weights once) that loads in one process.
    Accelerate runs FSDP on GPUs only, so `tests/fsdp_on_cpu.py` switches it on for CPU processes, and
    nothing else: Accelerate's own wrapping and grouping of the model run as on GPUs."""
    from transformers import AutoModelForMaskedLM

    run(micro, tmp_path / "one", "--max_steps", "4", *NO_DROPOUT)
    fsdp = [*FSDP2, "--fsdp_activation_checkpointing", "true",
            "--fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP",
            "--fsdp_transformer_layer_cls_to_wrap", "LinformerLayer",
            str(REPO / "tests" / "fsdp_on_cpu.py"), "train_mlm.py", "--config", str(micro / "micro.yaml"),
            "--max_steps", "4", "--per_device_train_batch_size", "4", "--checkpointing_steps", "2", *NO_DROPOUT]
    env = {"ACCELERATE_USE_CPU": "1"}
    two = tmp_path / "two"
    result = launch(*fsdp, "--output_dir", str(two), env_extra=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "2 process(es), 8 sequences per update" in result.stdout
    assert "Weights identical" not in result.stdout  # FSDP, not data parallelism: no full replica to compare
    assert losses(two) == pytest.approx(losses(tmp_path / "one"), rel=1e-5)
    one, final = load_file(tmp_path / "one" / "model.safetensors"), load_file(two / "model.safetensors")
    assert final.keys() == one.keys()  # the tied decoder is saved once, as by one process
    assert all(torch.allclose(one[k], final[k], atol=1e-6) for k in one)

    step_2 = two / "checkpoints" / "checkpoint_2"
    assert (step_2 / "pytorch_model_fsdp_0" / ".metadata").is_file() and (step_2 / "optimizer_0").is_dir()
    assert checkpoints.verify_checkpoint(step_2, 2)["step"] == 2
    damaged = tmp_path / "damaged"
    shutil.copytree(step_2, damaged)
    truncate(next((damaged / "pytorch_model_fsdp_0").glob("*.distcp")))
    with pytest.raises(checkpoints.DamagedCheckpoint, match=r"pytorch_model_fsdp_0/__\d_0.distcp has \d+ bytes"):
        checkpoints.verify_checkpoint(damaged, 2)

    resumed = tmp_path / "resumed"
    shutil.copytree(step_2, resumed / "checkpoints" / "checkpoint_2")
    result = launch(*fsdp, "--output_dir", str(resumed), "--resume_from_checkpoint", "latest", env_extra=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Resumed from" in result.stdout and "step 2" in result.stdout
    again = load_file(resumed / "model.safetensors")
    assert again.keys() == final.keys() and all(torch.equal(final[k], again[k]) for k in final)

    assert sorted(p.name for p in two.glob("*.py")) == ["configuration_linformer.py", "modeling_linformer.py"]
    assert not (two / ".final.tmp").exists()
    config = json.loads((two / "config.json").read_text())
    assert config["architectures"] == ["LinformerForMaskedLM"]
    assert config["auto_map"]["AutoModelForMaskedLM"] == "modeling_linformer.LinformerForMaskedLM"
    model = AutoModelForMaskedLM.from_pretrained(two)
    assert type(model).__name__ == "LinformerForMaskedLM" and model.linformer.encoder.projections.num_matrices() == 1
    assert model.lm_head.decoder.weight is model.linformer.embeddings.word_embeddings.weight
