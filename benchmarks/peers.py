# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Our Linformer against the other PyPI implementations, same configuration, same method.

Peers (optional extra `peers`, skipped with a note when not installed):
- `linformer` (lucidrains): LinformerSelfAttention / Linformer(dim, seq_len, depth, k, heads), separate E and F
  per layer (its share_kv=True would also make values equal keys: a different model, half the V work);
- `linformer-pytorch` (tatp22): MHAttention / Linformer(input_size, channels, dim_k, dim_ff, nhead, depth,
  parameter_sharing="layerwise").
Ours: one attention block (LinformerAttention: self-attention + output map + residual LayerNorm) with
the model's layerwise E, and the encoder stack (LinformerEncoder) on the same hidden states.

Every implementation gets the same random (batch, n, hidden) input, 12 heads, FFN 4x hidden, k, dropout
off, eval mode, torch.inference_mode; they are timed interleaved after warm-up (median and IQR). FLOPs are
the matmul FLOPs each one actually executes, counted by torch's FlopCounterMode (eager attention for
ours, since the counter does not see CPU sdpa), so GFLOP/s compares how well each uses the machine and
the FLOP column shows how much work each design does.

    python -m benchmarks.peers --quick
    python -m benchmarks.peers --n 512,2048,4096 --k 256
"""

import argparse
from functools import partial
from pathlib import Path

import torch
from tqdm import tqdm

from benchmarks import flop_counts, harness, measure, models


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", default="512,2048,4096")
    p.add_argument("--k", default="256")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--level", default="layer,model", help="layer, model or both (comma-separated)")
    harness.add_run_args(p, repeats=5)
    p.add_argument("--quick", action="store_true", help="n=512,2048, 3 repeats")
    args = p.parse_args(argv)
    if args.quick:
        args.n, args.repeats = "512,2048", 3
    try:
        ns, ks = harness.int_list(args.n), harness.int_list(args.k)
    except ValueError as e:
        p.error(str(e))
    levels = [v for v in args.level.split(",") if v]
    if not levels or any(v not in ("layer", "model") for v in levels):
        p.error(f"--level must be layer, model or layer,model; got {args.level!r}")
    device, dtype, dims = harness.setup_run(args, p)
    return args, ns, ks, levels, device, dtype, dims


def load_peers():
    """{name: module} of the peer packages that are installed (a note for each one that is not)."""
    peers = {}
    try:
        import linformer as lucidrains
        peers["lucidrains/linformer"] = lucidrains
    except ImportError:
        print("note: `linformer` (lucidrains) is not installed: pip install linformer")
    try:
        import linformer_pytorch as tatp22
        peers["tatp22/linformer-pytorch"] = tatp22
    except ImportError:
        print("note: `linformer-pytorch` is not installed: pip install linformer-pytorch")
    return peers


def candidates(n, k, level, peers, dims, dtype, device):
    """{name: (module, call)} for one configuration; every module in eval mode on the device."""
    out = {}
    for attn in ("sdpa", "eager"):
        ours = models.build_linformer(n, k, dims, attn, dtype, device)
        E, F = ours.encoder.projections.for_layer(0)
        if level == "layer":
            block = ours.encoder.layer[0].attention
            out[f"ours ({attn})"] = (ours, lambda x, b=block, E=E, F=F: b(x, None, None, E, F))
        else:
            out[f"ours ({attn})"] = (ours, lambda x, m=ours: m.encoder(x).last_hidden_state)
    torch.manual_seed(0)
    for name, package in peers.items():
        out[name] = peer_model(name, package, n, k, level, dims)
    return {name: (mod.to(device=device, dtype=dtype).eval(), call) for name, (mod, call) in out.items()}


def peer_model(name, package, n, k, level, dims):
    """(module, call) of one peer package at our size: its attention layer, or its encoder stack (`level`)."""
    D, H, L = dims["hidden_size"], dims["num_attention_heads"], dims["num_hidden_layers"]
    if name == "lucidrains/linformer":
        if level == "layer":
            m = package.LinformerSelfAttention(D, n, k=k, heads=H, share_kv=False)
        else:
            m = package.Linformer(D, n, L, k=k, heads=H, share_kv=False)
    elif level == "layer":
        E = package.get_EF(n, k, "learnable", D // H)
        m = package.MHAttention(n, D // H, D, k, H, 0.0, "C0", "layerwise", E, E, False, None)
    else:
        m = package.Linformer(n, D, k, dim_ff=dims["intermediate_size"], nhead=H, depth=L, dropout=0.0, dropout_ff=0.0,
                              parameter_sharing="layerwise")
    return m, m


def measure_one(cands, x, args, device, label):
    """Matmul FLOPs (torch's count) and interleaved times of every candidate on the input x."""
    flops = {}
    for name, (mod, call) in cands.items():
        if name == "ours (sdpa)":
            continue
        with torch.inference_mode(False), torch.no_grad():
            flops[name] = flop_counts.count_matmul_flops(partial(call, x), mod)
    flops["ours (sdpa)"] = flops["ours (eager)"]
    fns = {}
    for name, (_, call) in cands.items():
        def fn(call=call):
            with torch.inference_mode():
                return call(x)
        fns[name] = fn
    with tqdm(total=len(fns) * (args.warmup + args.repeats), desc=label) as bar:
        times = measure.time_interleaved(fns, device, args.warmup, args.repeats, progress=bar)
    return flops, times


def main(argv=None):
    args, ns, ks, levels, device, dtype, dims = parse_args(argv)
    D, H, L = dims["hidden_size"], dims["num_attention_heads"], dims["num_hidden_layers"]
    tag = args.tag or ("peers_quick" if args.quick else "peers")
    peers = load_peers()
    rows = []
    for level in levels:
        for n in ns:
            for k in [k for k in ks if k <= n]:
                x = torch.randn(args.batch, n, D, generator=torch.Generator().manual_seed(0)).to(device, dtype)
                cands = candidates(n, k, level, peers, dims, dtype, device)
                flops, times = measure_one(cands, x, args, device, f"{level} n={n} k={k}")
                ref = measure.stats(times["ours (sdpa)"])["median"]
                for name in cands:
                    st = measure.stats(times[name])
                    rows.append(dict(level=level, n=n, k=k, batch=args.batch, impl=name, time_s=st["median"],
                                     time_q1=st["q1"], time_q3=st["q3"], gflops=flops[name] / 1e9,
                                     gflop_per_s=flops[name] / st["median"] / 1e9, slower_than_ours=st["median"] / ref,
                                     samples=times[name]))
                del cands

    info = harness.machine_info(device)
    md = [f"# Peers: attention layer and {L}-layer encoder, hidden {D}, {H} heads, FFN {dims['intermediate_size']}, "
          f"batch {args.batch}, {args.dtype}", "",
          f"Machine: {info.get('gpu') or info.get('cpu')}, {info['threads']} threads, torch {info['torch']}. Median of "
          f"{args.repeats} interleaved runs after {args.warmup} warm-up. 'x ours' = time / time of ours (sdpa). GFLOP: "
          "matmul FLOPs executed (torch FlopCounterMode).", "",
          "| level | n | k | implementation | time (median) | IQR | x ours | GFLOP | GFLOP/s |", "|---" * 9 + "|"]
    for r in rows:
        md.append(f"| {r['level']} | {r['n']} | {r['k']} | {r['impl']} | {r['time_s'] * 1e3:.1f} ms | "
                  f"{r['time_q1'] * 1e3:.1f}-{r['time_q3'] * 1e3:.1f} ms | {r['slower_than_ours']:.2f} | "
                  f"{r['gflops']:.1f} | {r['gflop_per_s']:.0f} |")
    md = "\n".join(md) + "\n"
    print("\n" + md)
    out = Path(args.out)
    harness.save_csv(out / f"{tag}.csv", [{k: v for k, v in r.items() if k != "samples"} for r in rows])
    harness.save_json(out / f"{tag}.json", dict(args=vars(args), command=harness.command_line("benchmarks.peers", argv),
                                                machine=info, dims=dims, peers=list(peers), rows=rows))
    (out / f"{tag}.md").write_text(md)
    print(f"wrote {out / tag}.{{csv,json,md}}")


if __name__ == "__main__":
    main()
