# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""sentence-transformers' Transformer module as a Linformer release ships it (remote code, beside
modeling_linformer.py; modules.json names it): the same module, plus

- one warning per call when inputs are longer than `max_seq_length`. sentence-transformers cuts such inputs to fit
  without a word, and a model that reads long documents is exactly where a user expects the whole text to count;
- `model_kwargs={"compile": True}` (or a `torch.compile` mode such as `"reduce-overhead"`, or a dict of its
  keywords): the model compiled with `torch.compile`, which takes it whole (no graph break). sentence-transformers
  pads each batch to its longest input, so every new length would compile (and record CUDA graphs) once more: a
  compiled module pads each batch further, to the next power of two (at most `max_seq_length`), which the model's
  masks make invisible, so a whole corpus meets a handful of shapes;
- `backend="onnx"` served by ONNX Runtime directly. The stock loader goes through optimum, whose releases pin
  transformers below 5, so that path cannot be installed beside this model. This module always uses its own
  loader, optimum installed or not: it serves the graph `export_onnx.py` wrote and checked against PyTorch,
  behaves the same in every environment, and a missing graph is an error naming the command that writes it
  (optimum would instead try to export the model itself, with an exporter that knows no Linformer).

It travels as remote code, so it imports only torch, transformers, sentence-transformers, numpy, onnxruntime (on
demand) and the standard library.
"""

import logging
import shutil
import threading
from pathlib import Path

import numpy as np
import torch
from transformers.modeling_outputs import BaseModelOutput
from transformers.utils import cached_file

try:
    from sentence_transformers.sentence_transformer.modules import Transformer
    SERVES_ONNX = True  # sentence-transformers 6 hands `backend` to `_load_model` with this signature
except ImportError:  # sentence-transformers before 6 (which calls `tokenize`, not `preprocess`: no warning there)
    from sentence_transformers.models import Transformer
    SERVES_ONNX = False

logger = logging.getLogger(__name__)

ONNX_NAME = "model.onnx"  # what sentence-transformers loads by default; export_onnx.py's names
EXPORT = "python export_onnx.py --model_name_or_path {folder} --overwrite_output_dir true"
# model_kwargs this loader acts on. Hub keys are what sentence-transformers adds to every module's model_kwargs;
# the rest are optimum's names, so a line written for the stock backend means the same here.
HUB_KEYS = {"subfolder", "token", "cache_dir", "revision", "local_files_only", "trust_remote_code", "force_download"}
ONNX_KEYS = {"file_name", "provider", "provider_options", "session_options", "export"}
# A fast tokenizer keeps its padding and truncation on the shared Rust object and releases the GIL while it
# encodes. The truncation count tokenizes unpadded and uncut, so a thread counting could switch padding off between
# another thread's setting it and encoding (a ragged batch, or one longer than max_seq_length). Both calls run under
# this lock; the graph or the model still runs in parallel. Module level: a lock in the module's state would not
# pickle for sentence-transformers' process pool.
TOKENIZING = threading.Lock()


class LinformerTransformer(Transformer):
    def preprocess(self, inputs, prompt=None, **kwargs):
        with TOKENIZING:
            self.warn_truncation(inputs, prompt)
            features = super().preprocess(inputs, prompt=prompt, **kwargs)
        return self.pad_to_bucket(features) if getattr(self, "compiled", False) else features

    def pad_to_bucket(self, features):
        """The batch padded to the next power of two of its length (at most max_seq_length): few shapes to compile."""
        ids = features.get("input_ids")
        if ids is None or ids.dim() != 2:
            return features
        length = ids.shape[1]
        bucket = min(max(1 << (length - 1).bit_length(), 16), max(self.max_seq_length or length, length))
        fill = {"input_ids": self.tokenizer.pad_token_id or 0}
        for key in ("input_ids", "attention_mask", "token_type_ids"):
            if key in features and bucket > length:
                features[key] = torch.nn.functional.pad(features[key], (0, bucket - length), value=fill.get(key, 0))
        return features

    def warn_truncation(self, inputs, prompt=None):
        """Count the tokens the tokenizer's truncation to `max_seq_length` drops (text inputs; a prompt is read
        as part of each text) and say so once."""
        texts = [(prompt or "") + text for text in inputs if isinstance(text, str)]
        limit = self.max_seq_length
        if not texts or not limit or self.tokenizer is None:
            return
        lengths = [len(ids) for ids in self.tokenizer(texts, truncation=False, verbose=False)["input_ids"]]
        over = [length for length in lengths if length > limit]
        if over:
            logger.warning(
                f"{len(over)} of {len(texts)} input(s) are longer than max_seq_length={limit} tokens and were cut to "
                f"it: {sum(over) - limit * len(over):,} token(s) dropped (longest input {max(over):,} tokens). "
                f"Split longer documents, or embed them in parts.")

    def _load_model(self, model_name_or_path, transformer_task, config, backend, is_peft_model, **model_kwargs):
        how = model_kwargs.pop("compile", None)
        if backend == "onnx" and SERVES_ONNX:
            if how:
                raise ValueError("model_kwargs compile: torch.compile compiles the PyTorch model; backend='onnx' "
                                 "serves a graph already (leave out one or the other)")
            return OnnxModel.load(model_name_or_path, config, transformer_task, **model_kwargs)
        model = super()._load_model(model_name_or_path, transformer_task, config, backend, is_peft_model,
                                    **model_kwargs)
        if how:
            if not isinstance(how, (bool, str, dict)):
                raise ValueError(f"model_kwargs compile: True, a torch.compile mode or a dict of its keywords, got "
                                 f"{how!r}")
            model.compile(**(how if isinstance(how, dict) else {} if how is True else {"mode": how}))
        self.compiled = bool(how)
        return model


class OnnxModel(torch.nn.Module):
    """An ONNX Runtime session standing where the transformers model stands in the Transformer module: called
    with the tokenizer's tensors, it returns the graph's output as a torch tensor (on the CPU, where the
    pooling that follows runs); `save_pretrained` writes the graph and what loading it again needs. A Module with
    no parameters, so sentence-transformers' device and dtype handling passes over it."""

    def __init__(self, session, config, path, source):
        super().__init__()
        self.session, self.config, self.path, self.source = session, config, Path(path), source
        self.inputs = [i.name for i in session.get_inputs()]
        self.output = session.get_outputs()[0].name

    @property
    def device(self):
        return torch.device("cpu")

    @classmethod
    def load(cls, model_name_or_path, config, transformer_task="feature-extraction", **model_kwargs):
        unknown = sorted(set(model_kwargs) - HUB_KEYS - ONNX_KEYS)
        if unknown:
            raise ValueError(f"model_kwargs {unknown}: not read by backend='onnx' (this model's ONNX loader reads "
                             f"{sorted(ONNX_KEYS)}); the graph fixes dtype and weights, choose it with file_name")
        if model_kwargs.get("export"):
            raise ValueError(f"model_kwargs export=True: this model's graph is written by export_onnx.py, checked "
                             f"against PyTorch: {EXPORT.format(folder=model_name_or_path)}")
        file_name = model_kwargs.get("file_name") or ONNX_NAME
        path, source = locate(model_name_or_path, file_name, model_kwargs)
        session = open_session(path, model_kwargs)
        expected = "last_hidden_state" if transformer_task == "feature-extraction" else "logits"
        model = cls(session, config, path, source)
        if model.output != expected:
            raise ValueError(f"{path}: the graph outputs {model.output!r}, a {transformer_task} module reads "
                             f"{expected!r}; export the matching head (export_onnx.py --task {transformer_task})")
        return model

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, inputs_embeds=None, return_dict=True):
        if inputs_embeds is not None:
            raise ValueError("inputs_embeds: the ONNX graph reads input_ids; pass text or token ids")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        feed = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        if "token_type_ids" not in self.inputs and token_type_ids is not None and bool(token_type_ids.any()):
            raise ValueError("token_type_ids: this ONNX graph reads every token as segment 0, and these inputs "
                             "have a second segment; embed each text on its own")
        missing = [name for name in self.inputs if feed.get(name) is None]
        if missing:
            raise ValueError(f"{self.path}: the graph needs {missing}, which the tokenizer did not give")
        arrays = {name: feed[name].detach().cpu().numpy().astype(np.int64) for name in self.inputs}
        hidden = torch.from_numpy(self.session.run([self.output], arrays)[0])
        if self.output == "last_hidden_state":
            return BaseModelOutput(last_hidden_state=hidden)
        return {self.output: hidden}

    def save_pretrained(self, save_directory, **kwargs):
        """The graph (onnx/<its name>, where sentence-transformers looks), config.json and the remote code its
        auto_map names, so the saved folder loads with backend="onnx" as the one it came from. The PyTorch weights
        are not written: this model never loaded them."""
        save_directory = Path(save_directory)
        (save_directory / "onnx").mkdir(parents=True, exist_ok=True)
        _copy(self.path, save_directory / "onnx" / self.path.name)
        self.config.save_pretrained(save_directory)
        for name in sorted({ref.split(".")[0] + ".py" for ref in _auto_map_refs(self.config)}):
            code = cached_file(self.source["path"], name, _raise_exceptions_for_missing_entries=False,
                               **self.source["hub"])
            if code is not None:
                _copy(code, save_directory / name)


def _copy(source, target):
    """A copy, except onto itself (saving into the folder the model was loaded from)."""
    if not (Path(target).exists() and Path(target).samefile(source)):
        shutil.copyfile(source, target)


def _auto_map_refs(config):
    """The `module.Class` references of config.json's auto_map (a value may be a [slow, fast] pair)."""
    refs = []
    for value in (getattr(config, "auto_map", None) or {}).values():
        refs += [v for v in (value if isinstance(value, (list, tuple)) else [value]) if v and "--" not in v]
    return refs


def locate(model_name_or_path, file_name, model_kwargs):
    """The local path of `file_name` (relative to the model, or to its onnx/ folder, as sentence-transformers
    reads it), downloaded from the Hub when the model is a repo id. Missing: a one-line error naming the file
    and the command that writes it, and the other graphs the folder has."""
    hub = {key: model_kwargs[key] for key in HUB_KEYS - {"subfolder", "trust_remote_code"} if key in model_kwargs}
    subfolder = model_kwargs.get("subfolder") or ""
    source = {"path": model_name_or_path, "hub": {**hub, "subfolder": subfolder}}
    candidates = [file_name] if Path(file_name).parts[0] == "onnx" else [file_name, f"onnx/{file_name}"]
    for candidate in candidates:
        found = cached_file(model_name_or_path, candidate, subfolder=subfolder,
                            _raise_exceptions_for_missing_entries=False, **hub)
        if found is not None:
            return Path(found), source
    folder = Path(model_name_or_path, subfolder)
    wanted = folder / candidates[-1]
    if not folder.is_dir():
        raise OSError(f"{model_name_or_path}: has no ONNX file {candidates[-1]}; export it from a local copy: "
                      f"{EXPORT.format(folder='LOCAL_COPY')}, then upload its onnx/ folder")
    others = sorted(p.relative_to(folder).as_posix() for p in folder.glob("**/*.onnx"))
    offer = f" (present: {', '.join(others)}; choose one with model_kwargs={{'file_name': ...}})" if others else ""
    raise OSError(f"{wanted}: ONNX file missing; write it again with: {EXPORT.format(folder=folder)}{offer}")


def open_session(path, model_kwargs):
    """An ONNX Runtime session on `path` with the provider asked for, else every provider this ONNX Runtime has,
    in its order (a GPU build's GPU first, the CPU taking what the others do not; the stock loader's first
    provider alone is, on the plain CPU wheel, AzureExecutionProvider). A truncated or damaged file is one line
    naming it and the command that writes it (ONNX Runtime's own says only "Protobuf parsing failed")."""
    import onnxruntime

    available = onnxruntime.get_available_providers()
    provider, provider_options = model_kwargs.get("provider"), model_kwargs.get("provider_options")
    if provider is not None and provider not in available:
        raise ValueError(f"model_kwargs provider={provider!r}: not in this ONNX Runtime ({', '.join(available)})")
    if provider_options and provider is None:
        raise ValueError("model_kwargs provider_options: name the provider they are for (model_kwargs provider)")
    options = model_kwargs.get("session_options")
    if options is None:
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
    try:
        return onnxruntime.InferenceSession(str(path), options, providers=[provider] if provider else available,
                                            provider_options=[provider_options] if provider_options else None)
    except Exception as e:  # noqa: BLE001  onnxruntime raises its own exception types
        folder = path.parent.parent if path.parent.name == "onnx" else path.parent
        raise OSError(f"{path}: ONNX file unreadable ({str(e).splitlines()[0][:160]}); write it again with: "
                      f"{EXPORT.format(folder=folder)}") from None
