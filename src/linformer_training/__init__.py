# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""The training side of linformer-hf: what the scripts (train_mlm.py, finetune_glue.py, ...) stand on.

    arguments    flags: HfArgumentParser + YAML recipes, bounds on every number, shared argument groups
    corpus       text corpora through `datasets` (Hub names, local files, streaming)
    tokenization a tokenizer loaded or trained on the corpus, or a conversion source's carried over
    mlm          packing, seeded masking and draws, the masked-LM objective
    tasks        GLUE/IMDB/own-data classification tasks and their objective
    metrics      GLUE metrics (scikit-learn / scipy; an `evaluate` script only with --metric_script)
    models       facts about model configs (input limit, from-scratch configs, convertible types), model files
    conversion   a BERT/RoBERTa encoder turned into a Linformer (convert_to_linformer.py)
    jargon       a Jargon checkpoint (already a Linformer) as a linformer-hf folder (convert_to_linformer.py)
    distillation teacher/student checks, spans and the distillation objective (distill.py)
    loop         a script's `Setup`, `prepare` (optimizer, schedule, Accelerate), the loop `train(run)` and its state
    processes    what every process does together (votes on failures, main process first)
    checkpoints  complete-or-absent checkpoints and output folders (one `publish`), verified resume
    tracking     trackers and metrics.jsonl
    outputs      the final model folder, its card, the Hub upload
    onnx_export  fp32 and 8-bit ONNX graphs checked against PyTorch (export_onnx.py)
    sentence_transformer_linformer  the sentence-transformers module a release ships as remote code
    upgrade      a folder in the first releases' format rewritten into today's (config fields, weight names)

The model package (`linformer_hf`) never imports this one.
"""
