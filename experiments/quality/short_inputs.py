"""Short inputs: masked-LM perplexity of the pretrained runs on validation blocks shorter than n.

Pretraining packs full n-token blocks, so a learned projection always sums over all n columns of E/F. A
short input (a review, a sentence) meets only its first L columns, and its projected keys and values
shrink by about sqrt(L/n). This measures what that costs, for each `projection_length_scaling`, on the
same blocks and the same masks as the RoBERTa baseline, which has no such mismatch. Writes
results/short_inputs/NAME.json for every run with a checkpoint.

    python -m experiments.quality.short_inputs                                     # every pretrained run
    python -m experiments.quality.short_inputs --only roberta_n512_s0 linformer_n512_k128_layerwise_s0
    python -m experiments.quality.short_inputs --data_dir ~/linformer-data             # the news corpus is not bundled
"""

import argparse
import json
import math
import sys
from pathlib import Path

import torch
from torch.nn import functional as F
from tqdm.auto import tqdm
from transformers import AutoModelForMaskedLM

from experiments.quality import study  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

from linformer_hf.configuration_linformer import PROJECTION_LENGTH_SCALING  # noqa: E402
from linformer_training.corpus import load_corpus  # noqa: E402
from linformer_training.mlm import BlockSeededMLMCollator, pack  # noqa: E402
from linformer_training.tokenization import load_tokenizer  # noqa: E402

OUT = REPO / "experiments/quality/results/short_inputs"

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--only", nargs="+", metavar="NAME", help="runs to measure (default: every one with a checkpoint)")
p.add_argument("--lengths", type=int, nargs="+", default=[32, 64, 128, 512], help="block lengths L (tokens)")
p.add_argument("--tokens", type=int, default=32768, help="validation tokens per length (the first ones)")
p.add_argument("--seed", type=int, default=0, help="seed of the masks, identical for every run and scaling")
study.add_data_dir_argument(p)
args = p.parse_args()

news = study.data_files(args.data_dir, p, REPO, "pretrain")["pretrain"]
runs = study.pretrained(args.only, p, REPO)
if any(L < 8 for L in args.lengths) or args.tokens < max(args.lengths):
    p.error("--lengths must be at least 8 tokens and --tokens at least the longest length")

torch.set_num_threads(1)
tokenizer = load_tokenizer(REPO / study.TOKENIZER)
corpus = load_corpus(train_file=[str(news["train_file"])], validation_file=[str(news["validation_file"])])
collator = BlockSeededMLMCollator(tokenizer, 0.15, seed=args.seed)
batches = {}
for L in args.lengths:
    blocks = pack(corpus["validation"], tokenizer, block_size=L, desc=f"packing L={L}")
    blocks = [b for b in blocks["input_ids"] if len(b) == L][: args.tokens // L]
    batches[L] = [collator([{"input_ids": b} for b in blocks[i:i + 32]]) for i in range(0, len(blocks), 32)]


@torch.no_grad()
def loss_on(model, L):
    total, count = 0.0, 0
    for batch in batches[L]:
        logits = model(input_ids=batch["input_ids"]).logits
        masked = batch["labels"] != -100
        total += F.cross_entropy(logits[masked].float(), batch["labels"][masked], reduction="sum").item()
        count += masked.sum().item()
    return {"loss": total / count, "perplexity": math.exp(total / count), "masked_tokens": count,
            "blocks": sum(len(b["input_ids"]) for b in batches[L])}


for r in tqdm(runs, desc="runs"):
    path = REPO / study.CHECKPOINTS / r["name"]
    scalings = list(PROJECTION_LENGTH_SCALING) if r["model_type"] == "linformer" else ["n/a"]
    result = {"name": r["name"], "n": r["n"], "command": " ".join(["python -m", __spec__.name, *sys.argv[1:]]), "lengths": {}}
    for scaling in scalings:
        extra = {} if scaling == "n/a" else {"projection_length_scaling": scaling}
        model = AutoModelForMaskedLM.from_pretrained(path, **extra).eval()
        for L in args.lengths:
            if L <= r["n"]:
                result["lengths"].setdefault(str(L), {})[scaling] = loss_on(model, L)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{r['name']}.json").write_text(json.dumps(result, indent=1) + "\n")
    print(r["name"], {L: {s: round(v["perplexity"], 1) for s, v in d.items()} for L, d in result["lengths"].items()})
