# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
"""A run of several processes fails as one: an error in any of them ends all of them, with a message.

Where one process works alone while the others wait for it (the main process fills the dataset cache or
trains the tokenizer, writes a checkpoint or the final model), an error there used to leave the others
waiting at the next barrier: under NCCL until the process group's timeout (10 minutes), under gloo until the
dead process's connection closed, with a traceback that says nothing of what failed; and a launcher may or
may not end them (torchrun's agent does, srun or a hand-written launcher does not). So every such block ends
with a vote instead of a bare barrier: each process says whether its part raised, and a failure anywhere is
raised everywhere, the failed process with its own error and the others with `PeerFailed` naming it.
"""

import contextlib

import torch

from .arguments import ScriptError


class PeerFailed(ScriptError):
    """Another process failed in a block this one took part in; that process's own error says why."""


@contextlib.contextmanager
def together(accelerator, what):
    """Run a block (any process may skip its body), then vote; this is also the barrier after the block, so
    it replaces `accelerator.wait_for_everyone()` there. `what` names the block in the others' message."""
    error = None
    try:
        yield
    except BaseException as e:  # SystemExit of a flag error too: the others must not wait for this process
        error = e
    failed = [0] if accelerator.num_processes == 1 else \
        accelerator.gather(torch.tensor([int(error is not None)], device=accelerator.device)).tolist()
    if error is not None:
        raise error
    if any(failed):
        ranks = ", ".join(str(rank) for rank, bad in enumerate(failed) if bad)
        raise PeerFailed(f"{what} failed on process {ranks} (see its error); process "
                         f"{accelerator.process_index} stopped too")


@contextlib.contextmanager
def main_process_first(accelerator, what):
    """Accelerate's `main_process_first` (the main process runs the block, then the others, who then find
    its cache), with a vote after each turn: an error on the main process stops the others before their turn."""
    if accelerator.is_main_process:
        with together(accelerator, what):
            yield
        with together(accelerator, what):
            pass
    else:
        with together(accelerator, what):
            pass
        with together(accelerator, what):
            yield
