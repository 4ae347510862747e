# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""Export a Linformer folder to ONNX (fp32, and a weight-only int8 copy) for ONNX Runtime.

    python export_onnx.py --model_name_or_path outputs/minilm-linformer-4096   # a folder of your own

writes outputs/minilm-linformer-4096/onnx/model.onnx and onnx/model_qint8.onnx, where sentence-transformers'
`backend="onnx"` looks for them (a release folder, or any that holds either file already, needs
`--overwrite_output_dir true`; docs/serving.md): dynamic batch and length
(up to n), every attention route in one graph, checked against PyTorch (max abs difference <= 1e-4) before it
is written. Needs the `onnx` extra (pip install 'linformer-hf[onnx]').
"""

import dataclasses

from linformer_training import processes
from linformer_training.arguments import parse_args
from linformer_training.onnx_export import ExportArguments, export_onnx


def main(argv=None):
    args = parse_args(ExportArguments, argv, prog="export_onnx.py")
    out, difference = export_onnx(**dataclasses.asdict(args))
    print(f"export_onnx.py: wrote {out} (ONNX Runtime vs PyTorch: max abs difference {difference:.2g})")


if __name__ == "__main__":
    processes.run_script(main, "export_onnx.py")
