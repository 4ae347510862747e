# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Measuring: interleaved timing (CUDA events on GPU, perf_counter on CPU), medians and spread, the
machine's matmul peak timed in the same loop, and peak activation memory (max_memory_allocated on CUDA,
the peak resident set of a fresh process on CPU)."""

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from benchmarks.models import BASE

REPO = Path(__file__).absolute().parent.parent


def sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def time_once(fn, device):
    """Seconds for one call of fn, CUDA events on GPU, perf_counter on CPU."""
    if torch.device(device).type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1e3
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def time_interleaved(fns, device, warmup=1, repeats=5, progress=None, probe=None):
    """Time every fn of the dict `fns` `repeats` times, interleaved: round r runs all of them once, in an
    order rotated by r, so that a slow stretch of a shared machine hits every candidate alike.
    Returns {name: [seconds, ...]}. With `probe` (a short matmul), it is also timed right before and
    right after every timed call, as "<name>@probe": the machine's speed at the moment each candidate ran."""
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
            if progress is not None:
                progress.update(1)
    sync(device)
    times = {name: [] for name in names}
    for r in range(repeats):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            before = time_once(probe, device) if probe is not None else None
            times[name].append(time_once(fns[name], device))
            if probe is not None:
                times.setdefault(name + "@probe", []).extend([before, time_once(probe, device)])
            if progress is not None:
                progress.update(1)
    return times


def stats(samples):
    """Median and spread (min, max, interquartile range) of a list of seconds."""
    s = sorted(samples)
    q = statistics.quantiles(s, n=4, method="inclusive") if len(s) > 1 else [s[0]] * 3
    return dict(median=statistics.median(s), min=s[0], max=s[-1], q1=q[0], q3=q[2], n=len(s))


def probe_size(device, tiny=False):
    """The side of the probe matmul: the smallest square one that runs at the machine's full matmul rate. On a CPU
    core 2048^3 runs at the same FLOP/s as 4096^3 and is short enough (~0.2 s) to be taken often; a GPU needs
    8192^3 (about 1.4 ms on an H200): the first GPU check timed 2048^3 there at 100-400 TFLOP/s, below its
    790, and so put models above 100% of the peak."""
    return 256 if tiny else 8192 if torch.device(device).type == "cuda" else 2048


def matmul_peak(device, dtype, size):
    """A square matmul in the benchmark's dtype: (fn, flops). Timed right before and after every model
    run (see time_interleaved), its FLOP/s is the machine's matmul peak at that moment, which the
    model's achieved FLOP/s is compared to (size: probe_size)."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=g).to(device=device, dtype=dtype)
    b = torch.randn(size, size, generator=g).to(device=device, dtype=dtype)
    return (lambda: torch.mm(a, b)), 2 * size ** 3


def matmul_rate(device, dtype, size):
    """A first estimate of the machine's matmul FLOP/s (median of 3 after a warm-up): what an analytic FLOP
    count is divided by to estimate a run's time before deciding to run it."""
    fn, flops = matmul_peak(device, dtype, size)
    return flops / stats(time_interleaved({"mm": fn}, device, 1, 3)["mm"])["median"]


def sdpa_kernels(fn):
    """The scaled-dot-product-attention kernels that fn() runs (flash, efficient, cudnn, math; on CPU
    flash_attention_for_cpu), read off the aten ops a profiler sees. sdpa picks one per call from the dtype, the
    mask and the hardware (a mask rules flash out), so a timing means little without the kernel beside it."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    prefix = "aten::_scaled_dot_product_"
    return sorted({e.key.removeprefix(prefix) for e in prof.key_averages() if e.key.startswith(prefix)})


def where_time_goes(fn, device, top=8):
    """Where one call of fn() spends its time: the `top` operators by self time (device time on CUDA, CPU time on
    CPU), each with its share of the whole, read off torch.profiler. What a missed speed goal is explained by."""
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.device(device).type == "cuda"
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        fn()
        sync(device)
    key = "self_device_time_total" if cuda else "self_cpu_time_total"
    events = sorted((e for e in prof.key_averages() if getattr(e, key) > 0), key=lambda e: -getattr(e, key))
    total = sum(getattr(e, key) for e in events) or 1
    return [dict(op=e.key, ms=getattr(e, key) / 1e3, share=getattr(e, key) / total) for e in events[:top]]


# ---------------------------------------------------------------- memory

def status_kb(field):
    with Path("/proc/self/status").open() as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not found in /proc/self/status")


def peak_memory(fn, device):
    """Peak memory (bytes) that fn() adds on top of what is resident before it.

    CUDA: max_memory_allocated - memory_allocated. CPU (Linux): the process's peak resident set
    (VmHWM, reset through /proc/self/clear_refs) minus its resident set before the call. Run the CPU
    variant in a fresh process (see `probe_memory`): memory freed earlier in a long-lived process
    can be reused without raising the resident set, which would under-count."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated(device) - base
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current VmRSS (Linux >= 4.0)
    except OSError as e:
        raise RuntimeError("CPU peak memory needs Linux's /proc/self/clear_refs (writable)") from e
    base = status_kb("VmRSS")
    fn()
    return (status_kb("VmHWM") - base) * 1024


# memory_probe's exit status when the configuration did not fit or ran past the time cap (its last line says which)
SKIPPED = 3


def probe_memory(spec, timeout=3600):
    """Run benchmarks.memory_probe on `spec` (a dict) in a fresh Python process; returns its JSON answer.
    A configuration that did not fit in spec["mem_limit_bytes"] (or the device), or whose step ran past
    spec["cap_s"], answers {"skip": reason} (also when the kernel killed it for memory) instead of raising."""
    env = dict(os.environ)
    # Fixed mmap threshold: large tensors are mmap'd and go back to the OS when freed, so the
    # resident set follows the live tensors (glibc's dynamic threshold would keep freed blocks).
    env.setdefault("MALLOC_MMAP_THRESHOLD_", "131072")
    cmd = [sys.executable, "-m", "benchmarks.memory_probe", json.dumps(spec)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO)
    if out.returncode == -9:  # SIGKILL: on Linux, the kernel's out-of-memory killer
        return dict(skip="did not fit: killed by the kernel (out of memory)")
    if out.returncode not in (0, SKIPPED):
        raise RuntimeError(f"memory probe failed for {spec}:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


class Skips:
    """The configurations a benchmark leaves out, with why. A model measured not to fit or to pass the time cap
    at some n (`stopped`: name -> (n, reason)) is not tried at a longer n: it would only fail slower."""

    def __init__(self):
        self.skipped, self.stopped = [], {}

    def add(self, spec, reason, measured=True):
        self.skipped.append(dict(n=spec["n"], model=spec["model"], k=spec["k"], reason=reason))
        if measured:
            self.stopped[spec["name"]] = (spec["n"], reason.partition(":")[0])
        print(f"skip n={spec['n']} {spec['name']}: {reason}")

    def stopped_before(self, spec):
        """Why spec's model is not tried at this n (None: it is)."""
        if spec["name"] in self.stopped:
            n, reason = self.stopped[spec["name"]]
            return f"{reason} at n={n}: not tried at a larger n"
        return None


def estimate_activation_bytes(model, n, k=None, dims=BASE, batch=1, bytes_per=4, training=False):
    """Rough peak activation bytes of one forward (training: all layers kept), to skip what cannot fit."""
    D, L, H = dims["hidden_size"], dims["num_hidden_layers"], dims["num_attention_heads"]
    inner = dims["intermediate_size"]
    linear = batch * n * (2 * inner + 8 * D)
    once = 0
    if model == "roberta-eager":
        quad = 3 * batch * H * n * n
    elif model == "roberta-sdpa":
        quad = 0 if not training else batch * H * n * 2
    elif model.startswith("modernbert"):
        # GLU: 2 inner wide after Wi, then inner; the local window is an n x n mask (bool for sdpa, kept for the
        # whole forward, which sdpa turns into a float mask per layer; additive float for eager)
        linear = batch * n * (4 * inner + 8 * D)
        quad = (3 * batch * H * n * n if model.endswith("eager") else 0) + batch * n * n
        once = n * n
    else:
        quad = 3 * batch * H * n * k
    per_layer = (linear + quad) * bytes_per
    return per_layer * (L if training else 1) + once


def available_bytes():
    try:
        import psutil
        return psutil.virtual_memory().available
    except ImportError:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
