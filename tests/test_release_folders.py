# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Every folder under release/ is what its build command writes from src/: its remote code (and load dtype,
sentence-transformers module) byte for byte as `outputs.write_remote_code` writes it today, and its manifest.json
matching the files on disk. A new release is covered by being there; a fix to the model that a release misses
fails here until the release is refreshed (experiments/*/release.py --refresh, weights untouched)."""

import shutil

import pytest
from conftest import REPO

from linformer_training import checkpoints, outputs
from linformer_training.arguments import UsageError

RELEASES = sorted(p.parent for p in (REPO / "release").glob("*/config.json"))
REFRESH = "python -m experiments.{long_documents|masked_lm}.release --refresh --out {0} (its build script's)"


def not_generated(folder, scratch):
    """The files of `folder` that differ from what write_remote_code writes into a copy of it (weights left out:
    it reads none), as paths relative to it."""
    copy = scratch / folder.name
    shutil.copytree(folder, copy, ignore=lambda _, names: [n for n in names if n.endswith(outputs.WEIGHT_SUFFIXES)])
    outputs.write_remote_code(copy)
    return sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*")
                  if p.is_file() and p.read_bytes() != (folder / p.relative_to(copy)).read_bytes())


def test_every_release_is_its_build_from_src(tmp_path):
    assert RELEASES, "no release/*/config.json"
    problems = []
    for i, folder in enumerate(RELEASES):
        stale = not_generated(folder, tmp_path / str(i))
        if stale:
            command = REFRESH.replace("{0}", str(folder.relative_to(REPO)))
            problems.append(f"{stale} differ from src/; rewrite them: {command}")
        try:
            checkpoints.check_manifest(folder) or problems.append(f"{folder.name} has no {checkpoints.MANIFEST}")
        except ValueError as e:
            problems.append(f"{folder.name}: {e}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", [*outputs.CODE_FILES, "config.json"])
def test_a_release_file_that_is_not_src_is_found(tmp_path, name):
    """A release whose code is a version behind (a byte changed), or whose load dtype is not float32, fails."""
    folder = tmp_path / "release"
    shutil.copytree(RELEASES[0], folder, ignore=lambda _, names: [n for n in names
                                                                   if n.endswith(outputs.WEIGHT_SUFFIXES)])
    outputs.write_remote_code(folder)
    assert not_generated(folder, tmp_path / "clean") == []
    text = (folder / name).read_text()
    (folder / name).write_text(text.replace('"float32"', '"float16"') if name == "config.json" else text + "\n")
    assert not_generated(folder, tmp_path / "stale") == [name]


def test_a_refresh_rewrites_code_and_manifest_and_never_the_weights(tmp_path):
    """outputs.refresh_release on a small folder: code from src/ and a manifest matching it, weights byte for byte;
    a `write` that changes a weight file publishes nothing, unless that file is one it was asked to rewrite."""
    out = tmp_path / "release"
    (out / "onnx").mkdir(parents=True)
    (out / "config.json").write_text('{"dtype": "float16"}\n')
    (out / "model.safetensors").write_bytes(b"weights")
    (out / "onnx" / "model_qint8.onnx").write_bytes(b"graph")
    (out / "modeling_linformer.py").write_text("# a version behind\n")
    before, after = outputs.refresh_release(out)
    assert before == after == outputs.weight_digests(out) and set(before) == {"model.safetensors",
                                                                              "onnx/model_qint8.onnx"}
    assert not_generated(out, tmp_path / "check") == [] and checkpoints.check_manifest(out) is True
    published = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def regraph(folder):
        (folder / "onnx" / "model_qint8.onnx").write_bytes(b"new graph")

    with pytest.raises(RuntimeError, match=r"changed its weights \(onnx/model_qint8.onnx\) before it was published"):
        outputs.refresh_release(out, regraph)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == published
    assert sorted(p.name for p in tmp_path.iterdir()) == ["check", "release"]  # no staging folder left behind
    before, after = outputs.refresh_release(out, regraph, rewritten=("onnx/model_qint8.onnx",))
    assert before["model.safetensors"] == after["model.safetensors"] and (out / "onnx/model_qint8.onnx").read_bytes() \
        == b"new graph" and checkpoints.check_manifest(out) is True
    with pytest.raises(UsageError, match="no config.json"):
        outputs.refresh_release(tmp_path / "none")


def test_a_refresh_rewrites_a_release_of_the_first_format_with_every_tensor_unchanged(tmp_path):
    """A release still in the first releases' format (retired config fields, old weight names): the refresh renames
    its weights and fields (`upgrade`), so the file's SHA-256 changes, and the model loads with every tensor and
    its outputs as before."""
    import torch
    from test_upgrade import mixed_batch, saved_model, to_first_release_format

    from linformer_hf import LinformerForMaskedLM

    out = tmp_path / "release"
    model = saved_model(out)
    to_first_release_format(out)
    before, after = outputs.refresh_release(out)
    assert set(before) == set(after) == {"model.safetensors"} and before != after
    assert not_generated(out, tmp_path / "check") == [] and checkpoints.check_manifest(out) is True
    again = LinformerForMaskedLM.from_pretrained(out).eval()
    ids, mask = mixed_batch()
    with torch.no_grad():
        assert torch.equal(again(ids, attention_mask=mask).logits, model(ids, attention_mask=mask).logits)
    assert outputs.refresh_release(out)[0] == outputs.weight_digests(out)  # once rewritten, byte for byte again
