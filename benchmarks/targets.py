"""Check an inference.py result against the project's targets (12 layers / 768 / 12 heads, batch 1, k=256).

    python -m benchmarks.targets benchmarks/results/inference.json

Targets: vs sdpa RoBERTa at least 1.1x faster at n=512, 2x at n=4096, 3x at n=8192; at least 75% of the
measured matmul peak for n >= 2048; vs eager RoBERTa at least 14x less memory per sequence at n=4096.
Prints one line per target: the measured value, met / MISSED, or 'not measured'.
"""

import argparse
import json
import os


def row(rows, n, model, k=None):
    return next((r for r in rows if r["n"] == n and r["model"].startswith(model) and r["k"] == k), None)


def check(label, value, goal, fmt):
    if value is None:
        print(f"{label}: not measured")
    else:
        print(f"{label}: {fmt(value)} (target {fmt(goal)}) {'met' if value >= goal else 'MISSED'}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("result", help="a JSON file written by inference.py")
    p.add_argument("--k", type=int, default=256)
    args = p.parse_args(argv)
    if not os.path.isfile(args.result):
        p.error(f"{args.result!r}: no such file")
    with open(args.result) as f:
        rows = json.load(f)["rows"]

    x = lambda v: f"{v:.2f}x"  # noqa: E731
    for n, goal in ((512, 1.1), (4096, 2.0), (8192, 3.0)):
        r = row(rows, n, "linformer", args.k)
        check(f"time saved vs sdpa, n={n}, k={args.k}", r and r.get("time_saved_vs_sdpa"), goal, x)
    for r in sorted((r for r in rows if r["model"].startswith("linformer") and r["k"] == args.k and r["n"] >= 2048),
                    key=lambda r: r["n"]):
        check(f"fraction of matmul peak, n={r['n']}, k={args.k}", r["frac_of_peak"], 0.75, lambda v: f"{100 * v:.0f}%")
        if "frac_of_best_peak" in r:
            check("  (vs the best matmul of the run)", r["frac_of_best_peak"], 0.75, lambda v: f"{100 * v:.0f}%")
    r = row(rows, 4096, "linformer", args.k)
    check(f"memory saved vs eager, n=4096, k={args.k}", r and r.get("mem_saved_vs_eager"), 14.0, x)


if __name__ == "__main__":
    main()
