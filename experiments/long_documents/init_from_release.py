# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
"""Start the long-input adapters and E of a converted student from an earlier distilled release.

    python experiments/long_documents/init_from_release.py --converted outputs/minilm-n4096-k256-exact512-r64 \
        --previous PREVIOUS_RELEASE_FOLDER --out outputs/minilm-n4096-svd64

The previous release (linformer-hf 0.1's release/minilm-l6-linformer-n4096, git history: 7243e98) trained
every weight, so on inputs the teacher can read it was no longer the teacher. What it learned for long inputs
is kept here as long-input-only parameters: each linear map's change is truncated to the adapters' rank by SVD
(B A with B = U S^1/2, A = S^1/2 V^T), its bias change becomes the adapter's bias, E is copied, and so are the
position rows past the source's limit, which only long inputs reach. Every other tensor stays the converted
student's, i.e. the teacher's: the result is its teacher, exactly, on inputs of at most 512 tokens.
"""

import argparse
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

# adapter (relative to encoder.layer.<i>.) -> the linear map it updates
ADAPTED = {"attention.self.long_input_adapters.query": "attention.self.query",
           "attention.self.long_input_adapters.key": "attention.self.key",
           "attention.self.long_input_adapters.value": "attention.self.value",
           "attention.long_input_adapter": "attention.output.dense",
           "long_input_adapters.intermediate": "intermediate.dense",
           "long_input_adapters.output": "output.dense"}
POSITIONS = "embeddings.position_embeddings.weight"


def low_rank(change, rank):
    """(B, A) with B A the best rank-`rank` approximation of `change` (Eckart-Young), split evenly."""
    u, s, vh = torch.linalg.svd(change.double(), full_matrices=False)
    root = s[:rank].sqrt()
    return (u[:, :rank] * root).float(), (root[:, None] * vh[:rank]).float()


def initialise(converted, previous, source_positions):
    """The converted state dict with its long-input parameters taken from `previous`; and, per map, the share
    of the change's energy the rank keeps."""
    out, kept = dict(converted), {}
    layers = sorted({int(name.split(".")[2]) for name in converted if name.startswith("encoder.layer.")})
    for i in layers:
        for adapter, linear in ADAPTED.items():
            a, w = f"encoder.layer.{i}.{adapter}", f"encoder.layer.{i}.{linear}"
            rank = converted[f"{a}.down"].shape[0]
            change = previous[f"{w}.weight"].float() - converted[f"{w}.weight"].float()
            out[f"{a}.up"], out[f"{a}.down"] = low_rank(change, rank)
            out[f"{a}.bias"] = previous[f"{w}.bias"].float() - converted[f"{w}.bias"].float()
            energy = torch.linalg.svdvals(change.double()).square()
            kept[w] = float(energy[:rank].sum() / energy.sum())
    for name in converted:
        if name.startswith("encoder.projections."):
            out[name] = previous[name].float()
    first_long = 1 + source_positions  # rows 0 (padding) and 1..source_positions are what short inputs read
    out[POSITIONS] = converted[POSITIONS].clone()
    out[POSITIONS][first_long:] = previous[POSITIONS][first_long:].float()
    return out, kept


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--converted", required=True, help="convert_to_linformer.py output with adapters")
    parser.add_argument("--previous", required=True, help="the earlier release folder")
    parser.add_argument("--out", required=True, help="new folder (a copy of --converted with the new weights)")
    parser.add_argument("--source_positions", type=int, default=512, help="the teacher's position limit")
    args = parser.parse_args(argv)
    converted = load_file(Path(args.converted) / "model.safetensors")
    if not any(".long_input_adapter" in name for name in converted):
        parser.error(f"--converted {args.converted}: has no long-input adapters (convert with "
                     f"--long_input_adapter_rank R)")
    previous = load_file(Path(args.previous) / "model.safetensors")
    state, kept = initialise(converted, previous, args.source_positions)
    out = Path(args.out)
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(args.converted, staging)
    save_file({k: v.contiguous() for k, v in state.items()}, staging / "model.safetensors", metadata={"format": "pt"})
    if out.exists():
        shutil.rmtree(out)
    staging.rename(out)
    share = sorted(kept.values())
    print(f"wrote {out}: rank-{converted[next(n for n in converted if n.endswith('.down'))].shape[0]} adapters keep "
          f"{share[0]:.2f}-{share[-1]:.2f} of each map's change (median {share[len(share) // 2]:.2f})")


if __name__ == "__main__":
    main()
