# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""The committed benchmark results as the docs show them: one index of the current result of each sweep
(benchmarks/results/RESULTS.md) and the tables of docs/benchmarks.md, both written from the JSON files (the prose
is report.template.md's). A figure in the docs is never typed by hand: re-running a sweep into benchmarks/results
(`--out benchmarks/results`) and then this command is how the docs change.

    python -m benchmarks.report            # rewrite results/RESULTS.md and docs/benchmarks.md's tables
    python -m benchmarks.report --check    # write nothing; fail when a page differs from the results (a test runs it)
"""

import argparse
import json
import os
import sys
from functools import partial
from pathlib import Path

from benchmarks import harness, inference, models, targets
from benchmarks.reporting import body, number, prose, splice, status, table, write

DOC = harness.ROOT / "docs" / "benchmarks.md"
INDEX = harness.RESULTS / "RESULTS.md"
GPU_RESULTS = harness.RESULTS / "gpu"  # `make gpu-check`'s folder: the GPU section, when it exists
TEMPLATE = harness.ROOT / "benchmarks" / "report.template.md"  # the prose of the pages, one part each
# The current result of every sweep (an older run of the same sweep is deleted, git keeps it): tag -> the script
# that wrote it, the tag's first word; what each measured is its part of the template.
SWEEPS = {tag: tag.split("_")[0] for tag in (
    "inference", "inference_chunked_ff", "inference_cpu_fp32_b1", "inference_cpu_bf16_b1", "inference_cpu_fp32_b4",
    "inference_cpu_bf16_b4", "inference_cpu_fp32_b1_far_1800s", "inference_cpu_bf16_b1_far_1800s", "training_cpu_fp32",
    "training_cpu_bf16", "training_cpu_fp32_far", "training_cpu_bf16_far", "training_cpu_bf16_far_32768", "peers",
    "spectrum", "theorem", "serving", "training_cpu_fp32_race", "training_cpu_fp32_race_512", "compiled_cpu_fp32")}
NAMES = {"roberta-sdpa": "RoBERTa-sdpa", "roberta-eager": "RoBERTa-eager", "modernbert-sdpa": "ModernBERT",
         "linformer-sdpa": "Linformer", "lucidrains-linformer": "lucidrains' linformer",
         "tatp22-linformer-pytorch": "linformer-pytorch"}
# A Linformer's projection_type in the practical answer's words
PROJECTION_WORDS = {"linear": "learned projections E/F", "conv": "the convolutional projection",
                    "mean_pool": "mean-pooling projections", "max_pool": "max-pooling projections"}
README = harness.ROOT / "README.md"
CARD = harness.ROOT / "model_card.md"
# Issue 67's goals: Linformer's training tokens/s over RoBERTa-sdpa's at n; its MFU at 512; its compiled batch-1
# speed over RoBERTa-sdpa's compiled one at n
TRAINING_GOALS, MFU_GOAL, COMPILED_GOALS = {4096: 2.0, 16384: 4.0}, 0.35, {512: 1.0, 4096: 1.5}
ratio = harness.fmt_ratio
words = partial(prose, TEMPLATE)  # a part of the template, filled


# The training race again in one process (train_mlm.py's logits at the masked positions only), then with the vocabulary
# padded to a multiple of 64: measured on the H200 after gpu_check's run, to read its profile (docs/benchmarks.md).
GPU_ONE_PROCESS = ("training_cuda_bf16_sparse", "training_cuda_bf16_sparse_v50304")
# Issue 67's CPU counterparts: their tables say "not measured yet" while their results are not committed
CPU_RACE = ("training_cpu_fp32_race", "training_cpu_fp32_race_512", "compiled_cpu_fp32")


def load(results_dir):
    paths = {tag: Path(results_dir) / f"{tag}.json" for tag in SWEEPS}
    return {tag: json.loads(path.read_text()) for tag, path in paths.items() if tag not in CPU_RACE or path.is_file()}


def command(result, script):
    """The command that wrote this result into benchmarks/results: as recorded, else rebuilt from its arguments
    (results older than the recorded command keep every argument, defaults included)."""
    line = result.get("command") or f"python -m benchmarks.{script} " + " ".join(
        f"--{key.replace('_', '-')}" + ("" if value is True else f" {value}")
        for key, value in result["args"].items() if key != "out" and value is not None and value is not False)
    if " --out " not in line:
        return line + " --out benchmarks/results"
    # as run, with the folder last (the flags' order means nothing to argparse): each command of the index ends so
    return line.replace(" --out benchmarks/results", "") + " --out benchmarks/results"


def seconds(s):
    return f"{s * 1e3:.0f} ms" if s < 1 else (f"{s:#.3g} s" if s < 100 else f"{s:.0f} s")


def find(result, n, model, k=None):
    return next((r for r in result["rows"] if r["n"] == n and r["model"] == model and r["k"] == k), None)


def precision(result):
    return {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}[result["args"]["dtype"]]


def per_token_growth(result, k, n):
    """Linformer's time per token at n over n = 512 (inference or training): 1.0 is linear cost."""
    short, long = find(result, 512, "linformer-sdpa", k), find(result, n, "linformer-sdpa", k)
    if "time_per_token_s" in long:
        return long["time_per_token_s"] / short["time_per_token_s"]
    return short["tokens_per_s"] / long["tokens_per_s"]


def targets_block(res):
    """The targets table: targets.py's and the ModernBERT goals as rows, the template's fixed rows with figures."""
    fp32, bf16 = res["inference_cpu_fp32_b1"], res["inference_cpu_bf16_b1"]
    checks = targets.checks(fp32["rows"], 256)
    times = [[f">= {c['goal']:g}x faster than RoBERTa-sdpa at n = {c['n']} (k = 256, fp32)",
              # a miss that would read as the goal at two decimals gets three
              f"{c['value']:.{3 if c['value'] < c['goal'] and round(c['value'], 2) == round(c['goal'], 2) else 2}f}x",
              status(c["value"] >= c["goal"]), "inference_cpu_fp32_b1"] for c in checks if c["what"] == "time"]
    modernbert = []
    for n, goal in ((8192, 3), (16384, 5)):
        cells = {precision(r): [find(r, n, "linformer-sdpa", k)["time_saved_vs_modernbert"] for k in (128, 256)]
                 for r in (fp32, bf16)}
        modernbert.append([f">= {goal}x faster than ModernBERT at n = {n} (k = 128, 256)",
                           "; ".join(f"{p}: {ratio(a)}, {ratio(b)}" for p, (a, b) in cells.items()),
                           status(min(min(v) for v in cells.values()) >= goal), "inference_cpu_{fp32,bf16}_b1"])
    peaks = [c["value"] for c in checks if c["what"] == "peak"]
    memory = next(c for c in targets.checks(res["inference"]["rows"], 256) if c["what"] == "memory")["value"]
    chunked = find(res["inference_chunked_ff"], 4096, "linformer-sdpa", 256)["mem_saved_vs_eager"]
    growth = [(precision(r), k, per_token_growth(r, k, 16384)) for r in (fp32, bf16) for k in (128, 256)]
    return words("targets", times=body(times), modernbert=body(modernbert), memory=f"{memory:.1f}x",
                 peak=f"{100 * min(peaks):.0f}-{100 * max(peaks):.0f}%", peak_status=status(min(peaks) >= 0.75),
                 memory_status=status(memory >= 14), chunked=f"{chunked:.1f}x", chunked_status=status(chunked >= 14),
                 growth="; ".join(f"{p} k={k}: {g:.2f}x" for p, k, g in growth),
                 growth_status=status(max(g for *_, g in growth) <= 1.3))


def speedups_block(res, tags, times):
    """Linformer (k = 128, 256) against RoBERTa-sdpa and ModernBERT at every n of the sweeps `tags`: the time saved,
    after the four times themselves where `times` (the batch-1 table; the batch-4 one shows the ratios only)."""
    rows = []
    for r in (res[tag] for tag in tags):
        for n in sorted({row["n"] for row in r["rows"]}):
            lin = [find(r, n, "linformer-sdpa", k) for k in (128, 256)]
            timed = [find(r, n, "roberta-sdpa"), find(r, n, "modernbert-sdpa"), *lin] if times else []
            rows.append([n, precision(r), *(seconds(x["time_per_seq_s"]) for x in timed),
                         *(", ".join(ratio(x[f"time_saved_vs_{of}"]) for x in lin) for of in ("sdpa", "modernbert"))])
    return table(["n", "precision", *(["RoBERTa-sdpa", "ModernBERT", "Linformer k=128", "Linformer k=256"] * times),
                  "RoBERTa-sdpa / Linformer (k=128, 256)", "ModernBERT / Linformer (k=128, 256)"], rows)


def far_block(res, tags, value):
    """The far end of a sweep (every n above 512): each model's figure, or why it has none, and Linformer's time per
    token over n = 512 (1.0 is linear cost)."""
    def cell(r, n, model):
        row = find(r, n, model, 256 if model.startswith("linformer") else None)
        return value(row) if row else next((s["reason"] for s in r["skipped"] if s["n"] == n and s["model"] == model),
                                           "not run")

    return words("far", rows=body(
        [n, precision(r), *(cell(r, n, m) for m in ("roberta-sdpa", "modernbert-sdpa", "linformer-sdpa")),
         f"{per_token_growth(r, 256, n):.2f}x" if find(r, n, "linformer-sdpa", 256) else "-", tag]
        for tag in tags for r in [res[tag]]
        for n in sorted({row["n"] for row in r["rows"]} | {s["n"] for s in r["skipped"]}) if n != 512))


def training_block(res):
    return table(["n / k", "precision", "RoBERTa-sdpa tokens/s", "Linformer tokens/s", "speed-up"], [
        [f"{row['n']} / {row['k']}", precision(r), f"{base['tokens_per_s']:.0f}", f"{row['tokens_per_s']:.0f}",
         ratio(row["tokens_per_s"] / base["tokens_per_s"])]
        for r in (res["training_cpu_fp32"], res["training_cpu_bf16"]) for row in r["rows"]
        if row["model"] == "linformer-sdpa" for base in [find(r, row["n"], "roberta-sdpa")]])


def serving_block(res):
    """Every cell of the serving sweep, then issue 35's goals at the longest length for every batch size (one
    document as it arrives, and a batch), each said met or missed, on the CPU whose extensions the record names."""
    cells = {(row["threads"], row["length"], row["batch"], row["model"], row["runtime"]): row
             for row in res["serving"]["rows"]}
    goals = []
    for threads, batch in sorted({(key[0], key[2]) for key in cells}):
        length = max(key[1] for key in cells if key[0] == threads and key[2] == batch)
        mine = {key[4]: row for key, row in cells.items() if key[:4] == (threads, length, batch, "release")}
        theirs = cells[threads, length, batch, "teacher windows", "onnxruntime int8"]
        int8, fp32 = mine["onnxruntime int8"], mine["pytorch fp32"]
        fast = max((row for row in mine.values() if row["min_cosine"] >= 0.999), key=lambda row: row["docs_per_s"])
        goals.append(words(
            "serving_goals", threads=threads, length=length, batch=batch, int8=speedup(int8, fp32),
            cosine=f"{int8['min_cosine']:.4f}",
            int8_goal=status(int8["docs_per_s"] >= 1.25 * fp32["docs_per_s"] and int8["min_cosine"] >= 0.99),
            teacher=speedup(int8, theirs), teacher_goal=status(int8["docs_per_s"] >= theirs["docs_per_s"]),
            fastest=fast["runtime"], fastest_speed=speedup(fast, fp32)))
    return words("serving_cells", cpu=res["serving"]["machine"].get("cpu", "?"),
                 extensions=harness.instruction_sets(res["serving"]["machine"]), goals="\n".join(goals), rows=body(
        [*key, f"{row['docs_per_s']:.2f}", speedup(row, cells[(*key[:4], "pytorch fp32")]), f"{row['min_cosine']:.4f}"]
        for key, row in cells.items()))


def serving_answer(res):
    """README's serving sentence: on the measured CPU, at the longest length and the most threads measured, the
    fastest way to serve the release that keeps its embeddings, one document per call and in a batch, and the int8
    graph's speed against PyTorch fp32 in both cases (issue 35's 1.25x goal, met or missed)."""
    result = res["serving"]
    rows = [row for row in result["rows"] if row["model"] == "release"]
    threads = max(row["threads"] for row in rows)
    length = max(row["length"] for row in rows if row["threads"] == threads)
    cases = []
    for batch in sorted({row["batch"] for row in rows}):
        mine = {row["runtime"]: row for row in rows
                if (row["threads"], row["length"], row["batch"]) == (threads, length, batch)}
        fp32, int8 = mine["pytorch fp32"], mine["onnxruntime int8"]
        fast = max((row for row in mine.values() if row["min_cosine"] >= 0.999), key=lambda row: row["docs_per_s"])
        int8_met = int8["docs_per_s"] >= 1.25 * fp32["docs_per_s"] and int8["min_cosine"] >= 0.99
        cases.append(words("serving_case", batch=f"{batch} document{'s' * (batch > 1)} per call",
                           fastest=fast["runtime"], fastest_speed=speedup(fast, fp32), int8=speedup(int8, fp32),
                           int8_goal=status(int8_met)))
    return words("serving_answer", cpu=result["machine"].get("cpu", "?"),
                 extensions=harness.instruction_sets(result["machine"]),
                 threads=f"{threads} thread{'s' * (threads > 1)}", length=f"{length:,}",
                 cases="; ".join(cases))


def speedup(row, of):
    """Documents per second of `row` over those of `of`, as '1.23x'."""
    return f"{row['docs_per_s'] / of['docs_per_s']:.2f}x"


def gpu_block(gpu_dir):
    """The GPU section, from `make gpu-check`'s results (its plan is in their gpu_check.md)."""
    gpu_dir = Path(gpu_dir)
    check = json.loads((gpu_dir / "gpu_check.json").read_text())
    machine, steps = check["machine"], check["steps"]
    ran = [name for name, entry in steps.items() if entry["status"] == "ok"]

    def result(tag):
        return json.loads((gpu_dir / f"{tag}.json").read_text())

    blocks = [words("gpu_ran", command=check["command"], gpu=machine.get("gpu", "?"), torch=machine["torch"],
                    commit=machine.get("git_head", "?"),
                    steps=", ".join(f"{name} {e['status']} ({e['seconds']:.0f} s)" for name, e in steps.items()))]
    inference_tags = [tag for tag in ran if tag.startswith("inference_")]
    batch_tags = [tag for tag in ran if tag.startswith("max_batch")]
    if inference_tags and batch_tags:
        blocks.append(gpu_reading([result(tag) for tag in inference_tags], result(batch_tags[0])))
    if inference_tags:
        blocks.append(words("gpu_inference", rows=gpu_inference_rows(map(result, inference_tags))))
    blocks += [gpu_max_batch_table(result(tag)) for tag in batch_tags]
    if mlm := [steps[name] for name in ran if name.startswith("mlm_")]:
        blocks.append(words("gpu_mlm", rows=body([e["precision"], e["updates"], f"{e['tokens_per_second']:,.0f}",
                                                  f"{e['peak_memory_gb']:.1f} GiB", number(e["skipped_updates"], "")]
                                                 for e in mlm)))
    if (fsdp := steps.get("fsdp2_resume", {})).get("status") == "ok":
        blocks.append(words("gpu_fsdp", resumed_from=fsdp["resumed_from"], updates=fsdp["updates"],
                            difference=f"{fsdp['max_relative_loss_difference']:.2g}",
                            weights="bit-identical" if fsdp["bit_exact"] else "not bit-identical"))
    return "\n\n".join(blocks)


def gpu_reading(inference_results, batch_result):
    """What a GPU user asks first, read off the tables below: Linformer's throughput against sdpa at the largest
    batch run, its memory against sdpa, where batch 1 is slower, and whether the run's matmul probe can be trusted."""
    from benchmarks import gpu_check  # imports torch: only once there are GPU results


    def lin(r, k):
        return sorted((row for row in r["rows"] if row["k"] == k), key=lambda row: row["n"])

    k = min(row["k"] for row in batch_result["rows"] if row["k"])
    throughput = ", ".join(f"{ratio(row['time_per_token_saved_vs_sdpa'])} at n = {row['n']}"
                           for row in lin(batch_result, k) if row.get("time_per_token_saved_vs_sdpa"))
    rows = [row for r in inference_results for row in r["rows"] if row["k"]]
    memory = sorted(row["mem_saved_vs_sdpa"] for row in rows if row.get("mem_saved_vs_sdpa"))
    slower = sorted({row["n"] for row in rows if row.get("time_saved_vs_sdpa", 1) < 1})
    times = sorted(row["time_saved_vs_sdpa"] for row in rows if row.get("time_saved_vs_sdpa", 1) < 1)
    smallest = min(row["n"] for row in rows)
    busiest = max(row["gflop_per_s"] for r in inference_results for row in r["rows"]
                  if row["n"] == smallest and row.get("gflop_per_s"))
    bullets = [words("gpu_reading", k=k, precision=precision(batch_result), throughput=throughput,
                     cap=f"{batch_result['args']['max_forward_s']:g}")]

    def span(values):  # "1.0x", "2.0x-4.0x"
        return "-".join(dict.fromkeys([ratio(values[0]), ratio(values[-1])]))

    if memory:  # a run with --no-memory has none
        bullets.append(words("gpu_same_memory" if memory[-1] < 1.1 else "gpu_less_memory", memory=span(memory)))
    if slower:
        bullets.append(words("gpu_batch1_slower", slower=", ".join(map(str, slower)), smallest=smallest,
                             times=span(times), tflops=f"{busiest / 1e3:.0f}",
                             share=f"{busiest * 1e9 / gpu_check.MATMUL_PEAK:.0%}",
                             peak=f"{gpu_check.MATMUL_PEAK / 1e12:.0f}"))
    reading = "\n".join(bullets)
    over = [row for r in inference_results if "matmul_probe_size" not in r["machine"]
            for row in r["rows"] if (row.get("frac_of_peak") or 0) > 1]
    if over:
        probes = sorted(row["peak_gflop_per_s"] for r in inference_results for row in r["rows"])
        reading += "\n\n" + words("gpu_probe", low=f"{probes[0] / 1e3:.0f}", high=f"{probes[-1] / 1e3:.0f}",
                                    most=f"{max(row['frac_of_peak'] for row in over):.0%}")
    return reading


def gpu_inference_rows(results):
    rows = []
    for r in results:
        for lin in (row for row in r["rows"] if row["k"]):
            sdpa = find(r, lin["n"], "roberta-sdpa")
            against = [(word, lin.get(f"{key}_saved_vs_eager"), lin.get(f"paper_{key}_saved"))
                       for word, key in (("time", "time"), ("memory", "mem"))]
            kernel = ", ".join(sdpa.get("sdpa_kernels") or ["?"]) if sdpa else "-"
            rows.append([precision(r), lin["n"], lin["k"], pair(lin, "{}_saved_vs_eager"), pair(lin, "paper_{}_saved"),
                         "; ".join(f"{word} {status(ours >= paper)}" for word, ours, paper in against if ours and paper)
                         or "-", pair(lin, "{}_saved_vs_sdpa") + f" ({kernel})", pair(lin, "{}_saved_vs_modernbert")])
    return body(rows)


def pair(row, key):
    """A row's time and memory ratios of `key` ("{}_saved_vs_sdpa": time_saved_vs_sdpa, mem_saved_vs_sdpa)."""
    return " / ".join(ratio(row.get(key.format(what))) for what in ("time", "mem"))


def gpu_max_batch_table(r):
    """The paper's Table 3 form: the largest batch and the time per token there, Linformer against eager."""
    rows = [[row["n"], NAMES.get(row["model"], row["model"]), row["k"] or "-",
             f"{row['largest_batch']}" + ("" if row["largest_batch_confirmed"] else " (not run)"),
             f"{row['time_per_token_s'] * 1e6:.3g} us at batch {row['batch']}",
             *((f"{ratio(row.get(ours))} ({ratio(paper.get(row['n'], {}).get(row['k']))})" if row["k"] else "-")
               for ours, paper in (("batch_ratio_vs_eager", inference.PAPER_MEMORY),
                                   ("time_per_token_saved_vs_eager", inference.PAPER_TIME))),
             ratio(row.get("time_per_token_saved_vs_sdpa")) if row["k"] else "-"] for row in r["rows"]]
    return words("gpu_max_batch", budget=harness.fmt_bytes(r["budget_bytes"]), precision=precision(r),
                 command=r["command"], rows=body(rows))


def gpu_result(pattern):
    """The GPU results whose tag matches `pattern` (glob), in tag order: none before a GPU ran them."""
    return [json.loads(path.read_text()) for path in sorted(Path(GPU_RESULTS).glob(f"{pattern}.json"))]


def latest(results, key=lambda result, row: row["n"]):
    """Each key's rows from the last of `results` (tag order: a rerun's tag sorts after the run it repeats) that
    measured it, so a rerun of one n replaces that n only; a result left without rows (its command neither)."""
    last = {key(r, row): i for i, r in enumerate(results) for row in r["rows"]}
    kept = [dict(r, rows=[row for row in r["rows"] if last[key(r, row)] == i]) for i, r in enumerate(results)]
    return [r for r in kept if r["rows"]]


def mfu_cell(row):
    """MFU as a share; above 100% the run's matmul probe ran at a slower moment than the steps (a shared CPU):
    not a figure."""
    mfu = row.get("mfu")
    return "-" if mfu is None else f"{mfu:.0%}" if mfu <= 1 else "n/a (the probe ran slower than the steps)"


def race_training(results):
    """Training side by side (issue 67, item 1): every row of the results (each n from the last result that ran
    it), then each goal met or missed, and where a missed one's time went (the profile of its step)."""
    rows, goals = [], []
    results = latest(results)
    for r in results:
        for row in sorted(r["rows"], key=lambda row: row["n"]):
            base = find(r, row["n"], "roberta-sdpa")
            rows.append([row["n"], NAMES.get(row["model"], row["model"]), row["k"] or "-", row["batch"] * row["n"],
                         f"{row['tokens_per_s']:,.0f}", harness.fmt_bytes(row["process_peak_bytes"])
                         if "process_peak_bytes" in row else "-", mfu_cell(row),
                         ratio(row["tokens_per_s"] / base["tokens_per_s"]) if base and row["k"] else "-",
                         "every layer" if row["checkpointing"] else "off"])
    lin = [(r, row) for r in results for row in r["rows"] if row["k"] and not row["checkpointing"]]
    for n, goal in TRAINING_GOALS.items():
        for r, row in ((r, row) for r, row in lin if row["n"] == n and find(r, n, "roberta-sdpa")):
            got = row["tokens_per_s"] / find(r, n, "roberta-sdpa")["tokens_per_s"]
            goals.append(words("race_goal", what=f">= {goal:g}x RoBERTa-sdpa's training tokens/s at n = {n}",
                               k=row["k"], got=ratio(got), status=status(got >= goal), where=where(row, got >= goal)))
    for row in (row for _, row in lin if row["n"] == 512 and (row.get("mfu") or 0) <= 1):
        goals.append(words("race_goal", what=f"the step at >= {MFU_GOAL:.0%} of the matmul rate at n = 512",
                           k=row["k"], got=mfu_cell(row), status=status((row.get("mfu") or 0) >= MFU_GOAL),
                           where=where(row, (row.get("mfu") or 0) >= MFU_GOAL)))
    kernel = next((", ".join(x.get("sdpa_kernels") or []) for r in results for x in r["rows"]
                   if x["model"] == "roberta-sdpa" and x.get("sdpa_kernels")), "")
    args = results[-1]["args"]
    vocabulary = (results[-1].get("dims") or {}).get("vocab_size", models.VOCAB)
    logits = ("MLM logits at the masked positions only (train_mlm.py in one process)" if args.get("sparse_head") else
              "MLM logits at every position (train_mlm.py across processes: a wrapped model is called whole)")
    if vocabulary != models.VOCAB:
        logits += f", the vocabulary padded from {models.VOCAB:,} to {vocabulary:,} rows"
    return words("race_training", machine=machine_of(results[-1]), logits=logits,
                 precision={"float32": "fp32", "bfloat16": "bf16 autocast", "float16": "fp16 autocast"}[args["dtype"]],
                 batch=f"each model at the largest tokens per update that fits, up to {args['tokens_per_update']:,}"
                 if args.get("tokens_per_update") else f"batch {args['batch']}",
                 rate=" and ".join(f"{r['matmul_flop_per_s'] / 1e12:.3g}" for r in results),
                 commands="; ".join(f"`{r['command']}`" for r in results), rows=body(rows), goals="\n".join(goals),
                 kernel=f" RoBERTa-sdpa's attention kernel: {kernel}." if kernel else "")


def where(row, met):
    """Where a step's time went, from its profile (for a missed goal; "" for a met one or without a profile)."""
    if met or not row.get("profile"):
        return ""
    return "; where its step's time goes: " + ", ".join(f"{op['op']} {op['share']:.0%}" for op in row["profile"][:4])


def machine_of(result):
    m = result["machine"]
    return (f"{m.get('gpu') or m.get('cpu')}, torch {m['torch']}, {m['threads']} thread(s), "
            f"commit {m.get('git_head', '?')}")


def race_compiled(results):
    """Batch 1 eager and compiled alike (issue 67, item 2): every row (each precision, n and model from the last
    result that ran it: the re-measure after a fix replaces what it measured again), then each goal met or missed."""
    rows, goals = [], []
    results = latest(results, key=lambda r, row: (precision(r), row["n"], row["model"]))
    for r in results:
        for row in r["rows"]:
            rows.append([row["n"], precision(r), NAMES.get(row["model"], row["model"]), row["k"] or "-",
                         seconds(row["eager_s"]), seconds(row["compiled_s"]),
                         " / ".join(ratio(row.get(f"saved_vs_sdpa_{how}")) for how in ("eager", "compiled"))
                         if "saved_vs_sdpa_eager" in row else "-", row["graphs"], row.get("graph_breaks", "-"),
                         "yes" if row["recompiled"] else "no"])
            if row["model"] == "linformer-sdpa" and row["n"] in COMPILED_GOALS and "saved_vs_sdpa_compiled" in row:
                goal, got = COMPILED_GOALS[row["n"]], row["saved_vs_sdpa_compiled"]
                goals.append(words("race_goal", what=f">= {goal:g}x RoBERTa-sdpa at n = {row['n']}, compiled against "
                                   f"compiled, {precision(r)}", k=row["k"], got=ratio(got), status=status(got >= goal),
                                   where=slower_compiled(find(r, row["n"], "roberta-sdpa"), row)))
    how = results[0]["args"]
    return words("race_compiled", machine=machine_of(results[0]), mode=how.get("mode"),
                 backend=how.get("backend", "inductor"), commands="; ".join(f"`{r['command']}`" for r in results),
                 rows=body(rows), goals="\n".join(goals))


def slower_compiled(base, row):
    """For a compiled goal: where RoBERTa-sdpa compiled ran slower than its own eager forward, the Linformer
    compiled against that faster eager forward too ("" otherwise), since a user would keep the faster one."""
    if not base or base["compiled_s"] <= base["eager_s"]:
        return ""
    return (f" (RoBERTa-sdpa compiled took {seconds(base['compiled_s'])}, more than its eager "
            f"{seconds(base['eager_s'])}: against its eager forward, {ratio(base['eager_s'] / row['compiled_s'])})")


def race_block(res):
    """docs/benchmarks.md's issue 67 tables: training side by side, compiled batch 1, the GPU time to reach standard
    attention's quality; on the GPU where its results exist ("not run yet" where not), and their CPU counterparts."""
    from benchmarks import time_to_quality

    training = gpu_result("training_cuda_bf16") + gpu_result("training_cuda_bf16_ckpt")
    compiled = gpu_result("compiled_cuda_*")
    study_times = gpu_result("training_cuda_bf16_study*")
    quality, summaries = time_to_quality.rows(study_times, training[0] if training else None,
                                              one_process=one_process())

    def gpu_cell(q):
        if q["gpu_ratio"]:
            return f"{q['gpu_ratio']:.2f}x"
        return f"more than {q['gpu_at_least']:.2f}x" if q["gpu_at_least"] else "not run yet"

    def step_cell(value, projected):
        if not value:
            return "not run yet"
        return f"{value * 1e6:.3g} us/token" if projected else seconds(value)

    cells = [[q["n"], q["what"], f"{q['updates']:,}" if q["updates"] else "-" if q["projected"] else
              f"more than {q['last']:,}", f"{q['update_ratio']:.2f}x" if q["update_ratio"] else f"> {q['at_least']:g}x",
              step_cell(q["step_s"], q["projected"]), step_cell(q["base_step_s"], q["projected"]), gpu_cell(q)]
             for q in quality]
    levels = {phase: next((q["level"] for q in quality if q.get("phase") == phase), None)
              for phase in time_to_quality.PHASES}
    one_process_blocks = [race_training(found) for found in map(gpu_result, GPU_ONE_PROCESS) if found]
    return "\n\n".join([
        race_training(training) if training else words("race_not_run", what="Training side by side"),
        *one_process_blocks,
        race_training([res[tag] for tag in CPU_RACE[:2] if tag in res]) if "training_cpu_fp32_race" in res else
        words("race_cpu_not_run", what="Training side by side", tag="training_cpu_fp32_race"),
        race_compiled(compiled) if compiled else words("race_not_run", what="Compiled batch 1"),
        race_compiled([res["compiled_cpu_fp32"]]) if "compiled_cpu_fp32" in res else
        words("race_cpu_not_run", what="Compiled batch 1", tag="compiled_cpu_fp32"),
        words("race_quality", rows=body(cells), projection=time_to_quality.PROJECTION,
              short_phase=time_to_quality.SHORT_PHASE_COST, paper_n=paper_n_configurations(summaries),
              **{f"{phase}_level": f"{level:.1f}" if level else "-" for phase, level in levels.items()})])


def paper_n_configurations(summaries):
    """The sentence on the paper's n's configurations whose seeds all got to standard attention's perplexity there,
    each by its geometric mean ("" before any did): the table reads its runs one by one."""
    from benchmarks import time_to_quality

    read = [c for c in summaries if c["phase"] == "settling"]
    if not read:
        return ""
    said = "; ".join(f"{PROJECTION_WORDS[c['projection']]} with k = {c['k']}, "
                     + (f"{c['gpu_ratio']:.2f}x standard attention's GPU time" if c["gpu_ratio"] else
                        "its GPU time not run yet")
                     + f" ({time_to_quality.seeds_words(c)})" for c in sorted(read, key=lambda c: c["update_ratio"]))
    return f" At n = {read[0]['n']}, per configuration none of whose stopped seeds stopped above that level: {said}."


def one_process():
    """The training race's one-process result (train_mlm.py's step on one GPU), or None."""
    return next(iter(gpu_result(GPU_ONE_PROCESS[0])), None)


def answer(res):
    """The one-sentence practical answer (README's speed line and the model card): the GPU time a Linformer needs
    to reach standard attention's quality, where a GPU measured it; else that it is not measured yet."""
    from benchmarks import time_to_quality

    training = next(iter(gpu_result("training_cuda_bf16")), None)
    quality, summaries = time_to_quality.rows(gpu_result("training_cuda_bf16_study*"), training,
                                              one_process=one_process())
    # the study's body at n = N, where a Linformer trained every update: the paper's n spent 9,000 of its budget's
    # 10,000 updates in the short phase (docs/benchmarks.md reads it in its own table rows)
    summaries = [c for c in summaries if c["phase"] == "extension"]
    best = min((c for c in summaries if c["gpu_ratio"]), key=lambda c: c["gpu_ratio"], default=None)
    if best is None:
        fewest = min(summaries, key=lambda c: c["update_ratio"])
        return words("answer_not_run", k=fewest["k"], n=fewest["n"], projection=PROJECTION_WORDS[fewest["projection"]],
                     updates=f"{fewest['update_ratio']:.2f}", seeds=time_to_quality.seeds_words(fewest))
    # the projection a user of one GPU meets (train_mlm.py's step there) where it was measured, else every position's
    steps = {time_to_quality.MASKED_ONLY: "train_mlm.py's update on one GPU",
             time_to_quality.EVERY_POSITION: "the update with logits at every position"}
    step, projected = None, []
    for label, said in steps.items():
        projected = [q for q in quality if q["projected"] and q["gpu_ratio"] and q["k"] == 128 and q["logits"] == label]
        if projected:
            step = said
            break
    return words("answer_gpu", n=best["n"], k=best["k"], projection=PROJECTION_WORDS[best["projection"]],
                 times=f"{best['gpu_ratio']:.2f}", seeds=time_to_quality.seeds_words(best),
                 projected=f", and projected to RoBERTa-base size with k = 128 ({step}), " + " and ".join(
                     f"{q['gpu_ratio']:.2f} times at n = {q['n']:,}" for q in projected) if projected else "")


BLOCKS = {"targets": targets_block,
          "baselines": lambda res: speedups_block(res, ("inference_cpu_fp32_b1", "inference_cpu_bf16_b1"), times=True),
          "batch4": lambda res: speedups_block(res, ("inference_cpu_fp32_b4", "inference_cpu_bf16_b4"), times=False),
          "far-inference": lambda res: far_block(
              res, ("inference_cpu_fp32_b1_far_1800s", "inference_cpu_bf16_b1_far_1800s"),
              lambda r: f"{seconds(r['time_per_seq_s'])} ({harness.fmt_bytes(r['mem_per_seq_bytes'])})"),
          "far-training": lambda res: far_block(
              res, ("training_cpu_fp32_far", "training_cpu_bf16_far", "training_cpu_bf16_far_32768"),
              lambda r: f"{seconds(r['step_s'])} ({harness.fmt_bytes(r['process_peak_bytes'])} process peak)"),
          "training": training_block, "serving": serving_block, "gpu": lambda res: gpu_block(GPU_RESULTS),
          "race": race_block}


def fill(page, res):
    """The page with every generated block rewritten from the results (the text around them is kept)."""
    for name, block in BLOCKS.items():
        page = splice(page, f"python -m benchmarks.report: {name}", block(res))
    return page


def owner(filename):
    """The sweep a result file belongs to: <tag>.{csv,json,md,png} or one of inference.py's <tag>_<plot>.png."""
    stem, _, ext = filename.rpartition(".")
    return next((tag for tag in SWEEPS if stem == tag or ext == "png" and stem in
                 (f"{tag}_{plot}" for plot in ("time", "per_token", "memory"))), None)


def index(res, results_dir):
    files = sorted(path.name for path in Path(results_dir).iterdir() if path.is_file())  # gpu/: apart
    if unlisted := [f for f in files if owner(f) is None and f != INDEX.name]:
        raise SystemExit(f"report.py: {', '.join(unlisted)} in benchmarks/results belong to no sweep of SWEEPS: add "
                         "the sweep, or delete an older run of one (git keeps it)")
    sections = [words("index")]
    for tag, script in ((tag, script) for tag, script in SWEEPS.items() if tag in res):
        machine = res[tag].get("machine")
        taken = words("taken", **machine, on=machine.get("cpu", machine.get("gpu", "?"))) if machine else words("none")
        sections.append(words("sweep", tag=tag, what=words(tag), taken=taken, command=command(res[tag], script),
                              files=", ".join(f"[{f}]({f})" for f in files if owner(f) == tag)))
    return "\n\n".join(sections) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when a page differs from the results")
    args = p.parse_args(argv)
    res = load(harness.RESULTS)
    pages = {INDEX: index(res, harness.RESULTS), DOC: fill(Path(DOC).read_text(), res),
             **{path: splice(path.read_text(), "python -m benchmarks.report: answer", answer(res))
                for path in (README, CARD)}}
    pages[README] = splice(pages[README], "python -m benchmarks.report: serving_answer", serving_answer(res))
    stale = {path: text for path, text in pages.items() if not Path(path).is_file() or Path(path).read_text() != text}
    if args.check:
        for path in stale:
            print(f"{os.path.relpath(path, harness.ROOT)} differs from benchmarks/results: run "
                  "python -m benchmarks.report")
        return int(bool(stale))
    print(write(stale) if stale else "wrote nothing: the pages are current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
