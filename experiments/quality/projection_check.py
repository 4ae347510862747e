# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Has a Linformer's learned E/F found where the words are? For each k x n projection of a pretrained model, how its
slots read the n positions: a slot that mixes every position with random signs (as E/F start) carries no word order;
one that averages a short stretch of neighbouring positions can (the mean-pooling projection is that by design).

    python -m experiments.quality.projection_check ~/runs/quality/linformer_n128_k32_layerwise_s0

Per projection matrix, means over its k slots (rows e of n weights):
- `positions_read`: (sum |e|)^2 / sum e^2, how many positions a slot reads: n for an even average, about
  2n / pi for Gaussian weights (the initialisation), n / k for a mean over its own stretch of n / k positions.
- `nearby_share`: the largest share of sum |e| inside any n / k consecutive positions: 1 for a slot that reads one
  stretch, a few times 1 / k for a random slot.
- `average_part`: |sum e| / sum |e|, how much of the slot is a plain average of its positions (1) rather than a
  signed mixture (near 0 for random weights).
The same three numbers for a Gaussian k x n matrix (`random`) are printed beside them as the yardstick.
"""

import argparse
import json
import math

import torch
from transformers import AutoModelForMaskedLM

from linformer_hf.modeling_linformer import LinformerProjections  # and linformer_hf registers with the Auto classes


def describe(matrix):
    """The three numbers above for one (k, n) matrix."""
    k, n = matrix.shape
    weight = matrix.abs()
    stretch = max(1, n // k)
    windows = weight.unfold(1, stretch, 1).sum(-1)  # (k, n - stretch + 1): |weight| in each run of `stretch`
    return {"positions_read": round(float((weight.sum(1) ** 2 / (matrix ** 2).sum(1)).mean()), 2),
            "nearby_share": round(float((windows.max(1).values / weight.sum(1)).mean()), 3),
            "average_part": round(float((matrix.sum(1).abs() / weight.sum(1)).mean()), 3)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a Linformer masked-LM folder (train_mlm.py output)")
    args = p.parse_args(argv)
    model = AutoModelForMaskedLM.from_pretrained(args.model, dtype=torch.float32)
    if model.config.model_type != "linformer":
        p.error(f"model: {args.model} is a {model.config.model_type!r} model; only a Linformer has projections")
    projections = next(m for m in model.modules() if isinstance(m, LinformerProjections))
    if model.config.projection_type != "linear":
        p.error(f"model: {args.model} has projection_type={model.config.projection_type!r}: its projections are fixed "
                f"poolings of n / k positions by construction; only 'linear' E/F are learnt position by position")
    report = {f"{name}[{group}]": describe(matrix) for name, param in projections.named_parameters()
              for group, matrix in enumerate(param.detach().float())}
    n, k = model.config.max_seq_length, model.config.projected_dims[0]
    report["random"] = describe(torch.randn(k, n, generator=torch.Generator().manual_seed(0)) / math.sqrt(n))
    print(json.dumps({"model": args.model, "n": n, "k": k, "projections": report}))


if __name__ == "__main__":
    main()
