# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Turn the n = 4096 continued run into release/minilm-l6-linformer-mlm-n4096: LinformerForMaskedLM in fp16, its
tokenizer, remote code, float32 as the load dtype, and a card with results.md's goals and commands.

    python -m experiments.masked_lm.release            # after run.py, evaluate.py and report.py (`make release-mlm`)
    python -m experiments.masked_lm.release --refresh  # the committed release: code from src/, card, manifest anew

`--refresh` keeps the weights byte for byte (their SHA-256 compared before and after) and rewrites what is not
trained, as a build writes it: the remote code (`outputs.write_remote_code`, from src/), the card from results.md,
the manifest. The folder appears only when complete (written beside it, then renamed over the old one).
"""

import argparse
import importlib
import json
import shutil
from pathlib import Path

import torch

from experiments.long_documents.release import results_section
from experiments.masked_lm.report import HERE
from experiments.masked_lm.run import RELEASE, RUNS_DIR
from linformer_training import outputs
from linformer_training.arguments import UsageError

importlib.import_module("linformer_hf")  # registers Linformer with the Auto classes

RUN = "continue_n4096_windowed"
SOURCE = "sentence-transformers/all-MiniLM-L6-v2"
EXAMPLE = "Zhang said in an [MASK] with Xinhua News Agency in 2014."


def card(config, results_md):
    """The release's model card: what it is, how to use it (fill-mask, finetuning, continued pretraining), and
    results.md from its goals on."""
    n, k, window = config["max_seq_length"], config["projected_dim"], config["exact_attention_length"]
    intro = f"""The first Linformer masked-LM weights: [`{SOURCE}`](https://huggingface.co/{SOURCE}) with a masked-LM
head, converted to a Linformer that reads up to {n} tokens in one pass, and continued with masked-LM pretraining on
English news. An input of at most {window} tokens is read with exact attention, as BERT reads it; a longer one reads
each {window}-token window exactly plus, in every layer, k = {k} slots projected from the whole input (Linformer's
E), mixed in through per-head gates trained open. Start here to finetune on long documents or to continue
pretraining; the results below say what it does and does not do.

**Source and licence:** {SOURCE} (Apache-2.0); these weights are derived from it, under the same licence.

"""
    use = f"""
```python
from transformers import pipeline

fill = pipeline("fill-mask", model="PATH_OR_HUB_ID", trust_remote_code=True)
fill("{EXAMPLE}")
```

```bash
python finetune_glue.py --model_name_or_path PATH_OR_HUB_ID --train_file train.csv --validation_file dev.csv \\
    --max_seq_length {n}                                   # long-document classification (linformer-hf)
python train_mlm.py --model_name_or_path PATH_OR_HUB_ID --train_file your_text.jsonl --block_size {n}
```

`AutoModelForMaskedLM.from_pretrained("PATH_OR_HUB_ID", trust_remote_code=True)` gives the model (weights stored
in float16, loaded in float32 unless you pass `dtype`). Inputs longer than {n} tokens are refused with an error
naming n: truncate them with the tokenizer (`truncation=True`).

"""
    made = """
Every step, from all-MiniLM-L6-v2 to this folder, is one command of linformer-hf (`make release-mlm`:
experiments/masked_lm/run.py, evaluate.py, report.py, release.py); the commands of each step are listed below.

"""
    return outputs.model_card("all-MiniLM-L6-v2 as a Linformer masked-LM for inputs of up to 4096 tokens", intro,
                              {"Use": use, "How it was made": made + results_section(results_md)},
                              pipeline_tag="fill-mask",
                              tags=["linformer", "masked-lm", "long-context"], base_model=SOURCE)


def write_card(folder, results_md):
    config = json.loads((folder / "config.json").read_text())
    (folder / "README.md").write_text(card(config, results_md), encoding="utf-8")


def build(run, out, results_md):
    """The release from the run: fp16 weights, tokenizer, remote code and card."""
    from transformers import AutoModelForMaskedLM

    model = AutoModelForMaskedLM.from_pretrained(run, dtype=torch.float32)

    def fill(staging):
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
                     "train_config.yaml"):
            if (run / name).is_file():
                shutil.copy2(run / name, staging / name)
        model.to(torch.float16).save_pretrained(staging)
        outputs.write_remote_code(staging)
        write_card(staging, results_md)

    outputs.write_release(out, fill)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"release.py: wrote {out} ({size / 2**20:.1f} MiB)")


def refresh(out, results_md):
    """The committed release rewritten where it is not trained (a release's weights are replaced at most once per
    issue): remote code from src/, card from results.md, manifest; its weights byte for byte."""
    try:
        before, after = outputs.refresh_release(out, lambda staging: write_card(staging, results_md))
    except UsageError as e:
        raise SystemExit(f"release.py: error: {e}") from None
    print(f"release.py: rewrote the remote code (from src/), card and manifest of {out}; weights (SHA-256 before -> "
          f"after):")
    for name, digest in before.items():
        print(f"  {name}: {digest} -> {after.get(name)}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", type=Path, help=f"the finished run (default: --runs_dir/{RUN})")
    p.add_argument("--runs_dir", default=RUNS_DIR)
    p.add_argument("--results", type=Path, default=HERE / "results.md", help="report.py's results.md")
    p.add_argument("--out", type=Path, default=RELEASE)
    p.add_argument("--refresh", action="store_true",
                   help="keep --out's weights byte for byte; write its remote code (from src/), card (from --results) "
                        "and manifest anew (no run needed)")
    args = p.parse_args(argv)
    run = args.run or Path(args.runs_dir).expanduser() / RUN
    needed = [("--results", args.results)] + ([] if args.refresh else [("--run", run / "model.safetensors")])
    for flag, path in needed:
        if not path.is_file():
            raise SystemExit(f"release.py: error: {flag}: {path} does not exist (finish the run / the report first)")
    if args.refresh:
        refresh(args.out, args.results)
    else:
        build(run, args.out, args.results)


if __name__ == "__main__":
    main()
