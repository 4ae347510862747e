# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Checkpoints and output folders: complete or absent, rotated only after the new one is complete,
verified before a resume trusts them (checksums, no unpickled objects), one run per folder, and never a
final model mixing two runs."""

import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch
from conftest import Payload

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
    checkpoints.write_manifest(path)
    assert checkpoints.verify_checkpoint(path, 1)["step"] == 2
    shard = next((path / "pytorch_model_fsdp_0").glob("*.distcp"))
    shard.write_bytes(shard.read_bytes()[:-8])
    with pytest.raises(checkpoints.DamagedCheckpoint, match=r"pytorch_model_fsdp_0/.*\.distcp has \d+ bytes, manifest"):
        checkpoints.verify_checkpoint(path, 1)
    checkpoints.write_manifest(path)  # damaged before its manifest was written: the shard check finds it
    with pytest.raises(checkpoints.DamagedCheckpoint,
                       match=r"pytorch_model_fsdp_0: .*\.distcp is missing or truncated"):
        checkpoints.verify_checkpoint(path, 1)
    shutil.rmtree(path / "optimizer_0")
    checkpoints.write_manifest(path)
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
    assert moved[-2:] == ["manifest.json", "config.json"] and not (out / "config.json").exists()
    monkeypatch.undo()
    checkpoints.publish(tmp, out)
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "config.json", "manifest.json", "model.safetensors"]
    assert checkpoints.check_manifest(out, complete=False)


def test_non_finite_weights_are_never_saved():
    model = torch.nn.Linear(2, 2)
    checkpoints.check_finite(model, "final model")
    with torch.no_grad():
        model.weight[0, 0] = float("nan")
    with pytest.raises(checkpoints.NonFiniteError, match="final model: weight weight holds NaN"):
        checkpoints.check_finite(model, "final model")


# --- trust nothing on disk (issue 23) ---------------------------------------------------------------


def two_checkpoints(accelerator, out):
    model, optimizer, _ = prepared(accelerator)
    for step in (2, 4):
        train_step(model, optimizer)
        checkpoints.save_checkpoint(accelerator, out, {"step": step})
    return out / "checkpoints" / "checkpoint_2", out / "checkpoints" / "checkpoint_4"


@pytest.mark.parametrize("name", ["optimizer.bin", "scheduler.bin", "random_states_0.pkl"])
def test_a_pickle_payload_in_any_checkpoint_file_never_runs(name, tmp_path, accelerator, caplog):
    """A downloaded checkpoint whose manifest matches its files: verification reads it as Accelerate's resume
    does (weights_only) and calls it damaged; the payload, live under a plain unpickler, never runs."""
    previous, latest = two_checkpoints(accelerator, tmp_path)
    marker = tmp_path / "payload_ran"
    torch.save({"state": Payload(marker)}, latest / name)
    checkpoints.write_manifest(latest)
    torch.load(latest / name, weights_only=False)
    assert marker.exists()  # the payload works: an unrestricted load runs it
    marker.unlink()

    with pytest.raises(checkpoints.DamagedCheckpoint, match=rf"checkpoint_4 is damaged: {name} is .*unreadable "
                                                            rf"\(UnpicklingError: holds pickled Python objects "
                                                            rf"\(io.open\), which are never unpickled here\)$"):
        checkpoints.find_resume_checkpoint(str(latest), tmp_path, 1)
    assert checkpoints.find_resume_checkpoint("latest", tmp_path, 1) == previous
    assert f"checkpoint_4 is damaged: {name}" in caplog.text
    with pytest.raises(Exception, match=r"holds pickled Python objects \(io.open\)"):
        checkpoints.check_fsdp_state(latest / name)  # a full-state FSDP .bin is read the same way
    try:
        accelerator.load_state(str(latest))  # and Accelerate's own resume, had it been reached
    except Exception:  # whatever Accelerate raises: what counts is that nothing was unpickled
        pass
    assert not marker.exists()


def finite_garbage(path):
    """The end of a safetensors file's data (up to 4 KiB) replaced by float32 sevens: every tensor still
    decodes and is finite."""
    data = bytearray(path.read_bytes())
    tail = min(4096, (len(data) - 8 - int.from_bytes(data[:8], "little")) // 4 * 4)
    data[-tail:] = torch.full((tail // 4,), 7.0).numpy().tobytes()
    path.write_bytes(bytes(data))


def test_the_manifest_finds_damage_that_still_decodes(tmp_path, accelerator, caplog):
    previous, latest = two_checkpoints(accelerator, tmp_path)
    assert sorted(__import__("json").loads((latest / "manifest.json").read_text())["files"]) == sorted(
        p.relative_to(latest).as_posix() for p in latest.rglob("*") if p.is_file() and p.name != "manifest.json")
    pristine = {p.name: p.read_bytes() for p in latest.iterdir()}
    damage = {
        "model.safetensors": (finite_garbage, "model.safetensors does not match its SHA-256 in manifest.json"),
        "random_states_0.pkl": (lambda p: torch.save({"step": 0}, p), r"random_states_0.pkl has \d+ bytes, "
                                                                     r"manifest.json says \d+"),
        "optimizer.bin": (lambda p: p.write_bytes(p.read_bytes()[:-1] + b"\x01"), "optimizer.bin does not match"),
        "extra.txt": (lambda p: p.write_text("x"), "extra.txt is not listed in manifest.json"),
        "scheduler.bin": (lambda p: p.unlink(), r"scheduler.bin is missing \(listed in manifest.json\)"),
    }
    for name, (harm, message) in damage.items():
        harm(latest / name)
        with pytest.raises(checkpoints.DamagedCheckpoint, match=f"checkpoint_4 is damaged: {message}"):
            checkpoints.verify_checkpoint(latest, 1)
        assert checkpoints.last_good_checkpoint(tmp_path, 1) == previous  # what "last good" messages name
        (latest / "extra.txt").unlink(missing_ok=True)
        for original, data in pristine.items():
            (latest / original).write_bytes(data)
        assert checkpoints.last_good_checkpoint(tmp_path, 1) == latest
    # Without its manifest a checkpoint is damaged (issue 33: finite garbage would pass unseen), and `latest`
    # falls back; unless the user says an older version wrote it: then a foreign RNG pickle is still refused by its
    # content, and finite garbage in the weights is not seen.
    (latest / "manifest.json").unlink()
    with pytest.raises(checkpoints.DamagedCheckpoint, match=r"checkpoint_4 is damaged: manifest.json is missing \(this "
                                                            r"version writes one into every checkpoint\); if a version "
                                                            r"older than manifests wrote it, pass --allow_missing_"
                                                            r"manifest true$"):
        checkpoints.verify_checkpoint(latest, 1)
    assert checkpoints.find_resume_checkpoint("latest", tmp_path, 1) == previous
    assert checkpoints.last_good_checkpoint(tmp_path, 1) == previous
    assert checkpoints.verify_checkpoint(latest, 1, allow_missing_manifest=True)["step"] == 4
    assert "has no manifest.json (--allow_missing_manifest: an older version wrote it)" in caplog.text
    assert checkpoints.find_resume_checkpoint("latest", tmp_path, 1, allow_missing_manifest=True) == latest
    torch.save({"step": 0}, latest / "random_states_0.pkl")
    with pytest.raises(checkpoints.DamagedCheckpoint, match="random_states_0.pkl is unreadable .*not an RNG state"):
        checkpoints.verify_checkpoint(latest, 1, allow_missing_manifest=True)


def test_a_model_folder_is_checked_before_it_is_used(tmp_path):
    from safetensors.torch import save_file

    folder = tmp_path / "model"
    folder.mkdir()
    save_file({"w": torch.randn(2048)}, folder / "model.safetensors")
    (folder / "README.md").write_text("card")
    checkpoints.write_manifest(folder)
    (folder / "README.md").write_text("an edited card")  # not weights: may change
    checkpoints.check_model_folder(folder, "--model_name_or_path")
    finite_garbage(folder / "model.safetensors")
    with pytest.raises(UsageError, match="--model_name_or_path .*model: model.safetensors does not match its SHA-256"):
        checkpoints.check_model_folder(folder, "--model_name_or_path")
    (folder / "manifest.json").unlink()
    checkpoints.check_model_folder(folder, "--model_name_or_path")  # finite garbage without a manifest: unseen
    save_file({"w": torch.full((4,), float("nan"))}, folder / "model.safetensors")
    with pytest.raises(UsageError, match="model.safetensors: tensor w holds NaN/inf; these weights cannot be used"):
        checkpoints.check_model_folder(folder, "--model_name_or_path")
    (folder / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes()[:60])
    with pytest.raises(UsageError, match="model.safetensors: Error while deserializing header"):
        checkpoints.check_model_folder(folder, "--model_name_or_path")


SINGLE = types.SimpleNamespace(is_main_process=True, num_processes=1)
HOLDER = """
import sys, time, types
from linformer_training import checkpoints
checkpoints.lock_output_dir(sys.argv[1], types.SimpleNamespace(is_main_process=True, num_processes=1))
print("locked", flush=True)
time.sleep(600)
"""


def test_one_run_per_output_folder_and_a_killed_one_does_not_block(tmp_path):
    out = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(UsageError, match=rf"^--output_dir {out} is in use by another run \(PID {holder.pid} on "
                                             rf"host {socket.gethostname()}\); wait for it to end"):
            checkpoints.lock_output_dir(out, SINGLE)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    checkpoints.lock_output_dir(out, SINGLE)  # the OS released the killed run's lock
    assert (out / ".lock.owner").read_text().startswith(f"PID {os.getpid()} ")
    (out / "model.safetensors").write_text("old")
    checkpoints.prepare_output_dir(out, overwrite=True, resuming=False)
    assert sorted(p.name for p in out.iterdir()) == [".lock", ".lock.owner"]  # the held lock file stays


def test_output_folder_that_cannot_be_written(tmp_path, monkeypatch):
    import filelock

    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(UsageError, match=r"--output_dir .*file.txt: is a file; pass a folder"):
        checkpoints.lock_output_dir(tmp_path / "file.txt", SINGLE)
    with pytest.raises(UsageError, match=r"--output_dir .*file.txt/out: not a writable folder"):
        checkpoints.lock_output_dir(tmp_path / "file.txt" / "out", SINGLE)

    def read_only(self, *args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(filelock.FileLock, "acquire", read_only)
    with pytest.raises(UsageError, match=r"--output_dir .*ro: not a writable folder \(Read-only file system\)"):
        checkpoints.lock_output_dir(tmp_path / "ro", SINGLE)


@pytest.mark.parametrize("error", [
    OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
    OSError(errno.EROFS, os.strerror(errno.EROFS)),
    RuntimeError("[enforce fail at inline_container.cc:672] . PytorchStreamWriter failed writing file data/0: "
                 "file write failed"),
], ids=["disk full", "read-only", "torch write failed"])
def test_a_failed_save_publishes_nothing_and_names_the_intact_checkpoint(error, tmp_path, accelerator, monkeypatch):
    model, optimizer, _ = prepared(accelerator)
    checkpoints.save_checkpoint(accelerator, tmp_path, {"step": 2})

    def fails(output_dir, **kwargs):
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        (Path(output_dir) / "model.safetensors").write_bytes(b"half a fi")
        raise error

    monkeypatch.setattr(accelerator, "save_state", fails)
    with pytest.raises(checkpoints.WriteFailed) as failed:
        checkpoints.save_checkpoint(accelerator, tmp_path, {"step": 4})
    reason = error.strerror if isinstance(error, OSError) else "[enforce fail"
    assert str(failed.value).startswith(f"could not write the checkpoint of step 4 into {tmp_path / 'checkpoints'} "
                                        f"({reason}")
    assert str(failed.value).endswith(f"nothing was published. Last good checkpoint: "
                                      f"{tmp_path / 'checkpoints' / 'checkpoint_2'}")
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["checkpoint_2"]


# --- issue 33: links, full disks whatever the writer reports, whole lines or none -------------------------


def test_a_link_in_the_output_folder_is_refused_and_never_followed(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    (out / "checkpoints").mkdir(parents=True)
    elsewhere.mkdir()
    (elsewhere / "model.safetensors").write_text("someone else's")
    checkpoints.check_no_links(out)
    (out / "checkpoints" / "checkpoint_2").symlink_to(elsewhere)
    with pytest.raises(UsageError, match=rf"^--output_dir {out}: checkpoints/checkpoint_2 is a symbolic link \(to "
                                         rf"{elsewhere}\); a run removes and rewrites"):
        checkpoints.check_no_links(out)
    checkpoints.remove(out / "checkpoints" / "checkpoint_2")  # the link goes, what it points to stays
    assert not (out / "checkpoints" / "checkpoint_2").exists() and (elsewhere / "model.safetensors").is_file()


@pytest.mark.parametrize("error, folder_free, reason", [
    (OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), None, "No space left on device"),
    (RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 130816 vs 130708"), 12 * 1024,
     "No space left on device: 12 KiB free; the writer said: [enforce fail at inline_container.cc:672] . unexpected "
     "pos 130816 vs 130708"),
    (RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 130816 vs 130708"), 1 << 30,
     "[enforce fail at inline_container.cc:672] . unexpected pos 130816 vs 130708"),
    (Exception("No space left on device (os error 28)"), None, "No space left on device"),  # tokenizers
    (ValueError("a bug, not a write"), None, None),
], ids=["OSError", "torch, disk full", "torch, disk not full", "tokenizers", "not a write"])
def test_a_full_disk_is_said_whatever_the_writer_reports(error, folder_free, reason, tmp_path, monkeypatch):
    if folder_free is not None:
        usage = type(shutil.disk_usage(tmp_path))
        monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(1 << 40, (1 << 40) - folder_free, folder_free))
    assert checkpoints.write_error(error, tmp_path) == reason


def test_a_failed_write_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    """metrics.jsonl is appended a whole line or nothing (a cut line would make it unreadable for a resume);
    train_config.yaml is replaced whole or not at all."""
    log = tmp_path / "metrics.jsonl"
    checkpoints.write_text(log, '{"step": 1}\n', tmp_path, 1, append=True)
    real_fsync = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(checkpoints.WriteFailed, match=rf"^could not write {log} \(No space left on device\); it is as "
                                                      rf"it was before. Last good checkpoint: none$"):
        checkpoints.write_text(log, '{"step": 2, "loss": 1.0}\n', tmp_path, 1, append=True)
    assert log.read_text() == '{"step": 1}\n'
    monkeypatch.setattr(os, "fsync", real_fsync)
    config = tmp_path / "train_config.yaml"
    config.write_text("old: 1\n")
    monkeypatch.setattr(os, "replace", lambda *a: full(0))
    with pytest.raises(checkpoints.WriteFailed, match="train_config.yaml"):
        checkpoints.write_text(config, "new: 2\n", tmp_path, 1)
    assert config.read_text() == "old: 1\n" and sorted(p.name for p in tmp_path.iterdir()) == [
        "metrics.jsonl", "train_config.yaml"]
