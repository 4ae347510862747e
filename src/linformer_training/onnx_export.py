# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Export a Linformer folder to ONNX, where ONNX Runtime serves it without PyTorch, plus an int8 copy (weights in 8
bits, products in float32).

One graph serves every batch size and every length up to n: under `torch.compiler.is_exporting()` the model
prepares both the exact and the projected keys and picks per sequence, and reads windows over n positions, so
nothing in the graph depends on the input it was traced with. The files go where sentence-transformers looks
(`onnx/model.onnx`, `onnx/model_qint8.onnx` beside the weights), and are published only after ONNX Runtime has
reproduced PyTorch on lengths on both sides of the exact length and across a padded mixed batch.
"""

import importlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch
from torch import nn

from . import checkpoints
from .arguments import Arguments, UsageError, arg

TASKS = {"feature-extraction": "AutoModel", "sequence-classification": "AutoModelForSequenceClassification",
         "fill-mask": "AutoModelForMaskedLM"}
ONNX_NAME, INT8_NAME = "model.onnx", "model_qint8.onnx"
STAGING_PREFIX = ".onnx-export-"  # + the exporting process's id: a folder whose process is gone was cut short
TOLERANCE = 1e-4  # max abs difference of the outputs against PyTorch fp32
INT8_BLOCK = 128  # input channels per weight scale of the int8 copy


@dataclass
class ExportArguments(Arguments):
    """Export a Linformer model folder to ONNX (fp32 and dynamic int8) for ONNX Runtime."""

    model_name_or_path: str = field(metadata={"help": "a Linformer folder (save_pretrained output, or a release)"})
    output_dir: str | None = arg(None, "where to write model.onnx and model_qint8.onnx (default: MODEL/onnx, where "
                                       "sentence-transformers looks)")
    task: Literal["auto", "feature-extraction", "sequence-classification", "fill-mask"] = arg(
        "auto", "which head to export (auto: from the folder's architectures)")
    quantize: bool = arg(True, "also write an 8-bit copy (weight matrices in 8 bits, products in float32, "
                                     "embedding tables uint8)")
    max_batch_size: int = arg(64, "largest batch the graph accepts")
    overwrite_output_dir: bool = arg(False, "replace existing ONNX files; in a folder with a manifest.json (a "
                                            "release), also write files it does not list and update it")
    allow_untrained_head: bool = arg(False, "export --task even where the folder has no weights for its head "
                                            "(the head would be freshly initialised: random outputs)")

    bounds = {"max_batch_size": "[1, 4096]"}


class _Outputs(nn.Module):
    """The model with plain tensor outputs (ONNX has no dataclasses): hidden states or logits."""

    def __init__(self, model, task):
        super().__init__()
        self.model, self.task = model, task

    def forward(self, input_ids, attention_mask):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
        return out.last_hidden_state if self.task == "feature-extraction" else out.logits


def _load(path, task, allow_untrained_head=False):
    import transformers

    from linformer_hf import LinformerConfig  # importing it registers Linformer with the Auto classes

    if not Path(path).is_dir():
        raise UsageError(f"--model_name_or_path {path}: no such folder (export reads a local Linformer folder)")
    try:
        config = LinformerConfig.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise UsageError(f"--model_name_or_path {path}: not a Linformer folder ({str(e).splitlines()[0]})") from None
    if task == "auto":
        architecture = (config.architectures or ["LinformerModel"])[0]
        task = {"LinformerForSequenceClassification": "sequence-classification",
                "LinformerForMaskedLM": "fill-mask"}.get(architecture, "feature-extraction")
    try:
        model, info = getattr(transformers, TASKS[task]).from_pretrained(
            path, dtype=torch.float32, attn_implementation="sdpa", output_loading_info=True)
    except Exception as e:  # noqa: BLE001  missing, truncated or foreign weights: transformers' many error types
        raise UsageError(f"--model_name_or_path {path}: its weights do not load ({type(e).__name__}: "
                         f"{str(e).splitlines()[0][:200] if str(e) else ''})") from None
    new = sorted(info["missing_keys"])
    if new and not allow_untrained_head:
        raise UsageError(f"--task {task}: {path} has no weights for {len(new)} of its tensors ({new[0]}, ...), "
                         f"which would be exported untrained; export the folder's own head (--task auto), or pass "
                         f"--allow_untrained_head true")
    return model.eval(), task


def check_batches(config, generator=None):
    """(input_ids, attention_mask) pairs the export must reproduce: one token, lengths on both sides of the
    exact length (or of k), n, and a batch mixing them padded on the left."""
    n = config.max_seq_length
    exact = config.exact_attention_length
    edge = exact if isinstance(exact, int) else max(config.projected_dims)
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


def session_options(threads=None):
    """ONNX Runtime options as the project times and serves graphs: its warnings off (the exporter's graphs
    trigger harmless ones on every load), and with `threads`, that many for one operator and no operator run
    beside another, so a thread count means what torch.set_num_threads means."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    if threads:
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    return options


def onnx_session(path, threads=None, options=None):
    """An ONNX Runtime session on the CPU for an exported file (`options`: default session_options(threads)). A
    missing, truncated or damaged file is one line naming it and the command that writes it again (ONNX Runtime's
    own says only "Protobuf parsing failed")."""
    import onnxruntime

    options = options or session_options(threads)
    path = Path(path)
    folder = path.parent.parent if path.parent.name == "onnx" else path.parent
    try:
        return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001  onnxruntime raises its own exception types
        why = "missing" if not path.is_file() else f"unreadable ({str(e).splitlines()[0][:160]})"
        raise UsageError(f"{path}: ONNX file {why}; write it again with: python export_onnx.py "
                         f"--model_name_or_path {folder} --overwrite_output_dir true") from None


def drop_stack_traces(model):
    """Remove the Python stack trace the exporter records on every node: it holds this checkout's file paths and
    line numbers, so any edit of the model's source changed a committed graph's bytes (the release's 40 MB int8
    file) and local paths shipped with it. The graph itself is untouched."""
    from onnx_ir.traversal import RecursiveGraphIterator

    graphs = [model.graph, *model.functions.values()]
    for graph in graphs:
        for node in RecursiveGraphIterator(graph):
            node.metadata_props.pop("pkg.torch.onnx.stack_trace", None)


def check_output_dir(out, names, overwrite):
    """Refuse, before any work, an --output_dir that cannot hold the files or holds some of them already, and
    (a folder with a manifest.json, such as a release) files its manifest does not cover. Returns the folder
    whose manifest the export must update, or None."""
    for parent in [out, *out.parents]:
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"--output_dir {out}: {parent} is a file, not a folder")
            break
    present = [name for name in names if (out / name).exists()]
    if present and not overwrite:
        raise UsageError(f"--output_dir {out}: holds {', '.join(present)} already; pass --overwrite_output_dir true "
                         f"to replace {'it' if len(present) == 1 else 'them'}")
    released = next((folder for folder in (out, out.parent) if (folder / checkpoints.MANIFEST).is_file()), None)
    if released is not None and not overwrite:
        raise UsageError(f"--output_dir {out}: {released} has a {checkpoints.MANIFEST} that does not list "
                         f"{', '.join(names)}; write them elsewhere (--output_dir), or pass --overwrite_output_dir "
                         f"true to add them and update the manifest")
    return released


def clean_stale_staging(out):
    """Remove what an export killed mid-way left in `out` (its staging folder, named after its process)."""
    for folder in out.glob(f"{STAGING_PREFIX}*"):
        pid = folder.name[len(STAGING_PREFIX):].split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(folder, ignore_errors=True)


def quantize_int8(source, destination):
    """Every MatMul's weights to 8 bits (symmetric, one scale per block of INT8_BLOCK input channels, ONNX Runtime's
    MatMulNBits), multiplied in float32 at run time; the embedding tables to uint8 with one scale per table.

    Weight-only, so that a text's embedding is its own whatever else shares its batch: ONNX Runtime's dynamic
    quantization (the first releases' scheme) gives each activation tensor one scale from its range over the whole
    batch, padding included, and a text's embedding moved with its neighbours (least cosine 0.988 between batch sizes
    1 and 8 on held-out texts). It also avoids the signed-weight integer kernel that saturates on x86 CPUs without
    VNNI. Its price is speed (float32 products, weights unpacked on the way): docs/serving.md."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

    settings = dict(bits=8, block_size=INT8_BLOCK, is_symmetric=True, accuracy_level=1)  # 1: float32 products
    quantizer = MatMulNBitsQuantizer(onnx.load(source), **settings,
                                     algo_config=DefaultWeightOnlyQuantConfig(**settings))
    quantizer.process()
    weights_only = Path(destination).with_name(f".{Path(destination).name}.matmuls")
    try:
        quantizer.model.save_model_to_file(str(weights_only), use_external_data_format=False)
        quantize_dynamic(weights_only, destination, op_types_to_quantize=["Gather"], weight_type=QuantType.QUInt8)
    finally:
        weights_only.unlink(missing_ok=True)



def export_onnx(model_name_or_path, output_dir=None, task="auto", quantize=True, max_batch_size=64,
                overwrite_output_dir=False, allow_untrained_head=False):
    """Write `model.onnx` (and `model_qint8.onnx`) for the Linformer folder `model_name_or_path` into
    `output_dir` (default: its `onnx/` subfolder); returns that folder and the largest difference from PyTorch on
the check inputs. Raises UsageError (one line) on bad
    input, and refuses to publish a graph that does not reproduce PyTorch within 1e-4."""
    try:
        for package in ("onnxruntime", "onnxscript"):
            importlib.import_module(package)
    except ImportError as e:
        raise UsageError(f"ONNX export needs onnx, onnxscript and onnxruntime ({e.name} is missing): "
                         "pip install 'linformer-hf[onnx]'") from None
    out = Path(output_dir) if output_dir else Path(model_name_or_path) / "onnx"
    names = [ONNX_NAME, *([INT8_NAME] if quantize else [])]
    released = check_output_dir(out, names, overwrite_output_dir)
    model, task = _load(model_name_or_path, task, allow_untrained_head)
    wrapped = _Outputs(model, task).eval()
    config = model.config
    batch = torch.export.Dim("batch", min=1, max=max_batch_size)
    length = torch.export.Dim("sequence", min=1, max=config.max_seq_length)
    ids, mask = check_batches(config)[-1]
    width = max(2, min(config.max_seq_length // 2, 64))  # neither 1 nor n, which a trace could specialise on
    example = (ids[:2, -width:], mask[:2, -width:].clone())
    example[1][0, :2] = 0  # two rows, one of them padded: a trace that specialises on neither
    try:
        out.mkdir(parents=True, exist_ok=True)
        clean_stale_staging(out)
        staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=out))
    except OSError as e:
        raise UsageError(f"--output_dir {out}: cannot write there ({e.strerror or e})") from None
    try:
        program = torch.onnx.export(
            wrapped, example, dynamo=True, input_names=["input_ids", "attention_mask"],
            output_names=["last_hidden_state" if task == "feature-extraction" else "logits"],
            dynamic_shapes={"input_ids": {0: batch, 1: length}, "attention_mask": {0: batch, 1: length}},
            optimize=True, verbose=False)
        drop_stack_traces(program.model)
        program.save(str(staging / ONNX_NAME))
        try:
            difference = max_difference(onnx_session(staging / ONNX_NAME), wrapped, check_batches(config))
        except Exception as e:  # ONNX Runtime refusing a check input: the graph kept a traced shape
            raise UsageError(f"--model_name_or_path {model_name_or_path}: the exported graph does not run on every "
                             f"length (ONNX Runtime: {str(e).splitlines()[0][:200]}); nothing was written") from None
        if difference > TOLERANCE:
            raise UsageError(f"--model_name_or_path {model_name_or_path}: the ONNX graph differs from PyTorch by "
                             f"{difference:.2g} (> {TOLERANCE}) on the check inputs; nothing was written")
        if quantize:
            quantize_int8(staging / ONNX_NAME, staging / INT8_NAME)
        for name in names:  # each file whole or not at all (a rename within the folder)
            (staging / name).replace(out / name)
        if released is not None:
            checkpoints.write_manifest(released)
    except OSError as e:  # a full disk, a file size limit: nothing half-written is left
        raise UsageError(f"--output_dir {out}: could not write the ONNX files ({e.strerror or e}); nothing was "
                         f"published") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out, difference
