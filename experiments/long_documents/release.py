# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Turn a finished distill.py run into the released folder: fp16 weights, tokenizer, remote code,
sentence-transformers modules and a model card with the results of report.py.

    python -m experiments.long_documents.release --run runs/long-minilm-n4096 \
        --out release/minilm-l6-linformer-n4096

The run's folder is what a user would load too; the release only halves the weights (the folder is
committed to git, and fp16 keeps it near 45 MB) and replaces the card, whose figures all come from
files the run and the report wrote: training time from metrics.jsonl, the results from results.md.
The new folder appears only when complete (written beside it, then renamed).

What is not trained is written by `outputs.write_remote_code`, here, in the masked-LM release and by `--refresh`,
which rewrites it in an existing release and leaves its weights byte for byte (their SHA-256 compared before and
after): the remote code (`modeling_linformer.py`, `configuration_linformer.py` and the sentence-transformers module
`sentence_transformer_linformer.py`, which warns when an input is cut and serves `backend="onnx"` without optimum,
from src/; tests/test_release_folders.py fails while they differ), the load dtype (float32: the weights are stored
in float16 to halve the folder, but float16 is slow on CPU, where most embedding runs; on a GPU pass
dtype=torch.float16), the card (from results.md, the training facts report.py keeps in results.json, and the
hardware the card already names) and the manifest:

    python -m experiments.long_documents.release --refresh --out release/minilm-l6-linformer-n4096

The int8 ONNX graph `onnx/model_qint8.onnx` (export_onnx.py, checked against PyTorch before it is written) is
written by a build, and by a refresh only with `--onnx` (after a change to what the model computes; minutes).

The fp32 ONNX graph (about 4x the int8 file) is not committed; `python export_onnx.py --model_name_or_path
release/minilm-l6-linformer-n4096 --quantize false --overwrite_output_dir true` writes it into its onnx/ folder
(ignored by git) and lists it in the folder's manifest.
"""

import argparse
import json
import os
import platform
import re
import shutil
import sys
from pathlib import Path

import torch

from linformer_hf import LinformerConfig  # linformer_hf registers with the Auto classes; its files are the remote code
from linformer_training import outputs
from linformer_training.arguments import UsageError
from linformer_training.onnx_export import INT8_NAME, ONNX_NAME, export_onnx
from linformer_training.tracking import read_jsonl

HERE = Path(__file__).resolve().parent

# Files of the run folder that describe the run rather than the model.
RUN_ONLY = {"logs", "metrics.jsonl", "eval_results.json", "README.md", "model.safetensors", "checkpoints",
            "manifest.json"}
BUILD_COMMAND = "make release"
ST_MODULE = outputs.ST_MODULE
# The card's training sentence names where the run trained; a refresh keeps it (it is not this machine).
HARDWARE = re.compile(r"wall time \(evaluations included\) on (.+?), bf16 autocast")


def write_int8_onnx(folder):
    """onnx/model_qint8.onnx, where sentence-transformers looks for ONNX files; the fp32 graph it is quantized
    from is dropped (its size is not worth committing; export_onnx.py writes it on demand)."""
    out, difference = export_onnx(folder, Path(folder) / "onnx", quantize=True, overwrite_output_dir=True)
    (out / ONNX_NAME).unlink()
    print(f"release.py: onnx/{INT8_NAME} written (the fp32 graph matched PyTorch within {difference:.1g})")


def refresh(out, results_md, hardware=None, onnx=False):
    """Rewrite what is not trained in the release `out` (outputs.refresh_release: remote code from src/, load
    dtype, manifest; here the card, from results.md and the training facts recorded in results.json, and with
    `onnx` the int8 ONNX graph), every weight file byte for byte but the graph `onnx` asks for."""
    import yaml

    facts = json.loads(results_md.with_suffix(".json").read_text()).get("training")
    if facts is None:
        sys.exit(f"release.py: error: --results: {results_md.with_suffix('.json')} records no training facts; run "
                 f"report.py with --run first")

    def write(staging):
        if onnx:
            write_int8_onnx(staging)
        config = json.loads((staging / "config.json").read_text())
        train_config = yaml.safe_load((staging / "train_config.yaml").read_text())
        named = HARDWARE.search((staging / "README.md").read_text(encoding="utf-8"))
        if hardware is None and named is None:
            sys.exit(f"release.py: error: {out}/README.md names no hardware the run trained on; pass --hardware")
        (staging / "README.md").write_text(card(config, train_config, facts, results_md, hardware or named[1],
                                                shortfalls(results_md.with_suffix(".json"))), encoding="utf-8")

    try:
        before, after = outputs.refresh_release(out, write, rewritten=(f"onnx/{INT8_NAME}",) if onnx else ())
    except UsageError as e:
        sys.exit(f"release.py: error: {e}")
    print(f"release.py: rewrote the remote code (from src/), load dtype, card{', int8 ONNX graph' * onnx} and "
          f"manifest of {out}; weights (SHA-256 before -> after):")
    for name, digest in before.items():
        print(f"  {name}: {digest} -> {after.get(name)}")


def training_facts(run):
    """Updates, wall time, tokens, peak memory and the validation curve (step, document recall@1, cosine) of
    the run, from its metrics log (first to last record)."""
    records = read_jsonl(Path(run) / "metrics.jsonl")
    times = [r["time"] for r in records if "time" in r]
    trained = [r for r in records if "train_loss" in r]
    return {"updates": max(r["step"] for r in records), "hours": (max(times) - min(times)) / 3600,
            "tokens": max((r.get("tokens_seen", 0) for r in trained), default=0),
            "peak_memory_gb": max((r.get("peak_memory_gb", 0) for r in trained), default=0),
            "evals": [(r["step"], r.get("eval_document_recall_at_1"), r["eval_cosine"]) for r in records
                      if "eval_cosine" in r]}


def results_section(results_md):
    """results.md from its first `## ` heading on, headings one level down, plot links dropped."""
    text = Path(results_md).read_text(encoding="utf-8")
    body = text[text.index("\n## "):] if "\n## " in text else text
    lines = [("#" + line if line.startswith("#") else line) for line in body.splitlines() if not line.startswith("![")]
    return "\n".join(lines).strip()


def shortfalls(results_json):
    """The goals results.md marks missed, each with its measurement: the card says plainly what was not reached."""
    goals = json.loads(Path(results_json).read_text())["goals"]
    missed = [g for g in goals if g["met"] is False]
    if not missed:
        return "Every goal of the results below is met."
    return "\n".join(f"- {g['goal']}: **missed** ({g['measured']})." for g in missed)


def card(config, train_config, facts, results_md, hardware, missed):
    """The release's model card (outputs.model_card, as every folder the scripts write): intro, use, recipe with
    its shortfalls, then the report's results."""
    parsed = LinformerConfig.from_dict(config)  # a config.json from before attention_type reads the same
    n, k, window = parsed.max_seq_length, parsed.projected_dim, parsed.exact_attention_length
    exact = window
    teacher = "sentence-transformers/all-MiniLM-L6-v2"
    intro = f"""\
[`{teacher}`](https://huggingface.co/{teacher}), exactly, on every input of at most {exact} tokens (all it
can read), and a document reader for longer ones, up to {n} tokens in one pass. A longer input is read as the
source reads each of its {window}-token windows, exactly, plus, in every layer, attention to k = {k} slots
projected from the whole document by a learned E (Linformer, Wang et al. 2020; `projection_sharing=
{config['projection_sharing']!r}`, resampled to each input's length), mixed in by a per-head gate
(`global_gate`). The gates started closed (the model was then exactly the source on each window) and were
opened by training, with rank-{config.get('long_input_adapter_rank')} adapters on every linear map
(`long_input_adapter_rank`) that only long inputs use: training them never moved the short path. Which path
a sequence takes is decided per sequence, so a padded batch may mix both.

**Source and licence:** {teacher} (Apache-2.0); these weights are derived from it, under the same licence.

"""
    use = f"""
```python
from sentence_transformers import SentenceTransformer

model = SentenceTransformer("PATH_OR_HUB_ID", trust_remote_code=True)   # mean pooling, normalised
embeddings = model.encode(["a short sentence", "a news article of a few thousand tokens ..."])
```

Inputs longer than {n} tokens are cut to {n} by sentence-transformers, as it cuts every model's; this folder's
module (`{ST_MODULE}`) logs one warning per call saying how many tokens were dropped. Split longer documents.

ONNX Runtime, through sentence-transformers (optimum not needed: this folder's module serves the graph):

```python
from sentence_transformers import SentenceTransformer

model = SentenceTransformer("PATH_OR_HUB_ID", backend="onnx", trust_remote_code=True,
                            model_kwargs={{"file_name": "onnx/model_qint8.onnx"}})  # int8, in this folder
embeddings = model.encode(["a short sentence", "a news article of a few thousand tokens ..."])
```

`onnx/model_qint8.onnx` is the int8 graph (weight matrices in 8 bits, multiplied in float32, so a text's \
embedding does not depend on
what shares its batch; embedding tables uint8; dynamic batch and length up to {n}; inputs
`input_ids`, `attention_mask`, output `last_hidden_state`, to mean-pool and normalise as above, for ONNX Runtime
called directly). Without `model_kwargs`, `backend="onnx"` serves the fp32 graph `onnx/model.onnx`, which is not
in the folder: `python export_onnx.py --model_name_or_path PATH --quantize false --overwrite_output_dir true`
writes it there (PATH: a local copy of this folder).

The weights are stored in float16 (half the folder) and load in float32 by default, which is the fast choice on
CPU; on a GPU pass `model_kwargs={{"dtype": torch.float16}}` (or `dtype=torch.float16` to `from_pretrained`).
`AutoModel.from_pretrained("PATH_OR_HUB_ID", trust_remote_code=True)` gives the encoder (mean-pool its
last hidden state over real tokens, then L2-normalise, to get the same embeddings).

"""
    inputs = ("each input one article (`--inputs documents`, articles of more than "
              f"{train_config.get('min_document_length')} tokens)" if train_config.get("inputs") == "documents"
              else "each input cut from articles packed back to back")
    made = f"""
```bash
{BUILD_COMMAND}     # = experiments/long_documents/build.sh: convert, train, evaluate, this folder
```

- Conversion: `convert_to_linformer.py --max_seq_length {n} --projected_dim {k} --exact_attention_length {exact}
  --attention_type {parsed.attention_type} --long_input_adapter_rank {config.get('long_input_adapter_rank')}` (gates at
  zero, adapters as no change, E as window means, position rows repeating every {exact}).
- Training (`distill.py --config configs/distill/minilm_n4096.yaml`, long path only: E, gates, adapters): on
  spans of {train_config.get('short_max_length')}-{train_config.get('block_size')} tokens of English news
  (held-out articles excluded by id), {inputs},
  a document objective, weight {train_config.get('document_loss_weight')}: each
  input's embedding must pick out its own \
{train_config.get('piece_min_length')}-{train_config.get('piece_max_length')}-token
  pieces, embedded by the teacher, among the pieces of the other inputs of the batch and a fixed bank of
  pieces from held-back inputs (InfoNCE, temperature {train_config.get('document_temperature')}, both directions);
  and the teacher's 512-token windows as an anchor (hidden states, weight {train_config.get('hidden_loss_weight')};
  pooled embedding, weight {train_config.get('cosine_loss_weight')}).
- {facts['updates']} updates of {train_config.get('total_batch_size')} spans, {facts['tokens']:,} tokens,
  {facts['hours']:.2f} h wall time (evaluations included) on {hardware}, bf16 autocast; peak memory
  {facts['peak_memory_gb']:.1f} GB. Weights stored in float16.

### Where it falls short

{missed}

"""
    return outputs.model_card(f"all-MiniLM-L6-v2 as a Linformer for inputs of up to {n} tokens", intro,
                              {"Use": use, "How it was made": made + results_section(results_md)},
                              pipeline_tag="sentence-similarity", tags=["linformer", "sentence-transformers",
                                                                         "long-context"], base_model=teacher)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", type=Path, help="the output_dir of a finished distill.py run")
    p.add_argument("--results", type=Path, default=HERE / "results.md",
                   help="report.py's results.md (its results.json, beside it, is read too)")
    p.add_argument("--out", type=Path, required=True, help="the release folder (replaced once the new one is complete)")
    p.add_argument("--hardware", help="where the run trained, for the card (default: this machine's CPU cores; "
                                      "with --refresh, the hardware the card names)")
    p.add_argument("--refresh", action="store_true",
                   help="only rewrite what is not trained in the existing release --out: remote code (from src/), "
                        "load dtype, card, manifest; its weights stay byte for byte")
    p.add_argument("--onnx", action="store_true",
                   help="with --refresh: export the int8 ONNX graph again too (after a change to what the model "
                        "computes)")
    args = p.parse_args(argv)
    if args.refresh:
        return refresh(args.out, args.results, args.hardware, args.onnx)
    if args.onnx:
        p.error("--onnx goes with --refresh (a build always exports the graph)")
    hardware = args.hardware or f"{os.cpu_count()} CPU cores ({platform.machine()})"
    if args.run is None:
        p.error("--run is required (or --refresh)")
    for flag, path in (("--run", args.run / "model.safetensors"), ("--results", args.results),
                       ("--results", args.results.with_suffix(".json"))):
        if not path.is_file():
            sys.exit(f"release.py: error: {flag}: {path} does not exist (finish the run / the report first)")

    import yaml
    from transformers import AutoModel

    model = AutoModel.from_pretrained(args.run, dtype=torch.float32)
    config = json.loads((args.run / "config.json").read_text())
    train_config = yaml.safe_load((args.run / "train_config.yaml").read_text())

    def fill(staging):
        for item in args.run.iterdir():
            if item.name in RUN_ONLY or item.name.startswith("."):
                continue
            (shutil.copytree if item.is_dir() else shutil.copy2)(item, staging / item.name)
        model.to(torch.float16).save_pretrained(staging)
        outputs.write_remote_code(staging)
        write_int8_onnx(staging)
        (staging / "README.md").write_text(card(config, train_config, training_facts(args.run), args.results,
                                                hardware, shortfalls(args.results.with_suffix(".json"))),
                                           encoding="utf-8")

    outputs.write_release(args.out, fill)  # manifest, then one rename over the old folder
    size = sum(f.stat().st_size for f in args.out.rglob("*") if f.is_file())
    print(f"release.py: wrote {args.out} ({size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
