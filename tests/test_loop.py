# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""linformer_training/loop.py: what every training script shares. Here: the data loaders, which must never draw
from the global RNG (dropout's), or a resumed run would train on other dropout masks than the run it continues;
and `prepare`, which measures a run (the scripts' end-to-end tests run the rest)."""

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

    def stack(rows):
        return torch.stack([r["input_ids"] for r in rows])

    loaders = dict(zip(("blocks_train", "blocks_validation"), block_loaders(args, blocks, stack, stack), strict=True))
    examples = datasets.Dataset.from_dict({"input_ids": [list(range(3, 3 + n)) for n in range(2, 14)],
                                           "attention_mask": [[1] * n for n in range(2, 14)]})
    loaders["finetune_shuffled"] = finetune_glue.train_loader_of(args, examples, tokenizer)
    grouped = types.SimpleNamespace(**{**vars(args), "group_by_length": True})
    loaders["finetune_grouped"] = finetune_glue.train_loader_of(grouped, examples, tokenizer)
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


def test_prepare_measures_a_run_in_updates_or_in_epochs_of_the_prepared_loader(tmp_path):
    """`prepare`: a run of --max_steps lasts that many updates; one measured in epochs lasts that many passes over
    the training loader as Accelerate prepared it, in updates of `accumulation` batches (an epoch's last partial
    update is skipped), and its schedule ends there. An absent validation split stays None."""
    from accelerate import Accelerator

    from linformer_training import loop
    from linformer_training.arguments import OptimizerArguments

    setup = loop.Setup(accelerator=Accelerator(cpu=True), accumulation=2, output_dir=tmp_path, checkpoint=None)
    batches = loop.data_loader(torch.arange(10.0)[:, None], 0, batch_size=2)  # 5 batches: 2 updates an epoch
    by_epochs = loop.prepare(OptimizerArguments(), setup, torch.nn.Linear(1, 1), batches, [None], epochs=3)
    assert (by_epochs.updates_per_epoch, by_epochs.max_steps, by_epochs.eval_loaders) == (2, 6, [None])
    for _ in range(6):
        by_epochs.optimizer.step()  # no gradients: only the schedule moves
        by_epochs.scheduler.step()
    assert by_epochs.scheduler.get_last_lr() == [0.0, 0.0]  # the linear decay ends with the run
    by_steps = loop.prepare(OptimizerArguments(max_steps=4), setup, torch.nn.Linear(1, 1), batches)
    assert (by_steps.updates_per_epoch, by_steps.max_steps, by_steps.eval_loaders) == (None, 4, [])
