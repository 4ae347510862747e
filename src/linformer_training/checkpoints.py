# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Output folders and checkpoints that are complete or absent, never half-written or mixed.

Accelerate's `save_state` / `load_state` write and read a checkpoint (weights, optimizer, scheduler,
every process's RNG). Its automatic rotation (`ProjectConfiguration(total_limit=...)`) deletes the
oldest checkpoint *before* writing the new one, in place: with a limit of 1 a crash mid-save leaves
nothing to resume from. So checkpoints are written to a temporary folder, with `trainer_state.json` and
then `manifest.json` last, renamed into `checkpoints/checkpoint_{step}` (Accelerate's naming), and only
then are old ones removed. Resuming verifies a checkpoint before trusting it and falls back to
the previous one with a warning naming the file: every file must match the size and SHA-256 that
`manifest.json` recorded when it was written (finite garbage and a foreign RNG pickle are damage too), the
weights must be finite, and nothing is unpickled beyond plain tensors and containers (`weights_only`, as
Accelerate itself loads): a checkpoint folder may come from anywhere. A checkpoint without its manifest is
damaged too (this version always writes one) unless --allow_missing_manifest says an older version wrote it.
What the manifest finds and what it cannot is in docs/checkpoints.md.

A run deletes and rewrites what is inside its output folder only: an entry that is a symbolic link (to a
checkpoint, a log kept elsewhere) is refused before anything is written, as rotating or overwriting it would
act on what it points to.

The final model is written the same way: into a temporary folder first, then moved into the output
folder with `config.json` last, after the previous run's model files were removed at the start. A
killed save therefore leaves a folder without `config.json`, which does not load, never old weights
beside new metrics. A save that fails (a full or read-only disk) publishes nothing and says which
checkpoint is intact.

Resuming is here too: `open_run` finds the checkpoint to resume (verified, and written with this run's
layout of processes and batches) before any data is read, `resume_run` restores it into the loop's run.

One run writes an output folder at a time: the main process holds an OS lock on `.lock` in it for as long
as it runs (the OS drops it when the process dies, so a killed run never blocks the next one).
"""

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import pickle
import re
import shutil
import socket
import tempfile
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from . import processes
from .arguments import ScriptError, UsageError

logger = logging.getLogger(__name__)

CHECKPOINTS_DIR = "checkpoints"
PREFIX = "checkpoint_"
STATE_FILE = "trainer_state.json"
MANIFEST = "manifest.json"
RUN_FILES = ("metrics.jsonl", "logs", "train_config.yaml")  # written by the run itself, not the final save
LOCK_FILES = (".lock", ".lock.owner")  # the run's lock and who holds it: never removed, never "content"
_held_locks = {}  # output folder -> its FileLock, held until this process ends


class NonFiniteError(ScriptError, RuntimeError):
    """Training produced NaN/inf: reported with the step and the last good checkpoint."""


class DamagedCheckpoint(UsageError):
    pass


class WriteFailed(ScriptError):
    """A checkpoint or the final model could not be written (disk full, read-only, quota)."""


# ---------------------------------------------------------------------------------------------------
# Output folder
# ---------------------------------------------------------------------------------------------------


def lock_output_dir(output_dir, accelerator):
    """Before anything is written: the output folder exists, is writable and is this run's alone. Two runs
    in one folder would mix their weights, configs and logs, so a second run (or a resume, or an overwrite)
    of a folder in use stops at once. The main process holds the lock; every process raises the same error."""
    problem = _take_lock(Path(output_dir)) if accelerator.is_main_process else None
    if accelerator.num_processes > 1:
        from accelerate.utils import broadcast_object_list

        problem = broadcast_object_list([problem])[0]
    if problem:
        raise UsageError(problem)


def _take_lock(out):
    if out.exists() and not out.is_dir():
        return f"--output_dir {out}: is a file; pass a folder (new or empty, or one to resume or overwrite)"
    if out.resolve() in _held_locks:  # this process already runs here (scripts called again from Python)
        return None
    from filelock import FileLock, Timeout

    owner = out / LOCK_FILES[1]
    try:
        out.mkdir(parents=True, exist_ok=True)
        lock = FileLock(out / LOCK_FILES[0], timeout=0)
        lock.acquire()
    except Timeout:
        holder = owner.read_text().strip() if owner.is_file() else "holder unknown"
        return (f"--output_dir {out} is in use by another run ({holder}); wait for it to end or pick another "
                f"--output_dir")
    except OSError as e:
        return f"--output_dir {out}: not a writable folder ({e.strerror or e})"
    _held_locks[out.resolve()] = lock
    try:
        owner.write_text(f"PID {os.getpid()} on host {socket.gethostname()}\n")
    except OSError as e:
        return f"--output_dir {out}: not a writable folder ({e.strerror or e})"
    return None


def prepare_output_dir(output_dir, overwrite, resuming, is_main_process=True):
    """Refuse a non-empty folder unless resuming it or told to overwrite it (then all of it goes but the
    lock this run holds: a new lock file beside a deleted one would let a second run in)."""
    out = Path(output_dir)
    contents = [p for p in out.iterdir() if p.name not in LOCK_FILES] if out.is_dir() else []
    if contents and not resuming:
        if not overwrite:
            raise UsageError(f"--output_dir {out} is not empty; pass --overwrite_output_dir to replace it"
                             + (", or --resume_from_checkpoint latest to continue its run"
                                if list_checkpoints(out) else ""))
        if is_main_process:
            for path in contents:
                remove(path)
    if is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        if resuming:
            remove_final_model(out)
    return out


def remove_final_model(output_dir):
    """Delete a previous final model (and an interrupted final save) from a folder about to be resumed."""
    out = Path(output_dir)
    for path in out.iterdir():
        if path.name in (CHECKPOINTS_DIR, *RUN_FILES, *LOCK_FILES):
            continue
        remove(path)


def remove(path):
    """Delete a file or a folder; a symbolic link is unlinked, never followed (what it points to stays)."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def check_no_links(output_dir):
    """Refuse an output folder holding a symbolic link: the run removes, rotates and rewrites what is inside its
    folder, and through a link it would do so to files elsewhere (shutil.rmtree refuses a link with a traceback,
    an append or a save would write through it)."""
    out = Path(output_dir)
    if not out.is_dir():
        return
    for folder, dirs, files in os.walk(out):
        for name in sorted(dirs + files):
            path = Path(folder) / name
            if path.is_symlink():
                raise UsageError(f"--output_dir {out}: {path.relative_to(out)} is a symbolic link (to "
                                 f"{path.readlink()}); a run removes and rewrites what is inside its output folder, "
                                 f"never through a link: replace the link with a copy (cp -rL) or remove it")


def publish(tmp, target, whole=False):
    """Make a complete temporary folder visible: its manifest is written last, then its files are moved into
    `target` (the output folder, which holds other things) with `config.json` last (it makes the folder
    load), or, `whole`, it replaces `target` as one folder (a checkpoint)."""
    tmp, target = Path(tmp), Path(target)
    write_manifest(tmp)
    if not whole:
        for name in sorted((p.name for p in tmp.iterdir()), key=lambda n: (n == "config.json", n == MANIFEST)):
            if (target / name).is_dir() or (target / name).is_symlink():
                remove(target / name)
            (tmp / name).replace(target / name)
        tmp.rmdir()
    elif target.exists():  # the same checkpoint saved by an earlier attempt: swap, never delete first
        old = target.with_name(f".old-{target.name}")
        shutil.rmtree(old, ignore_errors=True)
        target.rename(old)
        tmp.rename(target)
        shutil.rmtree(old)
    else:
        tmp.rename(target)


@contextlib.contextmanager
def writing(what, tmp, output_dir, num_processes):
    """A save that cannot be written (a full or read-only disk, a quota) ends the run with one line: what
    was being written, that nothing was published, and the checkpoint to resume from. torch reports a
    failed write as a RuntimeError and safetensors as a SafetensorError, not as an OSError."""
    try:
        yield
    except Exception as e:  # narrowed by write_error
        if isinstance(e, ScriptError) or not write_error(e):
            raise
        reason = write_error(e, Path(tmp).parent)  # before the cleanup frees space
        shutil.rmtree(tmp, ignore_errors=True)
        raise WriteFailed(f"could not write {what} into {Path(tmp).parent} ({reason}); nothing was published. Last "
                          f"good checkpoint: {last_good_checkpoint(output_dir, num_processes) or 'none'}") from e


def write_error(error, folder=None):
    """Why a write failed, in words (None if `error` is no write failure): an OSError's own words; torch's stream
    writer, safetensors and tokenizers report a full disk as a RuntimeError, a SafetensorError or a bare
    Exception, torch's sometimes only as "unexpected pos", so a disk (almost) full is said as such."""
    text = str(error)
    if isinstance(error, OSError):
        return error.strerror or first_line(error)
    if not isinstance(error, (RuntimeError, SafetensorError)) and not re.search(r"os error \d+", text):
        return None
    if "No space left on device" in text or "os error 28" in text:
        return "No space left on device"
    if folder is not None:
        existing = next((p for p in (Path(folder), *Path(folder).parents) if p.exists()), None)
        free = shutil.disk_usage(existing).free if existing else None
        if free is not None and free < 1 << 20:
            return f"No space left on device: {free // 1024} KiB free; the writer said: {first_line(error)}"
    return first_line(error)


def write_text(path, text, output_dir, num_processes, append=False):
    """`text` written into `path` whole or not at all: replaced through a temporary file, or (`append`) added at
    its end and cut back to its old length when the write fails. A failure (a full disk, a quota) ends the run
    with one line naming the file and the checkpoint to resume from."""
    path = Path(path)
    tmp = path.with_name(f".tmp-{path.name}")
    try:
        if not append:
            tmp.write_text(text)
            tmp.replace(path)
            return
        with path.open("ab") as f:
            size = f.tell()
            try:
                f.write(text.encode())
                f.flush()
                os.fsync(f.fileno())
            except OSError:
                f.truncate(size)
                raise
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise WriteFailed(f"could not write {path} ({write_error(e)}); it is as it was before. Last good "
                          f"checkpoint: {last_good_checkpoint(output_dir, num_processes) or 'none'}") from e


def write_folder(write, target, what, output_dir, num_processes):
    """`write(folder)` into a temporary sibling of `target`, renamed into place once complete: a failed write
    leaves no half-written `target` (a truncated tokenizer.json that the next run would load)."""
    target = Path(target)
    tmp = target.with_name(f".tmp-{target.name}")
    with writing(what, tmp, output_dir, num_processes):
        shutil.rmtree(tmp, ignore_errors=True)
        write(tmp)
        if target.exists():
            remove(target)
        tmp.rename(target)


def check_new_output_dir(output_dir, overwrite):
    """A conversion's --output_dir: new or empty (or, with `overwrite`, to be replaced), in a folder this user can
    write in."""
    if output_dir.exists() and (not output_dir.is_dir() or any(output_dir.iterdir())) and not overwrite:
        raise UsageError(f"--output_dir {output_dir}: exists and is not empty; pass --overwrite_output_dir to replace "
                         f"it")
    existing = next(p for p in (output_dir, *output_dir.parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"--output_dir {output_dir}: {existing} is not a folder this user can write in; pick "
                         f"another --output_dir")


def write_converted_folder(output_dir, overwrite, write):
    """Publish the folder `write(staging)` fills (returning its card) at `output_dir`: written under a temporary
    sibling name and renamed only once complete, so a crash, a full disk or a rights problem never leaves half a
    model there; such a failure is one line and nothing at `output_dir`."""
    try:
        output_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.converting-", dir=output_dir.parent))
    except OSError as e:
        raise UsageError(f"--output_dir {output_dir}: cannot write there ({e.strerror or e}); pick another "
                         f"--output_dir") from None
    try:
        card = write(staging)
        (staging / "README.md").write_text(card, encoding="utf-8")
        staging.chmod(0o755)
        check_new_output_dir(output_dir, overwrite)  # someone may have written there meanwhile
        publish(staging, output_dir, whole=True)
    except (OSError, SafetensorError) as e:  # a full disk, a quota, a folder made read-only meanwhile
        shutil.rmtree(staging, ignore_errors=True)
        reason = e.strerror if isinstance(e, OSError) and e.strerror else first_line(e)
        raise WriteFailed(f"could not write the converted model into {output_dir.parent} ({reason}); nothing was "
                          f"written to --output_dir {output_dir}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return output_dir


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
    what = f"the checkpoint of step {state['step']}"
    # The vote: a write failing on one process (the main one writes most) ends the others too.
    with processes.together(accelerator, what), writing(what, tmp, output_dir, accelerator.num_processes):
        if accelerator.is_main_process:
            folder.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(tmp, ignore_errors=True)
        accelerator.wait_for_everyone()
        accelerator.save_state(str(tmp))
        accelerator.wait_for_everyone()  # every process has written its part
        if accelerator.is_main_process:
            if tokenizer is not None:
                tokenizer.save_pretrained(tmp / "tokenizer")
            (tmp / STATE_FILE).write_text(json.dumps(state, indent=2))
            publish(tmp, final, whole=True)
    if accelerator.is_main_process:
        if total_limit:
            for stale in list_checkpoints(output_dir)[:-total_limit]:
                remove(stale)
    accelerator.wait_for_everyone()
    return final


def sha256(path):
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def write_manifest(folder):
    """`manifest.json`: every file's size and SHA-256, so damage that still decodes (finite garbage in the
    weights, another run's RNG state) is found before a resume or a finetune trusts the folder."""
    folder = Path(folder)
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)
    entries = {p.relative_to(folder).as_posix(): {"size": p.stat().st_size, "sha256": sha256(p)} for p in files}
    (folder / MANIFEST).write_text(json.dumps({"files": entries}, indent=1) + "\n")


def check_manifest(folder, complete=True, suffixes=None, absent_ok=()):
    """Raise ValueError naming the first file that differs from `manifest.json` (with `complete`, a file the
    manifest does not list is one too; with `suffixes`, only such files are compared; `absent_ok` may be
    missing); False if the folder has no manifest (an older version wrote it, or not these scripts)."""
    folder = Path(folder)
    if not (folder / MANIFEST).is_file():
        return False
    try:
        entries = json.loads((folder / MANIFEST).read_text())["files"]
        listed = {name: (int(e["size"]), str(e["sha256"])) for name, e in entries.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{MANIFEST} is unreadable ({type(e).__name__}: {e})") from None
    for name, (size, digest) in sorted(listed.items()):
        if suffixes and not name.endswith(suffixes):
            continue
        path = folder / name
        if name in absent_ok:
            continue
        if not path.is_file():
            raise ValueError(f"{name} is missing (listed in {MANIFEST})")
        if path.stat().st_size != size:
            raise ValueError(f"{name} has {path.stat().st_size} bytes, {MANIFEST} says {size}")
        if sha256(path) != digest:
            raise ValueError(f"{name} does not match its SHA-256 in {MANIFEST} (changed since it was written)")
    if complete:
        extra = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()
                       and p.name != MANIFEST and p.relative_to(folder).as_posix() not in listed)
        if extra:
            raise ValueError(f"{extra[0]} is not listed in {MANIFEST} (added since it was written)")
    return True


def check_safetensors(file):
    """Raise unless every tensor of a safetensors file decodes and holds no NaN/inf."""
    with safe_open(file, "pt") as f:
        for key in f.keys():
            tensor = f.get_tensor(key)
            if tensor.is_floating_point() and not torch.isfinite(tensor).all():
                raise ValueError(f"tensor {key} holds NaN/inf")


def check_torch_weights(file):
    """Raise unless a torch-saved weight file (`pytorch_model.bin`) holds only tensors, none NaN/inf. It is read
    as `from_pretrained` reads it (`weights_only`), so a pickled object never runs; such a file is refused
    here, with a way out that keeps it that way."""
    try:
        state = load_plain(file)
    except pickle.UnpicklingError as e:
        raise ValueError(f"{e}; use a copy saved as model.safetensors by whoever can vouch for the file") from None
    except Exception as e:  # a damaged file
        raise ValueError(f"unreadable ({type(e).__name__}: {first_line(e)})") from None
    for key, tensor in state.items() if isinstance(state, dict) else []:
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise ValueError(f"tensor {key} holds NaN/inf")


def check_model_folder(folder, flag):
    """A saved model, before anything is built on it: its weights as its manifest recorded them (where it has
    one), readable without unpickling objects, and finite. `from_pretrained` loads NaN weights without a word,
    reports a truncated file without its name, and answers a pickle in `pytorch_model.bin` with advice to
    unpickle it anyway. (Its card and config may have been edited since: only weight files are compared.)"""
    folder = Path(folder)
    checks = [(file, check_safetensors) for file in sorted(folder.glob("*.safetensors"))] + \
             [(file, check_torch_weights) for file in sorted(folder.glob("pytorch_model*.bin"))]
    try:
        check_manifest(folder, complete=False, suffixes=(".safetensors", ".bin"))
        for file, check in checks:
            try:
                check(file)
            except Exception as e:  # any decoding error means the same: unusable weights
                raise ValueError(f"{file.name}: {first_line(e)}") from None
    except ValueError as e:
        raise UsageError(f"{flag} {folder}: {e}; these weights cannot be used") from None


def first_line(error):
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def load_plain(path):
    """A torch-saved file read as Accelerate's `load_state` reads it: tensors, numbers and containers only
    (`weights_only`), so a pickled object in a downloaded checkpoint never runs."""
    from accelerate.utils import load

    try:
        return load(path, map_location="cpu")
    except pickle.UnpicklingError as e:  # torch's own message goes on to suggest loading it unrestricted
        found = re.search(r"Unsupported global: GLOBAL (\S+)", str(e))
        raise pickle.UnpicklingError(f"holds pickled Python objects ({found[1] if found else 'not only tensors'}), "
                                     f"which are never unpickled here") from None


RNG_KEYS = ("random_state", "numpy_random_seed", "torch_manual_seed")


def verify_checkpoint(path, num_processes, allow_inexact=False, allow_missing_manifest=False):
    """Raise DamagedCheckpoint (naming `path` and the file) unless every file a resume needs is there,
    matches its manifest, reads without unpickling any object, and the weights are finite. A checkpoint without
    its manifest passes only with `allow_missing_manifest` (--allow_missing_manifest: an older version wrote it)."""
    path = Path(path)

    def damaged(why):
        return DamagedCheckpoint(f"checkpoint {path} is damaged: {why}")

    try:
        state = json.loads((path / STATE_FILE).read_text())
        if not isinstance(state, dict) or not isinstance(state.get("step"), int):
            raise ValueError("no integer `step`")
    except (OSError, ValueError) as e:
        raise damaged(f"{STATE_FILE} is unreadable ({e})") from None
    missing = [f"random_states_{i}.pkl" for i in range(num_processes)
               if not (path / f"random_states_{i}.pkl").is_file()]
    if missing and not allow_inexact:
        raise damaged(f"{', '.join(missing)} missing, so the run cannot continue bit-exactly; pass "
                      f"--allow_inexact_resume true to resume anyway")
    try:
        if not check_manifest(path, absent_ok=missing):
            if not allow_missing_manifest:
                raise ValueError(f"{MANIFEST} is missing (this version writes one into every checkpoint); if a "
                                 f"version older than manifests wrote it, pass --allow_missing_manifest true")
            logger.warning("%s has no %s (--allow_missing_manifest: an older version wrote it): its files are "
                           "checked only for being readable and finite", path, MANIFEST)
        check_resume_files(path)
    except ValueError as e:
        raise damaged(str(e)) from None
    if missing:
        logger.warning("resuming %s without %s: the run will not be bit-identical to an uninterrupted one",
                       path, ", ".join(missing))
    return state


def check_resume_files(path):
    """Raise ValueError naming the first weight, optimizer, scheduler or RNG file a resume could not use: each is
    read as the resume reads it (weights decoded and finite, pickles without running any object)."""
    weights = sorted(path.glob("model*.safetensors"))
    sharded = sorted(path.glob("pytorch_model_fsdp_*"))  # FSDP: torch.distributed.checkpoint folders (or .bin)
    if not weights and not sharded:
        raise ValueError("no model*.safetensors")
    custom = sorted(path.glob("custom_checkpoint_*.pkl"))
    if custom:  # Accelerate loads one per object registered for checkpointing, and these scripts register none
        raise ValueError(f"{custom[0].name} is a custom state no linformer-hf run writes (Accelerate would stop "
                         f"on it)")
    if sharded and not list(path.glob("optimizer_*")):
        raise ValueError("FSDP weights without their optimizer_0")
    plain = ("scheduler.bin",) if sharded else ("optimizer.bin", "scheduler.bin")
    checks = ([(item, check_fsdp_state, "{name}: {error}") for item in sharded + sorted(path.glob("optimizer_*"))]
              + [(file, check_safetensors, "{name}: {error}") for file in weights]
              + [(path / name, load_plain, "{name} is missing or unreadable ({kind}: {error})") for name in plain]
              # Accelerate skips a bad RNG state with an INFO line only.
              + [(rng, check_rng_state, "{name} is unreadable ({kind}: {error})")
                 for rng in sorted(path.glob("random_states_*.pkl"))])
    for file, check, problem in checks:
        try:
            check(file)
        except Exception as e:  # any decoding error means the same: cannot resume from it
            raise ValueError(problem.format(name=file.name, kind=type(e).__name__, error=first_line(e))) from None


def check_rng_state(file):
    """Every process's RNG state: a mapping with the generators Accelerate restores."""
    states = load_plain(file)
    if not isinstance(states, dict) or any(key not in states for key in RNG_KEYS):
        raise ValueError(f"not an RNG state (no {', '.join(RNG_KEYS)})")


def check_fsdp_state(item):
    """A sharded FSDP state (model or optimizer) is complete: its metadata reads and every byte range it
    names is in its files. (Its values were checked finite before saving; a `.bin` full state is loaded.)"""
    if item.is_file():
        load_plain(item)
        return
    from torch.distributed.checkpoint import FileSystemReader

    for info in FileSystemReader(str(item)).read_metadata().storage_data.values():
        file = item / info.relative_path
        if not file.is_file() or file.stat().st_size < info.offset + info.length:
            raise ValueError(f"{info.relative_path} is missing or truncated")


def find_resume_checkpoint(spec, output_dir, num_processes, allow_inexact=False, allow_missing_manifest=False):
    """The checkpoint to resume: `latest` -> the newest one that verifies (older ones are tried, with a
    warning, when the newest is damaged; None if there is none yet); a path -> that one, verified."""
    if spec != "latest":
        path = Path(spec)
        if not (path / STATE_FILE).is_file():
            raise UsageError(f"--resume_from_checkpoint {path}: not a complete checkpoint (no {STATE_FILE}); "
                             f"pass `latest` or a folder like {Path(output_dir) / CHECKPOINTS_DIR / (PREFIX + '100')}")
        verify_checkpoint(path, num_processes, allow_inexact, allow_missing_manifest)
        return path
    path, problems = newest_verified(output_dir, num_processes, allow_inexact, allow_missing_manifest)
    for problem in problems:
        logger.warning("%s; trying the previous checkpoint", problem)
    if path is None and problems:
        raise UsageError("no checkpoint can be resumed: " + "; ".join(problems))
    return path


def layout(args, num_processes, accumulation):
    """What must match between the run that wrote a checkpoint and the run resuming it."""
    return {"num_processes": num_processes, "accumulation": accumulation,
            "per_device_train_batch_size": args.per_device_train_batch_size}


def open_run(args, accelerator, accumulation):
    """Before any data: (the output folder, ready to write; the checkpoint --resume_from_checkpoint names,
    verified and written with this run's layout, or None). The data position and every process's RNG carry
    over only unchanged."""
    checkpoint = None
    check_no_links(args.output_dir)
    if args.resume_from_checkpoint:
        checkpoint = find_resume_checkpoint(args.resume_from_checkpoint, args.output_dir, accelerator.num_processes,
                                            args.allow_inexact_resume, args.allow_missing_manifest)
    if checkpoint is not None:
        saved, expected = read_state(checkpoint).get("layout"), layout(args, accelerator.num_processes, accumulation)
        if saved != expected:
            raise UsageError(f"--resume_from_checkpoint {checkpoint}: it was written with {saved}, this run has "
                             f"{expected}; resume with the same layout so the data position and RNG carry over")
    out = prepare_output_dir(args.output_dir, args.overwrite_output_dir, checkpoint is not None,
                             accelerator.is_main_process)
    return out, checkpoint


def save_run_checkpoint(run):
    """A `loop.Run`'s checkpoint: its model, optimizer, scheduler and RNGs, its state and layout."""
    check_finite(run.accelerator.unwrap_model(run.model), f"checkpoint at step {run.state.step}")
    # The logging window's clock and token count start again after a resume (a rate spans one process's time);
    # its loss sum and update count carry over, so the window's train_loss averages all of its updates.
    kept = {k: v for k, v in dataclasses.asdict(run.state).items() if k not in ("window_start", "window_tokens")}
    state = {**kept, "layout": layout(run.args, run.accelerator.num_processes, run.accumulation)}
    return save_checkpoint(run.accelerator, run.output_dir, state, run.args.save_total_limit, run.tokenizer)


def resume_run(run, path):
    """What `save_run_checkpoint` wrote, back into `run`: weights, optimizer, scheduler, every process's RNG,
    then the data position and counters."""
    saved = load_checkpoint(run.accelerator, path)
    for key in ("step", "epoch", "batches_in_epoch", "tokens_seen", "best_metric", "best_step",
                "evals_since_best", "last_eval"):
        setattr(run.state, key, saved[key])
    # Absent from checkpoints of older versions:
    run.state.skipped_updates = saved.get("skipped_updates", 0)
    run.state.window_loss, run.state.window_updates = saved.get("window_loss", 0.0), saved.get("window_updates", 0)
    run.say(f"Resumed from {path}: step {run.state.step}, epoch {run.state.epoch}, "
            f"batch {run.state.batches_in_epoch} of that epoch")


def newest_verified(output_dir, num_processes, allow_inexact=False, allow_missing_manifest=False):
    """(the newest checkpoint that verifies or None, what was wrong with each newer one)."""
    problems = []
    for path in reversed(list_checkpoints(output_dir)):
        try:
            verify_checkpoint(path, num_processes, allow_inexact, allow_missing_manifest)
        except DamagedCheckpoint as e:
            problems.append(str(e))
            continue
        return path, problems
    return None, problems


def last_good_checkpoint(output_dir, num_processes):
    """The checkpoint an error message may call good: one that verifies now, not merely the newest."""
    return newest_verified(output_dir, num_processes)[0]


def read_state(path):
    return json.loads((Path(path) / STATE_FILE).read_text())


def load_checkpoint(accelerator, path):
    """Restore what `save_checkpoint` wrote; returns its state dict."""
    accelerator.load_state(str(path))
    return json.loads((Path(path) / STATE_FILE).read_text())

