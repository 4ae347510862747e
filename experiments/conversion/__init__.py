# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""All-MiniLM-L6-v2 converted to Linformer with no training: what survives (compute.py, then render.py).
Here: the variants the study compares, which both read."""

from experiments.shared import LONG_N, SOURCE_N

GRID = [(512, 32), (512, 64), (512, 128), (512, 256), (2048, 128), (2048, 256), (4096, 128), (4096, 256)]
INITS = ("window_mean", "random", "mean_pool", "resample", "window_mean_no_short_path")


def variants():
    """(n, k, init, measures): window_mean everywhere; random, and window_mean without the exact path for
    short inputs, at n = 512; the length-aware alternatives at n = 512 and 4096, with retrieval at 4096,
    where inputs are mostly far below n."""
    out = []
    for n, k in GRID:
        out.append((n, k, "window_mean", ("cosine", "probe", "retrieval")))
        if n == SOURCE_N:
            out.append((n, k, "random", ("cosine", "probe")))
            out.append((n, k, "window_mean_no_short_path", ("cosine", "probe")))
        if n in (SOURCE_N, LONG_N):
            out.append((n, k, "mean_pool", ("cosine", "probe") + (("retrieval",) if n == LONG_N else ())))
            out.append((n, k, "resample", ("cosine", "probe") + (("retrieval",) if n == LONG_N else ())))
    return out


def name_of(n, k, init):
    return f"n{n}_k{k}_{init}"
