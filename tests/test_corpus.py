# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Corpora through `datasets`: local files (globs, compression, formats), Hub names, mixing, streaming."""

import bz2
import gzip

import datasets
import pytest
from conftest import write_jsonl

from linformer_training import corpus as corpus_module
from linformer_training.arguments import UsageError
from linformer_training.mlm import pack

# --- files and corpora -----------------------------------------------------------------------------


def test_file_format_sees_through_compression():
    assert corpus_module.file_format("a/b.jsonl.gz") == ("json", {})
    assert corpus_module.file_format("b.TXT.bz2") == ("text", {})
    assert corpus_module.file_format("c.parquet") == ("parquet", {})
    assert corpus_module.file_format("d.tsv")[1]["delimiter"] == "\t"
    with pytest.raises(UsageError, match="unknown data file type"):
        corpus_module.file_format("d.docx")


def test_missing_empty_and_mixed_files_are_errors(tmp_path):
    with pytest.raises(UsageError, match="--train_file .*nope.jsonl: no such file"):
        corpus_module.resolve_files([str(tmp_path / "nope.jsonl")], "--train_file")
    with pytest.raises(UsageError, match="no file matches"):
        corpus_module.resolve_files([str(tmp_path / "*.jsonl")], "--train_file")
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(UsageError, match="--validation_file .*empty.jsonl: file is empty"):
        corpus_module.resolve_files([str(tmp_path / "empty.jsonl")], "--validation_file")
    (tmp_path / "a.txt").write_text("x\n")
    (tmp_path / "b.csv").write_text("text\nx\n")
    with pytest.raises(UsageError, match="different types"):
        corpus_module.resolve_files([str(tmp_path / "a.txt"), str(tmp_path / "b.csv")], "--train_file")


def test_local_formats_globs_and_compression(tmp_path, docs):
    rows = [{"id": i, "body": d} for i, d in enumerate(docs)]
    write_jsonl(tmp_path / "part-0.jsonl.gz", rows[:5], gzip.open)
    write_jsonl(tmp_path / "part-1.jsonl.gz", rows[5:], gzip.open)
    corpus = corpus_module.load_corpus(train_file=[str(tmp_path / "part-*.jsonl.gz")], text_column_name="body",
                                  validation_split_percentage=20)
    assert corpus["train"].column_names == ["text"] and corpus["validation"].column_names == ["text"]
    assert len(corpus["train"]) == 8 and len(corpus["validation"]) == 2
    assert sorted(list(corpus["train"]["text"]) + list(corpus["validation"]["text"])) == sorted(docs)

    with bz2.open(tmp_path / "book.txt.bz2", "wt") as f:
        f.write("\n".join(["first line", "second line", "third line"]))
    (tmp_path / "val.txt").write_text("held out\n")
    corpus = corpus_module.load_corpus(train_file=[str(tmp_path / "book.txt.bz2")],
                                  validation_file=[str(tmp_path / "val.txt")])
    assert list(corpus["train"]["text"]) == ["first line", "second line", "third line"]
    assert list(corpus["validation"]["text"]) == ["held out"]

    datasets.Dataset.from_dict({"sentence": docs[:4], "label": [0, 1, 0, 1]}).to_parquet(tmp_path / "d.parquet")
    corpus = corpus_module.load_corpus(train_file=[str(tmp_path / "d.parquet")])  # the one string column
    assert len(corpus["train"]) + len(corpus["validation"]) == 4


def test_text_column_errors(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [{"a": "x", "b": "y"}] * 3)
    with pytest.raises(UsageError, match="no `text` column among .*pass --text_column_name"):
        corpus_module.load_corpus(train_file=[path])
    with pytest.raises(UsageError, match="--text_column_name body: .* has no such column"):
        corpus_module.load_corpus(train_file=[path], text_column_name="body")
    with pytest.raises(UsageError, match="no corpus"):
        corpus_module.load_corpus()


def test_several_corpora_are_mixed(tmp_path):
    # Dataset folders load like Hub datasets by name (offline stand-ins for BookCorpus + Wikipedia).
    (tmp_path / "books").mkdir()
    (tmp_path / "wiki").mkdir()
    write_jsonl(tmp_path / "books" / "train.jsonl", [{"text": f"book {i}"} for i in range(20)])
    write_jsonl(tmp_path / "books" / "validation.jsonl", [{"text": "book held out"}])
    write_jsonl(tmp_path / "wiki" / "train.jsonl", [{"text": f"wiki {i}", "title": "t"} for i in range(20)])
    names = [str(tmp_path / "books"), str(tmp_path / "wiki")]
    corpus = corpus_module.load_corpus(dataset_name=names, validation_split_percentage=10)
    train, val = list(corpus["train"]["text"]), list(corpus["validation"]["text"])
    assert len(train) == 20 + 18 and {t.split()[0] for t in train} == {"book", "wiki"}
    assert "book held out" in val and len(val) == 1 + 2  # books' own split + 10% of wiki
    for books, first in ((0.9, "book"), (0.1, "wiki")):  # the probabilities decide which corpus leads
        mixed = list(corpus_module.load_corpus(dataset_name=names, validation_split_percentage=10,
                                           mix_probabilities=[books, 1 - books])["train"]["text"])
        assert set(mixed) == set(train)  # interleaved until every corpus is used up
        leading = sum(t.startswith(first) for t in mixed[:18])
        assert 14 <= leading < 18, (books, mixed[:18])  # drawn 9:1, the other corpus already among them
    with pytest.raises(UsageError, match="--mix_probabilities: got 1 values for 2 corpora"):
        corpus_module.load_corpus(dataset_name=names, mix_probabilities=[1.0])
    with pytest.raises(UsageError, match="--dataset_config_name: got 1 values for 2"):
        corpus_module.load_corpus(dataset_name=names, dataset_config_name=["c"])


def test_streaming_reads_lazily_and_holds_out_validation(tmp_path, tok):
    path = write_jsonl(tmp_path / "s.jsonl", [{"text": f"Call me Ishmael, number {i}."} for i in range(30)])
    corpus = corpus_module.load_corpus(train_file=[path], streaming=True, streaming_validation_docs=5)
    assert isinstance(corpus["train"], datasets.IterableDataset)
    assert [r["text"] for r in corpus["validation"]] == [f"Call me Ishmael, number {i}." for i in range(5)]
    assert len(list(corpus["train"])) == 25
    blocks = list(pack(corpus["train"], tok, block_size=16))
    assert blocks and all(len(b["input_ids"]) <= 16 and b["input_ids"][0] == tok.bos_token_id for b in blocks)


def test_blank_corpus_is_an_error(tmp_path):
    blank = write_jsonl(tmp_path / "blank.jsonl", [{"text": "   "}, {"text": "\n"}])
    with pytest.raises(UsageError, match="the train split has no text"):
        corpus_module.load_corpus(train_file=[blank])
    (tmp_path / "header.csv").write_text("text\n")
    with pytest.raises(UsageError, match="header.csv: no rows"):
        corpus_module.load_corpus(train_file=[str(tmp_path / "header.csv")])


def test_csv_keeps_na_and_none_as_text(tmp_path):
    """pandas reads "NA", "None" and "null" as missing values by default; they are words here."""
    rows = ["text", "NA", "None", "null", "Call me Ishmael."]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    data = corpus_module.load_files({"train": [str(tmp_path / "t.csv")]})["train"]
    assert data["text"] == rows[1:]


UNREADABLE = [  # file, its bytes, the one-line error (issue 23: these ended in a traceback or an unclear line)
    ("broken.jsonl", b'{"text": "a"}\n{"text": "b"\n', r"cannot read .*broken.jsonl: JSON parse error: .* in row 1"),
    ("latin1.txt", "caf\xe9\n".encode("latin-1"), r"cannot read .*latin1.txt: not UTF-8 text \('utf-8' codec"),
    ("latin1.csv", "text\ncaf\xe9\n".encode("latin-1"), r"cannot read .*latin1.csv: not UTF-8 text"),
    ("latin1.jsonl", '{"text": "caf\xe9"}\n'.encode("latin-1"), r"--train_file: the train split is not UTF-8 text"),
    ("numbers.jsonl", b'{"text": 5}\n{"text": 7}\n', r"column `text` holds int64 values, not text"),
    ("mixed.jsonl", b'{"text": "a"}\n{"text": 7}\n', r"column `text` holds mixed-type values, not text"),
]


@pytest.mark.parametrize("name, content, message", UNREADABLE, ids=[c[0] for c in UNREADABLE])
def test_unreadable_files_and_non_text_are_one_line_errors(name, content, message, tmp_path):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(UsageError, match=message):
        corpus_module.load_corpus(train_file=[str(tmp_path / name)])


def test_what_a_corpus_loses_is_said(tmp_path, caplog, docs):
    path = write_jsonl(tmp_path / "body.jsonl", [{"n": i, "body": d} for i, d in enumerate(docs)])
    corpus = corpus_module.load_corpus(train_file=[path], validation_split_percentage=20)
    assert len(corpus["train"]) + len(corpus["validation"]) == len(docs)
    assert "--train_file: no `text` column; reading its only string column, `body`, as the text" in caplog.text
    path = write_jsonl(tmp_path / "holes.jsonl", [{"text": d} for d in docs] + [{"id": 1}, {"text": None}])
    corpus = corpus_module.load_corpus(train_file=[path], validation_split_percentage=20)
    assert len(corpus["train"]) + len(corpus["validation"]) == len(docs)
    assert "--train_file: 2 of the train split's 12 documents have no text (the field missing, null or blank)" \
        in caplog.text
