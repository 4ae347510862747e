# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Runs a script (`python kill_at_update.py STEP script.py ARGS`) that kills its own process with SIGKILL when
training reaches update STEP, on every process of a multi-process run at once, as a pre-emption would:
test-only fault injection for the exact-resume tests (no exception handler, no atexit, nothing flushed)."""

import os
import runpy
import signal
import sys

from linformer_training import loop

step, real_update = int(sys.argv[1]), loop.train_update


def killed_at_step(run, group):
    if run.state.step == step:
        os.kill(os.getpid(), signal.SIGKILL)
    return real_update(run, group)


loop.train_update = killed_at_step
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
