# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Inference time and memory: Linformer vs a RoBERTa of identical size (the paper's Table 3), and vs ModernBERT.

For every sequence length n, RoBERTa with eager attention (what the paper compared against) and with
sdpa (what users run today), optionally ModernBERT of the same depth, width, heads and intermediate
size with the attention transformers picks by default (the long-context encoder users would pick
today), and Linformer for each projected length k (layerwise sharing, k <= n/2 like the paper's grid)
run interleaved in one process on the same random tokens, after warm-up, under torch.inference_mode.
A large matmul is timed in the same loop: it is the machine's peak that each model's achieved FLOP/s
(analytic matmul count / median time) is compared to. Peak activation memory per sequence is measured
per configuration in a fresh process (CPU: peak RSS; CUDA: max_memory_allocated): the paper's "largest
batch that fits" is the memory budget over this number. Memory is measured first, and a forward there that
runs past --max-forward-s is stopped: that model is "past the cap" at that n and not tried at a longer one.

    python -m benchmarks.inference --quick             # a few minutes on 2 CPU cores
    python -m benchmarks.inference                      # n = 512..8192, k = 128..2048 (~20-30 min on 2 cores)
    python -m benchmarks.inference --n 512,4096 --k 256 --repeats 7
    python -m benchmarks.inference --n 512,16384 --k 256 --baselines sdpa,modernbert --dtype bf16 --batch 4

Writes <out>/<tag>.{csv,json,md} and <tag>_time.png, <tag>_per_token.png (Linformer's time per token vs n:
flat is the linear-cost promise), <tag>_memory.png (default out: outputs/benchmarks; `--out benchmarks/results`
replaces the committed results).
"""

import argparse
import gc
from pathlib import Path

import torch
from tqdm import tqdm

from benchmarks import flop_counts, harness, measure, models

# Wang et al. 2020, Table 3 (inference, Linformer with layerwise sharing vs Transformer, 16 GB V100).
PAPER_KS = (128, 256, 512, 1024, 2048)
_T = {
    512: (1.5, 1.3), 1024: (1.7, 1.6, 1.3), 2048: (2.6, 2.4, 2.1, 1.3), 4096: (3.4, 3.2, 2.8, 2.2, 1.3),
    8192: (5.5, 5.0, 4.4, 3.5, 2.1), 16384: (8.6, 7.8, 7.0, 5.6, 3.3), 32768: (13, 12, 11, 8.8, 5.0),
    65536: (20, 18, 16, 14, 7.9),
}
_M = {
    512: (1.7, 1.5), 1024: (3.0, 2.9, 1.8), 2048: (6.1, 5.6, 3.6, 2.0), 4096: (14, 13, 8.3, 4.3, 2.3),
    8192: (28, 26, 17, 8.5, 4.5), 16384: (56, 48, 32, 16, 8), 32768: (56, 48, 36, 18, 16),
    65536: (60, 52, 40, 20, 18),
}
# A row lists only the k the paper ran at that n (k <= n/2): the first of PAPER_KS, so the zip stops at the row's end
PAPER_TIME = {n: dict(zip(PAPER_KS, v, strict=False)) for n, v in _T.items()}
PAPER_MEMORY = {n: dict(zip(PAPER_KS, v, strict=False)) for n, v in _M.items()}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", default="512,1024,2048,4096,8192", help="sequence lengths (paper: 512..65536)")
    p.add_argument("--k", default="128,256,512,1024,2048", help="projected lengths; only k <= n/2 run, like the paper")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--baselines", default="eager,sdpa",
                   help="eager,sdpa: RoBERTa's attention kernels; modernbert: ModernBERT, transformers' default "
                        "attention")
    p.add_argument("--linformer-attn", default="sdpa", choices=["eager", "sdpa"], help="Linformer's attention kernel")
    p.add_argument("--sharing", default="layerwise", choices=["none", "headwise", "key_value", "layerwise"])
    p.add_argument("--chunk-ff", type=int, default=0, metavar="TOKENS",
                   help="chunk_size_feed_forward for every model (0: off): bounds the n x intermediate activation")
    harness.add_run_args(p, repeats=3, tag_help="output file prefix (default: inference, inference_quick)")
    p.add_argument("--max-forward-s", type=float, default=60.0,
                   help="skip configurations whose estimated forward time exceeds this; with memory measured, a "
                        "measured forward that runs longer is stopped and listed as past the cap")
    p.add_argument("--mem-budget", type=float, default=0.5,
                   help="skip configurations whose estimated activations exceed this fraction of free memory")
    p.add_argument("--no-memory", action="store_true", help="time only")
    p.add_argument("--quick", action="store_true", help="n=512,2048, k=128,256: a few minutes on 2 CPU cores")
    p.add_argument("--no-plots", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.n, args.k = "512,2048", "128,256"
    ns, ks, baselines = harness.parse_grid(p, args)
    if args.batch < 1 or args.repeats < 1 or args.warmup < 0:
        p.error("--batch and --repeats must be >= 1, --warmup >= 0")
    if args.chunk_ff and any(m.startswith("modernbert") for _, m in baselines):
        p.error("--chunk-ff: ModernBERT has no chunked feed-forward; leave modernbert out of --baselines")
    device, dtype, dims = harness.setup_run(args, p)
    return args, ns, ks, baselines, device, dtype, dims


def plan_runs(args, ns, ks, baselines, dims, peak_est, budget, bytes_per):
    """{n: configurations that run}, and measure.Skips holding those left out by estimate (time or memory)."""
    plan, skips = {}, measure.Skips()
    for n in ns:
        configs = [dict(model=m, n=n, k=None) for _, m in baselines]
        configs += [dict(model=f"linformer-{args.linformer_attn}", n=n, k=k) for k in ks if k <= n // 2]
        keep = []
        for c in configs:
            c["name"] = f"{c['model']}-k{c['k']}" if c["k"] else c["model"]
            c["spec"] = dict(model=c["model"], n=n, k=c["k"], dims=dims, dtype=args.dtype, sharing=args.sharing,
                             chunk_ff=args.chunk_ff)
            c["flops"] = flop_counts.forward_flops(c["model"], n, c["k"], dims, args.batch, args.sharing)
            # an uncounted kernel (ModernBERT with flash/flex) is estimated as the full-attention count, an upper bound
            est_t = (c["flops"] or flop_counts.flops_modernbert(n, dims, args.batch)) / peak_est
            est_m = measure.estimate_activation_bytes(c["model"], n, c["k"], dims, args.batch, bytes_per)
            if est_t > args.max_forward_s:
                skips.add(c, f"est. {est_t:.0f} s per forward > --max-forward-s {args.max_forward_s:.0f}",
                          measured=False)
            elif est_m > budget:
                skips.add(c, f"est. {harness.fmt_bytes(est_m)} activations > budget {harness.fmt_bytes(budget)}",
                          measured=False)
            else:
                keep.append(c)
        if keep:
            plan[n] = keep
    return plan, skips


def probe_runs(args, plan, device, skips):
    """CPU: peak memory of every planned configuration, one fresh process each, before any timing. The estimate
    behind --max-forward-s assumes the matmul peak; attention kernels at large n can run several times slower,
    so each probe's forward is stopped once it passes the cap: that model is then listed as past the cap and
    not tried at a longer n, instead of holding the run for hours. Returns the plan without them.
    CUDA: measured while timing, in this process (measure_in_process); the plan is returned as it is."""
    if device.type == "cuda":
        return plan
    kept = {}
    for n, configs in plan.items():
        keep = []
        for c in tqdm(configs, desc=f"memory at n={n} (fresh process each)"):
            reason = skips.stopped_before(c)
            if reason:
                skips.add(c, reason, measured=False)
                continue
            cap = args.max_forward_s
            m = measure.probe_memory(dict(c["spec"], batch=args.batch, device=device.type,
                                          threads=torch.get_num_threads(), cap_s=cap), timeout=3 * cap + 600)
            if "skip" in m:
                skips.add(c, m["skip"])
                continue
            c["peak_mem_bytes"] = m["peak_bytes"]
            keep.append(c)
        if keep:
            kept[n] = keep
    return kept


def measure_in_process(args, configs, fns, device, skips):
    """CUDA: each model's peak memory in the timing process. max_memory_allocated - memory_allocated counts what
    the call allocates whatever ran before, so the fresh process per configuration that the CPU's resident set
    needs (probe_runs) would only add start-ups, seconds each: a large share of a GPU loan of minutes. A model
    out of memory here is skipped and not tried at a longer n. The measured forward comes after the profiled one
    (time_runs), so loading kernels is not counted. Returns the configurations that fit."""
    kept = []
    for c in configs:
        reason = skips.stopped_before(c)
        if reason:
            skips.add(c, reason, measured=False)
        elif not args.no_memory:
            try:
                c["sdpa_kernels"] = measure.sdpa_kernels(fns[c["name"]])
                c["peak_mem_bytes"] = measure.peak_memory(fns[c["name"]], device)
            except torch.OutOfMemoryError:
                reason = "did not fit: out of memory in the forward"
                skips.add(c, reason)
        if reason:
            del fns[c["name"]]
            torch.cuda.empty_cache()
        else:
            kept.append(c)
    return kept


def time_runs(args, plan, dims, device, peak_fn, peak_flops, skips):
    """One row per configuration: interleaved per n, with the matmul probe around every run. The first warm-up
    forward of each model runs under the profiler, which records the sdpa kernel it picked (with --warmup 0 no
    forward is spared for it: not recorded); on CUDA the memory forward follows it, before the other warm-ups."""
    rows = []
    total = sum(len(cs) * (args.warmup + args.repeats) for cs in plan.values())
    bar = tqdm(total=total, desc="timing", unit="run")
    for n, configs in plan.items():
        ids = models.random_ids(args.batch, n, device, dims=dims)
        fns = {}
        for c in configs:
            model = models.build(c["spec"], device)
            fns[c["name"]] = models.inference_step(model, ids)
            c["attn_implementation"] = model.config._attn_implementation
            del model
        if device.type == "cuda":
            configs = measure_in_process(args, configs, fns, device, skips)
        for c in configs if args.warmup else ():
            if "sdpa_kernels" not in c:  # CUDA: profiled before its memory was measured
                c["sdpa_kernels"] = measure.sdpa_kernels(fns[c["name"]])
            bar.update(1)
        bar.set_postfix(n=n)
        times = measure.time_interleaved(fns, device, max(args.warmup - 1, 0), args.repeats, progress=bar,
                                         probe=peak_fn)
        for c in configs:
            st = measure.stats(times[c["name"]])
            peak_rate = peak_flops / measure.stats(times[c["name"] + "@probe"])["median"]
            best_rate = peak_flops / min(t for name, ts in times.items() if name.endswith("@probe") for t in ts)
            flops = c["flops"]  # None: not counted (reported as n/a, never as a guess)
            rows.append(dict(n=n, model=c["model"], k=c["k"], batch=args.batch,
                             attn_implementation=c["attn_implementation"], sdpa_kernels=c.get("sdpa_kernels"),
                             time_s=st["median"], time_q1=st["q1"], time_q3=st["q3"], time_min=st["min"],
                             time_max=st["max"], time_per_seq_s=st["median"] / args.batch,
                             time_per_token_s=st["median"] / (args.batch * n), repeats=st["n"],
                             gflops=flops and flops / 1e9, gflop_per_s=flops and flops / st["median"] / 1e9,
                             peak_gflop_per_s=peak_rate / 1e9, frac_of_peak=flops and flops / st["median"] / peak_rate,
                             best_peak_gflop_per_s=best_rate / 1e9,
                             frac_of_best_peak=flops and flops / st["median"] / best_rate,
                             samples=times[c["name"]], peak_samples=times[c["name"] + "@probe"], spec=c["spec"]))
            if "peak_mem_bytes" in c:
                rows[-1].update(peak_mem_bytes=c["peak_mem_bytes"], mem_per_seq_bytes=c["peak_mem_bytes"] / args.batch)
        del fns
        gc.collect()
    bar.close()
    return rows


def add_ratios(rows, baselines):
    """baseline / Linformer time and memory, and the paper's figures, on every Linformer row."""
    for r in rows:
        if r["k"] is None:
            continue
        for b, model in baselines:
            base = lookup(rows, r["n"], model)
            r[f"time_saved_vs_{b}"] = base["time_s"] / r["time_s"] if base else None
            if base and "peak_mem_bytes" in r:
                r[f"mem_saved_vs_{b}"] = base["peak_mem_bytes"] / r["peak_mem_bytes"]
        r["paper_time_saved"] = PAPER_TIME.get(r["n"], {}).get(r["k"])
        r["paper_mem_saved"] = PAPER_MEMORY.get(r["n"], {}).get(r["k"])


def lookup(rows, n, model):
    return next((r for r in rows if r["n"] == n and r["model"] == model), None)


def display(model):
    """roberta-sdpa -> RoBERTa-sdpa, modernbert-sdpa -> ModernBERT-sdpa (the kernel stays in the name)."""
    kind, _, attn = model.partition("-")
    return {"roberta": "RoBERTa", "modernbert": "ModernBERT", "linformer": "Linformer"}[kind] + f"-{attn}"


def ratio_table(rows, plan, ks, key, paper, title):
    used_k = [k for k in ks if any(r["k"] == k for r in rows)]
    lines = [f"**{title}**" + (" (ours, paper in brackets)" if paper else ""), "",
             "| n | " + " | ".join(f"k={k}" for k in used_k) + " |", "|---" * (len(used_k) + 1) + "|"]
    for n in plan:
        cells = []
        for k in used_k:
            r = next((r for r in rows if r["n"] == n and r["k"] == k), None)
            ours = harness.fmt_ratio(r.get(key)) if r else "-"
            ref = paper.get(n, {}).get(k)
            cells.append(f"{ours} ({harness.fmt_ratio(ref)})" if ref else ours)
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def per_token_table(rows, plan):
    """Time per token of every model at every n, and how Linformer's grows from the shortest n to the longest:
    the linear-cost promise is that it stays flat (project target: within 1.3x from n=512 to 16384)."""
    names = list(dict.fromkeys((r["model"], r["k"]) for r in rows))

    def label(model, k):
        return display(model) + (f" k={k}" if k else "")

    lines = ["**Time per token** (median time / (batch x n), ms)", "",
             "| n | " + " | ".join(label(m, k) for m, k in names) + " |", "|---" * (len(names) + 1) + "|"]
    for n in plan:
        cells = [next((f"{r['time_per_token_s'] * 1e3:.3g}" for r in rows if (r["n"], r["model"], r["k"]) == (n, m, k)),
                      "-") for m, k in names]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    growth = []
    for m, k in names:
        rs = sorted((r for r in rows if r["model"] == m and r["k"] == k), key=lambda r: r["n"])
        if k and len(rs) > 1:
            growth.append(f"k={k}: {rs[-1]['time_per_token_s'] / rs[0]['time_per_token_s']:.2f}x")
    if growth:
        lines += ["", f"Linformer's time per token at n={max(plan)} over n={min(plan)}: " + ", ".join(growth)
                  + " (linear cost: 1.0x; target <= 1.3x from 512 to 16384)."]
    return "\n".join(lines) + "\n"


def fmt_flops(value, fmt):
    return "n/a" if value is None else format(value, fmt)


def render(args, info, dims, baselines, ks, plan, rows, skipped):
    names = ", ".join(display(m) for _, m in baselines)
    md = [f"# Inference: Linformer (layerwise, {args.linformer_attn}) vs {names}, {dims['num_hidden_layers']} layers, "
          f"hidden {dims['hidden_size']}, {dims['num_attention_heads']} heads, FFN {dims['intermediate_size']}, "
          f"batch {args.batch}, {args.dtype}", "",
          f"Machine: {info.get('gpu') or info.get('cpu')}, {info['threads']} threads, torch {info['torch']}. "
          f"Median of {args.repeats} interleaved runs after {args.warmup} warm-up. Ratios are baseline / Linformer "
          "(time per sequence; peak activation memory per sequence, which sets the largest batch that fits).", ""]
    mb = next((m for _, m in baselines if m.startswith("modernbert")), None)
    if mb:
        md += [f"ModernBERT runs transformers' default attention here, `{mb.partition('-')[2]}`; its local window (128 "
               "tokens on 2 layers of 3) is then a mask over the full n x n scores, and its GLU MLP (hidden x "
               "2*intermediate in) does 1.5x RoBERTa's MLP FLOPs at the same intermediate size.", ""]
    for b, model in baselines:
        paper_t, paper_m = (PAPER_TIME, PAPER_MEMORY) if model.startswith("roberta") else ({}, {})
        md.append(ratio_table(rows, plan, ks, f"time_saved_vs_{b}", paper_t, f"Time saved vs {display(model)}"))
        if not args.no_memory:
            md.append(ratio_table(rows, plan, ks, f"mem_saved_vs_{b}", paper_m, f"Memory saved vs {display(model)}"))
    md.append(per_token_table(rows, plan))
    side = info.get("matmul_probe_size", 2048)  # results before the GPU probe's size was recorded used 2048
    md += [f"**Absolute numbers.** % of peak: achieved FLOP/s over the FLOP/s of a {side}^3 matmul timed right before "
           "and after each run of that model (median), i.e. the machine's speed at that moment; in brackets, over the "
           "best matmul of the whole run (a lower bound when neighbours slow the machine down). n/a: FLOPs not counted "
           "for that attention kernel.", "",
           "| n | model | k | time/seq (median) | IQR | time/token | GFLOP | GFLOP/s | % of matmul peak "
           "| peak mem/seq | sdpa kernel |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mem = harness.fmt_bytes(r["mem_per_seq_bytes"]) if "mem_per_seq_bytes" in r else "-"
        frac = "n/a" if r["frac_of_peak"] is None else f"{100 * r['frac_of_peak']:.0f}%"
        best = "n/a" if r["frac_of_best_peak"] is None else f"{100 * r['frac_of_best_peak']:.0f}%"
        md.append(f"| {r['n']} | {r['model']} | {r['k'] or '-'} | {r['time_per_seq_s'] * 1e3:.0f} ms | "
                  f"{r['time_q1'] / r['batch'] * 1e3:.0f}-{r['time_q3'] / r['batch'] * 1e3:.0f} ms | "
                  f"{r['time_per_token_s'] * 1e3:.3g} ms | "
                  f"{fmt_flops(r['gflops'], '.0f')} | {fmt_flops(r['gflop_per_s'], '.0f')} | "
                  f"{frac} of {r['peak_gflop_per_s']:.0f} ({best} of {r['best_peak_gflop_per_s']:.0f}) | {mem} | "
                  f"{', '.join(r['sdpa_kernels'] or ['-']) if r.get('sdpa_kernels') is not None else 'not recorded'} |")
    if skipped:
        md += ["", "**Skipped**", ""] + [f"- n={s['n']} {s['model']} k={s['k']}: {s['reason']}" for s in skipped]
    return "\n".join(md) + "\n"


def save_plots(args, rows, plan, device, out, tag):
    """Time and memory per sequence vs n, and Linformer's time per token relative to the shortest n."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator

    series = {}
    for r in rows:
        label = r["model"].replace("linformer-" + args.linformer_attn, "Linformer")
        label += f", k={r['k']}" if r["k"] else ""
        series.setdefault(label, []).append(r)

    def style_of(label):
        if "roberta" in label:
            return dict(ls="--", lw=2.2, color="black" if "eager" in label else "gray", zorder=3)
        if "modernbert" in label:
            return dict(ls="-.", lw=2.2, color="tab:red", zorder=3)
        return {}

    def draw(ax, key, scale, ylabel, title):
        for label, rs in series.items():
            style = style_of(label)
            ax.plot([r["n"] for r in rs], [r[key] * scale / (r["n"] if "token" in ylabel else 1) for r in rs],
                    marker="o", label=label, **style)
        ax.set(xscale="log", yscale="log", xlabel="sequence length n", ylabel=ylabel, title=title)
        ax.set_xticks(list(plan), [str(n) for n in plan])
        ax.minorticks_off()
        ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)

    where = f"batch {args.batch}, {device.type} {args.dtype}, {torch.get_num_threads()} thread(s)"
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.4))
    draw(a, "time_per_seq_s", 1, "time per sequence (s)", f"Inference time per sequence, {where}")
    draw(b, "time_per_seq_s", 1e3, "time per token (ms)", "Same, per token (fixed total tokens, paper Fig. 2)")
    fig.tight_layout()
    fig.savefig(out / f"{tag}_time.png", dpi=110)
    plt.close(fig)

    # Linformer alone, per token and relative to the shortest n: a flat line is the linear-cost promise
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for label, rs in series.items():
        if label.startswith("Linformer"):
            first = rs[0]["time_per_token_s"]
            ax.plot([r["n"] for r in rs], [r["time_per_token_s"] / first for r in rs], marker="o",
                    label=f"{label} ({first * 1e3:.3g} ms/token at n={rs[0]['n']})")
    ax.axhline(1.3, ls=":", color="tab:red", label="1.3x: target from n=512 to 16384")
    ax.axhline(1.0, lw=0.8, color="gray")
    ax.set(xscale="log", xlabel="sequence length n", ylabel=f"time per token / time per token at n={min(plan)}",
           title=f"Linformer time per token vs n, {where}")
    ax.set_xticks(list(plan), [str(n) for n in plan])
    ax.minorticks_off()
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / f"{tag}_per_token.png", dpi=110)
    plt.close(fig)
    if not args.no_memory:
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        draw(ax, "mem_per_seq_bytes", 2**-20, "peak activation memory per sequence (MiB)",
             f"Inference memory, {where}")
        fig.tight_layout()
        fig.savefig(out / f"{tag}_memory.png", dpi=110)
        plt.close(fig)


def main(argv=None):
    args, ns, ks, baselines, device, dtype, dims = parse_args(argv)
    tag = args.tag or ("inference_quick" if args.quick else "inference")
    bytes_per = torch.finfo(dtype).bits // 8

    # the machine's matmul peak, first estimate (for skipping)
    size = measure.probe_size(device, args.tiny)
    peak_fn, peak_flops = measure.matmul_peak(device, dtype, size)
    peak_est = measure.matmul_rate(device, dtype, size)
    free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else measure.available_bytes()
    budget = args.mem_budget * free
    print(f"device {device}, dtype {args.dtype}, threads {torch.get_num_threads()}, matmul peak ~{peak_est / 1e9:.0f} "
          f"GFLOP/s, memory budget {harness.fmt_bytes(budget)}")

    plan, skips = plan_runs(args, ns, ks, baselines, dims, peak_est, budget, bytes_per)
    # memory, one fresh process each (stopping what runs past the cap); then time, interleaved per n
    if not args.no_memory:
        plan = probe_runs(args, plan, device, skips)
    rows = time_runs(args, plan, dims, device, peak_fn, peak_flops, skips)
    add_ratios(rows, baselines)

    info = dict(harness.machine_info(device), matmul_probe_size=size)
    command = harness.command_line("benchmarks.inference", argv)
    md = render(args, info, dims, baselines, ks, plan, rows, skips.skipped)
    print("\n" + md)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    harness.save_csv(out / f"{tag}.csv", [{k: v for k, v in r.items() if k not in ("samples", "peak_samples", "spec")}
                                          for r in rows])
    harness.save_json(out / f"{tag}.json", dict(args=vars(args), command=command, machine=info, dims=dims, rows=rows,
                                                skipped=skips.skipped))
    (out / f"{tag}.md").write_text(md)
    if not args.no_plots:
        save_plots(args, rows, plan, device, out, tag)
    plots = "" if args.no_plots else f" and {out / tag}_{{time,per_token,memory}}.png"
    print(f"wrote {out / tag}.{{csv,json,md}}{plots}")


if __name__ == "__main__":
    main()
