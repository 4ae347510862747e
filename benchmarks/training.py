"""Training step: Linformer vs a RoBERTa of identical size, tokens/s and peak memory.

One step = masked-LM forward (15% of positions labelled) + backward + AdamW update, batch of random
tokens, dropout off. The models run interleaved in one process, after warm-up steps, and the median
step is reported with its spread. Peak memory is measured per configuration in a fresh process
(CPU: peak RSS; CUDA: max_memory_allocated) over one step taken after a first step created the
gradients and optimizer state, so it is the activation memory a step adds on top of the resident
weights, gradients and Adam moments (reported too).

    python benchmarks/training.py --quick       # n=512: a couple of minutes on 2 CPU cores
    python benchmarks/training.py --n 512,1024,2048 --k 256
"""

import argparse
import gc
import os

import torch
from tqdm import tqdm

import common as C

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--n", default="512,1024,2048")
p.add_argument("--k", default="256", help="Linformer projected lengths (layerwise sharing)")
p.add_argument("--batch", type=int, default=1)
p.add_argument("--baselines", default="eager,sdpa")
p.add_argument("--linformer-attn", default="sdpa", choices=["eager", "sdpa"])
C.add_run_args(p, repeats=3)
p.add_argument("--no-memory", action="store_true")
p.add_argument("--quick", action="store_true", help="n=512 only")
args = p.parse_args()

if args.quick:
    args.n = "512"
ns, ks = C.int_list(args.n), C.int_list(args.k)
baselines = [b for b in args.baselines.split(",") if b]
if any(b not in ("eager", "sdpa") for b in baselines):
    p.error(f"--baselines: each must be eager or sdpa, got {args.baselines!r}")
device, _, dims = C.setup_run(args, p)
tag = args.tag or ("training_quick" if args.quick else "training")
D, V = dims["hidden_size"], C.VOCAB


def train_flops(spec):
    """~3x the forward matmul FLOPs (forward, and two matmuls per matmul in backward), MLM head included."""
    n, b = spec["n"], args.batch
    fwd = C.flops_roberta(n, dims, b) if spec["model"].startswith("roberta") else C.flops_linformer(n, spec["k"], dims, b)
    head = 2 * b * n * D * (D + V)
    return 3 * (fwd + head)


rows = []
for n in ns:
    specs = [dict(model=f"roberta-{b}", n=n, k=None) for b in baselines]
    specs += [dict(model=f"linformer-{args.linformer_attn}", n=n, k=k) for k in ks if k <= n]
    ids = C.random_ids(args.batch, n, device)
    fns = {}
    for s in specs:
        s.update(dims=dims, dtype=args.dtype, head="mlm")
        s["name"] = f"{s['model']}-k{s['k']}" if s["k"] else s["model"]
        fns[s["name"]] = C.training_step(C.build(s, device), ids)
    with tqdm(total=len(fns) * (args.warmup + args.repeats), desc=f"training steps n={n}") as bar:
        times = C.time_interleaved(fns, device, args.warmup, args.repeats, progress=bar)
    del fns
    gc.collect()
    for s in specs:
        st = C.stats(times[s["name"]])
        row = dict(n=n, model=s["model"], k=s["k"], batch=args.batch, step_s=st["median"], step_q1=st["q1"],
                   step_q3=st["q3"], tokens_per_s=args.batch * n / st["median"], approx_tflops=train_flops(s) / 1e12,
                   gflop_per_s=train_flops(s) / st["median"] / 1e9, samples=times[s["name"]])
        if not args.no_memory:
            m = C.probe_memory(dict(s, mode="train", batch=args.batch, device=device.type,
                                    threads=torch.get_num_threads()))
            row.update(step_peak_bytes=m["peak_bytes"], resident_bytes=m["resident_bytes"])
        rows.append(row)

for r in rows:
    if r["k"] is None:
        continue
    for b in baselines:
        base = next((x for x in rows if x["n"] == r["n"] and x["model"] == f"roberta-{b}"), None)
        if base:
            r[f"speedup_vs_{b}"] = base["step_s"] / r["step_s"]
            if "step_peak_bytes" in r:
                r[f"mem_saved_vs_{b}"] = base["step_peak_bytes"] / r["step_peak_bytes"]

info = C.machine_info(device)
md = [f"# Training step (MLM, AdamW): Linformer vs RoBERTa, {dims['num_hidden_layers']} layers, hidden "
      f"{dims['hidden_size']}, batch {args.batch}, {args.dtype}", "",
      f"Machine: {info.get('gpu') or info.get('cpu')}, {info['threads']} threads, torch {info['torch']}. Median of "
      f"{args.repeats} interleaved steps after {args.warmup} warm-up. Peak = memory one step adds on top of "
      "weights + gradients + Adam state (resident).", "",
      "| n | model | k | step (median) | IQR | tokens/s | ~GFLOP/s | speed-up vs " + " / ".join(baselines)
      + " | step peak | resident | memory saved vs " + " / ".join(baselines) + " |",
      "|---" * 10 + "|"]
for r in rows:
    sp = " / ".join(C.fmt_ratio(r.get(f"speedup_vs_{b}")) for b in baselines) if r["k"] else "-"
    ms = " / ".join(C.fmt_ratio(r.get(f"mem_saved_vs_{b}")) for b in baselines) if r["k"] else "-"
    peak = C.fmt_bytes(r["step_peak_bytes"]) if "step_peak_bytes" in r else "-"
    res = C.fmt_bytes(r["resident_bytes"]) if "resident_bytes" in r else "-"
    md.append(f"| {r['n']} | {r['model']} | {r['k'] or '-'} | {r['step_s']:.2f} s | {r['step_q1']:.2f}-{r['step_q3']:.2f} s "
              f"| {r['tokens_per_s']:.0f} | {r['gflop_per_s']:.0f} | {sp} | {peak} | {res} | {ms} |")
md = "\n".join(md) + "\n"
print("\n" + md)
base_path = os.path.join(args.out, tag)
C.save_csv(base_path + ".csv", [{k: v for k, v in r.items() if k != "samples"} for r in rows])
C.save_json(base_path + ".json", dict(args=vars(args), machine=info, dims=dims, rows=rows))
with open(base_path + ".md", "w") as f:
    f.write(md)
print(f"wrote {base_path}.{{csv,json,md}}")
