# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Trains every Linformer head with the HF Trainer for a few steps; run under torchrun for DDP. A third
argument `gradient_checkpointing` turns activation checkpointing on.

Prints one JSON line per head (rank 0) with the eval loss the Trainer reports, the loss recomputed by
hand from the trained model, and a checksum of the weights gathered from every rank.
"""

import json
import sys

import torch
import torch.distributed as dist
from conftest import tiny_config  # tests/ is sys.path[0]: this file is run as a script
from torch.nn import functional as F
from transformers import Trainer, TrainingArguments

from linformer_hf import (
    LinformerForMaskedLM,
    LinformerForMultipleChoice,
    LinformerForQuestionAnswering,
    LinformerForSequenceClassification,
    LinformerForTokenClassification,
)

N, L = 16, 12
g = torch.Generator().manual_seed(0)
ids = torch.randint(5, 300, (N, L), generator=g)
mask = torch.ones(N, L, dtype=torch.long)
mask[::3, 8:] = 0

HEADS = {
    "masked_lm": (LinformerForMaskedLM, {}, lambda: {"labels": torch.where(mask.bool(), ids, -100)}),
    "regression": (LinformerForSequenceClassification, {"num_labels": 1},
                   lambda: {"labels": torch.randn(N, generator=g)}),
    "single_label": (LinformerForSequenceClassification, {"num_labels": 3},
                     lambda: {"labels": torch.randint(0, 3, (N,), generator=g)}),
    "multi_label": (LinformerForSequenceClassification, {"num_labels": 3, "problem_type": "multi_label_classification"},
                    lambda: {"labels": torch.randint(0, 2, (N, 3), generator=g).float()}),
    "token": (LinformerForTokenClassification, {"num_labels": 4},
              lambda: {"labels": torch.randint(0, 4, (N, L), generator=g)}),
    "qa": (LinformerForQuestionAnswering, {}, lambda: {"start_positions": torch.randint(0, L, (N,), generator=g),
                                                       "end_positions": torch.randint(0, L, (N,), generator=g)}),
    # Two choices per example: (N, 2, L) inputs replace the shared ones.
    "multiple_choice": (LinformerForMultipleChoice, {}, lambda: {
        "input_ids": torch.randint(5, 300, (N, 2, L), generator=g),
        "attention_mask": mask[:, None].expand(N, 2, L).clone(),
        "labels": torch.randint(0, 2, (N,), generator=g)}),
}


def manual_loss(name, out, labels):
    if name == "masked_lm":
        return F.cross_entropy(out.logits.flatten(0, 1), labels["labels"].flatten())
    if name == "regression":
        return F.mse_loss(out.logits.squeeze(-1), labels["labels"])
    if name == "single_label":
        return F.cross_entropy(out.logits, labels["labels"])
    if name == "multi_label":
        return F.binary_cross_entropy_with_logits(out.logits, labels["labels"])
    if name == "token":
        return F.cross_entropy(out.logits.flatten(0, 1), labels["labels"].flatten())
    if name == "multiple_choice":
        return F.cross_entropy(out.logits, labels["labels"])
    if name == "qa":
        return (F.cross_entropy(out.start_logits, labels["start_positions"])
                + F.cross_entropy(out.end_logits, labels["end_positions"])) / 2
    raise KeyError(name)


def main(output_dir, sharing, gradient_checkpointing=False):
    for name, (cls, extra, make_labels) in HEADS.items():
        torch.manual_seed(0)
        labels = make_labels()
        inputs = {"input_ids": labels.pop("input_ids", ids), "attention_mask": labels.pop("attention_mask", mask)}
        rows = [{**{k: v[i] for k, v in inputs.items()}, **{k: v[i] for k, v in labels.items()}} for i in range(N)]
        model = cls(tiny_config(projection_sharing=sharing, **extra))
        backend = "gloo" if dist.is_available() and dist.is_torchelastic_launched() else None
        args = TrainingArguments(output_dir=f"{output_dir}/{name}", per_device_train_batch_size=4,
                                 per_device_eval_batch_size=N, max_steps=4, learning_rate=1e-3, use_cpu=True,
                                 report_to=[], save_strategy="no", logging_steps=1, seed=0,
                                 gradient_checkpointing=gradient_checkpointing,
                                 ddp_backend=backend)
        trainer = Trainer(model=model, args=args, train_dataset=rows, eval_dataset=rows)
        trainer.train()
        reported = trainer.evaluate()["eval_loss"]
        model.eval()
        with torch.no_grad():
            out = model(**inputs)
            recomputed = manual_loss(name, out, labels).item()
            checksum = torch.stack([p.double().sum() for p in model.parameters()]).sum()
            if dist.is_initialized():
                gathered = [torch.zeros_like(checksum) for _ in range(dist.get_world_size())]
                dist.all_gather(gathered, checksum)
            else:
                gathered = [checksum]
        projection_tensors = model.base_model.encoder.projections.num_matrices()
        if not dist.is_initialized() or dist.get_rank() == 0:
            print("RESULT", json.dumps({"head": name, "reported": reported, "recomputed": recomputed,
                              "checksums": [c.item() for c in gathered], "projections": projection_tensors,
                              "checkpointing": model.is_gradient_checkpointing,
                              "world": dist.get_world_size() if dist.is_initialized() else 1}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], gradient_checkpointing=sys.argv[3:] == ["gradient_checkpointing"])
    if dist.is_initialized():  # a clean gloo shutdown; left to interpreter exit it can abort the process
        dist.barrier()
        dist.destroy_process_group()
