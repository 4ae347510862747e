# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""linformer_training/loop.py: what every training script shares. Here: the data loaders, which must never draw
from the global RNG (dropout's), or a resumed run would train on other dropout masks than the run it continues."""

import re
import types
from pathlib import Path

import pytest
import torch

import finetune_glue
from linformer_training.mlm import block_loaders

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.usefixtures("fresh_accelerate_state")


def script_loaders(tokenizer):
    """Every loader train_mlm.py, distill.py and finetune_glue.py build (both batch orders of finetuning)."""
    import datasets

    args = types.SimpleNamespace(seed=3, per_device_train_batch_size=4, per_device_eval_batch_size=4,
                                 streaming=False, dataloader_num_workers=0, group_by_length=False)
    blocks = {split: [{"input_ids": torch.arange(8) + i} for i in range(12)] for split in ("train", "validation")}
    stack = lambda rows: torch.stack([r["input_ids"] for r in rows])  # noqa: E731 (a collate function)
    loaders = dict(zip(("blocks_train", "blocks_validation"), block_loaders(args, blocks, stack, stack)))
    examples = datasets.Dataset.from_dict({"input_ids": [list(range(3, 3 + n)) for n in range(2, 14)],
                                           "attention_mask": [[1] * n for n in range(2, 14)]})
    loaders["finetune_shuffled"] = finetune_glue.train_loader_of(args, examples, tokenizer)
    loaders["finetune_grouped"] = finetune_glue.train_loader_of(types.SimpleNamespace(**{**vars(args), "group_by_length": True}),
                                                                examples, tokenizer)
    loaders["finetune_eval"] = finetune_glue.eval_loader(args, examples, tokenizer)
    return loaders


def test_no_loader_draws_from_the_global_rng(tokenizer):
    """Starting an iterator over any loader the scripts build, prepared by Accelerate as they prepare it, leaves
    the global RNG where it was. (Before: finetune_glue.py's loaders had no generator, each new iterator drew
    one number from it, and a finetuning run with dropout resumed onto other weights.)"""
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration

    accelerator = Accelerator(cpu=True, dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True))
    for name, loader in script_loaders(tokenizer).items():
        for prepared in (loader, accelerator.prepare(loader)):
            torch.manual_seed(0)
            before = torch.get_rng_state()
            next(iter(prepared))
            assert torch.equal(torch.get_rng_state(), before), f"{name} drew from the global RNG"


def test_loaders_are_built_in_one_place():
    """Every DataLoader of the scripts and the training package comes from loop.data_loader, so none can be
    built without its own generator."""
    built = {str(path.relative_to(REPO)): len(re.findall(r"\bDataLoader\(", path.read_text()))
             for path in [*REPO.glob("*.py"), *(REPO / "src").rglob("*.py")]}
    assert {path: count for path, count in built.items() if count} == {"src/linformer_training/loop.py": 1}
