# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""distill.py end to end on CPU: a tiny random BERT teacher, its conversion as the student, a short run,
exact resume, held-out ids, the span mix, the teacher's long-input modes, and bad input (issue 15)."""

import json
import re
import shutil
import sys

import pytest
import torch
from conftest import REPO, free_port, run_group, write_jsonl
from safetensors.torch import load_file, save_file
from transformers import BertConfig, BertModel, RobertaConfig, RobertaModel

import distill
from linformer_training import distillation
from linformer_training.arguments import ScriptError, parse_args
from linformer_training.conversion import convert_to_linformer
from linformer_training.corpus import ExcludedIds, load_corpus
from linformer_training.models import is_adapter, is_gate, is_long_path
from linformer_training.tracking import read_jsonl

TEACHER_LIMIT, N, K = 32, 64, 8  # the teacher's positions, the student's n and k
HELD_OUT = [3, 7, 11]


def make_teacher(folder, tokenizer, hidden_size=32, layers=2, kind="bert"):
    """A random BERT (or RoBERTa, whose positions start after the pad id) with dropout on and weights
    ~ N(0, 0.2), saved as a sentence-transformers folder like MiniLM."""
    torch.manual_seed(0)
    config_class, model_class, offset = {"bert": (BertConfig, BertModel, 0),
                                         "roberta": (RobertaConfig, RobertaModel, tokenizer.pad_token_id + 1)}[kind]
    config = config_class(vocab_size=len(tokenizer), hidden_size=hidden_size, num_hidden_layers=layers,
                          num_attention_heads=4, intermediate_size=64, max_position_embeddings=TEACHER_LIMIT + offset,
                          pad_token_id=tokenizer.pad_token_id)
    model = model_class(config)
    with torch.no_grad():  # weights large enough that attention, hence the projection, matters
        for param in model.parameters():
            param.normal_(0.0, 0.2)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": TEACHER_LIMIT}))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": hidden_size,
                                                                  "pooling_mode_mean_tokens": True}))
    return folder


@pytest.fixture(scope="module")
def models(tokenizer, tmp_path_factory):
    """Teacher, student (n=64, k=8), and teachers that do not fit the student."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    root = tmp_path_factory.mktemp("models")
    teacher = make_teacher(root / "teacher", tokenizer)
    student = convert_to_linformer(teacher, root / "student", max_seq_length=N, projected_dim=K)
    exact = convert_to_linformer(teacher, root / "student_k_eq_n", max_seq_length=N, projected_dim=N)
    long = convert_to_linformer(teacher, root / "student_long", max_seq_length=N, projected_dim=K,
                                exact_attention_length=TEACHER_LIMIT, long_input_adapter_rank=4,
                                attention_type="windowed")
    roberta = make_teacher(root / "roberta", tokenizer, kind="roberta")
    roberta_exact = convert_to_linformer(roberta, root / "roberta_k_eq_n", max_seq_length=N, projected_dim=N)
    other = ByteLevelBPETokenizer()
    other.train_from_iterator(["A different corpus gives a different vocabulary."] * 5, vocab_size=300,
                              special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    other = PreTrainedTokenizerFast(tokenizer_object=other._tokenizer, bos_token="<s>", eos_token="</s>",
                                    unk_token="<unk>", pad_token="<pad>", mask_token="<mask>")
    nan_student = root / "nan_student"  # a student whose weights went NaN (a diverged run saved by another tool)
    shutil.copytree(student, nan_student)
    state = load_file(nan_student / "model.safetensors")
    next(iter(state.values())).view(-1)[0] = float("nan")
    save_file(state, nan_student / "model.safetensors", metadata={"format": "pt"})
    (nan_student / "manifest.json").unlink()  # saved by a tool that writes none
    return {"teacher": teacher, "student": student, "nan_student": nan_student, "exact": exact, "long": long,
            "roberta": roberta, "roberta_exact": roberta_exact,
            "wide": make_teacher(root / "wide", tokenizer, hidden_size=48),
            "deep": make_teacher(root / "deep", tokenizer, layers=3),
            "other_tokenizer": make_teacher(root / "other_tokenizer", other)}


@pytest.fixture(scope="module")
def data(moby_text, tmp_path_factory):
    """60 documents of 200-1,200 characters with ids, and the list of held-out ids."""
    folder = tmp_path_factory.mktemp("data")
    text = " ".join(moby_text)
    docs, start = [], 0
    for i in range(60):
        size = 200 + (i * 337) % 1000
        docs.append({"id": i, "text": text[start:start + size]})
        start += size
    write_jsonl(folder / "docs.jsonl", docs)
    (folder / "heldout.txt").write_text("".join(f"{i}\n" for i in HELD_OUT))
    write_jsonl(folder / "blank.jsonl", [{"id": 100, "text": "  "}, {"id": 101, "text": "\t"}])
    write_jsonl(folder / "specials.jsonl", [{"id": 100 + i, "text": "<pad></s><s>"} for i in range(10)])
    write_jsonl(folder / "no_ids.jsonl", [{"text": d["text"]} for d in docs])
    return folder


pytestmark = pytest.mark.usefixtures("fresh_accelerate_state")


def flags(models, data, out, teacher="teacher", student="student"):
    return ["--teacher_name_or_path", str(models[teacher]), "--student_name_or_path", str(models[student]),
            "--train_file", str(data / "docs.jsonl"), "--exclude_ids_file", str(data / "heldout.txt"),
            "--validation_split_percentage", "10", "--min_length", "4", "--per_device_train_batch_size", "4",
            "--learning_rate", "1e-3", "--max_steps", "4", "--eval_steps", "0", "--logging_steps", "1",
            "--checkpointing_steps", "0", "--report_to", "none", "--output_dir", str(out)]


def run(models, data, out, *extra, **which):
    return distill.main(flags(models, data, out, **which) + list(extra))


def weights(folder):
    """The folder's tensors under the names the model's parameters have (a folder stores long-input adapters
    under their older names; loading renames them)."""
    from transformers import AutoModel

    return AutoModel.from_pretrained(folder).state_dict()


# --- runs ------------------------------------------------------------------------------------------


def test_short_run_saves_a_student_that_loads_everywhere(models, data, tmp_path, capsys):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    out = tmp_path / "run"
    final = run(models, data, out)
    printed = capsys.readouterr().out
    assert f"Excluded {len(HELD_OUT)} documents listed in {data / 'heldout.txt'}" in printed
    config = (out / "train_config.yaml").read_text()
    assert f"excluded_documents: {len(HELD_OUT)}" in config and f"block_size: {N}" in config

    evals = [r for r in read_jsonl(out / "metrics.jsonl") if "eval_cosine" in r]
    assert [r["step"] for r in evals] == [0, 4]
    # The converted student is exact up to k tokens and only there.
    assert evals[0][f"eval_cosine_len_le_{K}"] == pytest.approx(1.0, abs=1e-5)
    assert evals[0][f"eval_cosine_len_gt_{TEACHER_LIMIT}"] < 1.0
    assert evals[0]["eval_layer2_relative_error"] > 1e-3  # longer spans do go through the untrained projection
    assert {f"eval_layer{i}_relative_error" for i in (1, 2)} <= evals[0].keys()
    assert final == {k: v for k, v in evals[-1].items() if k not in ("step", "time")}
    assert [r["step"] for r in read_jsonl(out / "metrics.jsonl") if "train_loss" in r] == [1, 2, 3, 4]

    model = AutoModel.from_pretrained(out)
    assert type(model).__name__ == "LinformerModel" and model.config.max_seq_length == N
    assert model.config.hidden_dropout_prob == 0.1  # the converted folder's; distilled with dropout 0
    assert json.loads((out / "sentence_bert_config.json").read_text())["max_seq_length"] == N
    assert (out / "1_Pooling" / "config.json").exists() and (out / "README.md").exists()
    assert json.loads((out / "eval_results.json").read_text()) == final
    encoder = SentenceTransformer(str(out), device="cpu")
    assert encoder.max_seq_length == N and encoder.encode(["Call me Ishmael."]).shape == (1, 32)


def test_resume_from_a_checkpoint_reaches_the_same_weights(models, data, tmp_path, capsys):
    """A run stopped after its checkpoint at update 2 and resumed to 4 ends with the weights of an
    uninterrupted 4-update run, bit for bit (student dropout on: its RNG state is restored too)."""
    straight = tmp_path / "straight"
    run(models, data, straight, "--checkpointing_steps", "2", "--save_total_limit", "2", "--student_dropout", "0.1")
    killed = tmp_path / "killed"  # what a run killed after its step-2 checkpoint leaves behind
    (killed / "checkpoints").mkdir(parents=True)
    shutil.copytree(straight / "checkpoints" / "checkpoint_2", killed / "checkpoints" / "checkpoint_2")
    run(models, data, killed, "--checkpointing_steps", "2", "--student_dropout", "0.1",
        "--resume_from_checkpoint", "latest")
    assert "Resumed from" in capsys.readouterr().out
    assert [r["step"] for r in read_jsonl(killed / "metrics.jsonl") if "train_loss" in r] == [3, 4]  # not a restart
    a, b = weights(straight), weights(killed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["encoder.layer.0.attention.self.query.weight"],
                           weights(models["student"])["encoder.layer.0.attention.self.query.weight"])


def test_windows_teacher_and_long_path_only(models, data, tmp_path):
    out = tmp_path / "run"
    run(models, data, out, "--teacher_long_inputs", "windows", "--train_only_long_path", "--max_steps", "2",
        "--projection_learning_rate", "1e-2")
    before, after = weights(models["student"]), weights(out)
    changed = sorted(k for k in before if not torch.equal(before[k], after[k]))
    assert changed == ["encoder.projections.shared"]


def test_document_objective_trains_the_long_path_and_leaves_short_inputs_the_teacher(models, data, tmp_path,
                                                                                     capsys):
    """The release recipe in small: a student exact up to the teacher's limit, reading longer inputs by windows
    plus gated global slots, with long-input adapters, trained on long inputs only with the document objective.
    Only E/F, gates and adapters move (the gates open), and on inputs the teacher can read the trained student
    still gives the teacher's hidden states."""
    from transformers import AutoModel

    out = tmp_path / "run"
    run(models, data, out, "--teacher_long_inputs", "windows", "--train_only_long_path", "--document_loss_weight",
        "0.5", "--short_fraction", "0", "--short_max_length", str(TEACHER_LIMIT), "--negative_bank_blocks", "2",
        "--piece_min_length", "2", "--piece_max_length", "6", "--eval_steps", "2", "--learning_rate", "1e-2",
        "--inputs", "documents", "--min_document_length", str(TEACHER_LIMIT), student="long")
    printed = capsys.readouterr().out
    assert "Document objective: 16 bank pieces from 2 held-back training blocks" in printed
    assert re.search(rf"--inputs documents: \d+ training and \d+ validation inputs of more than {TEACHER_LIMIT} tokens",
                     printed)
    before, after = weights(models["long"]), weights(out)
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(is_long_path(k) for k in changed)
    assert any(is_adapter(k) for k in changed) and any(is_gate(k) for k in changed)
    evals = [r for r in read_jsonl(out / "metrics.jsonl") if "eval_document_recall_at_1" in r]
    assert [r["step"] for r in evals] == [0, 2, 4] and all(0 <= r["eval_document_recall_at_1"] <= 1 for r in evals)

    teacher = AutoModel.from_pretrained(models["teacher"]).eval()
    student = AutoModel.from_pretrained(out).eval()
    ids = torch.randint(5, 200, (3, 2 * TEACHER_LIMIT))
    mask = torch.ones_like(ids)
    mask[0, TEACHER_LIMIT:], mask[1, 9:] = 0, 0  # rows of 32 and 9 real tokens beside one of 64
    with torch.no_grad():
        ours = student(input_ids=ids, attention_mask=mask).last_hidden_state
        for row, length in ((0, TEACHER_LIMIT), (1, 9)):
            theirs = teacher(input_ids=ids[row:row + 1, :length]).last_hidden_state[0]
            torch.testing.assert_close(ours[row, :length], theirs, rtol=0, atol=1e-5)
        # The long row is read through the trained path: it moved, in the batch as alone.
        untrained = AutoModel.from_pretrained(models["long"]).eval()(input_ids=ids[2:]).last_hidden_state[0]
        torch.testing.assert_close(ours[2], student(input_ids=ids[2:]).last_hidden_state[0], rtol=0, atol=1e-5)
        assert (ours[2] - untrained).abs().max() > 1e-3


def test_info_nce_is_the_multi_positive_softmax_loss():
    """Against a float64 computation written out term by term."""
    torch.manual_seed(0)
    anchors, candidates = torch.randn(3, 5), torch.randn(7, 5)
    positive = torch.zeros(3, 7, dtype=torch.bool)
    positive[0, [0, 1]], positive[1, 2], positive[2, [3, 6]] = True, True, True
    ours = distillation.info_nce(anchors, candidates, positive, 0.1)
    a = torch.nn.functional.normalize(anchors.double(), dim=-1)
    c = torch.nn.functional.normalize(candidates.double(), dim=-1)
    for i in range(3):
        weights = torch.exp(a[i] @ c.T / 0.1)
        expected = -torch.log(weights[positive[i]].sum() / weights.sum())
        assert abs(ours[i].item() - expected.item()) < 1e-5


def test_document_pieces_lie_inside_each_inputs_text():
    ids = torch.arange(100, 140).repeat(2, 1)
    mask = torch.ones_like(ids)
    mask[1, 20:] = 0
    starts = distillation.span_starts(ids, mask, 5, 4, 30, torch.Generator().manual_seed(0))
    assert len(starts) == 2 and [len(row) for row in starts] == [5, 5]  # five pieces from each input
    for row, real in ((0, 40), (1, 20)):
        for start, length in starts[row]:
            assert 1 <= start and start + length <= real - 1 and 1 <= length <= min(30, real - 2)


def test_streaming_bf16_and_accumulation(models, data, tmp_path, capsys):
    out = tmp_path / "run"
    run(models, data, out, "--streaming", "--streaming_validation_docs", "5", "--mixed_precision", "bf16",
        "--total_batch_size", "8", "--max_steps", "2")
    printed = capsys.readouterr().out
    assert "8 sequences per update (2 accumulation steps)" in printed
    assert "Excluded the (streamed, uncounted) documents" in printed
    assert (out / "model.safetensors").exists() and "mixed_precision: bf16" in (out / "train_config.yaml").read_text()


# --- the pieces ------------------------------------------------------------------------------------


@pytest.mark.parametrize("teacher", ["teacher", "roberta"])
def test_extended_teacher_is_the_conversion_at_k_equal_n(teacher, models, tokenizer):
    """At k = n every input is attended exactly, so the student is its teacher with positions extended
    the conversion's way: the extended teacher must agree beyond its own limit, the windowed one not."""
    from accelerate import Accelerator
    from transformers import AutoModel

    exact = models["exact" if teacher == "teacher" else "roberta_exact"]
    pair = distillation.check_pair(models[teacher], exact)
    assert pair.teacher_limit == TEACHER_LIMIT
    student = AutoModel.from_pretrained(exact).eval()
    collate = distillation.SpanCollator(tokenizer, min_length=3, short_max_length=TEACHER_LIMIT, max_length=N,
                                        short_fraction=0.0, seed=0)
    blocks = [{"input_ids": [0] + [5 + (i * j) % 250 for j in range(N - 1)]} for i in range(16)]
    batches = [collate(blocks[:8]), collate(blocks[8:])]
    assert all((b["attention_mask"].sum(1) > TEACHER_LIMIT).all() for b in batches)
    errors = {}
    for mode in ("extended", "windows"):
        frozen = distillation.load_teacher(models[teacher], pair, N, mode, "cpu")
        objective = distillation.DistillationObjective(frozen, pair, Accelerator(cpu=True), long_inputs=mode)
        errors[mode] = objective.evaluate(student, batches, Accelerator(cpu=True))["eval_layer2_relative_error"]
    assert errors["extended"] < 1e-5 and errors["windows"] > 1e-3, errors


def test_spans_mix_lengths_and_repeat_exactly(tokenizer):
    collate = distillation.SpanCollator(tokenizer, min_length=4, short_max_length=16, max_length=N,
                                        short_fraction=0.25, seed=1)
    blocks = [{"input_ids": [0] + [5 + (i + j) % 200 for j in range(N - 1)]} for i in range(400)]
    first = collate(blocks)
    lengths = first["attention_mask"].sum(1)
    assert lengths.min() >= 4 and lengths.max() == N
    assert 0.15 < (lengths <= 16).float().mean() < 0.35  # the short fraction
    assert ((lengths > 16) & (lengths <= 32)).sum() > 50 and (lengths > 32).sum() > 100  # log-uniform above
    assert (first["input_ids"][:, 0] == 0).all()  # every span starts with <s>/[CLS] ...
    assert (first["input_ids"][torch.arange(400), lengths - 1] == 2).all()  # ... and ends with </s>/[SEP]
    assert torch.equal(collate(blocks)["input_ids"], first["input_ids"])  # the same epoch: the same spans
    collate.set_epoch(1)
    assert not torch.equal(collate(blocks[:8])["input_ids"], first["input_ids"][:8])
    # Training draws one length per batch: no padding, lengths mixed across batches.
    collate = distillation.SpanCollator(tokenizer, 4, 16, N, 0.25, seed=1, same_length=True)
    batches = [collate(blocks[i:i + 4]) for i in range(0, 400, 4)]
    assert all(b["attention_mask"].all() for b in batches)
    lengths = torch.tensor([b["input_ids"].shape[1] for b in batches])
    assert 0.1 < (lengths <= 16).float().mean() < 0.4 and lengths.max() > 48 and len(set(lengths.tolist())) > 20
    assert all(torch.equal(collate(blocks[i:i + 4])["input_ids"], batches[i // 4]["input_ids"]) for i in (0, 200))


def test_held_out_ids_are_never_read(data):
    exclude = ExcludedIds.from_file(data / "heldout.txt")
    corpus = load_corpus(train_file=[str(data / "docs.jsonl")], validation_split_percentage=10, exclude=exclude)
    docs = {d["text"]: d["id"] for d in read_jsonl(data / "docs.jsonl")}
    read = [docs[t] for split in corpus.values() for t in split["text"]]
    assert sorted(read) == sorted(set(range(60)) - set(HELD_OUT)) and exclude.total == len(HELD_OUT)
    streamed = ExcludedIds.from_file(data / "heldout.txt")
    corpus = load_corpus(train_file=[str(data / "docs.jsonl")], streaming=True, streaming_validation_docs=5,
                         exclude=streamed)
    assert sorted(docs[d["text"]] for split in corpus.values() for d in split) == sorted(read)
    assert streamed.total is None


def test_release_recipe_parses():
    args = parse_args(distill.DistillArguments, ["--config", str(REPO / "configs" / "distill" / "minilm_n4096.yaml")])
    assert args.block_size == 4096 and args.teacher_long_inputs == "windows" and args.text_column_name == "text"
    assert args.train_file == ["../shared/data/news/train.jsonl.gz"] and args.exclude_ids_file is None
    assert args.inputs == "documents" and args.min_document_length == args.short_max_length == 512


# --- bad input and faults: one table ---------------------------------------------------------------


CASES = [  # case, flags added to a working command line, the expected one-line message (regex)
    ("no teacher", ["--teacher_name_or_path", ""], "--teacher_name_or_path is required"),
    ("student not a Linformer", ["--student_name_or_path", "{teacher}"],
     r"a bert model, not a Linformer; make one from the teacher first: python convert_to_linformer.py"),
    ("different tokenizers", ["--teacher_name_or_path", "{other_tokenizer}"],
     "have different tokenizers: their vocabularies differ .* The student must be converted from the teacher"),
    ("different hidden sizes", ["--teacher_name_or_path", "{wide}"],
     "the teacher's hidden_size is 48 but the student's is 32"),
    ("different layer counts", ["--teacher_name_or_path", "{deep}"],
     "the teacher's num_hidden_layers is 3 but the student's is 2"),
    ("block above n", ["--block_size", "128"], f"--block_size 128 exceeds the student's longest input n={N}"),
    ("min length above the short spans", ["--min_length", "20"], "--min_length 20 is above --short_max_length 8"),
    ("short spans above the block", ["--block_size", "16", "--short_max_length", "20"],
     "--short_max_length 20 is above --block_size 16: a short span cannot be longer than the longest; allowed: at "
     "most 16"),
    ("blank corpus", ["--train_file", "{data}/blank.jsonl"], "the train split has no text"),
    ("no usable text", ["--train_file", "{data}/specials.jsonl"], "the corpus has no usable text: no training or "
     "validation block holds a token after tokenization"),
    ("ids listed, no id column", ["--train_file", "{data}/no_ids.jsonl"],
     r"--exclude_ids_file .*heldout.txt: --train_file train has no `id` column"),
    ("short fraction 2", ["--short_fraction", "2"], r"--short_fraction 2.0: must be in \[0, 1\]"),
    ("missing teacher folder", ["--teacher_name_or_path", "{data}/nope"],
     r"--teacher_name_or_path .*nope: no such folder"),
    ("no loss", ["--hidden_loss_weight", "0", "--cosine_loss_weight", "0"], "both 0: nothing to learn from"),
    ("pieces inverted", ["--piece_min_length", "9", "--piece_max_length", "8"],
     "--piece_min_length 9 is above --piece_max_length 8"),
    ("bank with streaming", ["--document_loss_weight", "1", "--streaming"],
     "--negative_bank_blocks 256: the bank is held back from a counted training set"),
    ("bank larger than the corpus", ["--document_loss_weight", "1", "--negative_bank_blocks", "100000"],
     "--negative_bank_blocks 100000: the training set has only"),
    ("unknown flag", ["--model_name_or_path", "x"], "unknown flag `model_name_or_path`"),
    ("document length with packed blocks", ["--min_document_length", "32"],
     "--min_document_length 32 applies to --inputs documents only"),
    ("unknown kind of input", ["--inputs", "pages"], "--inputs.*pages.*blocks.*documents"),
    # issue 33
    ("student with NaN weights", ["--student_name_or_path", "{nan_student}"],
     r"^--student_name_or_path .*nan_student: model.safetensors: tensor .* holds NaN/inf; "
     r"these weights cannot be used"),
    ("student path not made yet", ["--student_name_or_path", "tests/lin-k256"],  # tests/ is a folder in the repo
     r"^--student_name_or_path tests/lin-k256: no such folder \(read as a local path: ./tests is a folder here\)"),
]


@pytest.mark.parametrize("case, extra, expected", CASES, ids=[c[0] for c in CASES])
def test_bad_input(case, extra, expected, models, data, tmp_path, capsys):
    out = tmp_path / "out"
    extra = [e.format(data=data, **models) for e in extra]
    try:
        run(models, data, out, *extra)
    except ScriptError as e:
        message = str(e)
    except SystemExit as e:
        assert e.code == 2
        message = capsys.readouterr().err.strip().splitlines()[-1]
    else:
        raise AssertionError("the command did not fail")
    assert re.search(expected, message), message
    assert not (out / "model.safetensors").exists()



@pytest.mark.slow
def test_two_processes(models, data, tmp_path):
    """`accelerate launch` with 2 CPU processes: DDP trains (frozen pooler, E/F unused by short batches),
    the replicas end identical, and the evaluation before training (spans drawn per block, gathered over
    processes) is the one process's."""
    import os

    run(models, data, tmp_path / "one", "--per_device_eval_batch_size", "3")
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1"}
    result = run_group(
        [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2", "--num_machines",
         "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(free_port()),
         str(REPO / "distill.py"), *flags(models, data, tmp_path / "two"), "--per_device_train_batch_size", "2",
         "--checkpointing_steps", "2"],
        env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "2 process(es), 4 sequences per update" in result.stdout
    assert "Weights identical on all 2 processes" in result.stdout
    first = [next(r for r in read_jsonl(tmp_path / name / "metrics.jsonl") if "eval_cosine" in r)
             for name in ("one", "two")]
    assert {k: v for k, v in first[0].items() if k != "time"} == pytest.approx(
        # a ~1e-5 loss differs in float32's last bits with the batching
        {k: v for k, v in first[1].items() if k != "time"}, rel=1e-5, abs=1e-7)
    assert (tmp_path / "two" / "checkpoints" / "checkpoint_2" / "random_states_1.pkl").exists()


@pytest.mark.slow
def test_fsdp2_distils_the_release_recipe_in_small(models, data, tmp_path):
    """`accelerate launch --use_fsdp --fsdp_version 2 distill.py` on 2 CPU processes (tests/fsdp_on_cpu.py only
    switches Accelerate's state to FSDP, as on GPUs): the release recipe in small (long path only, document
    objective, windows teacher) trains, checkpoints, resumes, and saves a plain folder in which only the long
    path moved and inputs the teacher can read still give the teacher's states."""
    from test_train_mlm import FSDP2, launch
    from transformers import AutoModel

    recipe = [*flags(models, data, tmp_path / "unused", student="long")[:-2], "--teacher_long_inputs", "windows",
              "--train_only_long_path", "--document_loss_weight", "0.5", "--short_fraction", "0", "--short_max_length",
              str(TEACHER_LIMIT), "--negative_bank_blocks", "2", "--piece_min_length", "2", "--piece_max_length", "6",
              "--per_device_train_batch_size", "2", "--checkpointing_steps", "2"]
    fsdp = [*FSDP2, "--fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP", "--fsdp_transformer_layer_cls_to_wrap",
            "LinformerLayer", str(REPO / "tests" / "fsdp_on_cpu.py"), "distill.py", *recipe]
    out = tmp_path / "run"
    result = launch(*fsdp, "--output_dir", str(out), env_extra={"ACCELERATE_USE_CPU": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "2 process(es)" in result.stdout
    before, after = weights(models["long"]), weights(out)
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(is_long_path(k) for k in changed)

    resumed = tmp_path / "resumed"
    shutil.copytree(out / "checkpoints" / "checkpoint_2", resumed / "checkpoints" / "checkpoint_2")
    result = launch(*fsdp, "--output_dir", str(resumed), "--resume_from_checkpoint", "latest",
                    env_extra={"ACCELERATE_USE_CPU": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    again = weights(resumed)
    assert all(torch.equal(after[k], again[k]) for k in after)

    teacher, student = AutoModel.from_pretrained(models["teacher"]).eval(), AutoModel.from_pretrained(out).eval()
    ids = torch.randint(5, 200, (1, TEACHER_LIMIT))
    with torch.no_grad():
        torch.testing.assert_close(student(input_ids=ids).last_hidden_state, teacher(input_ids=ids).last_hidden_state,
                                   rtol=0, atol=1e-5)
