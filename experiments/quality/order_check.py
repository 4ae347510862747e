"""Does a masked-LM read word order? Its validation perplexity on news blocks as written and with the tokens of each
block shuffled (the same permutation for inputs and targets, the masked positions moving with their tokens), every
masked token replaced by <mask>. A model that only knows which words occur together (a bag of words) scores the
same on both; one that reads the words around a mask scores far better on the blocks as written.

    python -m experiments.quality.order_check ~/runs/quality/roberta_n128_s0 --block_size 128
"""

import argparse
import json
import math
from pathlib import Path

import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer

import linformer_hf  # noqa: F401  (registers Linformer with the Auto classes)
from experiments.quality import study
from linformer_training.corpus import load_corpus
from linformer_training.mlm import BlockSeededMLMCollator, MaskedLMObjective, pack

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("model", help="a masked-LM folder (train_mlm.py output)")
p.add_argument("--block_size", type=int, required=True, help="tokens per block (the model's pretraining n)")
p.add_argument("--blocks", type=int, default=128, help="validation blocks to score (default 128)")
p.add_argument("--seed", type=int, default=0, help="masks and the shuffle")
study.add_data_dir_argument(p)
args = p.parse_args()

data = Path(args.data_dir or Path(__file__).resolve().parents[2] / study.DATA) / study.PRETRAIN_DATA["validation_file"]
if not data.is_file():
    p.exit(2, f"order_check.py: no {data}: pass --data_dir (experiments/README.md, \"Data\")\n")
tokenizer = AutoTokenizer.from_pretrained(args.model, trust_remote_code=True)  # the study's own runs (the peer is remote code)
model = AutoModelForMaskedLM.from_pretrained(args.model, dtype=torch.float32, trust_remote_code=True).eval()
texts = load_corpus(train_file=[str(data)], validation_split_percentage=0)["train"]
blocks = [ids for ids in pack(texts, tokenizer, args.block_size)["input_ids"] if len(ids) == args.block_size][:args.blocks]
collate = BlockSeededMLMCollator(tokenizer, 0.15, seed=args.seed, mask_replace_prob=1.0, random_replace_prob=0.0)
batch = collate([{"input_ids": ids} for ids in blocks])
order = torch.randperm(args.block_size - 1, generator=torch.Generator().manual_seed(args.seed)) + 1  # <s> stays first
shuffled = torch.cat([torch.zeros(1, dtype=torch.long), order])


@torch.no_grad()
def perplexity(input_ids, labels):
    """Over every masked token, 16 blocks at a time, with the training loop's own masked-LM loss."""
    objective, total, count = MaskedLMObjective(sparse_head=True), 0.0, 0
    for start in range(0, len(input_ids), 16):
        batch = {"input_ids": input_ids[start:start + 16], "labels": labels[start:start + 16]}
        batch["attention_mask"] = torch.ones_like(batch["input_ids"])
        total += objective.loss_sum(model, batch).item()
        count += objective.count(batch).item()
    return math.exp(total / count)


as_written = perplexity(batch["input_ids"], batch["labels"])
scrambled = perplexity(batch["input_ids"][:, shuffled], batch["labels"][:, shuffled])
print(json.dumps({"model": args.model, "blocks": len(blocks), "block_size": args.block_size,
                  "perplexity_as_written": round(as_written, 2), "perplexity_shuffled": round(scrambled, 2),
                  "shuffled_over_written": round(scrambled / as_written, 3)}))
