# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Does a masked-LM read word order? Its validation perplexity on news blocks as written and with the tokens of each
block shuffled (the same permutation for inputs and targets, the masked positions moving with their tokens), every
masked token replaced by <mask>. A model that only knows which words occur together (a bag of words) scores the
same on both; one that reads the words around a mask scores far better on the blocks as written.

    python -m experiments.quality.order_check ~/runs/quality/roberta_n128_s0 --block_size 128
"""

import argparse
import importlib
import json
import math
from pathlib import Path

import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer

from experiments.quality import study
from linformer_training.corpus import load_corpus
from linformer_training.mlm import BlockSeededMLMCollator, MaskedLMObjective, pack

importlib.import_module("linformer_hf")  # registers Linformer with the Auto classes


def make_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a masked-LM folder (train_mlm.py output)")
    p.add_argument("--block_size", type=int, required=True, help="tokens per block (the model's pretraining n)")
    p.add_argument("--blocks", type=int, default=128, help="validation blocks to score (default 128)")
    p.add_argument("--seed", type=int, default=0, help="masks and the shuffle")
    study.add_data_dir_argument(p)
    return p


def validation_blocks(data, tokenizer, block_size, count):
    """The first `count` full blocks of `block_size` tokens of the news validation split, packed as in training."""
    texts = load_corpus(train_file=[str(data)], validation_split_percentage=0)["train"]
    return [ids for ids in pack(texts, tokenizer, block_size)["input_ids"] if len(ids) == block_size][:count]


def shuffle_order(block_size, seed):
    """One permutation of a block's positions, <s> kept first."""
    order = torch.randperm(block_size - 1, generator=torch.Generator().manual_seed(seed)) + 1
    return torch.cat([torch.zeros(1, dtype=torch.long), order])


@torch.no_grad()
def perplexity(model, input_ids, labels):
    """Over every masked token, 16 blocks at a time, with the training loop's own masked-LM loss."""
    objective, total, count = MaskedLMObjective(sparse_head=True), 0.0, 0
    for start in range(0, len(input_ids), 16):
        batch = {"input_ids": input_ids[start:start + 16], "labels": labels[start:start + 16]}
        batch["attention_mask"] = torch.ones_like(batch["input_ids"])
        total += objective.loss_sum(model, batch).item()
        count += objective.count(batch).item()
    return math.exp(total / count)


def main(argv=None):
    p = make_parser()
    args = p.parse_args(argv)
    root = Path(args.data_dir or Path(__file__).resolve().parents[2] / study.DATA)
    data = root / study.PRETRAIN_DATA["validation_file"]
    if not data.is_file():
        p.exit(2, f"order_check.py: no {data}: pass --data_dir (experiments/README.md, \"Data\")\n")
    # trust_remote_code: the study's own runs (the peer is remote code)
    tokenizer = AutoTokenizer.from_pretrained(args.model, trust_remote_code=True)
    model = AutoModelForMaskedLM.from_pretrained(args.model, dtype=torch.float32, trust_remote_code=True).eval()
    blocks = validation_blocks(data, tokenizer, args.block_size, args.blocks)
    collate = BlockSeededMLMCollator(tokenizer, 0.15, seed=args.seed, mask_replace_prob=1.0, random_replace_prob=0.0)
    batch = collate([{"input_ids": ids} for ids in blocks])
    shuffled = shuffle_order(args.block_size, args.seed)
    as_written = perplexity(model, batch["input_ids"], batch["labels"])
    scrambled = perplexity(model, batch["input_ids"][:, shuffled], batch["labels"][:, shuffled])
    print(json.dumps({"model": args.model, "blocks": len(blocks), "block_size": args.block_size,
                      "perplexity_as_written": round(as_written, 2), "perplexity_shuffled": round(scrambled, 2),
                      "shuffled_over_written": round(scrambled / as_written, 3)}))


if __name__ == "__main__":
    main()
