# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
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
import logging
import os
import sys
import traceback

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


def run_script(main, prog):
    """The `__main__` of every script: a `ScriptError` becomes one line, `PROG: error: ...`, and exit status 1.

    A process of a multi-process run (WORLD_SIZE > 1) then leaves at once (`os._exit`) instead of through the
    interpreter's teardown. By then its files are written and closed and `outputs.end` has destroyed the process
    group, but objects that still refer to the gloo group (the DDP wrapper, an FSDP mesh) are destroyed during
    teardown, where the group's worker thread can wait forever for the interpreter lock that the destructor
    holds: rank 0 of a finished run hung at exit in one test run out of five under load, and its launcher with it.
    """
    several = int(os.environ.get("WORLD_SIZE", "1")) > 1
    try:
        main()
        code = 0
    except ScriptError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        code = 1
    except SystemExit as e:  # argparse's usage errors (status 2) and the like
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
        code = e.code if isinstance(e.code, int) else int(e.code is not None)
    except BaseException:
        if not several:
            raise  # a single process ends as Python ends any failing program
        traceback.print_exc()
        code = 1
    if several:
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(code)
    sys.exit(code)
