"""Config parsing (defaults < YAML < flags, unknown keys rejected), metrics logging, checkpoint rotation."""

import json
from dataclasses import dataclass, field
from typing import Literal

import pytest
import torch

from linformer_hf import script_utils as su


@dataclass
class Demo:
    """A demo config."""

    learning_rate: float = 1e-3
    max_steps: int = 10
    name: str | None = None
    push_to_hub: bool = False
    train_file: list[str] | None = None
    schedule: Literal["linear", "cosine"] = "linear"
    model: dict = field(default_factory=lambda: {"hidden_size": 64, "projected_dim": 16})


def parse(argv):
    return su.parse_config(Demo, argv, prog="demo")


def parse_error(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def write(path, text):
    path.write_text(text)
    return str(path)


def test_defaults_then_yaml_then_flags(tmp_path):
    assert parse([]) == Demo()
    recipe = write(tmp_path / "r.yaml",
                   "learning_rate: 1e-4\nmax_steps: 50\ntrain_file: a.jsonl\nmodel: {hidden_size: 768}\n")
    args = parse(["--config", recipe])
    # PyYAML reads `1e-4` as a string; it must still arrive as a float. A scalar fills a list field.
    assert args.learning_rate == 1e-4 and args.max_steps == 50 and args.train_file == ["a.jsonl"]
    assert args.model == {"hidden_size": 768}  # a recipe's mapping replaces the default whole
    args = parse(["--config", recipe, "--max_steps", "7", "--push_to_hub", "--train_file", "x.txt", "y.txt",
                  "--model.projected_dim", "256", "--model.dims=[64, 128]", "--name", "none"])
    assert args.max_steps == 7 and args.push_to_hub is True and args.train_file == ["x.txt", "y.txt"]
    assert args.model == {"hidden_size": 768, "projected_dim": 256, "dims": [64, 128]}
    assert args.name is None
    assert parse(["--push_to_hub", "false"]).push_to_hub is False
    # A dotted flag without a recipe merges into the default mapping.
    assert parse(["--model.projected_dim", "32"]).model == {"hidden_size": 64, "projected_dim": 32}


def test_unknown_flag_is_an_error(capsys):
    assert "unrecognized arguments: --max_step" in parse_error(["--max_step", "3"], capsys)
    assert "unrecognized arguments: --bogus.key" in parse_error(["--bogus.key", "3"], capsys)


def test_unknown_yaml_key_is_an_error_with_a_suggestion(tmp_path, capsys):
    recipe = write(tmp_path / "r.yaml", "learning_rat: 0.1\n")
    err = parse_error(["--config", recipe], capsys)
    assert "unknown key `learning_rat`" in err and "did you mean `learning_rate`" in err


@pytest.mark.parametrize("argv, message", [
    (["--max_steps", "2.5"], "`max_steps`='2.5' is invalid"),
    (["--learning_rate", "fast"], "`learning_rate`='fast' is invalid"),
    (["--push_to_hub", "maybe"], "`push_to_hub`='maybe' is invalid; expected true or false"),
    (["--schedule", "step"], "`schedule`='step' is invalid; allowed: linear, cosine"),
    (["--model.hidden_size"], "--model.hidden_size expects a value"),
    (["--config", "/nonexistent/recipe.yaml"], "no such file"),
])
def test_bad_values_name_the_key(argv, message, capsys):
    assert message in parse_error(argv, capsys)


def test_yaml_must_be_a_mapping_and_values_typed(tmp_path, capsys):
    assert "mapping" in parse_error(["--config", write(tmp_path / "a.yaml", "- 1\n- 2\n")], capsys)
    assert "`max_steps`" in parse_error(["--config", write(tmp_path / "b.yaml", "max_steps: [1]\n")], capsys)
    assert "`model` must be a mapping" in parse_error(["--config", write(tmp_path / "c.yaml", "model: 3\n")], capsys)


def test_base_recipe(tmp_path, capsys):
    write(tmp_path / "base.yaml", "max_steps: 100\nlearning_rate: 0.5\nmodel: {hidden_size: 768, projected_dim: 128}\n")
    child = write(tmp_path / "child.yaml", "base: base.yaml\nmax_steps: 200\nmodel: {hidden_size: 768}\n")
    args = parse(["--config", child])
    assert (args.max_steps, args.learning_rate, args.model) == (200, 0.5, {"hidden_size": 768})
    loop = write(tmp_path / "loop.yaml", "base: loop.yaml\n")
    assert "loops" in parse_error(["--config", loop], capsys)


def test_resolve_trackers():
    assert su.resolve_trackers("none") is None
    assert su.resolve_trackers("tensorboard") == ["tensorboard"]
    with pytest.raises(su.UsageError, match="unknown --report_to tracker `tensorbord`"):
        su.resolve_trackers("tensorbord")


@pytest.fixture
def accelerator():
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    yield Accelerator(cpu=True)
    AcceleratorState._reset_state(reset_partial_state=True)


def test_log_metrics_appends_json_lines(tmp_path, accelerator):
    path = tmp_path / "metrics.jsonl"
    su.log_metrics(accelerator, {"train_loss": 2.5}, step=1, jsonl_path=path)
    su.log_metrics(accelerator, {"eval_loss": 2.0, "eval_perplexity": 7.39}, step=2, jsonl_path=path)
    rows = su.read_jsonl(path)
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[0]["train_loss"] == 2.5 and rows[1]["eval_perplexity"] == 7.39 and "time" in rows[0]


def _prepared(accelerator):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    return accelerator.prepare(model, optimizer)


def _train_step(model, optimizer):
    model(torch.randn(3, 4)).sum().backward()
    optimizer.step()
    optimizer.zero_grad()


def test_checkpoints_rotate_and_restore(tmp_path, accelerator):
    model, optimizer = _prepared(accelerator)
    ckpts = tmp_path / "checkpoints"
    saved = {}
    for step in (1, 2, 3):
        _train_step(model, optimizer)
        su.save_checkpoint(accelerator, ckpts, step, {"epoch": 0, "batches_in_epoch": step}, keep_last=2,
                           save_extra=lambda folder: (folder / "extra.txt").write_text("hi"))
        saved[step] = model.weight.detach().clone()
    assert [p.name for p in su.list_checkpoints(ckpts)] == ["step_2", "step_3"]  # step_1 rotated out
    latest = su.find_checkpoint("latest", ckpts)
    assert latest.name == "step_3" and (latest / "extra.txt").read_text() == "hi"

    _train_step(model, optimizer)
    assert not torch.equal(model.weight, saved[2])
    state = su.load_checkpoint(accelerator, ckpts / "step_2")
    assert state == {"step": 2, "epoch": 0, "batches_in_epoch": 2}
    assert torch.equal(model.weight, saved[2])


def test_crash_mid_save_leaves_previous_checkpoint(tmp_path, accelerator, monkeypatch):
    model, optimizer = _prepared(accelerator)
    ckpts = tmp_path / "checkpoints"
    su.save_checkpoint(accelerator, ckpts, 5, {"epoch": 0}, keep_last=1)
    before = sorted(p.name for p in (ckpts / "step_5").iterdir())

    def crash(output_dir, **kwargs):
        (tmp_path / "checkpoints" / ".tmp-step_10").mkdir(exist_ok=True)
        (tmp_path / "checkpoints" / ".tmp-step_10" / "model.safetensors").write_bytes(b"half a fi")
        raise KeyboardInterrupt("killed mid-write")

    monkeypatch.setattr(accelerator, "save_state", crash)
    with pytest.raises(KeyboardInterrupt):
        su.save_checkpoint(accelerator, ckpts, 10, {"epoch": 0}, keep_last=1)
    # The half-written folder is not a checkpoint; the previous one is complete and still the latest.
    assert [p.name for p in su.list_checkpoints(ckpts)] == ["step_5"]
    assert su.find_checkpoint("latest", ckpts).name == "step_5"
    assert sorted(p.name for p in (ckpts / "step_5").iterdir()) == before
    monkeypatch.undo()
    su.save_checkpoint(accelerator, ckpts, 10, {"epoch": 0}, keep_last=1)  # a later save cleans up
    assert [p.name for p in su.list_checkpoints(ckpts)] == ["step_10"]
    assert not (ckpts / ".tmp-step_10").exists()


def test_find_checkpoint(tmp_path):
    assert su.find_checkpoint("latest", tmp_path / "none_yet") is None
    with pytest.raises(su.UsageError, match="--resume_from_checkpoint .*not a checkpoint folder"):
        su.find_checkpoint(str(tmp_path), tmp_path)
    (tmp_path / "step_7").mkdir()
    (tmp_path / "step_7" / su.STATE_FILE).write_text(json.dumps({"step": 7}))
    assert su.find_checkpoint(str(tmp_path / "step_7"), tmp_path) == tmp_path / "step_7"


def test_ensure_writable_dir(tmp_path):
    assert su.ensure_writable_dir(tmp_path / "a" / "b").is_dir()
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a folder")
    with pytest.raises(su.UsageError, match="--output_dir .*file.txt/out is not a writable directory"):
        su.ensure_writable_dir(blocker / "out")


def test_main_process_first_returns_or_raises(accelerator):
    assert su.main_process_first(accelerator, lambda: 42) == 42

    def fail():
        raise su.UsageError("--train_file x: no such file")

    with pytest.raises(su.UsageError, match="--train_file x"):
        su.main_process_first(accelerator, fail)
