"""Peak memory of one configuration, measured in this fresh process (used by inference.py and training.py).

    python -m benchmarks.memory_probe '{"model": "roberta-eager", "n": 1024, "mode": "inference"}'
    python -m benchmarks.memory_probe '{"model": "modernbert-sdpa", "n": 1024, "mode": "train", "amp": "bfloat16"}'

Prints one JSON line: peak_bytes (added on top of the resident weights during one forward pass, or one
training step after a first step created the gradients and optimizer state) and resident_bytes.
"""

import json
import sys

import torch

from benchmarks.harness import pick_device
from benchmarks.measure import peak_memory, status_kb
from benchmarks.models import build, inference_step, random_ids, training_step


def main():
    spec = json.loads(sys.argv[1])
    device = pick_device(spec.get("device", "cpu"))
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    mode = spec.get("mode", "inference")
    model = build(dict(spec, head="mlm" if mode == "train" else spec.get("head")), device)
    ids = random_ids(spec.get("batch", 1), spec["n"], device)
    if mode == "train":
        step = training_step(model, ids, amp=spec.get("amp"))
        step()  # creates gradients and optimizer state: they are not activations
    elif mode == "inference":
        step = inference_step(model, ids)
        # loads kernels and thread pools outside the measurement (RoBERTa chunks only whole multiples)
        inference_step(model, ids[:, :spec.get("chunk_ff") or 16])()
    else:
        raise ValueError(f"mode must be inference or train, got {mode!r}")
    resident = torch.cuda.memory_allocated(device) if device.type == "cuda" else status_kb("VmRSS") * 1024
    peak = peak_memory(step, device)
    print(json.dumps(dict(peak_bytes=peak, resident_bytes=resident)))


if __name__ == "__main__":
    main()
