# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Speed, memory and low-rank benchmarks. Run each from the repository root as `python -m benchmarks.NAME`
(`--help` says what it measures); the shared pieces are `models`, `flop_counts`, `measure` and `harness`; `reporting`
writes the tables, intervals and verdicts of every results page, here and in experiments/."""
