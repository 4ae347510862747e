# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Masked-LM quality of experiments.masked_lm.run's models on held-out news, every model on the same masked tokens.

    python -m experiments.masked_lm.evaluate                      # every model of --runs_dir that exists
    python -m experiments.masked_lm.evaluate --models continue_source continue_k128

Two readings of the news validation articles (never trained on: train_mlm.py read news/train without the held-out
articles):
- `blocks`: packed into 512-token blocks as train_mlm.py packs them; 15% of each block's tokens masked by a
  generator seeded from its content (BlockSeededMLMCollator), so every model meets the same masks. Every masked
  token becomes the mask token (not BERT's 80/10/10, which leaves a tenth of the scored tokens as their own answer
  and another tenth as noise): fill-mask top-1/top-5 and perplexity are predictions from context alone.
- `documents`: each article longer than 512 tokens, whole up to 4,094 tokens (longer ones are cut there; the
  count is recorded), masked once. A model of n >= 4096 reads each document at once; any other reads it in
  consecutive windows of 510 tokens, each between [CLS] and [SEP], with the same masked tokens.

Per model and reading: perplexity over all masked tokens, top-1 and top-5 accuracy; per pair in COMPARISONS the
perplexity ratio with a 95% paired bootstrap interval over blocks or documents. Per-token losses are cached in
--runs_dir/eval (a model is scored once); the summary goes to experiments/masked_lm/results/evaluation.json.
"""

import argparse
import gzip
import importlib
import json
import math
from pathlib import Path

import numpy as np
import torch
from datasets import Dataset
from transformers import AutoModelForMaskedLM, AutoTokenizer

from benchmarks.reporting import paired_bootstrap
from experiments.masked_lm.run import DATA, LONG_N, RELEASE, RUNS_DIR, N
from experiments.shared import REPO
from linformer_training.mlm import BlockSeededMLMCollator, mlm_head, pack
from linformer_training.models import input_limit

importlib.import_module("linformer_hf")  # registers Linformer with the Auto classes

RESULTS = REPO / "experiments/masked_lm/results"
MASK_SEED = 36
MASKING = {"mlm_probability": 0.15, "mask_replace_prob": 1.0, "random_replace_prob": 0.0}
MASKS = f"seed{MASK_SEED}-all-mask"  # in the cache's name: losses scored under other masks are never reused
BOOTSTRAP = 2000
MODELS = ["source_head", "continue_source", "convert_k128", "continue_k128", "convert_k256", "continue_k256",
          "convert_n4096_windowed", "continue_n4096_windowed", "convert_n4096_projected", "continue_n4096_projected",
          str(RELEASE)]
# (reading, model, reference): the ratio model / reference of perplexity on the same masked tokens. The n = 4096
# goals read the release (continue_n4096_windowed in fp16), the model users get and finetune_glue.py finetunes.
COMPARISONS = [
    ("blocks", "continue_k128", "continue_source"),
    ("blocks", "continue_k256", "continue_source"),
    ("blocks", "convert_k128", "source_head"),
    ("blocks", "convert_k256", "source_head"),
    ("blocks", RELEASE.name, "continue_source"),
    ("documents", RELEASE.name, "continue_source"),
    ("documents", "continue_n4096_projected", "continue_source"),
    ("documents", RELEASE.name, "continue_n4096_projected"),
    ("documents", "convert_n4096_windowed", "source_head"),
    ("documents", "convert_n4096_projected", "source_head"),
    ("blocks", RELEASE.name, "source_head"),
]
# (model, reference): fill-mask top-1 / top-5 differences on the same masked tokens of 512-token blocks.
FILL_MASK = [(RELEASE.name, "source_head"), (RELEASE.name, "continue_source")]


def read_articles(data_dir):
    with gzip.open(Path(data_dir) / "news/validation.jsonl.gz", "rt", encoding="utf-8") as f:
        return [row["text"] for row in map(json.loads, f) if row["text"].strip()]


def masked_readings(tokenizer, articles):
    """(blocks, documents): lists of (input_ids, labels) tensors, masks fixed by MASK_SEED and content."""
    collator = BlockSeededMLMCollator(tokenizer, seed=MASK_SEED, **MASKING)
    packed = pack(Dataset.from_dict({"text": articles}), tokenizer, N, desc="packing held-out news")
    blocks = [collator.torch_mask_tokens(torch.tensor([ids]))
              for ids in packed["input_ids"]]
    documents, cut = [], 0
    for ids in tokenizer(articles, add_special_tokens=False)["input_ids"]:
        if len(ids) <= N:
            continue
        cut += len(ids) > LONG_N - 2
        whole = [tokenizer.cls_token_id, *ids[:LONG_N - 2], tokenizer.sep_token_id]
        documents.append(collator.torch_mask_tokens(torch.tensor([whole])))
    return blocks, documents, cut


@torch.no_grad()
def masked_scores(model, input_ids, labels):
    """Per masked token: (loss, rank of the label < 1, < 5) for one sequence the model reads whole."""
    masked = labels[0] != -100
    hidden = model.base_model(input_ids=input_ids).last_hidden_state[0, masked]
    logits = mlm_head(model)(hidden).float()
    target = labels[0, masked]
    loss = torch.nn.functional.cross_entropy(logits, target, reduction="none")
    rank = (logits > logits.gather(1, target[:, None])).sum(1)
    return torch.stack([loss, (rank < 1).float(), (rank < 5).float()], 1)


def score_windows(model, tokenizer, input_ids, labels, window=N - 2):
    """A document read in consecutive windows of `window` tokens, each between [CLS] and [SEP]."""
    body, body_labels = input_ids[0, 1:-1], labels[0, 1:-1]
    parts = []
    for start in range(0, len(body), window):
        ids = torch.cat([torch.tensor([tokenizer.cls_token_id]), body[start:start + window],
                         torch.tensor([tokenizer.sep_token_id])])
        part_labels = torch.cat([torch.tensor([-100]), body_labels[start:start + window], torch.tensor([-100])])
        parts.append(masked_scores(model, ids[None], part_labels[None]))
    return torch.cat(parts)


def score_model(path, tokenizer, readings):
    """{reading: [per-unit arrays of (loss, top1, top5) per masked token]} for one model folder."""
    model = AutoModelForMaskedLM.from_pretrained(path, dtype=torch.float32).eval()
    whole = input_limit(model.config) >= LONG_N
    scores = {"blocks": [masked_scores(model, ids, labels).numpy() for ids, labels in readings["blocks"]]}
    scores["documents"] = [
        (masked_scores(model, ids, labels) if whole else score_windows(model, tokenizer, ids, labels)).numpy()
        for ids, labels in readings["documents"]]
    if not all(np.isfinite(unit).all() for units in scores.values() for unit in units):
        raise SystemExit(f"evaluate.py: {path} gives non-finite losses; nothing was cached or written")
    return scores


def summary(units):
    every = np.concatenate(units)
    return {"perplexity": float(math.exp(every[:, 0].mean())), "top1": float(every[:, 1].mean()),
            "top5": float(every[:, 2].mean()), "masked_tokens": int(len(every)), "units": len(units)}


def paired_ratio(units, reference_units, seed=0):
    """Perplexity ratio over the same masked tokens and its 95% bootstrap interval (units resampled whole): the
    paired bootstrap of the loss difference per token, through exp."""
    loss, reference, clusters = per_token(units, reference_units, 0)
    mean, low, high = paired_bootstrap(loss, reference, clusters, BOOTSTRAP, seed)
    return {"ratio": math.exp(mean), "low": math.exp(low), "high": math.exp(high), "units": len(units)}


def paired_accuracy(units, reference_units, seed=0):
    """Top-1 and top-5 differences (model - reference) over the same masked tokens, 95% bootstrap intervals with
    units resampled whole."""
    out = {"units": len(units)}
    for column, k in ((1, 1), (2, 5)):
        mean, low, high = paired_bootstrap(*per_token(units, reference_units, column), BOOTSTRAP, seed)
        out[f"top{k}"] = {"difference": mean, "low": low, "high": high}
    return out


def per_token(units, reference_units, column):
    """One column of every unit's (loss, top1, top5) rows, for the model and the reference, and each token's unit."""
    return (np.concatenate([u[:, column] for u in units]), np.concatenate([u[:, column] for u in reference_units]),
            np.concatenate([np.full(len(u), i) for i, u in enumerate(units)]))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=MODELS, metavar="NAME",
                   help="folders of --runs_dir (or paths) to score (default: those of MODELS that exist)")
    p.add_argument("--runs_dir", default=RUNS_DIR)
    p.add_argument("--data_dir", default=DATA)
    p.add_argument("--max_articles", type=int, help="read only the first N validation articles (a quick check)")
    p.add_argument("--out", type=Path, default=RESULTS / "evaluation.json")
    args = p.parse_args(argv)
    runs = Path(args.runs_dir).expanduser()
    torch.set_num_threads(1)

    tokenizer = AutoTokenizer.from_pretrained(runs / "source_head")
    blocks, documents, cut = masked_readings(tokenizer, read_articles(REPO / args.data_dir)[:args.max_articles])
    readings = {"blocks": blocks, "documents": documents}
    scores = {}
    for name in args.models:
        folder = Path(name) if Path(name).is_dir() else runs / name
        if not (folder / "config.json").exists():
            print(f"skipped {name}: no model at {folder}")
            continue
        subset = "" if args.max_articles is None else f".first{args.max_articles}"
        cache = runs / "eval" / f"{folder.name}.{MASKS}{subset}.npz"
        if not cache.exists() or cache.stat().st_mtime < (folder / "config.json").stat().st_mtime:
            scored = score_model(folder, tokenizer, readings)
            cache.parent.mkdir(exist_ok=True)
            np.savez(cache, **{f"{reading}_{i}": unit for reading, units in scored.items()
                               for i, unit in enumerate(units)})
        saved = np.load(cache)
        scores[folder.name] = {reading: [saved[f"{reading}_{i}"] for i in range(len(units))]
                               for reading, units in readings.items()}
        print(folder.name, {reading: summary(units) for reading, units in scores[folder.name].items()})

    result = {"mask_seed": MASK_SEED, "masking": MASKING, "bootstrap": BOOTSTRAP, "documents_cut_at_4094_tokens": cut,
              "models": {name: {reading: summary(units) for reading, units in by_reading.items()}
                         for name, by_reading in scores.items()},
              "comparisons": [{"reading": reading, "model": model, "reference": reference,
                               **paired_ratio(scores[model][reading], scores[reference][reading])}
                              for reading, model, reference in COMPARISONS
                              if model in scores and reference in scores],
              "fill_mask": [{"reading": "blocks", "model": model, "reference": reference,
                             **paired_accuracy(scores[model]["blocks"], scores[reference]["blocks"])}
                            for model, reference in FILL_MASK if model in scores and reference in scores]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    tmp.replace(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
