"""Run the quality study: pretrain each run of experiments/quality/study.py with train_mlm.py, then finetune it
on Rotten Tomatoes with finetune_glue.py, one process at a time. Results go to experiments/quality/results/NAME.json
(config, commands, validation perplexity curve, final perplexity, finetuning accuracies); checkpoints to
experiments/checkpoints/ (git-ignored, rebuilt by running this again). Finished work is skipped.

The news corpus and Rotten Tomatoes are not bundled: they are read from --data_dir (default ../shared/data,
where developer checkouts have them; where to get them: experiments/README.md, "Data").

    python -m experiments.quality.run_study                          # every run, in priority order
    python -m experiments.quality.run_study --data_dir ~/linformer-data
    python -m experiments.quality.run_study --only roberta_n512_s0 linformer_n512_k128_layerwise_s0
    python -m experiments.quality.run_study --stage pretrain         # pretraining only
    python -m experiments.quality.run_study --finetune_seeds 0       # one finetuning seed per run
    python -m experiments.quality.run_study --list
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from experiments.quality import study

REPO = Path(__file__).resolve().parents[2]

RESULTS = REPO / "experiments/quality/results"
CHECKPOINTS = REPO / study.CHECKPOINTS

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--only", nargs="+", metavar="NAME", help="run just these runs (names from --list)")
p.add_argument("--stage", choices=["all", "pretrain", "finetune"], default="all")
p.add_argument("--finetune_seeds", type=int, nargs="+", default=list(study.FINETUNE_SEEDS))
p.add_argument("--variants", nargs="*", metavar="NAME", help="finetuning variants to run (default: every one a "
               "run lists; none: the study's own setting only)")
p.add_argument("--rebuild", action="store_true", help="pretrain again even where results exist "
               "(e.g. to rebuild a deleted checkpoint); the results file is rewritten")
p.add_argument("--list", action="store_true", help="print the runs and whether they are done, then exit")
study.add_data_dir_argument(p)
args = p.parse_args()

runs = study.select(args.only, p)
if args.variants and not set(args.variants) <= set(study.FINETUNE_VARIANTS):
    p.error(f"--variants: allowed: {', '.join(study.FINETUNE_VARIANTS)}")
if any(s < 0 for s in args.finetune_seeds):
    p.error("--finetune_seeds must be non-negative")

# One core per process, as agreed on the shared machine (train_mlm.py and finetune_glue.py inherit it).
env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
       "RAYON_NUM_THREADS": os.environ.get("RAYON_NUM_THREADS", "1"), "TOKENIZERS_PARALLELISM": "false"}


def load(name):
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def save(result):
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{result['name']}.json").write_text(json.dumps(result, indent=1) + "\n")


def flags(options):
    return [x for key, value in options.items() for x in (f"--{key}", flag_value(value))]


def flag_value(value):
    """A flag's value: absolute paths relative to the repository root (where the commands run) unless that climbs
    out of its parent folder; a mapping as KEY=VALUE,... with YAML values (train_mlm.py --config_overrides)."""
    if isinstance(value, Path) and value.is_absolute():
        relative = os.path.relpath(value, REPO)
        return str(value) if relative.startswith(os.path.join(os.pardir, os.pardir)) else relative
    if isinstance(value, dict):
        return ",".join(f"{k}={v if isinstance(v, str) else json.dumps(v, separators=(',', ':'))}"
                        for k, v in value.items())
    return str(value)


def execute(cmd, log):
    """Run one command from the repository root; its output goes to `log`; fail loudly."""
    print("$", " ".join(cmd), flush=True)
    start = time.time()
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as f:
        code = subprocess.run(cmd, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT).returncode
    if code:
        tail = "".join(open(log).readlines()[-15:])
        sys.exit(f"run_study.py: command failed (exit {code}), log {log}:\n{tail}")
    return time.time() - start


if args.list:
    for r in runs:
        res = load(r["name"]) or {}
        keys = ["finetune", *(f"finetune_{v}" for v in r["variants"])]
        print(f"{r['name']:40s} pretrained: {'perplexity' in res!s:5s} seeds: "
              + ", ".join(f"{key} {sorted(int(s) for s in res.get(key, {}))}" for key in keys))
    sys.exit(0)

# Pretraining reads the news corpus, finetuning Rotten Tomatoes: check that what this invocation needs is there.
data = study.data_files(args.data_dir, p, REPO, *{"all": ["pretrain", "finetune"]}.get(args.stage, [args.stage]))
tokenizer = REPO / study.TOKENIZER
if "pretrain" in data:
    from linformer_training.corpus import load_corpus
    from linformer_training.tokenization import load_tokenizer, train_tokenizer

    news = {key: [str(path)] for key, path in data["pretrain"].items()}
    # The shared tokenizer: byte-level BPE trained once on the news train split by train_mlm.py's own code.
    if not (tokenizer / "tokenizer_config.json").exists():
        print(f"training the shared tokenizer into {tokenizer}", flush=True)
        train_tokenizer(load_corpus(**news)["train"], study.TOKENIZER_VOCAB_SIZE).save_pretrained(tokenizer)

# Reference: the perplexity of a context-free model (train-split unigram frequencies, add-one smoothed) on
# the validation tokens that masking can pick (no special tokens). A model near it has not learnt to use context.
reference = RESULTS / "reference/unigram.json"
if "pretrain" in data and not reference.exists():
    import math
    from collections import Counter
    tok = load_tokenizer(tokenizer)
    corpus = load_corpus(**news)
    counts = {}
    for split in ("train", "validation"):
        ids = tok(list(corpus[split]["text"]), add_special_tokens=False)["input_ids"]
        counts[split] = Counter(i for doc in ids for i in doc)
    total, vocab = sum(counts["train"].values()), len(tok)
    nll = -sum(c * math.log((counts["train"][i] + 1) / (total + vocab)) for i, c in counts["validation"].items())
    tokens = sum(counts["validation"].values())
    reference.parent.mkdir(parents=True, exist_ok=True)
    reference.write_text(json.dumps({"unigram_perplexity": math.exp(nll / tokens), "validation_tokens": tokens,
                                     "train_tokens": total, "vocab_size": vocab}, indent=1) + "\n")

# Reference: Rotten Tomatoes validation accuracy of always predicting the training split's majority label.
majority = RESULTS / "reference/rotten_tomatoes_majority.json"
if "finetune" in data and not majority.exists():
    import csv
    labels = {split: [row["label"] for row in csv.DictReader(open(data["finetune"][f"{split}_file"]))]
              for split in ("train", "validation")}
    label = max(set(labels["train"]), key=labels["train"].count)
    majority.parent.mkdir(parents=True, exist_ok=True)
    majority.write_text(json.dumps({"majority_label": label, "validation_accuracy":
                                    labels["validation"].count(label) / len(labels["validation"])}, indent=1) + "\n")

for r in runs:
    name, out = r["name"], CHECKPOINTS / r["name"]
    result = load(name)
    has_model = (out / "model.safetensors").exists()
    variants = [v for v in r["variants"] if args.variants is None or v in args.variants]
    need_model = args.stage != "pretrain" and any(
        str(s) not in (result or {}).get(key, {}) for key in ["finetune", *(f"finetune_{v}" for v in variants)]
        for s in args.finetune_seeds)
    if args.stage != "finetune" and (result is None or args.rebuild or (need_model and not has_model)):
        n = r["n"]
        if study.TOKENS_PER_UPDATE % n:
            sys.exit(f"run_study.py: {name}: n={n} does not divide TOKENS_PER_UPDATE={study.TOKENS_PER_UPDATE}")
        options = {"config": r["config"], **data["pretrain"], **study.PRETRAIN, "model_type": r["model_type"],
                   "config_overrides": {**study.PRETRAIN["config_overrides"], **r["config_overrides"]},
                   "per_device_train_batch_size": study.TOKENS_PER_UPDATE // n, "seed": r["seed"],
                   "output_dir": out.relative_to(REPO), "overwrite_output_dir": "true"}
        cmd = [sys.executable, "train_mlm.py", *flags(options)]
        seconds = execute(cmd, out.with_suffix(".pretrain.log"))
        log = [json.loads(line) for line in open(out / "metrics.jsonl")]
        curve = [{"step": m["step"], "loss": m["eval_loss"], "perplexity": m["eval_perplexity"]}
                 for m in log if "eval_perplexity" in m]
        train = [m for m in log if "train_loss" in m]
        result = {"name": name, "seed": r["seed"], "run": {k: v for k, v in r.items() if k != "name"},
                  "pretrain_command": "python " + " ".join(cmd[1:]),
                  "config": yaml.safe_load((out / "train_config.yaml").read_text()),
                  "curve": curve, "perplexity": curve[-1]["perplexity"], "loss": curve[-1]["loss"],
                  "train_curve": [{"step": m["step"], "loss": m["train_loss"]} for m in train],
                  "tokens_seen": train[-1]["tokens_seen"], "pretrain_seconds": round(seconds, 1),
                  "finetune": {}}
        save(result)
        print(f"{name}: validation perplexity {result['perplexity']:.2f} after {curve[-1]['step']} updates "
              f"({seconds / 60:.1f} min)", flush=True)
    if args.stage == "pretrain":
        continue
    if result is None:
        print(f"{name}: not pretrained yet, no finetuning (run with --stage all or pretrain)")
        continue
    for variant in [None, *variants]:
        key = "finetune" if variant is None else f"finetune_{variant}"
        done = result.setdefault(key, {})
        for seed in args.finetune_seeds:
            if str(seed) in done or str(seed) in (load(name) or {}).get(key, {}):  # done here or by another process
                continue
            if not (out / "model.safetensors").exists():
                sys.exit(f"run_study.py: {name}: checkpoint {out} is missing; rebuild it with --only {name} --rebuild")
            ft_out = CHECKPOINTS / f"{name}_rt{'' if variant is None else '_' + variant}_s{seed}"
            options = {**data["finetune"], **study.FINETUNE, **study.FINETUNE_VARIANTS.get(variant, {}),
                       "model_name_or_path": out.relative_to(REPO), "seed": seed, "output_dir": ft_out.relative_to(REPO)}
            cmd = [sys.executable, "finetune_glue.py", *flags(options)]
            seconds = execute(cmd, ft_out.with_suffix(".log"))
            scores = json.loads((ft_out / "eval_results.json").read_text())
            done[str(seed)] = {"accuracy": scores["validation"]["accuracy"], "command": "python " + " ".join(cmd[1:]),
                               "seconds": round(seconds, 1), "eval_results": scores}
            # Merge into the file as it is now: another run_study.py process may have added other seeds.
            latest = load(name)
            for k in [k for k in latest if k.startswith("finetune")]:
                for s, entry in latest[k].items():
                    result.setdefault(k, {}).setdefault(s, entry)
            save(result)
            print(f"{name}: Rotten Tomatoes validation accuracy {scores['validation']['accuracy']:.4f} "
                  f"({key}, seed {seed}, {seconds / 60:.1f} min)", flush=True)
