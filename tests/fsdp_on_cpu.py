# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Runs a script (`python fsdp_on_cpu.py train_mlm.py ARGS`, under `accelerate launch --use_fsdp`) with
Accelerate's FSDP2 on CPU processes (gloo), so that the FSDP code paths of our training loop are tested
on a machine without GPUs. Test-only, and it changes one thing only: Accelerate turns FSDP on only for
GPU-like devices, so on CPU processes its state stays MULTI_CPU (data parallelism), which
`loop.check_launch` refuses. Here the state becomes FSDP, as it would on GPUs; torch's `fully_shard`
itself runs on CPU with gloo. Everything else (Accelerate's wrapping and grouping of the model, the
product's own code) is what runs on GPUs.
"""

import runpy
import sys

import accelerate.state
from accelerate.utils import DistributedType

_init = accelerate.state.AcceleratorState.__init__


def init(self, *args, fsdp_plugin=None, **kwargs):
    _init(self, *args, fsdp_plugin=fsdp_plugin, **kwargs)
    if fsdp_plugin is not None and self.distributed_type == DistributedType.MULTI_CPU:
        self.distributed_type = DistributedType.FSDP
        self.fsdp_plugin = fsdp_plugin
        # Every later AcceleratorState() copies PartialState's fields over its own.
        accelerate.state.PartialState._shared_state["distributed_type"] = DistributedType.FSDP


accelerate.state.AcceleratorState.__init__ = init

if __name__ == "__main__":
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
