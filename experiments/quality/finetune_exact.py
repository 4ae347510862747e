"""Rotten Tomatoes finetuning of each pretrained Linformer run with the exact short path (study.finetune_exact_overrides):
the same recipe and seeds as run_study.py's, every input read by exact attention with the pretrained weights.

    python -m experiments.quality.finetune_exact                 # every finished Linformer run of --runs_dir
    python -m experiments.quality.finetune_exact --only linformer_n512_k128_layerwise_s0

Results go to experiments/quality/results/exact_rt/NAME.json, written after each seed (finished seeds are
skipped when run again); render.py puts them beside the runs' own finetuning.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from experiments.quality import study

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "experiments/quality/results/exact_rt"


def command(r, run_dir, out, seed, data):
    options = {**data, **study.FINETUNE, "model_name_or_path": run_dir, "seed": seed, "output_dir": out,
               "overwrite_output_dir": "true",
               "config_overrides": ",".join(f"{k}={v}" for k, v in study.finetune_exact_overrides(r).items())}
    return [sys.executable, "finetune_glue.py", *[x for k, v in options.items() for x in (f"--{k}", str(v))]]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", nargs="+", metavar="NAME", help="just these runs (names of study.RUNS)")
    p.add_argument("--runs_dir", metavar="DIR", help=f"where run_study.py trained (default {study.RUNS_DIR})")
    study.add_data_dir_argument(p)
    args = p.parse_args(argv)
    runs = [r for r in study.select(args.only, p) if r["model_type"] == "linformer"]
    data = study.data_files(args.data_dir, p, REPO, "finetune")["finetune"]
    runs_dir = study.runs_dir(args.runs_dir)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "TOKENIZERS_PARALLELISM": "false"}
    for r in runs:
        if not (runs_dir / r["name"] / "model.safetensors").is_file():
            print(f"{r['name']}: not pretrained yet, skipped")
            continue
        path = RESULTS / f"{r['name']}.json"
        record = json.loads(path.read_text()) if path.exists() else {
            "name": r["name"], "overrides": study.finetune_exact_overrides(r), "finetune": {}}
        for seed in study.FINETUNE_SEEDS:
            if str(seed) in record["finetune"]:
                continue
            out = runs_dir / f"{r['name']}_rt_exact_s{seed}"
            cmd = command(r, runs_dir / r["name"], out, seed, data)
            start = time.time()
            with open(out.with_suffix(".log"), "a") as log:
                if subprocess.run(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT).returncode:
                    sys.exit(f"finetune_exact.py: {r['name']} seed {seed} failed, see {out.with_suffix('.log')}")
            accuracy = json.loads((out / "eval_results.json").read_text())["validation"]["accuracy"]
            record["finetune"][str(seed)] = {"accuracy": accuracy, "seconds": round(time.time() - start, 1),
                                             "command": "python " + " ".join(cmd[1:]).replace(str(Path.home()), "~")}
            RESULTS.mkdir(parents=True, exist_ok=True)
            path.with_suffix(".tmp").write_text(json.dumps(record, indent=1) + "\n")
            path.with_suffix(".tmp").replace(path)
            print(f"{r['name']}: Rotten Tomatoes, exact short path, seed {seed}: {accuracy:.4f}")


if __name__ == "__main__":
    main()
