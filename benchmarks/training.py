# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Training step: Linformer vs a RoBERTa of identical size, tokens/s and peak memory.

One step = one train_mlm.py update: masked-LM forward (15% of positions labelled) + backward + gradient
clipping at 1.0 + AdamW, batch of random tokens, dropout off. --dtype bfloat16 / float16 is train_mlm.py's
--mixed_precision: weights stay float32 and the forward runs under autocast (float16 with a GradScaler),
as Accelerate does it. The models run interleaved in one process, after warm-up steps, and the median
step is reported with its spread. Peak memory is measured per configuration in a fresh process
(CPU: peak RSS; CUDA: max_memory_allocated) over one step taken after a first step created the
gradients and optimizer state, so it is the activation memory a step adds on top of the resident
weights, gradients and Adam moments (reported too, and their sum: the process peak).

    python -m benchmarks.training --quick       # n=512: a couple of minutes on 2 CPU cores
    python -m benchmarks.training --n 512,1024,2048 --k 256
    python -m benchmarks.training --pairs 512:128,4096:256 --baselines sdpa --dtype bf16

Long inputs: --checkpointing (activation checkpointing, every layer), --chunk-ff (chunked feed-forward,
RoBERTa and Linformer; ModernBERT has none), --sparse-head (vocabulary logits at the labelled positions
only). --mem-limit and --max-step-s bound each model: the fresh process that measures its memory (run
before any timing) stops as soon as its resident set passes the limit or a step passes the cap, and the
model is listed as "did not fit" or "past the cap" at that n and not tried at larger n; a step whose
FLOPs at the machine's matmul peak would already pass the cap is not started ("est."). --repeats 0 takes
each step's time from that process (its second step, alone) instead of timing again, interleaved: for
steps of minutes.

    python -m benchmarks.training --n 512,32768,65536 --k 256 --baselines sdpa,modernbert --checkpointing \\
        --chunk-ff 512 --sparse-head --mem-limit 24 --max-step-s 1800 --repeats 0 --threads 1 --dtype bf16

On CUDA a model that runs out of memory at some n is listed as skipped and the others go on, so a
long --n list finds the largest n that trains.

At batches a real run uses (the GPU comparison of issue 67): --tokens-per-update T gives each model at each n the
batch T // n, halved on CUDA until one step fits (each model its own largest, recorded per row), and each row's
model FLOP utilisation: 3 x (encoder forward + MLM head) matmul FLOPs (flop_counts; activation checkpointing's
recomputed forward not counted, as MFU is usually stated) per second, over the bf16/fp16/fp32 rate of a large
square matmul timed in the same run (measure.probe_size). On CUDA a step's peak memory is read in the timing
process (max_memory_allocated), as inference.py does: fresh processes would cost a GPU loan seconds each.
--profile runs two more steps of each model under torch.profiler and keeps where its time went (the top
operators by self time), which is what a missed goal is read against, and the sdpa kernel it ran.

    python -m benchmarks.training --device cuda --n 512,4096,16384 --k 128,256 --baselines sdpa,modernbert \
        --dtype bf16 --tokens-per-update 65536 --profile
"""

import argparse
import gc
from pathlib import Path

import torch
from tqdm import tqdm

from benchmarks import flop_counts, harness, measure, models

MASK_PROB = 0.15  # models.training_step's share of labelled positions


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", default="512,1024,2048")
    p.add_argument("--k", default="256",
                   help="Linformer projected lengths (layerwise sharing), each run at every n >= k")
    p.add_argument("--pairs", default=None, metavar="N:K,...",
                   help="(n, k) pairs instead of the --n x --k grid, e.g. 512:128,4096:256")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--baselines", default="eager,sdpa",
                   help="eager,sdpa: RoBERTa's attention kernels; modernbert: ModernBERT, transformers' default "
                        "attention")
    p.add_argument("--linformer-attn", default="sdpa", choices=["eager", "sdpa"])
    p.add_argument("--sharing", default="layerwise", choices=["none", "headwise", "key_value", "layerwise"],
                   help="Linformer's projection sharing")
    p.add_argument("--projection", default="linear", choices=["linear", "conv", "mean_pool", "max_pool"],
                   help="Linformer's projection_type: learned E/F (linear) or a window over n/k positions; the "
                        "quality study pretrains both, so both have a step time")
    p.add_argument("--dims", default=None, metavar="FIELD=VALUE,...",
                   help="the model size instead of RoBERTa-base's (--tiny: 2 layers, hidden 64), e.g. the quality "
                        "study's body: hidden_size=128,num_hidden_layers=2,num_attention_heads=2,intermediate_size=512,"
                        "vocab_size=8192")
    p.add_argument("--checkpointing", action="store_true",
                   help="activation checkpointing on every layer of every model (recomputed in the backward)")
    p.add_argument("--chunk-ff", type=int, default=0, metavar="TOKENS",
                   help="chunk_size_feed_forward of RoBERTa and Linformer (0: off); ModernBERT has no chunking")
    p.add_argument("--sparse-head", action="store_true",
                   help="MLM logits at the labelled positions only (not n x vocabulary), the same loss")
    p.add_argument("--mem-limit", type=float, default=None, metavar="GIB",
                   help="a model whose measuring process passes this resident set did not fit (CPU default and "
                        "ceiling: the memory available at the start; CUDA: the device's)")
    p.add_argument("--max-step-s", type=float, default=None, metavar="SECONDS",
                   help="a model whose step runs longer is past the cap (default: no cap)")
    harness.add_run_args(p, repeats=3)
    p.add_argument("--tokens-per-update", type=int, default=0, metavar="TOKENS",
                   help="batch TOKENS // n at each n (at least 1), halved on CUDA until a step fits; 0: --batch")
    p.add_argument("--profile", action="store_true",
                   help="one more step of each model under torch.profiler: where its time goes (top operators)")
    p.add_argument("--no-memory", action="store_true")
    p.add_argument("--quick", action="store_true", help="n=512 only")
    args = p.parse_args(argv)
    if args.quick:
        args.n = "512"
    if args.batch < 1 or args.repeats < 0 or args.warmup < 0 or args.chunk_ff < 0 or args.tokens_per_update < 0:
        p.error("--batch must be >= 1; --repeats, --warmup, --chunk-ff and --tokens-per-update >= 0")
    if args.repeats == 0 and args.no_memory:
        p.error("--repeats 0 takes each step's time from the memory probe: leave out --no-memory")
    try:
        if args.pairs:
            pairs = [tuple(harness.int_list(pair.replace(":", ","))) for pair in args.pairs.split(",") if pair.strip()]
            if not pairs or any(len(pair) != 2 for pair in pairs):
                raise ValueError(f"--pairs: expected N:K,N:K,..., got {args.pairs!r}")
        else:
            pairs = [(n, k) for n in harness.int_list(args.n) for k in harness.int_list(args.k) if k <= n]
        baselines = models.baseline_models(args.baselines)
    except ValueError as e:
        p.error(str(e))
    grid = {}  # n -> the Linformer k's that run at it
    for n, k in pairs:
        grid.setdefault(n, []).append(k)
    device, dtype, dims = harness.setup_run(args, p)
    if args.dims:
        try:
            dims = harness.dims_from(args.dims)
        except ValueError as e:
            p.error(str(e))
    return args, grid, baselines, device, dtype, dims


def step_flops(spec, args, bound=False, recompute=True):
    """~Matmul FLOPs of one update: forward and backward (two matmuls per matmul) of encoder and MLM head (at
    every position, or the labelled ones with --sparse-head), plus the encoder's forward again under
    activation checkpointing (recompute=False: not, the model FLOPs of MFU). None where the forward is not counted;
    bound: then full attention, an upper bound."""
    n, dims, batch = spec["n"], spec["dims"], spec["batch"]
    fwd = flop_counts.forward_flops(spec["model"], n, spec["k"], dims, batch, spec.get("sharing", "layerwise"),
                                    spec.get("projection", "linear"))
    if fwd is None and bound:
        fwd = flop_counts.flops_modernbert(n, dims, batch)
    if fwd is None:
        return None
    positions = batch * n * (MASK_PROB if args.sparse_head else 1)
    head = 2 * positions * dims["hidden_size"] * (dims["hidden_size"] + dims.get("vocab_size", models.VOCAB))
    return 3 * (fwd + head) + (fwd if args.checkpointing and recompute else 0)


def memory_limit(args, device):
    """The resident-set limit of each measuring process (bytes), or None (CUDA without --mem-limit)."""
    asked = args.mem_limit * 2**30 if args.mem_limit else None
    if device.type == "cuda":
        return asked
    return min(asked or float("inf"), measure.available_bytes())


def specs_at(n, ks, args, baselines, dims, amp):
    specs = [dict(model=m, n=n, k=None) for _, m in baselines]
    specs += [dict(model=f"linformer-{args.linformer_attn}", n=n, k=k) for k in ks]
    batch = max(1, args.tokens_per_update // n) if args.tokens_per_update else args.batch
    for s in specs:
        s["batch"] = batch
        chunk = 0 if s["model"].startswith("modernbert") else args.chunk_ff  # ModernBERT's MLP has no chunking
        s.update(dims=dims, dtype="float32", amp=amp, head="mlm", chunk_ff=chunk, checkpointing=args.checkpointing,
                 sharing=args.sharing, projection=args.projection,
                 sparse_head=args.sparse_head, name=f"{s['model']}-k{s['k']}" if s["k"] else s["model"])
    return specs


def why_not(spec, args, rate):
    """Why a model is not started at this n (None: it is): its estimated step time at the machine's matmul
    peak (a lower bound on the real one) already passes --max-step-s."""
    if rate and args.max_step_s:
        est = step_flops(spec, args, bound=True) / rate
        if est > args.max_step_s:
            return f"past the cap: est. {est:.3g} s per step at the matmul peak > --max-step-s {args.max_step_s:g}"
    return None


def fits(step, device, spec):
    """On CUDA, whether one step runs without running out of memory (not timed; it creates the gradients and
    the optimizer state), then the peak memory of a second step in this process (spec["memory"]); on CPU the
    kernel would kill the process instead: there the memory probe (run first) or --n keeps it within the machine."""
    if device.type != "cuda":
        return True
    try:
        step()
        resident = torch.cuda.memory_allocated(device)
        spec["memory"] = dict(peak_bytes=measure.peak_memory(step, device), resident_bytes=resident)
        return True
    except torch.OutOfMemoryError:
        return False


def built_step(s, args, device):
    """The training step of a spec at its batch, or None where it does not fit; with --tokens-per-update, the
    batch is halved until it does (down to 1), and the spec keeps the batch that fitted."""
    while True:
        try:
            ids = models.random_ids(s["batch"], s["n"], device, dims=s["dims"])
            step = models.training_step(models.build(s, device), ids, amp=s["amp"], sparse_head=s["sparse_head"])
            if fits(step, device, s):
                return step
        except torch.OutOfMemoryError:
            pass
        step = None
        gc.collect()
        torch.cuda.empty_cache()
        if not args.tokens_per_update or s["batch"] == 1:
            return None
        s["batch"] //= 2


def time_steps(specs, args, device, skips):
    """{name: [seconds]} of the specs that fit, interleaved; those that do not go to `skips`."""
    fns = {}
    for s in specs:
        step = built_step(s, args, device)
        if step is None:
            skips.add(s, f"did not fit: out of memory at batch {s['batch']}")
        else:
            fns[s["name"]] = step
    if not fns:
        return {}
    with tqdm(total=len(fns) * (args.warmup + args.repeats), desc=f"training steps n={specs[0]['n']}") as bar:
        times = measure.time_interleaved(fns, device, args.warmup, args.repeats, progress=bar)
    if args.profile:  # and the sdpa kernel each model ran (a timing means little without it)
        for s in specs:
            if s["name"] in fns:
                s["profile"] = measure.where_time_goes(fns[s["name"]], device)
                s["sdpa_kernels"] = measure.sdpa_kernels(fns[s["name"]])
    del fns, step
    gc.collect()
    return times


def run(args, grid, baselines, device, dtype, dims):
    """The rows (one per model and n that trained) and the skipped models with their reasons."""
    amp = None if args.dtype == "float32" else args.dtype  # fp32 weights (Accelerate's master weights), autocast
    limit = memory_limit(args, device)
    rate = measure.matmul_rate(device, dtype, measure.probe_size(device, args.tiny))
    rows, skips = [], measure.Skips()
    for n, ks in grid.items():
        specs = []
        for s in specs_at(n, ks, args, baselines, dims, amp):
            reason = skips.stopped_before(s) or why_not(s, args, rate)
            if reason:
                skips.add(s, reason, measured=False)
            else:
                specs.append(s)
        if not args.no_memory and device.type != "cuda":  # CUDA: in the timing process (fits)
            for s in list(specs):
                m = measure.probe_memory(dict(s, mode="train", device=device.type,
                                              threads=torch.get_num_threads(), mem_limit_bytes=limit,
                                              cap_s=args.max_step_s),
                                         timeout=3 * args.max_step_s + 600 if args.max_step_s else 3600)
                if "skip" in m:
                    skips.add(s, m["skip"])
                    specs.remove(s)
                else:
                    s["memory"] = m
        if not specs:
            continue
        if args.repeats:
            times = time_steps(specs, args, device, skips)
        else:
            times = {s["name"]: [s["memory"]["step_s"]] for s in specs}
        for s in (s for s in specs if s["name"] in times):
            st = measure.stats(times[s["name"]])
            flops, model_flops = step_flops(s, args), step_flops(s, args, recompute=False)
            row = dict(n=n, model=s["model"], k=s["k"], batch=s["batch"], dtype=args.dtype, chunk_ff=s["chunk_ff"],
                       checkpointing=args.checkpointing, sparse_head=args.sparse_head, step_s=st["median"],
                       step_q1=st["q1"], step_q3=st["q3"], tokens_per_s=s["batch"] * n / st["median"],
                       approx_tflops=flops and flops / 1e12, gflop_per_s=flops and flops / st["median"] / 1e9,
                       mfu=model_flops and model_flops / st["median"] / rate,
                       timed="interleaved" if args.repeats else "fresh process, one step", samples=times[s["name"]])
            if "profile" in s:
                row.update(profile=s["profile"], sdpa_kernels=s["sdpa_kernels"])
            if "memory" in s:
                m = s["memory"]
                row.update(step_peak_bytes=m["peak_bytes"], resident_bytes=m["resident_bytes"],
                           process_peak_bytes=m["peak_bytes"] + m["resident_bytes"])
            rows.append(row)
    for r in rows:
        if r["k"] is None:
            continue
        for b, model in baselines:
            base = next((x for x in rows if x["n"] == r["n"] and x["model"] == model), None)
            if base:
                r[f"speedup_vs_{b}"] = r["tokens_per_s"] / base["tokens_per_s"]  # batches may differ
                if "step_peak_bytes" in r:
                    r[f"mem_saved_vs_{b}"] = base["step_peak_bytes"] / r["step_peak_bytes"]
    return rows, skips.skipped, limit, rate


def render(args, command, info, dims, baselines, rows, skipped, limit, rate):
    labels = [b for b, _ in baselines]
    precision = f"autocast {args.dtype}, fp32 weights" if args.dtype != "float32" else "float32"
    timing = (f"Median of {args.repeats} interleaved steps after {args.warmup} warm-up" if args.repeats else
              "One step per model, timed alone in the fresh process that measured its memory, after a first step")
    linformer = f"Linformer ({args.sharing}, {args.projection} projection)"
    md = [f"# Training step (MLM, AdamW): {linformer} vs {', '.join(m for _, m in baselines)}, "
          f"{dims['num_hidden_layers']} layers, hidden {dims['hidden_size']}, "
          + (f"up to {args.tokens_per_update} tokens per update" if args.tokens_per_update else f"batch {args.batch}")
          + f", {precision}", "",
          f"Command: `{command}`", "",
          f"Machine: {info.get('gpu') or info.get('cpu')}, {info['threads']} threads, torch {info['torch']}. {timing}. "
          "One step = one train_mlm.py update (clip 1.0, AdamW). Step peak = memory one step adds on top of weights "
          "+ gradients + Adam state (resident); process peak = both. Speed-up: tokens/s over the baseline's. MFU: "
          "3 x (encoder forward + MLM head) matmul FLOPs per second over the matmul rate measured in this run "
          f"({rate / 1e12:.3g} TFLOP/s, a {measure.probe_size(info['device'], args.tiny)}^3 matmul).", "",
          f"Activation checkpointing: {'every layer' if args.checkpointing else 'off'}. Chunked feed-forward: "
          + (f"{args.chunk_ff} tokens (RoBERTa and Linformer; ModernBERT has none)" if args.chunk_ff else "off")
          + ". MLM logits: " + ("at the labelled positions only" if args.sparse_head else "at every position")
          + f". Memory limit: {harness.fmt_bytes(limit) if limit else 'the device'}"
          + (f" (--mem-limit {args.mem_limit:g} GiB, at most the memory available at the start)"
             if args.mem_limit and info["device"] == "cpu" else "")
          + ". Time cap: " + (f"{args.max_step_s:g} s per step" if args.max_step_s else "none") + ".", "",
          "| n | model | k | batch | step (median) | IQR | tokens/s | ~GFLOP/s | MFU | speed-up vs "
          + " / ".join(labels) + " | step peak | resident | process peak | memory saved vs " + " / ".join(labels)
          + " |",
          "|---" * 13 + "|"]
    for r in rows:
        sp = " / ".join(harness.fmt_ratio(r.get(f"speedup_vs_{b}")) for b in labels) if r["k"] else "-"
        ms = " / ".join(harness.fmt_ratio(r.get(f"mem_saved_vs_{b}")) for b in labels) if r["k"] else "-"
        mem = [harness.fmt_bytes(r[key]) if key in r else "-"
               for key in ("step_peak_bytes", "resident_bytes", "process_peak_bytes")]
        achieved = "n/a" if r["gflop_per_s"] is None else f"{r['gflop_per_s']:.0f}"
        mfu = "n/a" if r.get("mfu") is None else f"{r['mfu']:.0%}"
        md.append(f"| {r['n']} | {r['model']} | {r['k'] or '-'} | {r['batch']} | {r['step_s']:.3g} s | "
                  f"{r['step_q1']:.3g}-{r['step_q3']:.3g} s | {r['tokens_per_s']:.0f} | {achieved} | {mfu} | {sp} | "
                  f"{' | '.join(mem)} | {ms} |")
    for k in sorted({r["k"] for r in rows if r["k"]}):
        rs = sorted((r for r in rows if r["k"] == k), key=lambda r: r["n"])
        if len(rs) > 1:
            md += ["", f"Linformer k={k}: time per token at n={rs[-1]['n']} over n={rs[0]['n']}: "
                   f"{rs[0]['tokens_per_s'] / rs[-1]['tokens_per_s']:.2f}x (linear cost: 1.0x)."]
    for r in (r for r in rows if "profile" in r):
        md += ["", f"Where one step's time goes, n={r['n']} {r['model']}" + (f" k={r['k']}" if r["k"] else "")
               + " (torch.profiler, operators by self time): "
               + "; ".join(f"{op['op']} {op['share']:.0%}" for op in r["profile"])]
    if skipped:
        md += ["", "**Skipped**", ""] + [f"- n={s['n']} {s['model']} k={s['k']}: {s['reason']}" for s in skipped]
    return "\n".join(md) + "\n"


def main(argv=None):
    args, grid, baselines, device, dtype, dims = parse_args(argv)
    command = harness.command_line("benchmarks.training", argv)
    rows, skipped, limit, rate = run(args, grid, baselines, device, dtype, dims)
    info = dict(harness.machine_info(device), matmul_probe_size=measure.probe_size(device, args.tiny))
    md = render(args, command, info, dims, baselines, rows, skipped, limit, rate)
    print("\n" + md)
    out, tag = Path(args.out), args.tag or ("training_quick" if args.quick else "training")
    harness.save_csv(out / f"{tag}.csv",
                     [{k: v for k, v in r.items() if k not in ("samples", "profile")} for r in rows])
    harness.save_json(out / f"{tag}.json", dict(args=vars(args), command=command, machine=info, dims=dims,
                                                mem_limit_bytes=limit, matmul_flop_per_s=rate, rows=rows,
                                                skipped=skipped))
    (out / f"{tag}.md").write_text(md)
    print(f"wrote {out / tag}.{{csv,json,md}}")


if __name__ == "__main__":
    main()
