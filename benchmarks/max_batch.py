# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""The paper's Table 3 in its own form: the largest batch of n-token sequences each model fits in memory, and its
time per token at that batch.

Wang et al. (2020) give Table 3 as the time and memory saved at the largest batch that fits a 16 GB V100;
inference.py gives the same per sequence at batch 1. Here, for every n and model: a forward at batch 1 measures
the peak activation memory per sequence (CUDA: max_memory_allocated; on CPU there is no allocator limit to meet,
so it is the estimate the scripts skip by), the batch that fills --mem-gib over the resident weights follows, a
forward at that batch confirms it fits (each out-of-memory takes 15% off, 4 tries), and --repeats forwards at it
are timed. Where a forward at that batch is estimated above --max-forward-s (matmul FLOPs at the measured matmul
rate), the batch that cap allows runs instead and the row says so: time per token has long stopped falling there,
and a loan of minutes cannot wait. A model that does not fit batch 1 at some n is not tried at a longer one.
The results file is rewritten after every n, so a run stopped early keeps the lengths it finished.

    python -m benchmarks.max_batch --device cuda --dtype fp16 --n 512,4096,16384,65536 --k 128,256
"""

import argparse
import statistics
from pathlib import Path

import torch

from benchmarks import flop_counts, harness, measure, models

OOM_SHRINK, OOM_TRIES = 0.85, 4


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", default="512,4096,16384,65536", help="sequence lengths")
    p.add_argument("--k", default="128,256", help="Linformer's projected lengths (k <= n/2 run)")
    p.add_argument("--baselines", default="sdpa,eager", help="RoBERTa's attention kernels (eager, sdpa), modernbert")
    p.add_argument("--mem-gib", type=float, default=None,
                   help="memory to fill, GiB (default: 95%% of the device's free memory)")
    p.add_argument("--max-forward-s", type=float, default=1.0,
                   help="run a smaller batch where a forward at the largest is estimated to take longer")
    harness.add_run_args(p, repeats=2, tag_help="output file prefix (default: max_batch)")
    args = p.parse_args(argv)
    ns, ks, baselines = harness.parse_grid(p, args)
    if args.repeats < 1 or args.max_forward_s <= 0 or (args.mem_gib is not None and args.mem_gib <= 0):
        p.error("--repeats must be >= 1, --max-forward-s and --mem-gib > 0")
    device, dtype, dims = harness.setup_run(args, p)
    return args, ns, ks, baselines, device, dtype, dims


def configs(args, n, ks, baselines, dims):
    out = [dict(model=m, k=None) for _, m in baselines] + [dict(model="linformer-sdpa", k=k) for k in ks if k <= n // 2]
    for c in out:
        c.update(n=n, name=f"{c['model']}-k{c['k']}" if c["k"] else c["model"],
                 spec=dict(model=c["model"], n=n, k=c["k"], dims=dims, dtype=args.dtype))
    return out


def per_sequence_bytes(model, c, device, bytes_per):
    """Peak activation bytes of one sequence: measured on CUDA (after a first forward loads the kernels), the
    estimate on CPU."""
    step = models.inference_step(model, models.random_ids(1, c["n"], device, dims=c["spec"]["dims"]))
    step()
    if device.type == "cuda":
        return measure.peak_memory(step, device), "measured"
    spec = c["spec"]
    return measure.estimate_activation_bytes(c["model"], c["n"], c["k"], spec["dims"], 1, bytes_per), "estimated"


def largest_batch(args, c, device, budget, peak_rate, skips, bytes_per):
    """One row: the batch that fits (and the one run, if the time cap lowered it), time per token there."""
    model = models.build(c["spec"], device)
    resident = (torch.cuda.memory_allocated(device) if device.type == "cuda"
                else sum(p.numel() * p.element_size() for p in model.parameters()))
    try:
        per_seq, source = per_sequence_bytes(model, c, device, bytes_per)
    except torch.OutOfMemoryError:
        return skips.add(c, "did not fit: out of memory at batch 1")
    fits = int((budget - resident) // max(per_seq, 1))
    if fits < 1:
        return skips.add(c, f"did not fit: batch 1 needs {harness.fmt_bytes(per_seq)}, "
                            f"{harness.fmt_bytes(budget - resident)} left beside the weights")
    dims = c["spec"]["dims"]  # an uncounted kernel (ModernBERT with flash) as full attention, an upper bound
    flops_one = (flop_counts.forward_flops(c["model"], c["n"], c["k"], dims, 1)
                 or flop_counts.flops_modernbert(c["n"], dims))
    time_cap = max(1, int(args.max_forward_s * peak_rate / flops_one))
    batch, confirmed = min(fits, time_cap), False
    for _ in range(OOM_TRIES):
        step = models.inference_step(model, models.random_ids(batch, c["n"], device, dims=dims))
        try:
            for _ in range(args.warmup or 1):
                step()
            confirmed = batch == fits
            break
        except torch.OutOfMemoryError:
            del step
            torch.cuda.empty_cache()
            fits = batch = int(batch * OOM_SHRINK)
    else:
        return skips.add(c, f"did not fit: out of memory {OOM_TRIES} times, down to batch {batch}")
    times = [measure.time_once(step, device) for _ in range(args.repeats)]
    median = statistics.median(times)
    return dict(n=c["n"], model=c["model"], k=c["k"], per_seq_bytes=per_seq, per_seq_source=source,
                resident_bytes=resident, largest_batch=fits, largest_batch_confirmed=confirmed, batch=batch,
                capped_by_time=batch < fits, time_s=median, time_per_token_s=median / (batch * c["n"]),
                tokens_per_s=batch * c["n"] / median, samples=times)


def add_ratios(rows, baselines):
    """baseline / Linformer: the largest batch (the paper's memory saved) and the time per token (time saved)."""
    for r in (r for r in rows if r["k"]):
        for b, model in baselines:
            base = next((x for x in rows if x["n"] == r["n"] and x["model"] == model), None)
            r[f"batch_ratio_vs_{b}"] = base and r["largest_batch"] / base["largest_batch"]
            r[f"time_per_token_saved_vs_{b}"] = base and base["time_per_token_s"] / r["time_per_token_s"]


def render(args, info, dims, budget, rows, skipped):
    md = [f"# Largest batch that fits and time per token there (the paper's Table 3 form), {args.dtype}", "",
          f"{info.get('gpu') or info.get('cpu')}, torch {info['torch']}; {dims['num_hidden_layers']} layers, hidden "
          f"{dims['hidden_size']}; memory filled: {harness.fmt_bytes(budget)}. Largest batch: (memory - weights) / "
          "peak per sequence at batch 1, confirmed by a forward unless a smaller batch ran (the forward time cap "
          f"{args.max_forward_s:g} s). Time: median of {args.repeats} forwards at the batch run.", "",
          "| n | model | k | per sequence | largest batch | batch run | time/token | tokens/s | batch ratio "
          "(Linformer / baseline) | time per token saved |", "|---" * 10 + "|"]
    for r in rows:
        ratios = [(key.rpartition("_vs_")[2], r[key]) for key in r if key.startswith("batch_ratio_vs_") and r[key]]
        saved = [(key.rpartition("_vs_")[2], r[key])
                 for key in r if key.startswith("time_per_token_saved_vs_") and r[key]]
        largest = f"{r['largest_batch']}{'' if r['largest_batch_confirmed'] else ' (not run)'}"
        md.append(f"| {r['n']} | {r['model']} | {r['k'] or '-'} | {harness.fmt_bytes(r['per_seq_bytes'])} "
                  f"({r['per_seq_source']}) | {largest} "
                  f"| {r['batch']} | {r['time_per_token_s'] * 1e6:.3g} us | {r['tokens_per_s']:,.0f} | "
                  + (", ".join(f"{b} {harness.fmt_ratio(v)}" for b, v in ratios) or "-") + " | "
                  + (", ".join(f"{b} {harness.fmt_ratio(v)}" for b, v in saved) or "-") + " |")
    if skipped:
        md += ["", "**Skipped**", ""] + [f"- n={s['n']} {s['model']} k={s['k']}: {s['reason']}" for s in skipped]
    return "\n".join(md) + "\n"


def save(args, argv, info, dims, budget, rows, skipped, baselines):
    add_ratios(rows, baselines)
    out, tag = Path(args.out), args.tag or "max_batch"
    command = harness.command_line("benchmarks.max_batch", argv)
    harness.save_json(out / f"{tag}.json", dict(args=vars(args), command=command, machine=info, dims=dims,
                                                budget_bytes=budget, rows=rows, skipped=skipped))
    md = render(args, info, dims, budget, rows, skipped)
    (out / f"{tag}.md").write_text(md)
    return out / tag, md  # the stem of both files


def main(argv=None):
    args, ns, ks, baselines, device, dtype, dims = parse_args(argv)
    bytes_per = torch.finfo(dtype).bits // 8
    peak_rate = measure.matmul_rate(device, dtype, measure.probe_size(device, args.tiny))
    free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else measure.available_bytes()
    budget = args.mem_gib * 2**30 if args.mem_gib else 0.95 * free
    info, rows, skips = harness.machine_info(device), [], measure.Skips()
    for n in ns:
        for c in configs(args, n, ks, baselines, dims):
            reason = skips.stopped_before(c)
            row = skips.add(c, reason, measured=False) if reason else largest_batch(
                args, c, device, budget, peak_rate, skips, bytes_per)
            if row:
                rows.append(row)
                print(f"n={n} {c['name']}: largest batch {row['largest_batch']}, ran {row['batch']}, "
                      f"{row['time_per_token_s'] * 1e6:.3g} us/token", flush=True)
            if device.type == "cuda":
                torch.cuda.empty_cache()
        stem, md = save(args, argv, info, dims, budget, rows, skips.skipped, baselines)
    print("\n" + md + f"\nwrote {stem}.{{json,md}}")


if __name__ == "__main__":
    main()
