# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Peak memory of one configuration, measured in this fresh process (used by inference.py and training.py).

    python -m benchmarks.memory_probe '{"model": "roberta-eager", "n": 1024, "mode": "inference"}'
    python -m benchmarks.memory_probe '{"model": "modernbert-sdpa", "n": 1024, "mode": "train", "amp": "bfloat16"}'

Prints one JSON line: peak_bytes (added on top of the resident weights during one forward pass, or one
training step after a first step created the gradients and optimizer state), resident_bytes and the
seconds of the measured step (step_s; train: first_step_s too).

With "mem_limit_bytes" and / or "cap_s" in the spec, a watchdog ends the process with exit status
measure.SKIPPED and a last line {"skip": "did not fit: ..." or "past the cap: ..."} as soon as the resident
set passes the limit (on CUDA: the allocator refuses past it) or one step runs longer than the cap: the
limit is met before the kernel's out-of-memory killer picks a process, which could be someone else's.
"""

import json
import os
import sys
import threading
import time

import torch

from benchmarks.harness import fmt_bytes, pick_device
from benchmarks.measure import SKIPPED, peak_memory, status_kb, time_once
from benchmarks.models import BASE, build, inference_step, random_ids, training_step


def skip(reason):
    print(json.dumps(dict(skip=reason)), flush=True)
    os._exit(SKIPPED)  # from the watchdog thread too, while the main thread is inside a kernel


class Watchdog(threading.Thread):
    """Ends the process (skip) when its resident set passes limit_bytes or the current step runs past cap_s."""

    def __init__(self, limit_bytes=None, cap_s=None, every_s=0.05):
        super().__init__(daemon=True)
        self.limit, self.cap, self.every = limit_bytes, cap_s, every_s
        self.what, self.since = "building the model", None

    def begin(self, what):
        self.what, self.since = what, time.monotonic()

    def run(self):
        while True:
            time.sleep(self.every)
            if self.limit and status_kb("VmRSS") * 1024 > self.limit:
                skip(f"did not fit: resident set passed {fmt_bytes(self.limit)} while {self.what}")
            if self.cap and self.since is not None and time.monotonic() - self.since > self.cap:
                skip(f"past the cap: {self.what} ran over {self.cap:g} s")


def main():
    spec = json.loads(sys.argv[1])
    device = pick_device(spec.get("device", "cpu"))
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    limit = spec.get("mem_limit_bytes")
    if limit and device.type == "cuda":  # the allocator itself refuses past the limit: OutOfMemoryError below
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, limit / total))
        limit = None
    watchdog = Watchdog(limit, spec.get("cap_s"))
    if limit or spec.get("cap_s"):
        watchdog.start()
    try:
        probe(spec, device, watchdog)
    except torch.OutOfMemoryError:
        skip(f"did not fit: out of memory while {watchdog.what}")
    except RuntimeError as e:
        if "can't allocate memory" not in str(e):  # CPU allocator: mmap refused
            raise
        skip(f"did not fit: out of memory while {watchdog.what}")


def probe(spec, device, watchdog):
    mode = spec.get("mode", "inference")
    model = build(dict(spec, head="mlm" if mode == "train" else spec.get("head")), device)
    ids = random_ids(spec.get("batch", 1), spec["n"], device, dims=spec.get("dims", BASE))
    out = {}
    if mode == "train":
        step = training_step(model, ids, amp=spec.get("amp"), sparse_head=spec.get("sparse_head", False))
        watchdog.begin("taking the first step")
        out["first_step_s"] = time_once(step, device)  # creates gradients and optimizer state: not activations
    elif mode == "inference":
        step = inference_step(model, ids)
        # loads kernels and thread pools outside the measurement (RoBERTa chunks only whole multiples)
        inference_step(model, ids[:, :spec.get("chunk_ff") or 16])()
    else:
        raise ValueError(f"mode must be inference or train, got {mode!r}")
    resident = torch.cuda.memory_allocated(device) if device.type == "cuda" else status_kb("VmRSS") * 1024
    watchdog.begin("taking the measured step")
    times = []
    peak = peak_memory(lambda: times.append(time_once(step, device)), device)
    print(json.dumps(dict(out, peak_bytes=peak, resident_bytes=resident, step_s=times[0])))


if __name__ == "__main__":
    main()
