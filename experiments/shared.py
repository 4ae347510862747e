# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""What the studies measure the same way: the held-out news and Rotten Tomatoes
data, the source encoder (also with its positions extended), embeddings, fidelity (cosine and per-layer
error), linear probes, long-document retrieval, peak memory in a fresh process, and the result files."""

import argparse
import csv
import gzip
import hashlib
import importlib
import json
import math
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from linformer_training.conversion import extend_positions

importlib.import_module("linformer_hf")  # registers Linformer with the Auto classes

REPO = Path(__file__).resolve().parents[1]
HELDOUT = REPO / "experiments" / "conversion" / "heldout_news_ids.txt"
LONG_N = 4096   # the long-input length: long held-out chunks are cut to it
HELDOUT_TRAIN_PERCENT = 15  # of news/train.jsonl.gz, by a hash of the id, plus all of news/validation
SOURCE_N = 512
QUERY_TOKENS = 64


def read_news(data_dir):
    rows = {}
    for split in ("train", "validation"):
        with gzip.open(data_dir / "news" / f"{split}.jsonl.gz", "rt", encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                rows[row["id"]] = dict(row, split=split)
    return rows


def heldout_ids(news):
    """All validation articles plus a fixed hash-chosen part of train; written once, then read from the file."""
    if not HELDOUT.exists():
        chosen = [i for i, row in sorted(news.items()) if row["split"] == "validation"
                  or int(hashlib.sha256(f"news:{i}".encode()).hexdigest(), 16) % 100 < HELDOUT_TRAIN_PERCENT]
        HELDOUT.write_text("".join(f"{i}\n" for i in chosen))
    return [int(line) for line in HELDOUT.read_text().split()]


def with_specials(tokenizer, ids):
    return [tokenizer.cls_token_id, *ids, tokenizer.sep_token_id]


def build_data(args, tokenizer):
    """Token-id lists for every measurement, drawn once with a fixed seed from held-out text only."""
    rng = random.Random(0)
    news = read_news(args.data_dir)
    ids = heldout_ids(news)
    texts = [news[i]["text"] for i in ids]
    tokens = tokenizer(texts, add_special_tokens=False)["input_ids"]
    articles = list(zip(ids, tokens, strict=True))

    # Chunks of log-uniform length in [8, 512] (specials included), from random places in held-out articles.
    chunks = []
    pool = [t for _, t in articles if len(t) >= 16]
    for _ in range(args.chunks):
        length = int(round(math.exp(rng.uniform(math.log(8), math.log(SOURCE_N)))))
        candidates = [t for t in pool if len(t) >= length - 2]
        t = rng.choice(candidates)
        start = rng.randrange(len(t) - (length - 2) + 1)
        chunks.append(with_specials(tokenizer, t[start:start + length - 2]))

    long_articles = [t for _, t in articles if len(t) > SOURCE_N]
    long_docs = [with_specials(tokenizer, t[:LONG_N - 2]) for t in rng.sample(long_articles, args.long_chunks)]

    # Retrieval: whole articles longer than 1,024 tokens; one query span from beyond token 512 of each.
    docs, queries, doc_ids = [], [], []
    for i, t in articles:
        if len(t) > 1024:
            start = rng.randrange(512, len(t) - QUERY_TOKENS + 1)
            docs.append(t)
            queries.append(with_specials(tokenizer, t[start:start + QUERY_TOKENS]))
            doc_ids.append(i)
    if args.retrieval_docs and len(docs) > args.retrieval_docs:
        keep = sorted(rng.sample(range(len(docs)), args.retrieval_docs))
        docs, queries, doc_ids = [docs[i] for i in keep], [queries[i] for i in keep], [doc_ids[i] for i in keep]

    def read_rt(split, count):
        with (args.data_dir / "rotten_tomatoes" / f"{split}.csv").open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        rng.shuffle(rows)
        rows = rows[:count]
        return tokenizer([r["sentence"] for r in rows], truncation=True, max_length=SOURCE_N)["input_ids"], \
            [int(r["label"]) for r in rows]

    probe = {"train": read_rt("train", args.probe_train), "validation": read_rt("validation", args.probe_validation)}
    return dict(heldout=len(ids), chunks=chunks, long_docs=long_docs, docs=docs, queries=queries, doc_ids=doc_ids,
                probe=probe)


def load_source(path):
    from transformers import AutoModel

    return AutoModel.from_pretrained(path, attn_implementation="sdpa").eval()


def extended_source(source, n):
    """The source BERT with its position table repeated to n rows (as the conversion does) and full attention."""
    from transformers import BertModel

    config = source.config.to_dict()
    config.update(max_position_embeddings=n)
    config.pop("architectures", None)
    model = BertModel(type(source.config).from_dict(config)).eval()
    state = source.state_dict()
    state["embeddings.position_embeddings.weight"] = extend_positions(state["embeddings.position_embeddings.weight"], n)
    model.load_state_dict(state)
    model.config._attn_implementation = "sdpa"
    return model


@torch.inference_mode()
def forward(model, batch_ids, hidden_states=False):
    """Mean-pooled embeddings (B, d) of equal-length sequences, and all hidden states when asked."""
    ids = torch.tensor(batch_ids)
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=hidden_states)
    pooled = out.last_hidden_state.mean(1)
    return pooled, (out.hidden_states if hidden_states else None)


def embed(model, sequences, batch_size=64):
    """Mean-pooled embeddings, batching only sequences of equal length (no padding anywhere)."""
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
    out = [None] * len(sequences)
    i = 0
    while i < len(order):
        j = i
        while j < len(order) and j - i < batch_size and len(sequences[order[j]]) == len(sequences[order[i]]):
            j += 1
        pooled, _ = forward(model, [sequences[order[m]] for m in range(i, j)])
        for m, vector in zip(range(i, j), pooled, strict=True):
            out[order[m]] = vector
        i = j
    return torch.stack(out)


def window_embeddings(model, doc, cls, sep, window=SOURCE_N):
    """The source's long-document baseline: mean of its embeddings of consecutive 510-token windows."""
    step = window - 2
    pieces = [[cls, *doc[s:s + step], sep] for s in range(0, len(doc), step)]
    vectors = [forward(model, [p])[0][0] for p in pieces]
    weights = torch.tensor([len(p) for p in pieces], dtype=torch.float32)
    return (torch.stack(vectors) * weights[:, None]).sum(0) / weights.sum()


def cosine(a, b):
    return F.cosine_similarity(a, b, dim=-1)


def relative_layer_error(ours, theirs):
    return [((a - b).norm() / b.norm()).item() for a, b in zip(ours, theirs, strict=True)]  # layer by layer


def bucket_of(length, k):
    return "<=k" if length <= k else ("k..512" if length <= SOURCE_N else ">512")


def measure_cosine(model, n, k, data, references):
    per_text, layers = [], {}
    texts = data["chunks"] + [d[:n] if len(d) <= n else d[:n - 1] + d[-1:] for d in data["long_docs"] if n > SOURCE_N]
    for ids in texts:
        reference = references["long" if len(ids) > SOURCE_N else "short"]
        key = tuple(ids)
        if key not in reference["cache"]:
            reference["cache"][key] = forward(reference["model"], [ids], hidden_states=True)
        theirs, their_states = reference["cache"][key]
        ours, our_states = forward(model, [ids], hidden_states=True)
        per_text.append((len(ids), cosine(ours[0], theirs[0]).item()))
        if len(ids) > k:
            layers.setdefault(bucket_of(len(ids), k), []).append(relative_layer_error(our_states, their_states))
    buckets = {}
    for length, value in per_text:
        buckets.setdefault(bucket_of(length, k), []).append(value)
    summary = {b: dict(mean=float(np.mean(v)), min=float(np.min(v)), count=len(v)) for b, v in buckets.items()}
    layer_summary = {b: [float(x) for x in np.mean(v, axis=0)] for b, v in layers.items()}
    return dict(cosine=summary, cosine_by_text=per_text, layer_error=layer_summary)


def probe_accuracy(model, data):
    from sklearn.linear_model import LogisticRegression

    (train_ids, train_y), (val_ids, val_y) = data["probe"]["train"], data["probe"]["validation"]
    train_x, val_x = embed(model, train_ids).numpy(), embed(model, val_ids).numpy()
    classifier = LogisticRegression(max_iter=3000, C=1.0).fit(train_x, train_y)
    return float(classifier.score(val_x, val_y))


def retrieval_scores(doc_vectors, query_vectors):
    similarity = F.normalize(query_vectors, dim=-1) @ F.normalize(doc_vectors, dim=-1).T
    correct = similarity.diagonal()[:, None]
    ranks = (similarity > correct).sum(1) + 1
    return dict(recall_at_1=float((ranks == 1).float().mean()), recall_at_5=float((ranks <= 5).float().mean()),
                mrr=float((1.0 / ranks.float()).mean()), documents=len(ranks))


def retrieval(model, data, tokenizer, max_tokens, windows=False):
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    if windows:
        docs = torch.stack([window_embeddings(model, d, cls, sep) for d in data["docs"]])
    else:
        docs = torch.stack([forward(model, [[cls, *d[:max_tokens - 2], sep]])[0][0] for d in data["docs"]])
    return retrieval_scores(docs, embed(model, data["queries"]))


def memory_probe_subprocess(spec, module):
    """Peak bytes of one forward, from `python -m MODULE --memory_probe SPEC` in a fresh process (each study's
    compute module probes its own systems)."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    try:
        result = subprocess.run([sys.executable, "-m", module, "--memory_probe", f.name], capture_output=True,
                                text=True, env=env, timeout=1800, cwd=REPO)
    finally:
        Path(f.name).unlink()
    if result.returncode != 0:
        raise RuntimeError(f"memory probe failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])["peak_bytes"]


def save(out, name, obj):
    (out / "results").mkdir(parents=True, exist_ok=True)
    tmp = out / "results" / f".{name}.json.tmp"
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    tmp.replace(out / "results" / f"{name}.json")


def load_all(out):
    return {p.stem: json.loads(p.read_text()) for p in sorted((out / "results").glob("*.json"))}


def shown(path):
    """A path as commands and tables show it: relative to the repository when it lies beside it (the
    shared data, the venv's teacher), so that stamps and commands read the same on every checkout."""
    path = Path(path).resolve()
    return os.path.relpath(path, REPO) if path.is_relative_to(REPO.parent) else str(path)


def render_main(doc, default_out, write_report, argv=None):
    """The command line of a study's render.py: --out, then `write_report` from the result files alone."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=default_out, help="the folder whose results/ to read; results.json, "
                   "results.md and the plots are written there (default: %(default)s)")
    args = p.parse_args(argv)
    if not (args.out / "results").is_dir():
        p.error(f"{args.out / 'results'} does not exist: run compute.py first")
    write_report(args.out, load_all(args.out))
