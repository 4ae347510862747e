"""Training step: Linformer vs a RoBERTa of identical size, tokens/s and peak memory.

One step = one train_mlm.py update: masked-LM forward (15% of positions labelled) + backward + gradient
clipping at 1.0 + AdamW, batch of random tokens, dropout off. --dtype bfloat16 / float16 is train_mlm.py's
--mixed_precision: weights stay float32 and the forward runs under autocast (float16 with a GradScaler),
as Accelerate does it. The models run interleaved in one process, after warm-up steps, and the median
step is reported with its spread. Peak memory is measured per configuration in a fresh process
(CPU: peak RSS; CUDA: max_memory_allocated) over one step taken after a first step created the
gradients and optimizer state, so it is the activation memory a step adds on top of the resident
weights, gradients and Adam moments (reported too).

    python -m benchmarks.training --quick       # n=512: a couple of minutes on 2 CPU cores
    python -m benchmarks.training --n 512,1024,2048 --k 256
    python -m benchmarks.training --pairs 512:128,4096:256 --baselines sdpa --dtype bf16

On CUDA a model that runs out of memory at some n is listed as skipped and the others go on, so a
long --n list finds the largest n that trains.
"""

import argparse
import gc
import os

import torch
from tqdm import tqdm

from benchmarks import flop_counts, harness, measure, models

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--n", default="512,1024,2048")
p.add_argument("--k", default="256", help="Linformer projected lengths (layerwise sharing), each run at every n >= k")
p.add_argument("--pairs", default=None, metavar="N:K,...",
               help="(n, k) pairs instead of the --n x --k grid, e.g. 512:128,4096:256")
p.add_argument("--batch", type=int, default=1)
p.add_argument("--baselines", default="eager,sdpa",
               help="eager,sdpa: RoBERTa's attention kernels; modernbert: ModernBERT, transformers' default attention")
p.add_argument("--linformer-attn", default="sdpa", choices=["eager", "sdpa"])
harness.add_run_args(p, repeats=3)
p.add_argument("--no-memory", action="store_true")
p.add_argument("--quick", action="store_true", help="n=512 only")
args = p.parse_args()

if args.quick:
    args.n = "512"
try:
    if args.pairs:
        pairs = [tuple(harness.int_list(pair.replace(":", ","))) for pair in args.pairs.split(",") if pair.strip()]
        if not pairs or any(len(pair) != 2 for pair in pairs):
            raise ValueError(f"--pairs: expected N:K,N:K,..., got {args.pairs!r}")
    else:
        pairs = [(n, k) for n in harness.int_list(args.n) for k in harness.int_list(args.k) if k <= n]
except ValueError as e:
    p.error(str(e))
grid = {}  # n -> the Linformer k's that run at it
for n, k in pairs:
    grid.setdefault(n, []).append(k)
device, _, dims = harness.setup_run(args, p)
try:
    baselines = models.baseline_models(args.baselines)
except ValueError as e:
    p.error(str(e))
# weights stay float32 (Accelerate's fp32 master weights); the lower precision is autocast's
amp = None if args.dtype == "float32" else args.dtype
tag = args.tag or ("training_quick" if args.quick else "training")
D, V = dims["hidden_size"], models.VOCAB


def train_flops(spec):
    """~3x the forward matmul FLOPs (forward, and two matmuls per matmul in backward), MLM head included;
    None where the forward is not counted."""
    fwd = flop_counts.forward_flops(spec["model"], spec["n"], spec["k"], dims, args.batch)
    head = 2 * args.batch * spec["n"] * D * (D + V)
    return None if fwd is None else 3 * (fwd + head)


def fits(spec, step):
    """On CUDA, whether one step runs without running out of memory (it is not timed); on CPU the kernel
    would kill the process instead, so there --n must stay within the machine."""
    if device.type != "cuda":
        return True
    try:
        step()
        measure.sync(device)
        return True
    except torch.OutOfMemoryError:
        return False


rows, skipped = [], []
for n, n_ks in grid.items():
    specs = [dict(model=m, n=n, k=None) for _, m in baselines]
    specs += [dict(model=f"linformer-{args.linformer_attn}", n=n, k=k) for k in n_ks]
    ids = models.random_ids(args.batch, n, device)
    fns = {}
    for s in specs:
        s.update(dims=dims, dtype="float32", amp=amp, head="mlm")
        s["name"] = f"{s['model']}-k{s['k']}" if s["k"] else s["model"]
        try:
            step = models.training_step(models.build(s, device), ids, amp=amp)
            ok = fits(s, step)
        except torch.OutOfMemoryError:
            ok = False
        if ok:
            fns[s["name"]] = step
        else:
            step = None
            gc.collect()
            torch.cuda.empty_cache()
            skipped.append(dict(n=n, model=s["model"], k=s["k"], reason="out of memory at batch " + str(args.batch)))
            print(f"skip n={n} {s['model']} k={s['k']}: out of memory")
    specs = [s for s in specs if s["name"] in fns]
    if not fns:
        continue
    with tqdm(total=len(fns) * (args.warmup + args.repeats), desc=f"training steps n={n}") as bar:
        times = measure.time_interleaved(fns, device, args.warmup, args.repeats, progress=bar)
    del fns, step
    gc.collect()
    for s in specs:
        st = measure.stats(times[s["name"]])
        flops = train_flops(s)
        row = dict(n=n, model=s["model"], k=s["k"], batch=args.batch, dtype=args.dtype, step_s=st["median"],
                   step_q1=st["q1"], step_q3=st["q3"], tokens_per_s=args.batch * n / st["median"],
                   approx_tflops=flops and flops / 1e12, gflop_per_s=flops and flops / st["median"] / 1e9,
                   samples=times[s["name"]])
        if not args.no_memory:
            m = measure.probe_memory(dict(s, mode="train", batch=args.batch, device=device.type,
                                    threads=torch.get_num_threads()))
            row.update(step_peak_bytes=m["peak_bytes"], resident_bytes=m["resident_bytes"])
        rows.append(row)

for r in rows:
    if r["k"] is None:
        continue
    for b, model in baselines:
        base = next((x for x in rows if x["n"] == r["n"] and x["model"] == model), None)
        if base:
            r[f"speedup_vs_{b}"] = base["step_s"] / r["step_s"]
            if "step_peak_bytes" in r:
                r[f"mem_saved_vs_{b}"] = base["step_peak_bytes"] / r["step_peak_bytes"]

info = harness.machine_info(device)
labels = [b for b, _ in baselines]
precision = f"autocast {args.dtype}, fp32 weights" if amp else "float32"
md = [f"# Training step (MLM, AdamW): Linformer vs {', '.join(m for _, m in baselines)}, {dims['num_hidden_layers']} "
      f"layers, hidden {dims['hidden_size']}, batch {args.batch}, {precision}", "",
      f"Machine: {info.get('gpu') or info.get('cpu')}, {info['threads']} threads, torch {info['torch']}. Median of "
      f"{args.repeats} interleaved steps after {args.warmup} warm-up. One step = one train_mlm.py update (clip "
      "1.0, AdamW). Peak = memory one step adds on top of weights + gradients + Adam state (resident).", "",
      "| n | model | k | step (median) | IQR | tokens/s | ~GFLOP/s | speed-up vs " + " / ".join(labels)
      + " | step peak | resident | memory saved vs " + " / ".join(labels) + " |",
      "|---" * 10 + "|"]
for r in rows:
    sp = " / ".join(harness.fmt_ratio(r.get(f"speedup_vs_{b}")) for b in labels) if r["k"] else "-"
    ms = " / ".join(harness.fmt_ratio(r.get(f"mem_saved_vs_{b}")) for b in labels) if r["k"] else "-"
    peak = harness.fmt_bytes(r["step_peak_bytes"]) if "step_peak_bytes" in r else "-"
    res = harness.fmt_bytes(r["resident_bytes"]) if "resident_bytes" in r else "-"
    rate = "n/a" if r["gflop_per_s"] is None else f"{r['gflop_per_s']:.0f}"
    md.append(f"| {r['n']} | {r['model']} | {r['k'] or '-'} | {r['step_s']:.2f} s | {r['step_q1']:.2f}-{r['step_q3']:.2f} s "
              f"| {r['tokens_per_s']:.0f} | {rate} | {sp} | {peak} | {res} | {ms} |")
if skipped:
    md += ["", "**Skipped**", ""] + [f"- n={s['n']} {s['model']} k={s['k']}: {s['reason']}" for s in skipped]
md = "\n".join(md) + "\n"
print("\n" + md)
base_path = os.path.join(args.out, tag)
harness.save_csv(base_path + ".csv", [{k: v for k, v in r.items() if k != "samples"} for r in rows])
harness.save_json(base_path + ".json", dict(args=vars(args), machine=info, dims=dims, rows=rows, skipped=skipped))
with open(base_path + ".md", "w") as f:
    f.write(md)
print(f"wrote {base_path}.{{csv,json,md}}")
