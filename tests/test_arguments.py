# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Arguments: HfArgumentParser + YAML recipes (flags win), bounds on every number, unknown flags, overrides."""

import dataclasses
from dataclasses import dataclass
from typing import Literal

import pytest

from linformer_training import arguments
from linformer_training.arguments import Arguments, UsageError, arg, parse_args, parse_overrides


@dataclass
class Demo(Arguments):
    """A demo."""

    learning_rate: float = arg(1e-3, "lr")
    max_steps: int = arg(10, "steps")
    name: str | None = arg(None, "a name")
    push_to_hub: bool = arg(False, "push")
    train_file: list[str] | None = arg(None, "files")
    schedule: Literal["linear", "cosine"] = arg("linear", "schedule")
    probabilities: list[float] | None = arg(None, "probabilities")
    config_overrides: str | None = arg(None, "overrides")

    bounds = {"learning_rate": "(0, inf)", "max_steps": "[1, 100]", "probabilities": "(0, 1]"}


def parse(argv):
    return parse_args(Demo, argv, prog="demo")


def parse_error(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    return err.strip().splitlines()[-1]


def write(path, text):
    path.write_text(text)
    return str(path)


def test_defaults_then_yaml_then_flags(tmp_path):
    assert parse([]) == Demo()
    recipe = write(tmp_path / "r.yaml", "learning_rate: 1e-4\nmax_steps: 50\ntrain_file: a.jsonl\n"
                                        "push_to_hub: true\nconfig_overrides: {hidden_size: 768, dims: [1, 2]}\n")
    args = parse(["--config", recipe])
    # PyYAML reads `1e-4` as a string; it still arrives as a float. A scalar fills a list field.
    assert args.learning_rate == 1e-4 and args.max_steps == 50 and args.train_file == ["a.jsonl"]
    assert args.push_to_hub is True
    assert parse_overrides(args.config_overrides) == {"hidden_size": 768, "dims": [1, 2]}
    args = parse(["--config", recipe, "--max_steps", "7", "--push_to_hub", "false", "--train_file", "x", "y",
                  "--config_overrides", "projected_dim=256,dims=[64, 128]"])
    assert args.max_steps == 7 and args.push_to_hub is False and args.train_file == ["x", "y"]
    # The command line's overrides merge onto the recipe's, key by key.
    assert parse_overrides(args.config_overrides) == {"hidden_size": 768, "dims": [64, 128], "projected_dim": 256}
    assert parse(["--push_to_hub"]).push_to_hub is True


def test_unknown_flags_and_keys(tmp_path, capsys):
    assert "unknown flag `max_step` (did you mean `max_steps`?)" in parse_error(["--max_step", "3"], capsys)
    assert "unknown flag `max_train_steps` (did you mean `max_steps`?)" in parse_error(["--max_train_steps", "3"],
                                                                                      capsys)
    assert "unknown flag `model.hidden_size`" in parse_error(["--model.hidden_size", "3"], capsys)
    recipe = write(tmp_path / "r.yaml", "learning_rat: 0.1\n")
    assert "unknown key `learning_rat` (did you mean `learning_rate`?)" in parse_error(["--config", recipe], capsys)
    recipe = write(tmp_path / "s.yaml", "max_train_steps: 3\n")
    assert "unknown key `max_train_steps` (did you mean `max_steps`?)" in parse_error(["--config", recipe], capsys)


def test_an_error_is_two_lines_and_help_starts_with_what_the_script_does(capsys):
    """A one-line usage, not every flag, before an error; the same usage, then the description, heads --help."""
    with pytest.raises(SystemExit):
        parse(["--max_step", "3"])
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0].startswith("usage: demo [--config RECIPE.yaml]") and "--help" in err[0]
    with pytest.raises(SystemExit):
        parse(["--help"])
    head = [line for line in capsys.readouterr().out.splitlines() if line.strip()][:2]
    assert head[0].startswith("usage: demo [--config") and head[1] == "A demo."


@pytest.mark.parametrize("argv, message", [
    (["--max_steps", "2.5"], "argument --max_steps/--max-steps: invalid int value: '2.5'"),
    (["--learning_rate", "fast"], "invalid float value: 'fast'"),
    (["--learning_rate", "0"], "--learning_rate 0.0: must be in (0, ∞)"),
    (["--learning_rate", "nan"], "--learning_rate nan: must be in (0, ∞)"),
    (["--max_steps", "0"], "--max_steps 0: must be in [1, 100]"),
    (["--max_steps", "101"], "--max_steps 101: must be in [1, 100]"),
    (["--probabilities", "0.5", "1.5"], "--probabilities 1.5: must be in (0, 1]"),
    (["--push_to_hub", "maybe"], "argument --push_to_hub/--push-to-hub: Truthy value expected"),
    (["--schedule", "step"], "invalid choice: 'step' (choose from 'linear', 'cosine')"),
    (["--config", "/nonexistent/recipe.yaml"], "--config /nonexistent/recipe.yaml: no such file"),
    (["--config_overrides", "hidden_size"], "expected key=value pairs"),
])
def test_bad_values_name_the_flag(argv, message, capsys):
    assert message in parse_error(argv, capsys)


def test_bounds_and_choices_hold_when_built_from_python():
    with pytest.raises(UsageError, match="--max_steps 0: must be in"):
        Demo(max_steps=0)
    with pytest.raises(UsageError, match="--schedule step: allowed: linear, cosine"):
        Demo(schedule="step")


def test_recipe_errors(tmp_path, capsys):
    assert "expected a mapping" in parse_error(["--config", write(tmp_path / "a.yaml", "- 1\n- 2\n")], capsys)
    assert "not valid YAML" in parse_error(["--config", write(tmp_path / "b.yaml", "a: [1\n")], capsys)
    assert "--max_steps 500: must be in [1, 100]" in parse_error(
        ["--config", write(tmp_path / "c.yaml", "max_steps: 500\n")], capsys)
    write(tmp_path / "base.yaml", "max_steps: 100\nlearning_rate: 0.5\nconfig_overrides: {a: 1, b: 2}\n")
    child = write(tmp_path / "child.yaml", "base: base.yaml\nmax_steps: 20\nconfig_overrides: {a: 3}\n")
    args = parse(["--config", child])
    # A child recipe's value replaces its base's whole (every recipe shows its whole model).
    assert (args.max_steps, args.learning_rate, parse_overrides(args.config_overrides)) == (20, 0.5, {"a": 3})
    assert "loops back" in parse_error(["--config", write(tmp_path / "loop.yaml", "base: loop.yaml\n")], capsys)


def test_overrides_parse_and_apply():
    from linformer_hf import LinformerConfig

    assert parse_overrides("a=1, b=[1, 2],c=x,d={e: 1}") == {"a": 1, "b": [1, 2], "c": "x", "d": {"e": 1}}
    assert parse_overrides(arguments.format_overrides({"k": [64, 64], "s": "layerwise"})) == {
        "k": [64, 64], "s": "layerwise"}
    config = arguments.apply_overrides(LinformerConfig, {"max_seq_length": 1024, "projected_dim": 64})
    assert config.max_position_embeddings == 1026  # derived from n, not copied from a default config
    assert arguments.apply_overrides(config, {"projection_length_scaling": "sqrt"}).projected_dim == 64
    with pytest.raises(UsageError, match="did you mean `hidden_size`"):
        arguments.apply_overrides(LinformerConfig, {"hidden_sise": 3})
    with pytest.raises(UsageError, match="--config_overrides: .*projected_dim"):
        arguments.apply_overrides(LinformerConfig, {"projected_dim": 4096})


SCRIPTS = ("train_mlm", "finetune_glue", "distill", "convert_to_linformer", "export_onnx")


def script_argument_classes():
    """Every argument class the scripts' modules define or import, wherever it lives (export_onnx.py's is in
    linformer_training.onnx_export), down the whole subclass tree of Arguments."""
    for script in SCRIPTS:
        __import__(script)

    def below(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from below(sub)

    classes = sorted({c for c in below(Arguments) if dataclasses.is_dataclass(c) and (
        c.__module__ in SCRIPTS or c.__module__.startswith("linformer_training."))}, key=lambda c: c.__qualname__)
    assert {"MLMArguments", "FinetuneArguments", "DistillArguments", "ConvertArguments", "ExportArguments"} <= {
        c.__name__ for c in classes}
    return classes


@pytest.mark.parametrize("cls", script_argument_classes(), ids=lambda c: c.__name__)
def test_every_flag_has_help_and_every_number_a_bound(cls):
    """A bad number must be refused before any data is read: every numeric flag has an interval."""
    bounds = arguments._merged(cls, "bounds")
    assert not [name for name in arguments.numeric_fields(cls) if name not in bounds]
    assert not [f.name for f in dataclasses.fields(cls) if not f.metadata.get("help")]


def test_every_allowed_schedule_runs_on_warmup_and_length_alone():
    """transformers' schedules that need more (a minimum rate, decay steps, a metric per step) failed after
    the first update; they are no choice any more, and every one that is, runs."""
    import torch
    from transformers import SchedulerType, get_scheduler

    assert {"reduce_lr_on_plateau", "cosine_with_min_lr", "warmup_stable_decay"}.isdisjoint(arguments.SCHEDULERS)
    assert {"linear", "cosine", "polynomial", "constant_with_warmup"} <= set(arguments.SCHEDULERS)
    assert set(arguments.SCHEDULERS) < {t.value for t in SchedulerType}
    for name in arguments.SCHEDULERS:
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        scheduler = get_scheduler(name, optimizer, num_warmup_steps=2, num_training_steps=10)
        for _ in range(3):
            optimizer.step()
            scheduler.step()


def test_a_warmup_that_leaves_no_decay_names_the_flag_that_set_it():
    from linformer_training.arguments import OptimizerArguments

    with pytest.raises(UsageError, match=r"^--warmup_ratio 0.6 \(2 warmup update\(s\)\) leaves no updates for the "
                                         r"linear decay of a run of 2 update\(s\)"):
        OptimizerArguments(max_steps=2, warmup_ratio=0.6)
    with pytest.raises(UsageError, match=r"^--warmup_steps 5 leaves no updates for the cosine decay"):
        OptimizerArguments(max_steps=5, warmup_steps=5, lr_scheduler_type="cosine")
    assert OptimizerArguments(max_steps=5, warmup_steps=5, lr_scheduler_type="constant_with_warmup")
    args = OptimizerArguments(warmup_ratio=0.5)  # the length comes from the data: checked once it is known
    assert args.num_warmup_steps(10) == 5
    with pytest.raises(UsageError, match=r"--warmup_ratio 0.5 \(1 warmup update\(s\)\)"):
        args.num_warmup_steps(1)
