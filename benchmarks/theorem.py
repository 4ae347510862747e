# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Theorems 1-2 of the paper, numerically: random projections of real attention inputs as k grows.

On real text, the queries, keys and values of every layer and head of a pretrained encoder (default:
MiniLM, the `minilm` extra) give the exact head output Y = P V, P = softmax(Q K^T / sqrt(d)).
For R (k x n) with i.i.d. N(0, 1/k) entries, as in the proofs, it compares with Y:

- thm1:      P R^T R V                                  (Theorem 1: P is close to the rank-k P R^T R, by JL)
- linformer: softmax(Q (R K)^T / sqrt(d)) (R V)          (Linformer with random Gaussian E = F = R)
- thm2:      softmax(delta Q K^T R^T / sqrt(d)) (e^-delta R V)   (Theorem 2's construction E = delta R, F = e^-delta R)
- svd:       P_k V, P_k the best rank-k approximation of P (Eckart-Young; a lower reference, k < n)

Error: ||Yhat - Y||_F / ||Y||_F per head, mean over layers, heads, windows and seeds (spread: std).
The JL argument predicts that the thm1 error falls like 1/sqrt(k).

    python -m benchmarks.theorem
    python -m benchmarks.theorem --k 16,64,256,1024 --samples 4 --seeds 5
"""

import argparse
import math
from pathlib import Path

import torch
from tqdm import tqdm

from benchmarks import harness
from benchmarks.spectrum import load_model, read_texts, windows

METHODS = ("thm1", "linformer", "thm2", "svd")


def head_inputs(model, ids):
    """[(Q, K, V)] per layer, each (heads, n, d), from the layer inputs of a BERT/RoBERTa-like encoder."""
    hidden = model(input_ids=ids, output_hidden_states=True).hidden_states
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    if layers is None or not hasattr(layers[0].attention, "self"):
        raise SystemExit("theorem.py reads query/key/value maps of BERT/RoBERTa-style layers "
                         "(model.encoder.layer[i].attention.self); this model has none")
    out = []
    heads = model.config.num_attention_heads
    for layer, layer_input in zip(layers, hidden[:-1], strict=True):  # hidden[-1]: the last layer's output
        sa, x = layer.attention.self, layer_input[0]
        out.append([m(x).unflatten(-1, (heads, -1)).transpose(0, 1) for m in (sa.query, sa.key, sa.value)])
    return out


def exact(Q, K, V):
    """What every estimate is compared with, computed once per layer: A, P, Y = P V and the SVD of P."""
    A = Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    P = A.softmax(-1)
    return dict(Q=Q, K=K, V=V, A=A, P=P, Y=P @ V, svd=torch.linalg.svd(P))


def errors(x, k, seed, delta):
    """Relative error of each method for one layer (all heads at once): {method: (heads,)}."""
    Q, K, V, A, P, Y = (x[key] for key in "QKVAPY")
    n, d = K.shape[-2], K.shape[-1]
    R = torch.randn(k, n, generator=torch.Generator().manual_seed(seed)) / math.sqrt(k)
    est = {"thm1": P @ R.T @ (R @ V),
           "linformer": (Q @ (R @ K).transpose(-1, -2) / math.sqrt(d)).softmax(-1) @ (R @ V),
           "thm2": (delta * A @ R.T).softmax(-1) @ (math.exp(-delta) * (R @ V))}
    if k < n and seed % 10 == 0:  # deterministic: once per k
        U, S, Vh = x["svd"]
        est["svd"] = (U[..., :k] * S[..., None, :k]) @ (Vh[..., :k, :] @ V)
    return {m: ((e - Y).norm(dim=(-2, -1)) / Y.norm(dim=(-2, -1))) for m, e in est.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="minilm", help="'minilm' or a local BERT/RoBERTa-style checkpoint folder")
    p.add_argument("--tokenizer", default=None)
    p.add_argument("--text", default="moby_dick",
                   help="moby_dick (bundled), news (developer checkouts: ../shared/data/news) or a .txt/.jsonl(.gz) "
                        "file")
    p.add_argument("--n", type=int, default=512)
    p.add_argument("--k", default="16,32,64,128,256,512,1024,2048")
    p.add_argument("--samples", type=int, default=2, help="windows of text")
    p.add_argument("--seeds", type=int, default=3, help="random R per k")
    p.add_argument("--delta", type=float, default=0.1, help="Theorem 2's small constant")
    p.add_argument("--out", default=harness.OUTPUT, help=harness.OUT_HELP)
    p.add_argument("--tag", default="theorem")
    p.add_argument("--no-plots", action="store_true")
    args = p.parse_args()
    ks = harness.int_list(args.k)
    if args.samples < 1 or args.seeds < 1 or args.delta <= 0:
        p.error("--samples and --seeds must be >= 1, --delta > 0")

    texts = read_texts(args.text)
    model, tok, longest = load_model(args.model, args.tokenizer)
    n = min(args.n, longest)
    ids = windows(tok, texts, n, args.samples)
    acc = {m: {k: [] for k in ks} for m in METHODS}
    with torch.inference_mode():
        with tqdm(total=len(ids) * len(ks) * args.seeds, desc="projections") as bar:
            for w in range(len(ids)):
                layers = [exact(Q, K, V) for Q, K, V in head_inputs(model, ids[w:w + 1])]
                for k in ks:
                    for s in range(args.seeds):
                        for x in layers:
                            for m, e in errors(x, k, seed=100000 * w + 10 * k + s, delta=args.delta).items():
                                acc[m][k] += e.tolist()
                        bar.update(1)

    summary = {m: {k: dict(mean=sum(v) / len(v), std=torch.tensor(v).std().item() if len(v) > 1 else 0.0)
                   for k, v in acc[m].items() if v} for m in METHODS}
    md = [f"# Random projections of real attention ({args.model}, {args.text}, n={n}, {len(ids)} windows, "
          f"{args.seeds} seeds)", "", "Relative error ||Yhat - Y||_F / ||Y||_F of the head output, mean (std) over "
          "layers, heads, windows, seeds.", "",
          "| k | " + " | ".join(METHODS) + " |", "|---" * (len(METHODS) + 1) + "|"]
    for k in ks:
        cells = [f"{summary[m][k]['mean']:.3f} ({summary[m][k]['std']:.3f})" if k in summary[m] else "-"
                 for m in METHODS]
        md.append(f"| {k} | " + " | ".join(cells) + " |")
    md = "\n".join(md) + "\n"
    print("\n" + md)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    harness.save_json(out / f"{args.tag}.json", dict(args=vars(args), n=n, summary=summary))
    (out / f"{args.tag}.md").write_text(md)
    if args.no_plots:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    labels = {"thm1": "Thm 1: $P R^T R V$", "linformer": "random $E=F=R$: softmax$(Q(RK)^T)RV$",
              "thm2": f"Thm 2: $E=\\delta R, F=e^{{-\\delta}}R$, $\\delta$={args.delta}", "svd": "best rank-k $P_k V$"}
    for m in METHODS:
        xs = sorted(summary[m])
        if xs:
            ax.errorbar(xs, [summary[m][k]["mean"] for k in xs], yerr=[summary[m][k]["std"] for k in xs],
                        marker="o", capsize=3, label=labels[m])
    ref = summary["thm1"][ks[0]]["mean"] * math.sqrt(ks[0])
    ax.plot(ks, [ref / math.sqrt(k) for k in ks], "k:", label="$\\propto 1/\\sqrt{k}$")
    ax.axvline(n, color="gray", lw=0.8)
    ax.set(xscale="log", yscale="log", xlabel="projected dimension k", ylabel="relative error of head output",
           title=f"Random projections of real attention, n={n}")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / f"{args.tag}.png", dpi=110)
    print(f"wrote {out / args.tag}.json, {out / args.tag}.md and {out / args.tag}.png")


if __name__ == "__main__":
    main()
