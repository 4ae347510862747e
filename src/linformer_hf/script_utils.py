"""Helpers the training scripts share.

One config system (dataclass defaults < YAML recipe < command line, unknown keys are errors), one
metrics sink (Accelerate's trackers plus a JSON-lines file that needs no viewer), and crash-safe
checkpoints (write to a temporary folder, rename into place, keep the last K).
"""

import argparse
import sys
import dataclasses
import difflib
import json
import os
import shutil
import time
import types
import typing
from pathlib import Path

import yaml

# ---------------------------------------------------------------------------------------------------
# Config: dataclass defaults < YAML (--config, may name a `base:` recipe) < --key value flags.
# ---------------------------------------------------------------------------------------------------

class UsageError(ValueError):
    """Bad input from the user (a flag, a file, a config): reported as one line, not a traceback."""


TRUE, FALSE = {"true", "yes", "1", "on"}, {"false", "no", "0", "off"}


def did_you_mean(kind, key, allowed):
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f" (did you mean `{close[0]}`?)" if close else ""
    return f"unknown {kind} `{key}`{hint}; allowed: {', '.join(sorted(allowed))}"


def _convert(name, tp, value):
    """Coerce a YAML or command-line value to the field's annotated type, or explain why not."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            if type(None) in args:
                return None
        inner = [a for a in args if a is not type(None)]
        errors = []
        for a in inner:
            try:
                return _convert(name, a, value)
            except ValueError as e:
                errors.append(str(e))
        raise ValueError(errors[0])
    if origin is typing.Literal:
        if value not in args:
            raise ValueError(f"`{name}`={value!r} is invalid; allowed: {', '.join(map(str, args))}")
        return value
    if origin is list:
        items = value if isinstance(value, list) else [value]
        return [_convert(name, args[0] if args else str, v) for v in items]
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise ValueError(f"`{name}` must be a mapping, got {value!r}")
        return dict(value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in TRUE | FALSE:
            return value.lower() in TRUE
        raise ValueError(f"`{name}`={value!r} is invalid; expected true or false")
    if tp in (int, float):
        expected = "an integer" if tp is int else "a number"
        try:
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise ValueError
            number = tp(value) if isinstance(value, str) else value
            if tp is int and number != int(number):
                raise ValueError
        except ValueError:
            raise ValueError(f"`{name}`={value!r} is invalid; expected {expected}") from None
        return tp(number)
    if tp is str:
        if isinstance(value, (dict, list)) or value is None:
            raise ValueError(f"`{name}`={value!r} is invalid; expected a string")
        return str(value)
    return value


def _strip_optional(tp):
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(inner) == 1:
            return inner[0]
    return tp


def _read_yaml(path, seen=()):
    """Load a recipe; a `base: other.yaml` key (relative to this file) is loaded first and its keys
    replaced by this file's (a `model:` mapping is replaced whole, so that every recipe shows its model)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--config {path}: no such file")
    if path.resolve() in seen:
        raise ValueError(f"--config {path}: `base` chain loops back to itself")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"--config {path}: expected a mapping of keys to values at the top level")
    base = data.pop("base", None)
    if base is None:
        return data
    return {**_read_yaml(path.parent / base, seen + (path.resolve(),)), **data}  # whole values replaced


def parse_config(cls, argv=None, prog=None):
    """Build a `cls` dataclass instance from defaults, an optional `--config` YAML and `--key value` flags.

    Every dataclass field is a flag (`--max_steps 100`; booleans also as bare `--push_to_hub`). A dict
    field takes dotted flags (`--model.projected_dim 256`, values parsed as YAML). A key that is not a
    field is an error, in the YAML file as much as on the command line, so a typo never goes unnoticed.
    Errors exit through argparse (status 2) with a message naming the key and what is allowed.
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    dict_fields = {n for n in fields if hints[n] is dict or typing.get_origin(hints[n]) is dict}
    parser = argparse.ArgumentParser(prog=prog, description=(cls.__doc__ or "").strip(), allow_abbrev=False)
    parser.add_argument("--config", help="YAML recipe; command-line flags override its values")
    for name, f in fields.items():
        if name in dict_fields:
            continue
        tp = _strip_optional(hints[name])
        is_list = typing.get_origin(tp) is list
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        kwargs = {"default": argparse.SUPPRESS, "help": f"{f.metadata.get('help', '')} (default: {default})".lstrip()}
        if typing.get_origin(tp) is typing.Literal:
            kwargs["metavar"] = "{" + ",".join(map(str, typing.get_args(tp))) + "}"
        if tp is bool:
            kwargs.update(nargs="?", const="true", metavar="{true,false}")
        elif is_list:
            kwargs.update(nargs="+")
        parser.add_argument(f"--{name}", **kwargs)
    for name in sorted(dict_fields):
        f = fields[name]
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        parser.add_argument_group(f"--{name}.KEY VALUE", f"{f.metadata.get('help', '')} (default: {default})")

    argv = list(sys.argv[1:] if argv is None else argv)
    # Pull out dotted overrides (`--model.key value` or `--model.key=value`) before argparse sees them.
    dotted, rest, i = {}, [], 0
    while i < len(argv):
        token = argv[i]
        head = token[2:].split("=", 1)[0] if token.startswith("--") else ""
        if "." in head and head.split(".", 1)[0] in dict_fields:
            if "=" in token:
                value = token.split("=", 1)[1]
            elif i + 1 < len(argv):
                value, i = argv[i + 1], i + 1
            else:
                parser.error(f"{token} expects a value")
            group, key = head.split(".", 1)
            dotted.setdefault(group, {})[key] = yaml.safe_load(value)
        else:
            rest.append(token)
        i += 1
    cli = vars(parser.parse_args(rest))

    values = {}
    try:
        if cli.get("config"):
            recipe = _read_yaml(cli["config"])
            for key in recipe:
                if key not in fields:
                    raise ValueError(f"{cli['config']}: " + did_you_mean("key", key, fields))
            values.update(recipe)
        for key, value in cli.items():
            if key != "config":
                values[key] = value
        for group, overrides in dotted.items():
            base = values.get(group)
            if base is None:
                f = fields[group]
                base = f.default_factory() if f.default_factory is not dataclasses.MISSING else {}
            values[group] = {**base, **overrides}
        typed = {key: _convert(key, hints[key], value) for key, value in values.items()}
        return cls(**typed)
    except ValueError as e:
        parser.error(str(e))


def config_to_dict(config):
    """Plain-dict view of a config dataclass, for YAML/JSON dumps and model cards."""
    return dataclasses.asdict(config)


# ---------------------------------------------------------------------------------------------------
# Metrics: Accelerate's trackers (TensorBoard by default) and a JSON-lines file.
# ---------------------------------------------------------------------------------------------------


def resolve_trackers(report_to):
    """`report_to` ("tensorboard", "wandb,tensorboard", "all", "none") as Accelerator(log_with=...).

    Accelerate quietly drops a tracker whose package is missing; here that is an error instead.
    """
    from accelerate.tracking import LOGGER_TYPE_TO_CLASS, get_available_trackers

    names = [n.strip() for n in str(report_to).split(",") if n.strip()]
    if not names or names == ["none"]:
        return None
    if names == ["all"]:
        return "all"
    available = {str(t) for t in get_available_trackers()}
    for name in names:
        if name not in LOGGER_TYPE_TO_CLASS:
            raise UsageError(did_you_mean("--report_to tracker", name, list(LOGGER_TYPE_TO_CLASS) + ["all", "none"]))
        if name not in available:
            raise UsageError(f"--report_to {name}: its package is not installed (pip install {name}), "
                             f"or pass --report_to none")
    return names


def init_trackers(accelerator, project_name, config):
    """Start the trackers with the run's config; TensorBoard's hparams take only scalars, so nested
    values are flattened (`model.hidden_size`) and lists/None become strings."""
    flat = {}

    def walk(prefix, value):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        elif isinstance(value, (int, float, str, bool)):
            flat[prefix] = value
        else:
            flat[prefix] = str(value)

    walk("", config)
    accelerator.init_trackers(project_name, config=flat)


def log_metrics(accelerator, metrics, step, jsonl_path=None):
    """Send metrics to the trackers and (main process) append them as one line to `jsonl_path`."""
    accelerator.log(metrics, step=step)
    if jsonl_path is not None and accelerator.is_main_process:
        record = {"step": step, "time": round(time.time(), 3), **metrics}
        with open(jsonl_path, "a") as f:
            f.write(json.dumps(record) + "\n")


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# ---------------------------------------------------------------------------------------------------
# Output folder and checkpoints.
# ---------------------------------------------------------------------------------------------------


def ensure_writable_dir(path, flag="--output_dir"):
    """Create `path` and prove it is writable now, before hours of training depend on it."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write_test_{os.getpid()}"
        probe.write_text("ok")
        probe.unlink()
    except OSError as e:
        raise UsageError(f"{flag} {path} is not a writable directory: {e.strerror or e}") from None
    return path


CHECKPOINT_PREFIX = "step_"
STATE_FILE = "trainer_state.json"


def list_checkpoints(checkpoints_dir):
    """Complete checkpoints, oldest first (temporary folders of interrupted saves are not listed)."""
    found = []
    for p in Path(checkpoints_dir).glob(f"{CHECKPOINT_PREFIX}*"):
        suffix = p.name[len(CHECKPOINT_PREFIX):]
        if p.is_dir() and suffix.isdigit() and (p / STATE_FILE).is_file():
            found.append((int(suffix), p))
    return [p for _, p in sorted(found)]


def save_checkpoint(accelerator, checkpoints_dir, step, state, keep_last=None, save_extra=None):
    """`accelerator.save_state` (model, optimizer, scheduler, RNG of every process) plus `state` (the
    data position etc.) as JSON, into a temporary folder renamed into place once complete: a crash
    mid-write leaves the previous checkpoints as they were. Then only the newest `keep_last` are kept.
    `save_extra(folder)` (main process) adds files of its own, e.g. the tokenizer."""
    checkpoints_dir = Path(checkpoints_dir)
    final = checkpoints_dir / f"{CHECKPOINT_PREFIX}{step}"
    tmp = checkpoints_dir / f".tmp-{CHECKPOINT_PREFIX}{step}"
    if accelerator.is_main_process:
        checkpoints_dir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    accelerator.wait_for_everyone()  # every rank has written its part
    if accelerator.is_main_process:
        if save_extra is not None:
            save_extra(tmp)
        (tmp / STATE_FILE).write_text(json.dumps({"step": step, **state}, indent=2))  # written last
        if final.exists():  # same step saved before (e.g. a resumed run); keep it until the swap
            old = checkpoints_dir / f".old-{final.name}"
            shutil.rmtree(old, ignore_errors=True)
            final.rename(old)
            tmp.rename(final)
            shutil.rmtree(old)
        else:
            tmp.rename(final)
        if keep_last:
            for stale in list_checkpoints(checkpoints_dir)[:-keep_last]:
                shutil.rmtree(stale)
    accelerator.wait_for_everyone()
    return final


def find_checkpoint(resume_from, checkpoints_dir):
    """`latest` -> newest complete checkpoint in `checkpoints_dir` (None if there is none yet);
    a path -> that checkpoint, which must be complete."""
    if resume_from == "latest":
        found = list_checkpoints(checkpoints_dir)
        return found[-1] if found else None
    path = Path(resume_from)
    if not (path / STATE_FILE).is_file():
        raise UsageError(f"--resume_from_checkpoint {path}: not a checkpoint folder (no {STATE_FILE}); "
                         f"pass `latest` or a folder like {Path(checkpoints_dir) / (CHECKPOINT_PREFIX + '1000')}")
    return path


def load_checkpoint(accelerator, path):
    """Restore what `save_checkpoint` wrote; returns its `state` dict (with `step`)."""
    accelerator.load_state(str(path))
    return json.loads((Path(path) / STATE_FILE).read_text())


def main_process_first(accelerator, fn):
    """`fn()` on the main process, then on the others (which then read its caches), like
    `accelerator.main_process_first()`; but an error on the main process is raised on every
    process, instead of leaving the others waiting at a barrier for ever."""
    from accelerate.utils import broadcast_object_list

    result, error = None, None
    if accelerator.is_main_process:
        try:
            result = fn()
        except Exception as e:  # noqa: BLE001  re-raised below, on every process
            error = e
    message = broadcast_object_list([None if error is None else f"{type(error).__name__}: {error}"])[0]
    if error is not None:
        raise error
    if message is not None:
        raise (UsageError if message.startswith("UsageError") else RuntimeError)(
            f"the main process failed: {message}")
    return result if accelerator.is_main_process else fn()


def push_failed(repo_id, folder, error):
    """The error for a failed upload: the local save stands, and says how to upload it later."""
    return UsageError(f"--push_to_hub: uploading to {repo_id} failed ({type(error).__name__}: {error}). "
                      f"Nothing is lost: the model is saved in {folder}; upload it later with "
                      f"`hf upload {repo_id} {folder}`")
