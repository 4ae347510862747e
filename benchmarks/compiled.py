# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Batch-1 latency, eager and compiled alike: Linformer against RoBERTa-sdpa, ModernBERT and the two PyPI Linformers.

At batch 1 below long n a forward is too small to keep a GPU busy: every model is launch-bound there, and the
first GPU check measured Linformer 0.7x-0.8x RoBERTa-sdpa at n = 512 and 4,096 (docs/benchmarks.md, "On a GPU").
Practitioners close such gaps with `torch.compile` (on a GPU, `mode="reduce-overhead"`: CUDA graphs over fixed
shapes). Whether that closes this one is a comparison only if every model is compiled the same way, so each model
here gets the same call, `torch.compile(model, mode=--mode, dynamic=False)`, and runs eager and compiled in one
interleaved loop (medians, ratios baseline / Linformer). Each row records how many graphs the compiled model was
cut into and whether a call after the warm-up compiled again: a model that does not compile whole is measured
as it compiles, and the row says so.

The peers (`peers.py`: lucidrains' `linformer`, tatp22's `linformer-pytorch`, skipped with a note where not
installed) are encoder stacks without embeddings: they are fed the same random hidden states, so they lack
the embedding lookup the three transformers models do (a few microseconds of one gather).

    python -m benchmarks.compiled --device cuda --n 512,4096 --k 128,256 --dtype bf16

Compiling takes most of such a run (tens of seconds a model, mostly one CPU thread's Python), so runs of one
machine may compile side by side: --timing-lock FILE holds an exclusive lock on FILE while timing (the warm-up
calls after the first and the interleaved calls), so that each run times its models with the GPU to itself.
    python -m benchmarks.compiled --n 512 --threads 1 --dtype bf16      # CPU: no CUDA graphs there (inductor's C++)
"""

import argparse
import contextlib
import fcntl
import time
from pathlib import Path

import torch
from tqdm import tqdm

from benchmarks import harness, measure, models, peers


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", default="512,4096")
    p.add_argument("--k", default="128,256", help="Linformer projected lengths (layerwise sharing)")
    p.add_argument("--baselines", default="sdpa,modernbert", help="as inference.py's: eager, sdpa, modernbert")
    p.add_argument("--peers", default="linformer,linformer-pytorch",
                   help="PyPI Linformers beside ours (comma-separated; empty: none)")
    p.add_argument("--peer-k", type=int, default=128, help="the peers' projected length (one, to bound compiling)")
    p.add_argument("--timing-lock", default=None, metavar="FILE",
                   help="time only while holding an exclusive lock on FILE (runs compiling side by side)")
    p.add_argument("--backend", default="inductor",
                   help="torch.compile's backend (eager: dynamo alone, the graph breaks without compiling: tests)")
    p.add_argument("--mode", default="reduce-overhead",
                   help="torch.compile's mode for every model (default, reduce-overhead, max-autotune, ...)")
    harness.add_run_args(p, repeats=20, tag_help="output file prefix (default: compiled)")
    p.set_defaults(warmup=3)
    args = p.parse_args(argv)
    ns, ks, baselines = harness.parse_grid(p, args)
    wanted = [name for name in args.peers.split(",") if name]
    if set(wanted) - set(PEERS):
        p.error(f"--peers: each must be one of {', '.join(PEERS)}, got {args.peers!r}")
    if args.repeats < 1 or args.warmup < 1:
        p.error(f"--repeats and --warmup must be >= 1 (the first warm-up compiles), got {args.repeats}, {args.warmup}")
    device, dtype, dims = harness.setup_run(args, p)
    return args, ns, ks, baselines, wanted, device, dtype, dims


# --peers name -> (peers.load_peers' name, the rows' model name)
PEERS = {"linformer": ("lucidrains/linformer", "lucidrains-linformer"),
         "linformer-pytorch": ("tatp22/linformer-pytorch", "tatp22-linformer-pytorch")}


def candidates(n, ks, baselines, wanted, found, args, dims, device):
    """{name: (module, input)} at one n: the transformers models on token ids, the peers on hidden states."""
    ids = models.random_ids(1, n, device, dims=dims)
    out = {}
    for _, model in baselines:
        out[model] = (models.build(dict(model=model, n=n, k=None, dims=dims, dtype=args.dtype), device), ids)
    for k in (k for k in ks if k <= n // 2):
        spec = dict(model="linformer-sdpa", n=n, k=k, dims=dims, dtype=args.dtype)
        out[f"linformer-sdpa-k{k}"] = (models.build(spec, device), ids)
    hidden = torch.randn(1, n, dims["hidden_size"], generator=torch.Generator().manual_seed(0))
    hidden = hidden.to(device, models.DTYPES[args.dtype])
    for package, label in (PEERS[name] for name in wanted if PEERS[name][0] in found):
        for k in (k for k in [args.peer_k] if k <= n // 2):
            module, _ = peers.peer_model(package, found[package], n, k, "model", dims)
            out[f"{label}-k{k}"] = (module.to(device=device, dtype=models.DTYPES[args.dtype]).eval(), hidden)
    return out


def graphs_of(fn):
    """Graphs dynamo compiled while fn() ran (0: nothing new compiled, i.e. no recompile), and the graph breaks it
    met. Both are needed: a model whose code another model already compiled reuses the graphs after its break
    (one new graph, the break still met), as the H200 run's second Linformer did."""
    from torch._dynamo.utils import counters

    before = counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())
    fn()
    return counters["stats"]["unique_graphs"] - before[0], sum(counters["graph_break"].values()) - before[1]


def forward(module, x):
    def call():
        with torch.inference_mode():
            return module(x) if x.is_floating_point() else module(input_ids=x)
    return call


@contextlib.contextmanager
def holding(path):
    """An exclusive lock on `path` (none without one)."""
    if path is None:
        yield
        return
    with Path(path).open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def measure_n(n, cands, args, device, bar):
    """Rows of one n: each model compiled (its first call), then, holding the timing lock, the compiled warm-ups
    (a recompile shows there) and every model eager and compiled timed interleaved."""
    fns, info = {}, {}
    for name, (module, x) in cands.items():
        fns[f"{name}|eager"] = forward(module, x)
        options = dict(mode=args.mode) if args.backend == "inductor" else {}  # modes are inductor's
        fns[f"{name}|compiled"] = forward(torch.compile(module, backend=args.backend, dynamic=False, **options), x)
        start = time.perf_counter()
        graphs, breaks = graphs_of(fns[f"{name}|compiled"])  # the first call compiles
        measure.sync(device)
        info[name] = dict(compile_s=time.perf_counter() - start, graphs=graphs, graph_breaks=breaks)
        bar.update(1)
    with holding(args.timing_lock):
        for name in cands:
            calls = max(args.warmup - 1, 1)  # at least one call after the first: does it compile again?
            info[name]["recompiled"] = sum(graphs_of(fns[f"{name}|compiled"])[0] for _ in range(calls)) > 0
        times = measure.time_interleaved(fns, device, 1, args.repeats)
    rows = []
    for name, (_, x) in cands.items():
        kind, _, k = name.rpartition("-k") if "-k" in name else (name, "", "")
        eager, compiled = (measure.stats(times[f"{name}|{how}"]) for how in ("eager", "compiled"))
        rows.append(dict(n=n, model=kind, k=int(k) if k else None, dtype=args.dtype, mode=args.mode,
                         input="hidden states" if x.is_floating_point() else "token ids",
                         eager_s=eager["median"], eager_q1=eager["q1"], eager_q3=eager["q3"],
                         compiled_s=compiled["median"], compiled_q1=compiled["q1"], compiled_q3=compiled["q3"],
                         compiled_speedup=eager["median"] / compiled["median"], **info[name],
                         samples_eager=times[f"{name}|eager"], samples_compiled=times[f"{name}|compiled"]))
    base = next((r for r in rows if r["model"] == "roberta-sdpa"), None)
    for r in rows:
        if base and r["k"]:
            r["saved_vs_sdpa_eager"] = base["eager_s"] / r["eager_s"]
            r["saved_vs_sdpa_compiled"] = base["compiled_s"] / r["compiled_s"]
    return rows


def render(args, command, info, rows):
    how = f"mode={args.mode!r}" if args.backend == "inductor" else f"backend={args.backend!r}"
    md = [f"# Batch 1, eager and `torch.compile({how}, dynamic=False)`, {args.dtype}", "",
          f"Command: `{command}`", "",
          f"Machine: {info.get('gpu') or info.get('cpu')}, {info['threads']} threads, torch {info['torch']}. Median of "
          f"{args.repeats} interleaved calls of every model eager and compiled, after {args.warmup} compiled warm-up "
          "calls (the first compiles). Speed-up vs RoBERTa-sdpa: its time / Linformer's, eager against eager and "
          "compiled against compiled. Graphs: what dynamo cut the model into (1: whole); breaks: the graph breaks "
          "it met compiling; recompiled: a warm-up call after the first compiled again. Peers run on hidden states "
          "(no embeddings).", "",
          "| n | model | k | eager | compiled | compiled speed-up | vs RoBERTa-sdpa: eager / compiled | graphs | "
          "breaks | recompiled | compile s |", "|---" * 11 + "|"]
    for r in rows:
        vs = (f"{harness.fmt_ratio(r['saved_vs_sdpa_eager'])} / {harness.fmt_ratio(r['saved_vs_sdpa_compiled'])}"
              if "saved_vs_sdpa_eager" in r else "-")
        md.append(f"| {r['n']} | {r['model']} | {r['k'] or '-'} | {r['eager_s'] * 1e3:.2f} ms | "
                  f"{r['compiled_s'] * 1e3:.2f} ms | {r['compiled_speedup']:.2f}x | {vs} | {r['graphs']} | "
                  f"{r['graph_breaks']} | {'yes' if r['recompiled'] else 'no'} | {r['compile_s']:.0f} |")
    return "\n".join(md) + "\n"


def main(argv=None):
    args, ns, ks, baselines, wanted, device, dtype, dims = parse_args(argv)
    found = peers.load_peers()
    rows = []
    with tqdm(desc="compiling", unit="model") as bar:
        for n in ns:
            torch._dynamo.reset()  # a fresh cache per n: one n's graphs never count against another's limit
            rows += measure_n(n, candidates(n, ks, baselines, wanted, found, args, dims, device), args, device, bar)
    command = harness.command_line("benchmarks.compiled", argv)
    info = harness.machine_info(device)
    md = render(args, command, info, rows)
    print("\n" + md)
    out, tag = Path(args.out), args.tag or "compiled"
    harness.save_csv(out / f"{tag}.csv", [{k: v for k, v in r.items() if not k.startswith("samples")} for r in rows])
    harness.save_json(out / f"{tag}.json", dict(args=vars(args), command=command, machine=info, dims=dims,
                                                peers=sorted(found), rows=rows))
    (out / f"{tag}.md").write_text(md)
    print(f"wrote {out / tag}.{{csv,json,md}}")


if __name__ == "__main__":
    main()
