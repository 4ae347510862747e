# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Runs a script (`python fail_on_rank0.py MODULE:FUNCTION script.py ARGS`) with that function raising
"No space left on device" on process 0 only, as a disk filling up under the main process's writes would:
test-only fault injection for the multi-process failure tests."""

import errno
import importlib
import os
import runpy
import sys

module_name, function_name = sys.argv[1].split(":")
module = importlib.import_module(module_name)
original = getattr(module, function_name)


def failing(*args, **kwargs):
    if os.environ.get("RANK", "0") == "0":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return original(*args, **kwargs)


setattr(module, function_name, failing)
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
