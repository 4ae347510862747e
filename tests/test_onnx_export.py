# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
"""export_onnx: one ONNX graph per model that ONNX Runtime runs at every batch size and length up to n, equal to
PyTorch (<= 1e-4) on both sides of the exact length and across padded mixed batches; bad input is one line."""

import subprocess
import sys

import pytest
import torch

from conftest import REPO, tiny_config

onnxruntime = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from linformer_hf import LinformerForSequenceClassification, LinformerModel  # noqa: E402
from linformer_training.arguments import UsageError  # noqa: E402
from linformer_training.onnx_export import export_onnx  # noqa: E402


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
    assert (out / "model_qint8.onnx").stat().st_size < 0.8 * (out / "model.onnx").stat().st_size  # tiny: embeddings stay fp32
    ids = torch.randint(5, 300, (2, 50), generator=torch.Generator().manual_seed(2))
    mask = torch.ones_like(ids)
    a, b = run(fp32, ids, mask).mean(1), run(int8, ids, mask).mean(1)
    assert torch.nn.functional.cosine_similarity(a, b).min() > 0.9


@pytest.mark.parametrize("setup, message", [
    (lambda tmp: tmp / "missing", "no such folder"),
    (lambda tmp: random_model(LinformerModel, projection_type="mean_pool").save_pretrained(tmp / "m") or tmp / "m",
     "projection_type='mean_pool'"),
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
