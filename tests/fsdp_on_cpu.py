# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
"""Runs a script (`python fsdp_on_cpu.py train_mlm.py ARGS`, under `accelerate launch --use_fsdp`) with
Accelerate's FSDP2 on CPU processes (gloo), so that the FSDP code paths of our training loop are tested
on a machine without GPUs. Test-only: two things Accelerate 1.15 does are changed for this process.

1. Accelerate turns FSDP on only for GPU-like devices: on CPU processes its state stays MULTI_CPU (data
   parallelism), which `loop.check_launch` refuses. Here the state becomes FSDP, as it would on GPUs;
   torch's `fully_shard` itself runs on CPU with gloo.
2. Accelerate's FSDP2 wrapping puts the output embedding (`lm_head.decoder`) in one group with the input
   embedding, but RoBERTa's LM head also ties `lm_head.decoder.bias` to `lm_head.bias`, which stays in the
   root group, and torch >= 2.13 rejects a parameter shared by two groups ("Parameter 'None' is shared
   with a parameter already managed by another FSDP group"), for `RobertaForMaskedLM` as for Linformer.
   Here the input embedding and the whole `lm_head` are sharded as one group first (so launch with
   `--fsdp_cpu_ram_efficient_loading false`, and no mixed precision: that group gets no precision policy).
"""

import runpy
import sys

import accelerate.accelerator
import accelerate.state
import accelerate.utils.fsdp_utils
from accelerate.utils import DistributedType

_init = accelerate.state.AcceleratorState.__init__


def init(self, *args, fsdp_plugin=None, **kwargs):
    _init(self, *args, fsdp_plugin=fsdp_plugin, **kwargs)
    if fsdp_plugin is not None and self.distributed_type == DistributedType.MULTI_CPU:
        self.distributed_type = DistributedType.FSDP
        self.fsdp_plugin = fsdp_plugin
        # Every later AcceleratorState() copies PartialState's fields over its own.
        accelerate.state.PartialState._shared_state["distributed_type"] = DistributedType.FSDP


_prepare = accelerate.utils.fsdp_utils.fsdp2_prepare_model


def prepare(accelerator, model):
    from torch.distributed.fsdp import fully_shard

    if not hasattr(model, "lm_head"):
        return _prepare(accelerator, model)
    fully_shard([model.get_input_embeddings(), model.lm_head])
    cls = type(model)
    get_output_embeddings = cls.get_output_embeddings
    cls.get_output_embeddings = lambda self: None  # already grouped: Accelerate carves no tail group
    try:
        return _prepare(accelerator, model)
    finally:
        cls.get_output_embeddings = get_output_embeddings


accelerate.state.AcceleratorState.__init__ = init
accelerate.utils.fsdp_utils.fsdp2_prepare_model = prepare
accelerate.accelerator.fsdp2_prepare_model = prepare

if __name__ == "__main__":
    sys.argv = sys.argv[1:]
    sys.path.insert(0, str(__import__("pathlib").Path(sys.argv[0]).resolve().parent))
    runpy.run_path(sys.argv[0], run_name="__main__")
