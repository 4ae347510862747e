# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Write the peer model's starting folder (modeling_peer.py): the study's Linformer config, the peer's attention,
initial weights from the run's seed, and the modeling file as remote code, which train_mlm.py then pretrains with
`--model_name_or_path FOLDER --trust_remote_code true`. run_study.py calls `write_start` for a run whose
model_type is "peer"; by hand:

    python -m experiments.quality.peer OUT --config_overrides hidden_size=128,... --seed 0
"""

import argparse
import shutil
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
PEER = "linformer==0.2.3"  # the peer implementation the study names (pyproject's dev extra pins it)


def write_start(folder, config_overrides, seed, vocab_size):
    """The peer's untrained folder; `config_overrides` are the run's LinformerConfig fields."""
    from experiments.quality.modeling_peer import PeerConfig, PeerForMaskedLM

    config = PeerConfig(vocab_size=vocab_size, **config_overrides)
    config.auto_map = {"AutoConfig": "modeling_peer.PeerConfig",
                       "AutoModelForMaskedLM": "modeling_peer.PeerForMaskedLM"}
    torch.manual_seed(seed)
    model = PeerForMaskedLM(config)
    folder = Path(folder)
    model.save_pretrained(folder)
    shutil.copy(HERE / "modeling_peer.py", folder / "modeling_peer.py")
    return folder


def main(argv=None):
    import yaml

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path)
    p.add_argument("--config_overrides", required=True, help="KEY=VALUE,... (YAML values), the run's config fields")
    p.add_argument("--vocab_size", type=int, required=True, help="the tokenizer's vocabulary size")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    fields = {k: yaml.safe_load(v) for k, v in (item.split("=", 1) for item in args.config_overrides.split(","))}
    print(write_start(args.out, fields, args.seed, args.vocab_size))


if __name__ == "__main__":
    main()
