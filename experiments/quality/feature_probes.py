"""Where is the sentence? Linear probes for Rotten Tomatoes sentiment on the frozen final states of each
pretrained checkpoint: the first token's state (what RoBERTa's classification head reads) and the mean of
the real tokens' states (`classifier_pooling="mean"`). A probe at the majority-class rate means that
representation carries no linearly readable sentiment, so finetuning has to create it. Logistic
regression (scikit-learn) fitted on the first --train_examples training sentences, scored on the whole
validation split; writes results/feature_probes/NAME.json.

    python -m experiments.quality.feature_probes                               # every pretrained run
    python -m experiments.quality.feature_probes --only roberta_n512_s0 linformer_n512_k128_layerwise_s0
    python -m experiments.quality.feature_probes --data_dir ~/linformer-data     # Rotten Tomatoes is not bundled
"""

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from tqdm.auto import tqdm
from transformers import AutoModel, AutoTokenizer
from transformers.utils import logging as hf_logging

from experiments.quality import study  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

import linformer_hf  # noqa: E402, F401  (registers Linformer with the Auto classes)

OUT = REPO / "experiments/quality/results/feature_probes"

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--only", nargs="+", metavar="NAME", help="runs to probe (default: every one with a checkpoint)")
p.add_argument("--train_examples", type=int, default=2000, help="training sentences the probe is fitted on")
p.add_argument("--scalings", nargs="+", default=["none", "sqrt"], help="projection_length_scaling values (Linformer)")
study.add_data_dir_argument(p)
args = p.parse_args()
files = study.data_files(args.data_dir, p, REPO, "finetune")["finetune"]
runs = study.pretrained(args.only, p, REPO)

torch.set_num_threads(1)
hf_logging.set_verbosity_error()  # the masked-LM head is left out on purpose: no "unexpected keys" report
splits = {}
for split in ("train", "validation"):
    with open(files[f"{split}_file"]) as f:
        rows = list(csv.DictReader(f))
    rows = rows[: args.train_examples] if split == "train" else rows
    splits[split] = ([r[study.FINETUNE["text_column"]] for r in rows],
                     np.array([int(r[study.FINETUNE["label_column"]]) for r in rows]))


@torch.no_grad()
def features(model, tokenizer, texts):
    first, mean = [], []
    for i in range(0, len(texts), 64):
        batch = tokenizer(texts[i:i + 64], padding=True, truncation=True, max_length=study.FINETUNE["max_seq_length"],
                          return_tensors="pt")
        hidden = model(**batch).last_hidden_state
        real = batch["attention_mask"][..., None].to(hidden.dtype)
        first.append(hidden[:, 0])
        mean.append((hidden * real).sum(1) / real.sum(1))
    return {"first_token": torch.cat(first).numpy(), "mean": torch.cat(mean).numpy()}


for r in tqdm(runs, desc="runs"):
    path = REPO / study.CHECKPOINTS / r["name"]
    tokenizer = AutoTokenizer.from_pretrained(path)
    result = {"name": r["name"], "command": " ".join(["python -m", __spec__.name, *sys.argv[1:]]), "train_examples": len(splits["train"][1]),
              "validation_examples": len(splits["validation"][1]), "accuracy": {}}
    for scaling in args.scalings if r["model_type"] == "linformer" else ["n/a"]:
        extra = {} if scaling == "n/a" else {"projection_length_scaling": scaling}
        model = AutoModel.from_pretrained(path, add_pooling_layer=False, **extra).eval()
        (x_train, y_train), (x_val, y_val) = [(features(model, tokenizer, t), y) for t, y in splits.values()]
        result["accuracy"][scaling] = {
            pooling: LogisticRegression(max_iter=3000).fit(x_train[pooling], y_train).score(x_val[pooling], y_val)
            for pooling in ("first_token", "mean")}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{r['name']}.json").write_text(json.dumps(result, indent=1) + "\n")
    print(r["name"], result["accuracy"], flush=True)
