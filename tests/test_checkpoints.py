"""Checkpoints and output folders: complete or absent, rotated only after the new one is complete,
verified before a resume trusts them, and never a final model mixing two runs."""


import pytest
import torch

from linformer_training import checkpoints
from linformer_training.arguments import UsageError


@pytest.fixture
def accelerator():
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    yield Accelerator(cpu=True)
    AcceleratorState._reset_state(reset_partial_state=True)


def prepared(accelerator):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    return accelerator.prepare(model, optimizer, scheduler)


def train_step(model, optimizer):
    model(torch.randn(3, 4)).sum().backward()
    optimizer.step()
    optimizer.zero_grad()


def names(out):
    return [p.name for p in checkpoints.list_checkpoints(out)]


def test_checkpoints_rotate_after_saving_and_restore(tmp_path, accelerator):
    model, optimizer, _ = prepared(accelerator)
    saved = {}
    for step in (1, 2, 3):
        train_step(model, optimizer)
        checkpoints.save_checkpoint(accelerator, tmp_path, {"step": step, "epoch": 0}, total_limit=2)
        saved[step] = model.weight.detach().clone()
    assert names(tmp_path) == ["checkpoint_2", "checkpoint_3"]  # checkpoint_1 rotated out after 3 was complete
    latest = checkpoints.find_resume_checkpoint("latest", tmp_path, num_processes=1)
    assert latest.name == "checkpoint_3"
    train_step(model, optimizer)
    state = checkpoints.load_checkpoint(accelerator, tmp_path / "checkpoints" / "checkpoint_2")
    assert state == {"step": 2, "epoch": 0} and torch.equal(model.weight, saved[2])


def test_crash_mid_save_keeps_the_previous_checkpoint_even_with_limit_1(tmp_path, accelerator, monkeypatch):
    """Accelerate's own rotation deletes the old checkpoint before writing the new one; ours does not."""
    model, optimizer, _ = prepared(accelerator)
    checkpoints.save_checkpoint(accelerator, tmp_path, {"step": 5}, total_limit=1)
    before = sorted(p.name for p in (tmp_path / "checkpoints" / "checkpoint_5").iterdir())

    def crash(output_dir, **kwargs):
        (tmp_path / "checkpoints" / ".tmp-checkpoint_10").mkdir(exist_ok=True)
        (tmp_path / "checkpoints" / ".tmp-checkpoint_10" / "model.safetensors").write_bytes(b"half a fi")
        raise KeyboardInterrupt("killed mid-write")

    monkeypatch.setattr(accelerator, "save_state", crash)
    with pytest.raises(KeyboardInterrupt):
        checkpoints.save_checkpoint(accelerator, tmp_path, {"step": 10}, total_limit=1)
    assert names(tmp_path) == ["checkpoint_5"]
    assert sorted(p.name for p in (tmp_path / "checkpoints" / "checkpoint_5").iterdir()) == before
    monkeypatch.undo()
    checkpoints.save_checkpoint(accelerator, tmp_path, {"step": 10}, total_limit=1)  # a later save cleans up
    assert names(tmp_path) == ["checkpoint_10"] and not (tmp_path / "checkpoints" / ".tmp-checkpoint_10").exists()


def test_verify_and_fall_back(tmp_path, accelerator, caplog):
    model, optimizer, _ = prepared(accelerator)
    for step in (2, 4):
        train_step(model, optimizer)
        checkpoints.save_checkpoint(accelerator, tmp_path, {"step": step})
    latest = tmp_path / "checkpoints" / "checkpoint_4"
    assert checkpoints.verify_checkpoint(latest, 1)["step"] == 4
    with pytest.raises(checkpoints.DamagedCheckpoint, match="random_states_1.pkl missing"):
        checkpoints.verify_checkpoint(latest, 2)  # written by 1 process, resumed by 2
    (latest / "optimizer.bin").write_bytes(b"\0" * 10)
    with pytest.raises(checkpoints.DamagedCheckpoint, match="checkpoint_4 is damaged: optimizer.bin"):
        checkpoints.verify_checkpoint(latest, 1)
    assert checkpoints.find_resume_checkpoint("latest", tmp_path, 1).name == "checkpoint_2"
    assert "checkpoint_4 is damaged" in caplog.text
    with pytest.raises(checkpoints.DamagedCheckpoint):
        checkpoints.find_resume_checkpoint(str(latest), tmp_path, 1)  # named explicitly: no fallback
    assert checkpoints.find_resume_checkpoint("latest", tmp_path / "nothing_yet", 1) is None
    with pytest.raises(UsageError, match="not a complete checkpoint"):
        checkpoints.find_resume_checkpoint(str(tmp_path), tmp_path, 1)


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_verify_accepts_fsdp_sharded_states_and_finds_their_damage(tmp_path, accelerator):
    """FSDP saves weights and optimizer as torch.distributed.checkpoint folders (pytorch_model_fsdp_0/,
    optimizer_0/) instead of model.safetensors and optimizer.bin: complete ones verify, a truncated shard or a
    missing optimizer state is damage. (tests/test_train_mlm.py checks real FSDP2 checkpoints.)"""
    import shutil

    import torch.distributed.checkpoint as dcp

    model, optimizer, _ = prepared(accelerator)
    checkpoints.save_checkpoint(accelerator, tmp_path, {"step": 2})
    path = tmp_path / "checkpoints" / "checkpoint_2"
    (path / "model.safetensors").unlink()
    (path / "optimizer.bin").unlink()
    dcp.save({"model": model.state_dict()}, checkpoint_id=path / "pytorch_model_fsdp_0")
    dcp.save({"optimizer": optimizer.state_dict()["state"]}, checkpoint_id=path / "optimizer_0")
    assert checkpoints.verify_checkpoint(path, 1)["step"] == 2
    shard = next((path / "pytorch_model_fsdp_0").glob("*.distcp"))
    shard.write_bytes(shard.read_bytes()[:-8])
    with pytest.raises(checkpoints.DamagedCheckpoint, match=r"pytorch_model_fsdp_0: .*\.distcp is missing or truncated"):
        checkpoints.verify_checkpoint(path, 1)
    shutil.rmtree(path / "optimizer_0")
    with pytest.raises(checkpoints.DamagedCheckpoint, match="FSDP weights without their optimizer_0"):
        checkpoints.verify_checkpoint(path, 1)


def test_output_dir_is_refused_replaced_or_resumed(tmp_path):
    out = tmp_path / "out"
    assert checkpoints.prepare_output_dir(out, overwrite=False, resuming=False).is_dir()
    (out / "model.safetensors").write_text("old")
    with pytest.raises(UsageError, match="is not empty; pass --overwrite_output_dir to replace it$"):
        checkpoints.prepare_output_dir(out, overwrite=False, resuming=False)
    checkpoints.prepare_output_dir(out, overwrite=True, resuming=False)
    assert list(out.iterdir()) == []  # replaced whole: nothing of the old run is left beside the new one
    for name in ("model.safetensors", "config.json", "metrics.jsonl"):
        (out / name).write_text("old")
    (out / "checkpoints").mkdir()
    checkpoints.prepare_output_dir(out, overwrite=False, resuming=True)
    # Resuming keeps the run's log and checkpoints and drops the previous final model.
    assert sorted(p.name for p in out.iterdir()) == ["checkpoints", "metrics.jsonl"]
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    with pytest.raises(UsageError, match="--output_dir .*file.txt/out: not a writable folder"):
        checkpoints.prepare_output_dir(blocker / "out", overwrite=False, resuming=False)


def test_publish_moves_config_last(tmp_path, monkeypatch):
    """A save killed half-way leaves no config.json, so the folder does not load as a model."""
    tmp, out = tmp_path / "tmp", tmp_path / "out"
    tmp.mkdir()
    out.mkdir()
    for name in ("config.json", "model.safetensors", "README.md"):
        (tmp / name).write_text(name)
    moved = []
    real_replace = checkpoints.os.replace

    def replace(src, dst):
        moved.append(dst.name)
        if dst.name == "config.json":
            raise KeyboardInterrupt("killed")
        real_replace(src, dst)

    monkeypatch.setattr(checkpoints.os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        checkpoints.publish(tmp, out)
    assert moved[-1] == "config.json" and not (out / "config.json").exists()
    monkeypatch.undo()
    checkpoints.publish(tmp, out)
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "config.json", "model.safetensors"]


def test_non_finite_weights_are_never_saved():
    model = torch.nn.Linear(2, 2)
    checkpoints.check_finite(model, "final model")
    with torch.no_grad():
        model.weight[0, 0] = float("nan")
    with pytest.raises(checkpoints.NonFiniteError, match="final model: weight weight holds NaN"):
        checkpoints.check_finite(model, "final model")
