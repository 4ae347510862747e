# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
"""Convert a pretrained BERT / RoBERTa / XLM-R encoder into a Linformer, with no training.

    python convert_to_linformer.py --model_name_or_path sentence-transformers/all-MiniLM-L6-v2 \
        --max_seq_length 4096 --projected_dim 256 --output_dir outputs/minilm-linformer-4096

The result loads with `AutoModel.from_pretrained(OUT, trust_remote_code=True)` (or after
`import linformer_hf`), in `pipeline("fill-mask")` when the source has a masked-LM head, and in
`SentenceTransformer` when the source is a sentence-transformers folder. Inputs of at most k tokens
give the source's hidden states exactly; what survives on longer ones is measured in
experiments/conversion/results.md.
"""

import dataclasses
import sys
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from linformer_training.arguments import Arguments, ScriptError, arg, parse_args
from linformer_training.conversion import MAX_SEQ_LENGTH, convert_to_linformer


@dataclass
class ConvertArguments(Arguments):
    """Convert a pretrained BERT / RoBERTa / XLM-R encoder into a Linformer."""

    model_name_or_path: str = field(metadata={"help": "source checkpoint: a folder or a Hub id (BERT, RoBERTa, XLM-R)"})
    output_dir: str = field(metadata={"help": "where to write the Linformer (must not exist or be empty)"})
    max_seq_length: int = arg(512, "n: the longest input; beyond the source's positions, its table is repeated")
    projected_dim: int = arg(128, "k: keys and values are projected to this length (at most n)")
    projection_sharing: Literal["layerwise", "key_value", "headwise", "none"] = arg("layerwise", "how E/F are shared")
    projection_init: Literal["window_mean", "random"] = arg(
        "window_mean", "E/F start as window means (the identity at k = n) or N(0, 1/n) as in the paper")
    projection_type: Literal["linear", "mean_pool", "max_pool", "conv"] = arg("linear", "learned E/F or a pooling")
    projection_length_scaling: Literal["resample", "none", "sqrt", "linear"] | None = arg(
        None, "how E/F meet inputs shorter than n (default: resample for linear projections, else none)")
    full_attention_short_inputs: bool = arg(True, "inputs of at most k tokens attend exactly, as in the source")
    short_input_max_length: int | None = arg(
        None, "longest input (real tokens) read exactly with --full_attention_short_inputs (default: k); the "
              "source's position limit (512 for BERT) keeps the source on everything it can read")
    long_input_adapter_rank: int = arg(0, "rank of low-rank adapters that only projected (long) inputs use; 0: none")
    local_attention_window: int | None = arg(
        None, "long inputs read each window of this many tokens exactly, plus the k slots through a gate that "
              "starts closed (needs --short_input_max_length equal to it)")
    tokenizer_name: str | None = arg(None, "tokenizer to carry over (default: the source's)")
    overwrite_output_dir: bool = arg(False, "replace a non-empty --output_dir, once the new folder is complete")
    seed: int = arg(0, "seed of the random projection init")

    bounds: ClassVar[dict[str, str]] = {"max_seq_length": f"[1, {MAX_SEQ_LENGTH}]", "projected_dim": "[1, inf)",
                                        "short_input_max_length": "[1, inf)", "long_input_adapter_rank": "[0, inf)",
                                        "local_attention_window": "[1, inf)",
                                        "seed": "[0, inf)"}


def main(argv=None):
    args = parse_args(ConvertArguments, argv, prog="convert_to_linformer.py")
    from transformers.utils import logging

    logging.disable_progress_bar()
    path = convert_to_linformer(**dataclasses.asdict(args))
    print(f"convert_to_linformer.py: wrote {path}")


if __name__ == "__main__":
    try:
        main()
    except ScriptError as e:
        sys.exit(f"convert_to_linformer.py: error: {e}")
