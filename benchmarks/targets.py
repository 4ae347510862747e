# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Check an inference.py result against the project's targets (12 layers / 768 / 12 heads, batch 1, k=256).

    python -m benchmarks.targets benchmarks/results/inference_cpu_fp32_b1.json

Targets: vs sdpa RoBERTa at least 1.1x faster at n=512, 2x at n=4096, 3x at n=8192; at least 75% of the
measured matmul peak for n >= 2048; vs eager RoBERTa at least 14x less memory per sequence at n=4096.
Prints one line per target: the measured value, met / MISSED, or 'not measured'.
"""

import argparse
import json
from pathlib import Path


def row(rows, n, model, k=None):
    return next((r for r in rows if r["n"] == n and r["model"].startswith(model) and r["k"] == k), None)


def checks(rows, k=256):
    """Every target this result can speak to, as dicts: what (time, peak, best_peak, memory), n, label, the
    measured value (None: not measured) and the goal. benchmarks/report.py renders the same list into the docs."""
    found = []
    for n, goal in ((512, 1.1), (4096, 2.0), (8192, 3.0)):
        r = row(rows, n, "linformer", k)
        found.append(dict(what="time", n=n, label=f"time saved vs sdpa, n={n}, k={k}", goal=goal,
                          value=r and r.get("time_saved_vs_sdpa")))
    for r in sorted((r for r in rows if r["model"].startswith("linformer") and r["k"] == k and r["n"] >= 2048),
                    key=lambda r: r["n"]):
        found.append(dict(what="peak", n=r["n"], label=f"fraction of matmul peak, n={r['n']}, k={k}", goal=0.75,
                          value=r["frac_of_peak"]))
        if "frac_of_best_peak" in r:
            found.append(dict(what="best_peak", n=r["n"], label="  (vs the best matmul of the run)", goal=0.75,
                              value=r["frac_of_best_peak"]))
    r = row(rows, 4096, "linformer", k)
    found.append(dict(what="memory", n=4096, label=f"memory saved vs eager, n=4096, k={k}", goal=14.0,
                      value=r and r.get("mem_saved_vs_eager")))
    return found


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("result", help="a JSON file written by inference.py")
    p.add_argument("--k", type=int, default=256)
    args = p.parse_args(argv)
    if not Path(args.result).is_file():
        p.error(f"{args.result!r}: no such file")
    rows = json.loads(Path(args.result).read_text())["rows"]
    for c in checks(rows, args.k):
        fmt = (lambda v: f"{100 * v:.0f}%") if c["what"] in ("peak", "best_peak") else (lambda v: f"{v:.2f}x")
        if c["value"] is None:
            print(f"{c['label']}: not measured")
        else:
            verdict = "met" if c["value"] >= c["goal"] else "MISSED"
            print(f"{c['label']}: {fmt(c['value'])} (target {fmt(c['goal'])}) {verdict}")


if __name__ == "__main__":
    main()
