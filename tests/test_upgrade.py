# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""linformer_training.upgrade: a folder in the format of linformer-hf's first releases (the three retired config
fields, adapters stored as one dict per block, the masked-LM bias as `lm_head.bias`) is refused by the library in
one line naming the command; the command rewrites it, and it then loads as the same model, bit for bit."""

import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import REPO, tiny_config
from safetensors.torch import load_file, save_file

from linformer_hf import LinformerConfig, LinformerForMaskedLM, LinformerModel
from linformer_training import checkpoints, upgrade
from linformer_training.arguments import UsageError

# Where the first releases stored what today's modules hold (written out here, not read from the module under test).
FIRST_RELEASE_NAMES = [("attention.self.query.adapter_", "attention.self.long_input_adapters.query."),
                       ("attention.self.key.adapter_", "attention.self.long_input_adapters.key."),
                       ("attention.self.value.adapter_", "attention.self.long_input_adapters.value."),
                       ("attention.output.dense.adapter_", "attention.long_input_adapter."),
                       ("intermediate.dense.adapter_", "long_input_adapters.intermediate."),
                       ("output.dense.adapter_", "long_input_adapters.output.")]
FIRST_RELEASE_FIELDS = {"full_attention_short_inputs": True, "short_input_max_length": 16,
                        "local_attention_window": 16}


def first_release_name(name):
    for today, old in FIRST_RELEASE_NAMES:
        if today in name:
            return name.replace(today, old)
    return "lm_head.bias" if name == "lm_head.decoder.bias" else name


def saved_model(folder):
    """A masked LM with windowed attention and adapters, every adapter and gate moved off its start (so a tensor
    left at its initial value on load would show), saved today."""
    torch.manual_seed(0)
    model = LinformerForMaskedLM(tiny_config(exact_attention_length=16, attention_type="windowed",
                                             long_input_adapter_rank=2)).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "adapter" in name or "gate" in name or "decoder.bias" in name:
                param.normal_(0.0, 0.5)
    model.save_pretrained(folder)
    return model


def to_first_release_format(folder, config=True, weights=True):
    """Rewrite a folder saved today as the first releases stored it, and give it a manifest."""
    if weights:
        tensors = load_file(folder / "model.safetensors")
        save_file({first_release_name(k): v for k, v in tensors.items()}, folder / "model.safetensors",
                  metadata={"format": "pt"})
    if config:
        fields = json.loads((folder / "config.json").read_text())
        del fields["attention_type"], fields["exact_attention_length"]
        (folder / "config.json").write_text(json.dumps({**fields, **FIRST_RELEASE_FIELDS}, indent=2))
    checkpoints.write_manifest(folder)


def mixed_batch():
    ids = torch.randint(5, 300, (3, 32), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, 10:], mask[2, :20] = 0, 0  # one sequence read exactly, one left-padded past the window
    return ids, mask


def test_a_first_release_folder_is_refused_in_one_line_and_loads_the_same_once_upgraded(tmp_path):
    folder = tmp_path / "first-release"
    model = saved_model(folder)
    to_first_release_format(folder)
    stored = sorted(load_file(folder / "model.safetensors"))
    assert "lm_head.bias" in stored and any(".long_input_adapters.query.down" in k for k in stored)
    with pytest.raises(ValueError, match=r"`full_attention_short_inputs` belongs to the format of linformer-hf's "
                                         r"first releases .*: python -m linformer_training\.upgrade <folder>$") as e:
        LinformerForMaskedLM.from_pretrained(folder)
    assert "\n" not in str(e.value)

    done = subprocess.run([sys.executable, "-m", "linformer_training.upgrade", str(folder)], capture_output=True,
                          text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{folder}: rewrote config.json, model.safetensors (every tensor's values unchanged)" in done.stdout
    config = json.loads((folder / "config.json").read_text())
    assert (config["attention_type"], config["exact_attention_length"]) == ("windowed", 16)
    assert not set(FIRST_RELEASE_FIELDS) & set(config)
    assert checkpoints.check_manifest(folder)  # its manifest follows the rewritten files
    again = LinformerForMaskedLM.from_pretrained(folder).eval()
    assert all(torch.equal(again.state_dict()[k], v) for k, v in model.state_dict().items())
    ids, mask = mixed_batch()
    with torch.no_grad():
        assert torch.equal(again(ids, attention_mask=mask).logits, model(ids, attention_mask=mask).logits)
    upgrade.main([str(folder)])  # a second time: nothing left to do
    assert checkpoints.check_manifest(folder)


@pytest.mark.parametrize("model_class", [LinformerForMaskedLM, LinformerModel])
def test_weights_stored_under_the_first_releases_names_are_refused_before_loading(model_class, tmp_path):
    """Today's config, the old weight names (every folder this library saved before the names changed): the load
    stops in one line naming the folder and the command, before transformers reports a key."""
    folder = tmp_path / "old-names"
    saved_model(folder)
    to_first_release_format(folder, config=False)
    with pytest.raises(ValueError, match=rf"{model_class.__name__}: {folder} stores weights under the names of "
                                         rf"linformer-hf's first releases \(`.*`, 37 in all\); rename them once with: "
                                         rf"python -m linformer_training\.upgrade {folder}$") as error:
        model_class.from_pretrained(folder)
    assert "\n" not in str(error.value)
    assert upgrade.upgrade_folder(folder) == ["model.safetensors"]
    model_class.from_pretrained(folder)


@pytest.mark.parametrize("old, new", [
    (dict(full_attention_short_inputs=False), dict(attention_type="projected", exact_attention_length=None)),
    (dict(full_attention_short_inputs=True), dict(attention_type="projected", exact_attention_length=128)),
    (dict(full_attention_short_inputs=True, short_input_max_length=512, max_seq_length=4096),
     dict(attention_type="projected", exact_attention_length=512)),
    (dict(full_attention_short_inputs=True, short_input_max_length=512, local_attention_window=512,
          max_seq_length=4096), dict(attention_type="windowed", exact_attention_length=512)),
    (dict(full_attention_short_inputs=True, num_hidden_layers=2, projected_dim=[32, 64], projection_sharing="none"),
     dict(attention_type="projected", exact_attention_length=[32, 64])),  # each layer's own k, as before
])
def test_the_retired_fields_become_todays(old, new):
    """The mapping the library applied on load until the releases were rewritten: `full_attention_short_inputs`
    reads sequences up to `short_input_max_length` (or k, per layer) exactly, and a window means windowed attention."""
    fields = upgrade.upgrade_config({"model_type": "linformer", **old})
    assert not set(FIRST_RELEASE_FIELDS) & set(fields)
    config = LinformerConfig(**fields)
    assert {key: getattr(config, key) for key in new} == new


@pytest.mark.parametrize("old, message", [
    (dict(full_attention_short_inputs="yes"), "`full_attention_short_inputs`='yes' is invalid; allowed: True or"),
    (dict(short_input_max_length=16), "`short_input_max_length`=16 is invalid; it needs full_attention_short_inputs"),
    (dict(full_attention_short_inputs=True, short_input_max_length=256, local_attention_window=128),
     "`local_attention_window`=128 is invalid; it needs short_input_max_length equal to it"),
    (dict(full_attention_short_inputs=True, exact_attention_length=256), "keep only those"),
])
def test_retired_fields_that_never_described_one_model_are_refused(old, message):
    with pytest.raises(UsageError, match=message) as error:
        upgrade.upgrade_config(old)
    assert "\n" not in str(error.value)


def test_what_the_upgrade_refuses(tmp_path):
    """No config.json, another model type, a manifest the weights no longer match, and a bias stored under both
    names with different values: one line each, and no file written."""
    with pytest.raises(UsageError, match=rf"^{tmp_path} is not a model folder \(no config\.json\)$"):
        upgrade.main([str(tmp_path)])
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(UsageError, match="holds a 'bert' model, not a Linformer"):
        upgrade.upgrade_folder(tmp_path)

    folder = tmp_path / "damaged"
    saved_model(folder)
    to_first_release_format(folder)
    tensors = load_file(folder / "model.safetensors")
    tensors["lm_head.bias"] = tensors["lm_head.bias"] + 1
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"model\.safetensors does not match its SHA-256 in manifest\.json"):
        upgrade.upgrade_folder(folder)
    save_file({**tensors, "lm_head.decoder.bias": tensors["lm_head.bias"] - 1}, folder / "model.safetensors",
              metadata={"format": "pt"})
    checkpoints.write_manifest(folder)
    before = (folder / "model.safetensors").read_bytes()
    with pytest.raises(UsageError, match=r"`lm_head\.(decoder\.)?bias` and `lm_head\.(decoder\.)?bias` are both "
                                         r"lm_head\.decoder\.bias, with different values"):
        upgrade.upgrade_folder(folder)
    assert (folder / "model.safetensors").read_bytes() == before
