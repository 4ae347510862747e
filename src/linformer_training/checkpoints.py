# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
"""Output folders and checkpoints that are complete or absent, never half-written or mixed.

Accelerate's `save_state` / `load_state` write and read a checkpoint (weights, optimizer, scheduler,
every process's RNG). Its automatic rotation (`ProjectConfiguration(total_limit=...)`) deletes the
oldest checkpoint *before* writing the new one, in place: with a limit of 1 a crash mid-save leaves
nothing to resume from. So checkpoints are written to a temporary folder, marked complete by
`trainer_state.json` (written last), renamed into `checkpoints/checkpoint_{step}` (Accelerate's naming),
and only then are old ones removed. Resuming verifies a checkpoint before trusting it (every file there,
readable, finite) and falls back to the previous one with a warning.

The final model is written the same way: into a temporary folder first, then moved into the output
folder with `config.json` last, after the previous run's model files were removed at the start. A
killed save therefore leaves a folder without `config.json`, which does not load, never old weights
beside new metrics.
"""

import json
import logging
import os
import shutil
from pathlib import Path

import torch
from safetensors import safe_open

from .arguments import ScriptError, UsageError

logger = logging.getLogger(__name__)

CHECKPOINTS_DIR = "checkpoints"
PREFIX = "checkpoint_"
STATE_FILE = "trainer_state.json"
RUN_FILES = ("metrics.jsonl", "logs", "train_config.yaml")  # written by the run itself, not the final save


class NonFiniteError(ScriptError, RuntimeError):
    """Training produced NaN/inf: reported with the step and the last good checkpoint."""


class DamagedCheckpoint(UsageError):
    pass


# ---------------------------------------------------------------------------------------------------
# Output folder
# ---------------------------------------------------------------------------------------------------


def prepare_output_dir(output_dir, overwrite, resuming, is_main_process=True):
    """Refuse a non-empty folder unless resuming it or told to overwrite it (then it is emptied whole)."""
    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--output_dir {out}: exists and is not a folder")
    contents = [p for p in out.iterdir() if not p.name.startswith(".write_test")] if out.is_dir() else []
    if contents and not resuming:
        if not overwrite:
            raise UsageError(f"--output_dir {out} is not empty; pass --overwrite_output_dir to replace it"
                             + (", or --resume_from_checkpoint latest to continue its run"
                                if list_checkpoints(out) else ""))
        if is_main_process:
            shutil.rmtree(out)
    if is_main_process:
        try:
            out.mkdir(parents=True, exist_ok=True)
            probe = out / f".write_test_{os.getpid()}"
            probe.write_text("ok")
            probe.unlink()
        except OSError as e:
            raise UsageError(f"--output_dir {out}: not a writable folder ({e.strerror or e})") from None
        if resuming:
            remove_final_model(out)
    return out


def remove_final_model(output_dir):
    """Delete a previous final model (and an interrupted final save) from a folder about to be resumed."""
    out = Path(output_dir)
    for path in out.iterdir():
        if path.name in (CHECKPOINTS_DIR, *RUN_FILES) or path.name.startswith(".write_test"):
            continue
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def publish(tmp, output_dir):
    """Move a complete folder's files into `output_dir`; `config.json` goes last (it makes the folder load)."""
    tmp, out = Path(tmp), Path(output_dir)
    names = sorted(p.name for p in tmp.iterdir())
    for name in sorted(names, key=lambda n: n == "config.json"):
        target = out / name
        if target.is_dir():
            shutil.rmtree(target)
        os.replace(tmp / name, target)
    tmp.rmdir()


def check_finite(model, what):
    """Raise if any weight is NaN/inf: such a model is never saved."""
    for name, p in model.named_parameters():
        if not torch.isfinite(p).all():
            raise NonFiniteError(f"{what}: weight {name} holds NaN/inf; nothing was saved")


# ---------------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------------


def list_checkpoints(output_dir):
    """Checkpoints marked complete, oldest first (temporary folders of interrupted saves are not listed)."""
    found = []
    for p in (Path(output_dir) / CHECKPOINTS_DIR).glob(f"{PREFIX}*"):
        suffix = p.name[len(PREFIX):]
        if p.is_dir() and suffix.isdigit() and (p / STATE_FILE).is_file():
            found.append((int(suffix), p))
    return [p for _, p in sorted(found)]


def save_checkpoint(accelerator, output_dir, state, total_limit=None, tokenizer=None):
    """`accelerator.save_state` + `state` (a dict with `step`) into checkpoints/checkpoint_{step}, atomically;
    then only the newest `total_limit` complete checkpoints are kept."""
    folder = Path(output_dir) / CHECKPOINTS_DIR
    final = folder / f"{PREFIX}{state['step']}"
    tmp = folder / f".tmp-{final.name}"
    if accelerator.is_main_process:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    accelerator.wait_for_everyone()  # every process has written its part
    if accelerator.is_main_process:
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp / "tokenizer")
        (tmp / STATE_FILE).write_text(json.dumps(state, indent=2))  # last: marks the folder complete
        if final.exists():  # the same step saved by an earlier attempt: swap, never delete first
            old = folder / f".old-{final.name}"
            shutil.rmtree(old, ignore_errors=True)
            final.rename(old)
            tmp.rename(final)
            shutil.rmtree(old)
        else:
            tmp.rename(final)
        if total_limit:
            for stale in list_checkpoints(output_dir)[:-total_limit]:
                shutil.rmtree(stale)
    accelerator.wait_for_everyone()
    return final


def verify_checkpoint(path, num_processes, allow_inexact=False):
    """Raise DamagedCheckpoint (naming `path`) unless every file a resume needs is there, readable and finite."""
    path = Path(path)

    def damaged(why):
        return DamagedCheckpoint(f"checkpoint {path} is damaged: {why}")

    try:
        state = json.loads((path / STATE_FILE).read_text())
        if not isinstance(state, dict) or not isinstance(state.get("step"), int):
            raise ValueError("no integer `step`")
    except (OSError, ValueError) as e:
        raise damaged(f"{STATE_FILE} is unreadable ({e})") from None
    weights = sorted(path.glob("model*.safetensors"))
    sharded = sorted(path.glob("pytorch_model_fsdp_*"))  # FSDP: torch.distributed.checkpoint folders (or .bin)
    if not weights and not sharded:
        raise damaged("no model*.safetensors")
    if sharded and not list(path.glob("optimizer_*")):
        raise damaged("FSDP weights without their optimizer_0")
    for item in sharded + sorted(path.glob("optimizer_*")):
        try:
            check_fsdp_state(item)
        except Exception as e:  # noqa: BLE001
            raise damaged(f"{item.name}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    for file in weights:
        try:
            with safe_open(file, "pt") as f:
                for key in f.keys():
                    tensor = f.get_tensor(key)
                    if tensor.is_floating_point() and not torch.isfinite(tensor).all():
                        raise ValueError(f"tensor {key} holds NaN/inf")
        except Exception as e:  # noqa: BLE001  any decoding error means the same: cannot resume from it
            raise damaged(f"{file.name}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    for name in ("scheduler.bin",) if sharded else ("optimizer.bin", "scheduler.bin"):
        try:
            torch.load(path / name, map_location="cpu", weights_only=False)
        except Exception as e:  # noqa: BLE001
            raise damaged(f"{name} is missing or unreadable ({type(e).__name__})") from None
    missing = [f"random_states_{i}.pkl" for i in range(num_processes) if not (path / f"random_states_{i}.pkl").is_file()]
    if missing and not allow_inexact:
        raise damaged(f"{', '.join(missing)} missing, so the run cannot continue bit-exactly; pass "
                      f"--allow_inexact_resume true to resume anyway")
    if missing:
        logger.warning("resuming %s without %s: the run will not be bit-identical to an uninterrupted one",
                       path, ", ".join(missing))
    return state


def check_fsdp_state(item):
    """A sharded FSDP state (model or optimizer) is complete: its metadata reads and every byte range it
    names is in its files. (Its values were checked finite before saving; a `.bin` full state is loaded.)"""
    if item.is_file():
        torch.load(item, map_location="cpu", weights_only=False)
        return
    from torch.distributed.checkpoint import FileSystemReader

    for info in FileSystemReader(str(item)).read_metadata().storage_data.values():
        file = item / info.relative_path
        if not file.is_file() or file.stat().st_size < info.offset + info.length:
            raise ValueError(f"{info.relative_path} is missing or truncated")


def find_resume_checkpoint(spec, output_dir, num_processes, allow_inexact=False):
    """The checkpoint to resume: `latest` -> the newest one that verifies (older ones are tried, with a
    warning, when the newest is damaged; None if there is none yet); a path -> that one, verified."""
    if spec != "latest":
        path = Path(spec)
        if not (path / STATE_FILE).is_file():
            raise UsageError(f"--resume_from_checkpoint {path}: not a complete checkpoint (no {STATE_FILE}); "
                             f"pass `latest` or a folder like {Path(output_dir) / CHECKPOINTS_DIR / (PREFIX + '100')}")
        verify_checkpoint(path, num_processes, allow_inexact)
        return path
    problems = []
    for path in reversed(list_checkpoints(output_dir)):
        try:
            verify_checkpoint(path, num_processes, allow_inexact)
        except DamagedCheckpoint as e:
            logger.warning("%s; trying the previous checkpoint", e)
            problems.append(str(e))
            continue
        return path
    if problems:
        raise UsageError("no checkpoint can be resumed: " + "; ".join(problems))
    return None


def read_state(path):
    return json.loads((Path(path) / STATE_FILE).read_text())


def load_checkpoint(accelerator, path):
    """Restore what `save_checkpoint` wrote; returns its state dict."""
    accelerator.load_state(str(path))
    return json.loads((Path(path) / STATE_FILE).read_text())

