# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Masked-LM data: packing documents into blocks, and seeded 80/10/10 masking."""

import importlib

import datasets
import pytest
import torch
from conftest import write_jsonl

from linformer_training import mlm
from linformer_training.arguments import UsageError

importlib.import_module("linformer_hf")  # the linformer cases need it registered, as the scripts register it

# --- packing and masking ---------------------------------------------------------------------------


def test_packing_keeps_every_token(tok, docs):
    split = datasets.Dataset.from_dict({"text": docs + ["", "   "]})
    blocks = list(mlm.pack(split, tok, block_size=64)["input_ids"])
    assert all(b[0] == tok.bos_token_id for b in blocks)
    assert all(len(b) == 64 for b in blocks[:-1]) and 1 < len(blocks[-1]) <= 64
    expected = []
    for doc in docs:  # blank documents carry no text and are skipped
        expected += tok(doc, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    assert [t for b in blocks for t in b[1:]] == expected


def test_document_blocks_hold_one_document_each_and_keep_every_token(tok, docs):
    """`documents=True`: a block never mixes two documents; a long one continues in the next blocks, each of at most
    block_size - 2 tokens after <s> (a span adds </s>), and nothing is dropped."""
    split = datasets.Dataset.from_dict({"text": docs + ["", "   "]})
    blocks = list(mlm.pack(split, tok, block_size=16, documents=True)["input_ids"])
    assert all(b[0] == tok.bos_token_id and 1 < len(b) <= 15 for b in blocks)
    at = 0
    for doc in docs:
        ids = tok(doc, add_special_tokens=False)["input_ids"]
        count = -(-len(ids) // 14)
        assert [t for b in blocks[at:at + count] for t in b[1:]] == ids
        assert all(len(b) == 15 for b in blocks[at:at + count - 1])
        at += count
    assert at == len(blocks) and any(len(tok(d, add_special_tokens=False)["input_ids"]) > 14 for d in docs)
    with pytest.raises(UsageError, match="--block_size 2: must be at least 3"):
        mlm.pack(split, tok, block_size=2, documents=True)


def test_packing_is_cached_and_parallel(tmp_path, tok, docs):
    path = write_jsonl(tmp_path / "c.jsonl", [{"text": d} for d in docs])
    split = datasets.load_dataset("json", data_files=path, split="train", cache_dir=str(tmp_path / "cache"))
    first = mlm.pack(split, tok, block_size=64, num_proc=2)
    assert len(first.cache_files) == 2  # one shard per worker
    again = mlm.pack(split, tok, block_size=64, num_proc=2)
    assert again.cache_files == first.cache_files  # the same fingerprint: read back, not recomputed
    other = mlm.pack(split, tok, block_size=32, num_proc=2)
    assert other.cache_files != first.cache_files


@pytest.fixture(scope="module")
def blocks(tok, docs):
    return mlm.pack(datasets.Dataset.from_dict({"text": docs}), tok, block_size=64)


def test_masking_is_80_10_10_at_15_percent(tok, blocks):
    collator = mlm.BlockSeededMLMCollator(tok, seed=0)
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

    def pad(x, value):
        return torch.nn.functional.pad(x, (0, width - x.shape[1]), value=value)

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
    collator = mlm.BlockSeededMLMCollator(tok, seed=3)
    together = collator([a, b, c])
    alone = collator([b])
    # The same block gets the same mask alone or in a batch: the mask does not depend on how a global
    # batch is split across processes, nor on what was drawn before a resume.
    assert torch.equal(together["labels"][1], alone["labels"][0])
    assert torch.equal(together["input_ids"][1], alone["input_ids"][0])
    collator.epoch = 1
    assert not torch.equal(collator([b])["labels"][0], alone["labels"][0])  # dynamic masking
    other_seed = mlm.BlockSeededMLMCollator(tok, seed=4)
    assert not torch.equal(other_seed([b])["labels"][0], alone["labels"][0])


# --- the objective ---------------------------------------------------------------------------------


@pytest.mark.parametrize("model_type", ["linformer", "roberta"])
def test_sparse_head_gives_the_full_heads_loss_and_evaluation(model_type, tok, blocks):
    """Logits at the masked positions only: the loss and the validation metrics of every position's logits,
    and under autocast the head runs in its precision (the sparse path bypasses the model's own forward)."""
    from accelerate import Accelerator
    from transformers import AutoModelForMaskedLM

    from linformer_training import models

    fields = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
    fields.update({"max_seq_length": 64, "projected_dim": 16} if model_type == "linformer"
                  else {"max_position_embeddings": 66})
    torch.manual_seed(0)
    model = AutoModelForMaskedLM.from_config(models.new_config(model_type, fields, tok)).double().eval()
    collate = mlm.BlockSeededMLMCollator(tok, 0.3, seed=0)
    batch = collate([blocks[i] for i in range(4)])
    full, sparse = mlm.MaskedLMObjective(), mlm.MaskedLMObjective(sparse_head=True)
    assert full.count(batch) == sparse.count(batch) > 0
    assert torch.allclose(full.loss_sum(model, batch), sparse.loss_sum(model, batch), rtol=1e-12)
    loader = torch.utils.data.DataLoader([blocks[i] for i in range(6)], batch_size=4, collate_fn=collate)
    accelerator = Accelerator(cpu=True)
    assert full.evaluate(model, loader, accelerator) == pytest.approx(sparse.evaluate(model, loader, accelerator),
                                                                      rel=1e-12)
    bf16 = mlm.MaskedLMObjective(sparse_head=True, autocast=lambda: torch.autocast("cpu", dtype=torch.bfloat16))
    assert bf16.masked_logits(model.float(), batch)[0].dtype == torch.bfloat16
    assert sparse.masked_logits(model.float(), batch)[0].dtype == torch.float32
