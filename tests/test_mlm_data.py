"""The MLM data pipeline: corpora from files, tokenizer training, packing, and masking."""

import bz2
import gzip
import json

import datasets
import pytest
import torch

from linformer_hf import mlm_data
from linformer_hf.script_utils import UsageError

from conftest import tiny_config


@pytest.fixture(scope="module")
def docs(moby_text):
    return moby_text  # the first 10 sections of the bundled Moby Dick


@pytest.fixture(scope="module")
def tok(docs):
    return mlm_data.train_tokenizer(datasets.Dataset.from_dict({"text": docs}), vocab_size=400)


def write_jsonl(path, rows, opener=open):
    with opener(path, "wt") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return str(path)


# --- files and corpora -----------------------------------------------------------------------------


def test_file_format_sees_through_compression():
    assert mlm_data.file_format("a/b.jsonl.gz") == "json"
    assert mlm_data.file_format("b.TXT.bz2") == "text"
    assert mlm_data.file_format("c.parquet") == "parquet"
    with pytest.raises(UsageError, match="unknown data file type"):
        mlm_data.file_format("d.docx")


def test_missing_empty_and_mixed_files_are_errors(tmp_path):
    with pytest.raises(UsageError, match="--train_file .*nope.jsonl: no such file"):
        mlm_data.resolve_files([str(tmp_path / "nope.jsonl")], "--train_file")
    with pytest.raises(UsageError, match="no file matches"):
        mlm_data.resolve_files([str(tmp_path / "*.jsonl")], "--train_file")
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(UsageError, match="--validation_file .*empty.jsonl: file is empty"):
        mlm_data.resolve_files([str(tmp_path / "empty.jsonl")], "--validation_file")
    (tmp_path / "a.txt").write_text("x\n")
    (tmp_path / "b.csv").write_text("text\nx\n")
    with pytest.raises(UsageError, match="different types"):
        mlm_data.resolve_files([str(tmp_path / "a.txt"), str(tmp_path / "b.csv")], "--train_file")


def test_local_formats_globs_and_compression(tmp_path, docs):
    rows = [{"id": i, "body": d} for i, d in enumerate(docs)]
    write_jsonl(tmp_path / "part-0.jsonl.gz", rows[:5], gzip.open)
    write_jsonl(tmp_path / "part-1.jsonl.gz", rows[5:], gzip.open)
    corpus = mlm_data.load_corpus(train_file=[str(tmp_path / "part-*.jsonl.gz")], text_column_name="body",
                                  validation_split_percentage=20)
    assert corpus["train"].column_names == ["text"] and corpus["validation"].column_names == ["text"]
    assert len(corpus["train"]) == 8 and len(corpus["validation"]) == 2
    assert sorted(list(corpus["train"]["text"]) + list(corpus["validation"]["text"])) == sorted(docs)

    with bz2.open(tmp_path / "book.txt.bz2", "wt") as f:
        f.write("\n".join(["first line", "second line", "third line"]))
    (tmp_path / "val.txt").write_text("held out\n")
    corpus = mlm_data.load_corpus(train_file=[str(tmp_path / "book.txt.bz2")],
                                  validation_file=[str(tmp_path / "val.txt")])
    assert list(corpus["train"]["text"]) == ["first line", "second line", "third line"]
    assert list(corpus["validation"]["text"]) == ["held out"]

    datasets.Dataset.from_dict({"sentence": docs[:4], "label": [0, 1, 0, 1]}).to_parquet(tmp_path / "d.parquet")
    corpus = mlm_data.load_corpus(train_file=[str(tmp_path / "d.parquet")])  # the one string column
    assert len(corpus["train"]) + len(corpus["validation"]) == 4


def test_text_column_errors(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [{"a": "x", "b": "y"}] * 3)
    with pytest.raises(UsageError, match="no `text` column among .*pass --text_column_name"):
        mlm_data.load_corpus(train_file=[path])
    with pytest.raises(UsageError, match="--text_column_name body: .* has no such column"):
        mlm_data.load_corpus(train_file=[path], text_column_name="body")
    with pytest.raises(UsageError, match="no corpus"):
        mlm_data.load_corpus()


def test_several_corpora_are_mixed(tmp_path):
    # Dataset folders load like Hub datasets by name (offline stand-ins for BookCorpus + Wikipedia).
    (tmp_path / "books").mkdir()
    (tmp_path / "wiki").mkdir()
    write_jsonl(tmp_path / "books" / "train.jsonl", [{"text": f"book {i}"} for i in range(20)])
    write_jsonl(tmp_path / "books" / "validation.jsonl", [{"text": "book held out"}])
    write_jsonl(tmp_path / "wiki" / "train.jsonl", [{"text": f"wiki {i}", "title": "t"} for i in range(20)])
    names = [str(tmp_path / "books"), str(tmp_path / "wiki")]
    corpus = mlm_data.load_corpus(dataset_name=names, validation_split_percentage=10)
    train, val = list(corpus["train"]["text"]), list(corpus["validation"]["text"])
    assert len(train) == 20 + 18 and {t.split()[0] for t in train} == {"book", "wiki"}
    assert "book held out" in val and len(val) == 1 + 2  # books' own split + 10% of wiki
    mixed = list(mlm_data.load_corpus(dataset_name=names, validation_split_percentage=10,
                                       mix_probabilities=[0.9, 0.1])["train"]["text"])
    assert set(mixed) == set(train)  # interleaved until every corpus is used up
    assert sum(t.startswith("book") for t in mixed[:20]) >= 14  # drawn 9:1 until books run out
    with pytest.raises(UsageError, match="--mix_probabilities: got 1 values for 2 corpora"):
        mlm_data.load_corpus(dataset_name=names, mix_probabilities=[1.0])
    with pytest.raises(UsageError, match="--dataset_config_name: got 1 values for 2"):
        mlm_data.load_corpus(dataset_name=names, dataset_config_name=["c"])


def test_streaming_reads_lazily_and_holds_out_validation(tmp_path, tok):
    path = write_jsonl(tmp_path / "s.jsonl", [{"text": f"Call me Ishmael, number {i}."} for i in range(30)])
    corpus = mlm_data.load_corpus(train_file=[path], streaming=True, streaming_validation_docs=5)
    assert isinstance(corpus["train"], datasets.IterableDataset)
    assert [r["text"] for r in corpus["validation"]] == [f"Call me Ishmael, number {i}." for i in range(5)]
    assert len(list(corpus["train"])) == 25
    blocks = list(mlm_data.pack(corpus["train"], tok, block_size=16))
    assert blocks and all(len(b["input_ids"]) <= 16 and b["input_ids"][0] == tok.bos_token_id for b in blocks)


# --- tokenizer -------------------------------------------------------------------------------------


def test_trained_tokenizer_is_roberta_like(tok, tmp_path):
    from transformers import AutoTokenizer

    ids = [tok.bos_token_id, tok.pad_token_id, tok.eos_token_id, tok.unk_token_id, tok.mask_token_id]
    assert ids == [0, 1, 2, 3, 4]
    assert len(tok) <= 400
    ids = tok("the whale <mask> the ship")["input_ids"]
    assert ids[0] == 0 and ids[-1] == 2 and ids.count(4) == 1
    assert tok.convert_ids_to_tokens(ids[ids.index(4) + 1]).startswith("Ġ")  # <mask> took its space
    tok.save_pretrained(tmp_path)
    assert AutoTokenizer.from_pretrained(tmp_path)("the whale <mask> the ship")["input_ids"] == ids


def test_tokenizer_must_fit_the_model(tok):
    mlm_data.check_tokenizer(tok, tiny_config(vocab_size=len(tok)))
    with pytest.raises(UsageError, match=r"vocabulary has \d+ tokens but the model's vocab_size is 100"):
        mlm_data.check_tokenizer(tok, tiny_config(vocab_size=100))
    with pytest.raises(UsageError, match="pad token id is 1 but the model's pad_token_id is 0"):
        mlm_data.check_tokenizer(tok, tiny_config(vocab_size=len(tok), pad_token_id=0))
    with pytest.raises(UsageError, match="--tokenizer_name /no/such/tokenizer"):
        mlm_data.load_tokenizer("/no/such/tokenizer")


# --- packing and masking ---------------------------------------------------------------------------


def test_packing_keeps_every_token(tok, docs):
    split = datasets.Dataset.from_dict({"text": docs + ["", "   "]})
    blocks = list(mlm_data.pack(split, tok, block_size=64)["input_ids"])
    assert all(b[0] == tok.bos_token_id for b in blocks)
    assert all(len(b) == 64 for b in blocks[:-1]) and 1 < len(blocks[-1]) <= 64
    expected = []
    for doc in docs:  # blank documents carry no text and are skipped
        expected += tok(doc, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    assert [t for b in blocks for t in b[1:]] == expected


def test_packing_is_cached_and_parallel(tmp_path, tok, docs):
    path = write_jsonl(tmp_path / "c.jsonl", [{"text": d} for d in docs])
    split = datasets.load_dataset("json", data_files=path, split="train", cache_dir=str(tmp_path / "cache"))
    first = mlm_data.pack(split, tok, block_size=64, num_proc=2)
    assert len(first.cache_files) == 2  # one shard per worker
    again = mlm_data.pack(split, tok, block_size=64, num_proc=2)
    assert again.cache_files == first.cache_files  # the same fingerprint: read back, not recomputed
    other = mlm_data.pack(split, tok, block_size=32, num_proc=2)
    assert other.cache_files != first.cache_files


@pytest.fixture(scope="module")
def blocks(tok, docs):
    return mlm_data.pack(datasets.Dataset.from_dict({"text": docs}), tok, block_size=64)


def test_masking_is_80_10_10_at_15_percent(tok, blocks):
    collator = mlm_data.BlockSeededMLMCollator(tok, seed=0)
    examples = [{"input_ids": ids} for ids in list(blocks["input_ids"])] * 4
    masked_inputs, labels, originals = [], [], []
    for epoch in range(4):  # fresh masks each epoch
        collator.epoch = epoch
        for i in range(0, len(examples), 64):
            chunk = examples[i:i + 64]
            batch = collator(chunk)
            originals.append(tok.pad([{"input_ids": e["input_ids"]} for e in chunk], return_tensors="pt")["input_ids"])
            masked_inputs.append(batch["input_ids"])
            labels.append(batch["labels"])
    width = max(x.shape[1] for x in originals)
    pad = lambda x, v: torch.nn.functional.pad(x, (0, width - x.shape[1]), value=v)  # noqa: E731
    orig = torch.cat([pad(x, tok.pad_token_id) for x in originals])
    inputs = torch.cat([pad(x, tok.pad_token_id) for x in masked_inputs])
    labels = torch.cat([pad(x, -100) for x in labels])

    special = torch.isin(orig, torch.tensor(tok.all_special_ids))
    chosen = labels != -100
    assert not (chosen & special).any()  # <s>, </s> and padding are never masked
    assert torch.equal(labels[chosen], orig[chosen]) and torch.equal(inputs[~chosen], orig[~chosen])
    rate = chosen.sum().item() / (~special).sum().item()
    assert 0.14 < rate < 0.16
    n = chosen.sum().item()
    as_mask = (inputs[chosen] == tok.mask_token_id).sum().item() / n
    kept = (inputs[chosen] == orig[chosen]).sum().item() / n
    assert 0.77 < as_mask < 0.83 and 0.08 < kept < 0.12 and 0.08 < 1 - as_mask - kept < 0.12


def test_masks_depend_on_block_and_epoch_only(tok, blocks):
    a, b, c = ({"input_ids": ids} for ids in list(blocks["input_ids"])[:3])
    collator = mlm_data.BlockSeededMLMCollator(tok, seed=3)
    together = collator([a, b, c])
    alone = collator([b])
    # The same block gets the same mask alone or in a batch: the mask does not depend on how a global
    # batch is split across processes, nor on what was drawn before a resume.
    assert torch.equal(together["labels"][1], alone["labels"][0])
    assert torch.equal(together["input_ids"][1], alone["input_ids"][0])
    collator.epoch = 1
    assert not torch.equal(collator([b])["labels"][0], alone["labels"][0])  # dynamic masking
    other_seed = mlm_data.BlockSeededMLMCollator(tok, seed=4)
    assert not torch.equal(other_seed([b])["labels"][0], alone["labels"][0])
