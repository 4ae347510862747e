# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""export_onnx: one ONNX graph per model that ONNX Runtime runs at every batch size and length up to n, equal to
PyTorch (<= 1e-4) on both sides of the exact length and across padded mixed batches; bad input is one line."""

import contextlib
import functools
import importlib
import io
import shutil
import subprocess
import sys

import pytest
import torch
from conftest import REPO, tiny_config

from linformer_hf import LinformerForSequenceClassification, LinformerModel
from linformer_training import processes
from linformer_training.arguments import UsageError
from linformer_training.onnx_export import export_onnx  # imports onnx and onnxruntime only when it runs them

onnxruntime = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")
onnx = pytest.importorskip("onnx")


def random_model(model_class, **overrides):
    """A tiny model whose every optional part acts: random E, adapters and gates (all start as no change)."""
    torch.manual_seed(0)
    model = model_class(tiny_config(max_seq_length=64, projected_dim=8, **overrides)).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "projections" in name or "adapter_" in name or name.endswith("global_gate"):
                param.normal_(0.0, 0.3)
    return model


def run(session, ids, mask):
    return torch.from_numpy(session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0])


CASES = {
    "paper": (LinformerModel, {}),
    "exact_path_per_head": (LinformerModel, dict(exact_attention_length=8, projection_sharing="none")),
    "exact_512_style": (LinformerModel, dict(exact_attention_length=16, projection_length_scaling="resample",
                                             long_input_adapter_rank=4)),
    "windowed": (LinformerModel, dict(attention_type="windowed", exact_attention_length=16, long_input_adapter_rank=4,
                                      projection_length_scaling="resample")),
    "classifier": (LinformerForSequenceClassification, dict(attention_type="windowed", exact_attention_length=16)),
    "pre_norm": (LinformerModel, dict(layer_norm_placement="pre", embedding_layer_norm=False)),  # the Jargon models
    # windows of n/k positions: one input token fills one window, the rest are empty and blocked
    "convolution": (LinformerModel, dict(projection_type="conv", exact_attention_length=16)),  # the study's recipe
    "max_pooling_per_head": (LinformerModel, dict(projection_type="max_pool", projection_sharing="none")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_onnx_runtime_reproduces_pytorch_at_every_length(case, tmp_path):
    model_class, overrides = CASES[case]
    model = random_model(model_class, **overrides)
    model.save_pretrained(tmp_path / "model")
    out, difference = export_onnx(tmp_path / "model", quantize=False)
    assert out == tmp_path / "model" / "onnx" and difference <= 1e-4
    session = onnxruntime.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    generator = torch.Generator().manual_seed(1)
    for batch, length in ((1, 1), (1, 7), (3, 16), (2, 17), (1, 40), (2, 64)):  # one window, several; <= and > k
        ids = torch.randint(5, 300, (batch, length), generator=generator)
        mask = torch.ones_like(ids)
        mask[0, : length // 3] = 0  # left padding on the first row: a mixed batch of two lengths
        with torch.no_grad():
            expected = model(input_ids=ids, attention_mask=mask)
        expected = expected.logits if case == "classifier" else expected.last_hidden_state
        got = run(session, ids, mask)
        if expected.dim() == 3:
            expected, got = expected[mask.bool()], got[mask.bool()]
        assert (got - expected).abs().max() <= 1e-4, (batch, length)


def test_int8_copy_is_written_and_close(tmp_path):
    random_model(LinformerModel).save_pretrained(tmp_path / "model")
    out, _ = export_onnx(tmp_path / "model", output_dir=tmp_path / "onnx")
    fp32, int8 = (onnxruntime.InferenceSession(str(out / name), providers=["CPUExecutionProvider"])
                  for name in ("model.onnx", "model_qint8.onnx"))
    # Every weight matrix in 8 bits (MatMulNBits; a tiny model's 32 input channels fill a block of 128 only in part,
    # so the file shrinks less than a real one's), the embedding tables quantized, no activation quantizer.
    graph = onnx.load(out / "model_qint8.onnx").graph
    constant = {t.name for t in graph.initializer}
    ops = [n.op_type for n in graph.node]
    assert "MatMulNBits" in ops and "DynamicQuantizeLinear" not in ops and "MatMulInteger" not in ops
    assert not [n.name for n in graph.node if n.op_type == "MatMul" and n.input[1] in constant]
    assert (out / "model_qint8.onnx").stat().st_size < 0.9 * (out / "model.onnx").stat().st_size
    ids = torch.randint(5, 300, (2, 50), generator=torch.Generator().manual_seed(2))
    mask = torch.ones_like(ids)
    a, b = run(fp32, ids, mask).mean(1), run(int8, ids, mask).mean(1)
    assert torch.nn.functional.cosine_similarity(a, b).min() > 0.9


@pytest.mark.parametrize("setup, message", [
    (lambda tmp: tmp / "missing", "no such folder"),
    (lambda tmp: (tmp / "other").mkdir() or (tmp / "other" / "config.json").write_text('{"model_type": "bert"}')
     and tmp / "other", "not a Linformer folder"),
])
def test_bad_input_is_one_line_and_writes_nothing(setup, message, tmp_path):
    folder = setup(tmp_path)
    with pytest.raises(UsageError, match=message) as error:
        export_onnx(folder)
    assert "\n" not in str(error.value) and not (tmp_path / "m" / "onnx").exists()


def test_command_refuses_to_overwrite_unless_asked(tmp_path):
    random_model(LinformerModel).save_pretrained(tmp_path / "model")
    (tmp_path / "model" / "onnx").mkdir()
    (tmp_path / "model" / "onnx" / "model.onnx").write_text("an older export")
    result = subprocess.run([sys.executable, "export_onnx.py", "--model_name_or_path", str(tmp_path / "model")],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode != 0 and "--overwrite_output_dir true" in result.stderr
    assert (tmp_path / "model" / "onnx" / "model.onnx").read_text() == "an older export"


# --- nothing is overwritten or left behind that the user did not ask for (issue 46) ------------------------------


def export_command(*args, limit=None):
    """export_onnx.py as a user runs it: its `__main__` path (processes.run_script: one error line, an exit status)
    in this process, which has already paid the imports (seconds per call); in a process of its own only where
    `limit` caps the largest file (bytes) it may write (ulimit -f), which would cap pytest too."""
    import resource

    argv = list(map(str, args))
    if limit:
        cap = functools.partial(resource.setrlimit, resource.RLIMIT_FSIZE, (limit, limit))
        return subprocess.run([sys.executable, "export_onnx.py", *argv], capture_output=True, text=True, cwd=REPO,
                              preexec_fn=cap, timeout=600)
    script = importlib.import_module("export_onnx")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as ended:
        processes.run_script(functools.partial(script.main, argv), "export_onnx.py")
    return subprocess.CompletedProcess(["export_onnx.py", *argv], ended.value.code, out.getvalue(), err.getvalue())


def one_line_error(result, *fragments):
    """The command failed with one line of its own (the last; the exporter's warnings may come before it)."""
    last = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 1 and last.startswith("export_onnx.py: error: "), result.stderr[-3000:]
    assert "Traceback" not in result.stderr and result.stderr.count("error: ") == 1, result.stderr[-3000:]
    assert all(f in last for f in fragments), last


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("saved") / "model"
    random_model(LinformerModel).save_pretrained(folder)
    return folder


def test_no_existing_file_is_replaced_unless_asked_and_a_cut_export_is_cleaned(saved, tmp_path):
    """Either file existing (here only the int8 copy, which the old guard missed) refuses the export; with
    --overwrite_output_dir both are replaced, and the staging folder an export killed mid-way left is removed."""
    out = tmp_path / "onnx"
    out.mkdir()
    (out / "model_qint8.onnx").write_text("a committed export")
    one_line_error(export_command("--model_name_or_path", saved, "--output_dir", out), "model_qint8.onnx",
                   "--overwrite_output_dir true")
    assert sorted(p.name for p in out.iterdir()) == ["model_qint8.onnx"]
    (out / ".onnx-export-999999999-cut").mkdir()  # a process id no process has: its export was killed
    assert export_command("--model_name_or_path", saved, "--output_dir", out, "--overwrite_output_dir", "true",
                          ).returncode == 0
    assert sorted(p.name for p in out.iterdir()) == ["model.onnx", "model_qint8.onnx"]
    assert (out / "model_qint8.onnx").read_bytes() != b"a committed export"


def test_a_released_folder_gets_no_file_its_manifest_does_not_cover(saved, tmp_path):
    """A folder with a manifest.json (a release) is written to only when asked, and then its manifest lists the new
    files, so the release's own check still passes."""
    from linformer_training import checkpoints

    release = tmp_path / "release"
    shutil.copytree(saved, release)
    checkpoints.write_manifest(release)
    before = {p.name: p.read_bytes() for p in release.iterdir()}
    one_line_error(export_command("--model_name_or_path", release, "--quantize", "false"), "manifest.json",
                   "--overwrite_output_dir true")
    assert {p.name: p.read_bytes() for p in release.iterdir()} == before
    assert export_command("--model_name_or_path", release, "--quantize", "false", "--overwrite_output_dir",
                          "true").returncode == 0
    assert sorted(p.name for p in (release / "onnx").iterdir()) == ["model.onnx"]
    assert checkpoints.check_manifest(release) is True


@pytest.mark.parametrize("case", ["output_dir_is_a_file", "output_dir_under_a_file", "truncated_weights",
                                  "no_weights", "file_size_limit"])
def test_each_failure_is_one_line_and_publishes_nothing(case, saved, tmp_path):
    model, out, limit = tmp_path / "model", tmp_path / "onnx", None
    shutil.copytree(saved, model)
    if case == "output_dir_is_a_file":
        out.write_text("not a folder")
        fragments = [f"{out} is a file"]
    elif case == "output_dir_under_a_file":
        out.write_text("not a folder")
        out = out / "inner"
        fragments = [f"{out.parent} is a file"]
    elif case == "truncated_weights":
        weights = model / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:1000])
        fragments = ["--model_name_or_path", "weights do not load"]
    elif case == "no_weights":
        (model / "model.safetensors").unlink()
        fragments = ["--model_name_or_path", "weights do not load"]
    else:
        limit, fragments = 64 * 1024, ["could not write the ONNX files", "nothing was published"]
    one_line_error(export_command("--model_name_or_path", model, "--output_dir", out, limit=limit), *fragments)
    assert not out.is_dir() or not [p for p in out.iterdir()]


def test_an_untrained_head_is_exported_only_when_asked(tmp_path):
    from linformer_hf import LinformerForMaskedLM

    torch.manual_seed(0)
    LinformerForMaskedLM(tiny_config(max_seq_length=64, projected_dim=8)).save_pretrained(tmp_path / "mlm")
    one_line_error(export_command("--model_name_or_path", tmp_path / "mlm", "--task", "sequence-classification",
                                  "--output_dir", tmp_path / "onnx"), "--task sequence-classification",
                   "--allow_untrained_head true")
    assert not (tmp_path / "onnx").exists()


def test_a_damaged_onnx_file_is_one_line_naming_it_and_the_command(saved, tmp_path):
    from linformer_training.onnx_export import onnx_session

    (tmp_path / "onnx").mkdir()
    damaged = tmp_path / "onnx" / "model_qint8.onnx"
    damaged.write_bytes(b"\x08\x07\x12\x05torch" * 3)  # a graph cut off after its first bytes
    for path in (damaged, tmp_path / "onnx" / "model.onnx"):
        with pytest.raises(UsageError) as error:
            onnx_session(path)
        message = str(error.value)
        assert "\n" not in message and str(path) in message
        assert f"python export_onnx.py --model_name_or_path {tmp_path} --overwrite_output_dir true" in message


def test_the_graph_carries_no_source_paths_or_line_numbers(saved, tmp_path):
    """The exporter's per-node stack traces are dropped, so the bytes of a committed graph do not change with every
    edit of the model's source, and no local path ships in it."""
    out, _ = export_onnx(saved, tmp_path / "onnx", quantize=False)
    data = (out / "model.onnx").read_bytes()
    assert b"pkg.torch.onnx.stack_trace" not in data and str(REPO).encode() not in data
