# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Rewrite a Linformer folder saved in the format of linformer-hf's first releases into today's, in place:

    python -m linformer_training.upgrade FOLDER [FOLDER ...]

Two things of that format are gone from the library, which refuses such a folder in one line naming this command:

* config fields: `full_attention_short_inputs`, `short_input_max_length` and `local_attention_window` become
  `exact_attention_length` (`short_input_max_length`, or k per layer where it is unset) and
  `attention_type="windowed"` (where a window was set);
* weight names: long-input adapters stored as one dict per block (`...long_input_adapters.query.down`) move onto
  the maps they update (`...attention.self.query.adapter_down`), and the masked-LM head's bias `lm_head.bias`
  becomes `lm_head.decoder.bias`.

Every tensor keeps its values, dtype and shape (each rewritten file is read back and compared before it replaces
the old one). A folder's manifest, where it has one, must match its weights first and is updated for the files
rewritten. `outputs.refresh_release` runs this on a release before writing its remote code.
"""

import argparse
import json
import re
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from . import checkpoints, processes
from .arguments import UsageError

COMMAND = "python -m linformer_training.upgrade"
RETIRED_FIELDS = ("full_attention_short_inputs", "short_input_max_length", "local_attention_window")
# (old name, today's), as regular expressions over a stored tensor's full name (any prefix: `linformer.`, none).
RENAMED_WEIGHTS = [
    (re.compile(r"layer\.(\d+)\.attention\.self\.long_input_adapters\.(query|key|value)\.(down|up|bias)$"),
     r"layer.\1.attention.self.\2.adapter_\3"),
    (re.compile(r"layer\.(\d+)\.attention\.long_input_adapter\.(down|up|bias)$"),
     r"layer.\1.attention.output.dense.adapter_\2"),
    (re.compile(r"layer\.(\d+)\.long_input_adapters\.(intermediate|output)\.(down|up|bias)$"),
     r"layer.\1.\2.dense.adapter_\3"),
    (re.compile(r"^lm_head\.bias$"), "lm_head.decoder.bias"),
]
INDEX = "model.safetensors.index.json"  # a sharded folder's map from tensor name to file


def linformer_config():
    """The LinformerConfig class, imported when first needed: `outputs` imports this module, and most of its
    users never load a model (transformers takes seconds to import)."""
    from linformer_hf import LinformerConfig

    return LinformerConfig


def renamed(name):
    """Today's name of a stored tensor (the name itself where it did not change)."""
    for old, new in RENAMED_WEIGHTS:
        if old.search(name):
            return old.sub(new, name)
    return name


def upgrade_config(fields):
    """config.json's `fields` with the retired long-input fields mapped onto today's (a new dict); the same
    one-line errors as the library gave for combinations that never described one model."""
    fields = dict(fields)
    exact = fields.pop("full_attention_short_inputs", None)
    length = fields.pop("short_input_max_length", None)
    window = fields.pop("local_attention_window", None)

    def refuse(field, value, allowed):
        return UsageError(f"config.json: `{field}`={value!r} is invalid; {allowed}")

    if exact not in (None, True, False):
        raise refuse("full_attention_short_inputs", exact, "allowed: True or False")
    if length is not None and not exact:
        raise refuse("short_input_max_length", length, "it needs full_attention_short_inputs=True")
    if window is not None and window != length:
        raise refuse("local_attention_window", window, f"it needs short_input_max_length equal to it (now {length})")
    if exact and (fields.get("exact_attention_length") is not None
                  or fields.get("attention_type", "projected") != "projected"):
        raise refuse("full_attention_short_inputs", exact, "it is replaced by exact_attention_length and "
                     "attention_type, which the file sets too; keep only those")
    if exact:
        fields["exact_attention_length"] = length if length is not None else fields.get(
            "projected_dim", linformer_config().projected_dim)
    if window is not None:
        fields["attention_type"] = "windowed"
    return fields


def weight_files(folder):
    return sorted(Path(folder).glob("*.safetensors"))


def stored_names(file):
    with safe_open(file, "pt") as f:
        return list(f.keys())


def outdated_files(folder):
    """The files of the Linformer folder `folder` this upgrade would rewrite (relative names; none for another
    model's folder), read without changing anything."""
    folder = Path(folder)
    config = json.loads((folder / "config.json").read_text())
    if config.get("model_type") != "linformer":
        return []
    files = ["config.json"] if set(RETIRED_FIELDS) & set(config) else []
    files += [file.name for file in weight_files(folder) if any(renamed(n) != n for n in stored_names(file))]
    if (folder / INDEX).is_file():
        shards = json.loads((folder / INDEX).read_text())["weight_map"]
        files += [INDEX] if any(renamed(name) != name for name in shards) else []
    return files


def rename_tensors(tensors, file):
    """`tensors` under today's names; a tensor stored under both its names (the decoder's bias, in a folder that
    also kept RoBERTa's `lm_head.bias`) is kept once, where both hold the same values."""
    out, stored_as = {}, {}
    for name, tensor in tensors.items():
        new = renamed(name)
        if new in out and not torch.equal(out[new], tensor):
            raise UsageError(f"{file}: `{stored_as[new]}` and `{name}` are both {new}, with different values; "
                             f"remove the one the model was not trained with, then run this again")
        out.setdefault(new, tensor)
        stored_as.setdefault(new, name)
    return out


def rewrite_weights(file):
    """Rename the tensors of one safetensors file in place, through a copy checked against the old file."""
    with safe_open(file, "pt") as f:
        metadata = f.metadata()
        before = {name: f.get_tensor(name) for name in f.keys()}
    after = rename_tensors(before, file)
    staging = file.with_name(f".{file.name}.upgrade")
    save_file(after, staging, metadata=metadata)
    with safe_open(staging, "pt") as f:
        for name, tensor in before.items():
            written = f.get_tensor(renamed(name))
            if written.dtype != tensor.dtype or not torch.equal(written, tensor):
                staging.unlink()
                raise RuntimeError(f"{file}: `{name}` changed while it was renamed; the file is as it was")
    staging.replace(file)


def upgrade_folder(folder):
    """Rewrite `folder`'s config.json and weights into today's format (see the module docstring); returns the
    names of the files rewritten (none for a folder already in it). The new config is checked to load before any
    file is written, and the weights against the folder's manifest (where it has one)."""
    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise UsageError(f"{folder} is not a model folder (no config.json)")
    config = json.loads((folder / "config.json").read_text())
    if config.get("model_type") != "linformer":
        raise UsageError(f"{folder} holds a {config.get('model_type')!r} model, not a Linformer")
    outdated = outdated_files(folder)
    if not outdated:
        return []
    config = upgrade_config(config)
    linformer_config().from_dict(config)  # a one-line ValueError naming the field if the result would not load
    checkpoints.check_manifest(folder, complete=False, suffixes=(".safetensors",))
    for name in outdated:
        if name.endswith(".safetensors"):
            rewrite_weights(folder / name)
    if INDEX in outdated:
        index = json.loads((folder / INDEX).read_text())
        index["weight_map"] = {renamed(name): shard for name, shard in index["weight_map"].items()}
        (folder / INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    if "config.json" in outdated:
        (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    update_manifest(folder, outdated)
    return outdated


def update_manifest(folder, names):
    """Record the new size and SHA-256 of the rewritten files in `folder`'s manifest, where it has one."""
    path = folder / checkpoints.MANIFEST
    if not path.is_file():
        return
    manifest = json.loads(path.read_text())
    for name in names:
        if name in manifest["files"]:
            manifest["files"][name] = {"size": (folder / name).stat().st_size,
                                       "sha256": checkpoints.sha256(folder / name)}
    path.write_text(json.dumps(manifest, indent=1) + "\n")


def main(argv=None):
    p = argparse.ArgumentParser(prog=COMMAND, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folders", nargs="+", type=Path, help="Linformer folders (save_pretrained output, a release)")
    args = p.parse_args(argv)
    for folder in args.folders:
        try:
            rewritten = upgrade_folder(folder)
        except UsageError:
            raise
        except ValueError as e:  # a manifest that no longer matches the weights, a config that would not load
            raise UsageError(f"{folder}: {e}") from None
        print(f"{COMMAND}: {folder}: " + (f"rewrote {', '.join(rewritten)} (every tensor's values unchanged)"
                                          if rewritten else "already in today's format; nothing to do"))


if __name__ == "__main__":
    processes.run_script(main, COMMAND)
