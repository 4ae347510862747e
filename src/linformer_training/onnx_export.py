# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
"""Export a Linformer folder to ONNX, where ONNX Runtime serves it without PyTorch, plus a dynamically quantized
int8 copy.

One graph serves every batch size and every length up to n: under `torch.compiler.is_exporting()` the model
prepares both the exact and the projected keys and picks per sequence, and reads windows over n positions, so
nothing in the graph depends on the input it was traced with. The files go where sentence-transformers looks
(`onnx/model.onnx`, `onnx/model_qint8.onnx` beside the weights), and are published only after ONNX Runtime has
reproduced PyTorch on lengths on both sides of the exact length and across a padded mixed batch.
"""

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch
from torch import nn

from .arguments import Arguments, UsageError, arg

TASKS = {"feature-extraction": "AutoModel", "sequence-classification": "AutoModelForSequenceClassification",
         "fill-mask": "AutoModelForMaskedLM"}
ONNX_NAME, INT8_NAME = "model.onnx", "model_qint8.onnx"
TOLERANCE = 1e-4  # max abs difference of the outputs against PyTorch fp32


@dataclass
class ExportArguments(Arguments):
    """Export a Linformer model folder to ONNX (fp32 and dynamic int8) for ONNX Runtime."""

    model_name_or_path: str = field(metadata={"help": "a Linformer folder (save_pretrained output, or a release)"})
    output_dir: str | None = arg(None, "where to write model.onnx and model_qint8.onnx (default: MODEL/onnx, where "
                                       "sentence-transformers looks)")
    task: Literal["auto", "feature-extraction", "sequence-classification", "fill-mask"] = arg(
        "auto", "which head to export (auto: from the folder's architectures)")
    quantize: bool = arg(True, "also write a dynamically quantized int8 copy (weights int8, per channel)")
    max_batch_size: int = arg(64, "largest batch the graph accepts")
    overwrite_output_dir: bool = arg(False, "replace existing ONNX files")

    bounds = {"max_batch_size": "[1, 4096]"}


class _Outputs(nn.Module):
    """The model with plain tensor outputs (ONNX has no dataclasses): hidden states or logits."""

    def __init__(self, model, task):
        super().__init__()
        self.model, self.task = model, task

    def forward(self, input_ids, attention_mask):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
        return out.last_hidden_state if self.task == "feature-extraction" else out.logits


def _load(path, task):
    import transformers

    import linformer_hf  # noqa: F401  (registers Linformer with the Auto classes)
    from linformer_hf import LinformerConfig

    if not Path(path).is_dir():
        raise UsageError(f"--model_name_or_path {path}: no such folder (export reads a local Linformer folder)")
    try:
        config = LinformerConfig.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise UsageError(f"--model_name_or_path {path}: not a Linformer folder ({str(e).splitlines()[0]})") from None
    if config.projection_type != "linear":
        raise UsageError(f"--model_name_or_path {path}: projection_type={config.projection_type!r}; ONNX export "
                         "supports learned projections ('linear', the default and what conversion writes)")
    if task == "auto":
        architecture = (config.architectures or ["LinformerModel"])[0]
        task = {"LinformerForSequenceClassification": "sequence-classification",
                "LinformerForMaskedLM": "fill-mask"}.get(architecture, "feature-extraction")
    model = getattr(transformers, TASKS[task]).from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa")
    return model.eval(), task


def check_batches(config, generator=None):
    """(input_ids, attention_mask) pairs the export must reproduce: one token, lengths on both sides of the
    exact length (or of k), n, and a batch mixing them padded on the left."""
    n = config.max_seq_length
    edge = config.exact_attention_length if isinstance(config.exact_attention_length, int) else max(config.projected_dims)
    lengths = sorted({1, max(edge - 1, 1), edge, min(edge + 1, n), n})
    generator = generator or torch.Generator().manual_seed(0)
    low = max(config.pad_token_id, config.bos_token_id or 0, config.eos_token_id or 0) + 1
    batches = []
    for length in lengths:
        ids = torch.randint(low, config.vocab_size, (1, length), generator=generator)
        batches.append((ids, torch.ones_like(ids)))
    mixed = [length for length in lengths if length < n][-3:] + [n]
    ids = torch.full((len(mixed), n), config.pad_token_id)
    mask = torch.zeros(len(mixed), n, dtype=torch.long)
    for row, length in enumerate(mixed):
        ids[row, n - length:] = torch.randint(low, config.vocab_size, (length,), generator=generator)
        mask[row, n - length:] = 1
    batches.append((ids, mask))
    return batches


def max_difference(session, model, batches):
    """Largest |ONNX Runtime - PyTorch| over the real tokens (or logits) of `batches`."""
    worst = 0.0
    for ids, mask in batches:
        with torch.no_grad():
            expected = model(ids, mask)
        got = torch.from_numpy(session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0])
        if expected.dim() == 3:  # hidden states or logits per token: padding positions carry nothing
            expected, got = expected[mask.bool()], got[mask.bool()]
        worst = max(worst, (got - expected).abs().max().item())
    return worst


def _session(path):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def export_onnx(model_name_or_path, output_dir=None, task="auto", quantize=True, max_batch_size=64,
                overwrite_output_dir=False):
    """Write `model.onnx` (and `model_qint8.onnx`) for the Linformer folder `model_name_or_path` into
    `output_dir` (default: its `onnx/` subfolder) and return that folder. Raises UsageError (one line) on bad
    input, and refuses to publish a graph that does not reproduce PyTorch within 1e-4."""
    try:
        import onnxruntime  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError as e:
        raise UsageError(f"ONNX export needs onnx, onnxscript and onnxruntime ({e.name} is missing): "
                         "pip install 'linformer-hf[onnx]'") from None
    model, task = _load(model_name_or_path, task)
    out = Path(output_dir) if output_dir else Path(model_name_or_path) / "onnx"
    if (out / ONNX_NAME).exists() and not overwrite_output_dir:
        raise UsageError(f"--output_dir {out}: holds {ONNX_NAME} already; pass --overwrite_output_dir true to "
                         "replace it")
    wrapped = _Outputs(model, task).eval()
    config = model.config
    batch = torch.export.Dim("batch", min=1, max=max_batch_size)
    length = torch.export.Dim("sequence", min=1, max=config.max_seq_length)
    ids, mask = check_batches(config)[-1]
    width = max(2, min(config.max_seq_length // 2, 64))  # neither 1 nor n, which a trace could specialise on
    example = (ids[:2, -width:], mask[:2, -width:].clone())
    example[1][0, :2] = 0  # two rows, one of them padded: a trace that specialises on neither
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".onnx-export-", dir=out))
    try:
        program = torch.onnx.export(
            wrapped, example, dynamo=True, input_names=["input_ids", "attention_mask"],
            output_names=["last_hidden_state" if task == "feature-extraction" else "logits"],
            dynamic_shapes={"input_ids": {0: batch, 1: length}, "attention_mask": {0: batch, 1: length}},
            optimize=True, verbose=False)
        program.save(str(staging / ONNX_NAME))
        try:
            difference = max_difference(_session(staging / ONNX_NAME), wrapped, check_batches(config))
        except Exception as e:  # ONNX Runtime refusing a check input: the graph kept a traced shape
            raise UsageError(f"--model_name_or_path {model_name_or_path}: the exported graph does not run on every "
                             f"length (ONNX Runtime: {str(e).splitlines()[0][:200]}); nothing was written") from None
        if difference > TOLERANCE:
            raise UsageError(f"--model_name_or_path {model_name_or_path}: the ONNX graph differs from PyTorch by "
                             f"{difference:.2g} (> {TOLERANCE}) on the check inputs; nothing was written")
        if quantize:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(staging / ONNX_NAME, staging / INT8_NAME, weight_type=QuantType.QInt8, per_channel=True)
        for name in (ONNX_NAME, INT8_NAME):
            if (staging / name).exists():
                (staging / name).replace(out / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out, difference
