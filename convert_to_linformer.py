# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Convert a pretrained BERT / RoBERTa / XLM-R encoder into a Linformer, with no training.

    python convert_to_linformer.py --model_name_or_path sentence-transformers/all-MiniLM-L6-v2 \
        --max_seq_length 4096 --projected_dim 256 --output_dir outputs/minilm-linformer-4096

The result loads with `AutoModel.from_pretrained(OUT, trust_remote_code=True)` (or after
`import linformer_hf`), in `pipeline("fill-mask")` when the source has a masked-LM head, and in
`SentenceTransformer` when the source is a sentence-transformers folder. Inputs of at most k tokens
give the source's hidden states exactly; what survives on longer ones is measured in
experiments/conversion/results.md.

A Jargon checkpoint (PantagrueLLM's French Linformers, e.g. PantagrueLLM/jargon-biomed-4096) converts with only
--model_name_or_path and --output_dir: its n, k and sharing are kept, and the result gives its logits
(docs/conversion.md, "Jargon").
"""

import dataclasses

from linformer_training import processes
from linformer_training.arguments import parse_args
from linformer_training.conversion import ConvertArguments, convert_to_linformer


def main(argv=None):
    args = parse_args(ConvertArguments, argv, prog="convert_to_linformer.py")
    from transformers.utils import logging

    logging.disable_progress_bar()
    path = convert_to_linformer(**dataclasses.asdict(args))
    print(f"convert_to_linformer.py: wrote {path}")


if __name__ == "__main__":
    processes.run_script(main, "convert_to_linformer.py")
