#!/usr/bin/env bash
# Study 4 — GELU vs SwiGLU (matched parameters) x LayerNorm vs RMSNorm. From the repository root:
#   bash experiments/04_ffn_norm/command.sh
# Re-running skips the jobs that completed (sweep_resume) and redoes the rest; the report is rewritten.
set -euo pipefail
[ -f .venv/bin/activate ] && . .venv/bin/activate
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 MPLBACKEND=Agg
SIZE=${SIZE:-cpu}   # SIZE=gpu: experiment=study_ffn_norm_gpu
EXP=study_ffn_norm; [ "$SIZE" = gpu ] && EXP=study_ffn_norm_gpu
python -m src.train -m experiment=$EXP
python -m src.report outputs/studies/ffn_norm/$SIZE --out experiments/04_ffn_norm/$SIZE \
  --baseline model/ffn=gelu,model/norm=layernorm --title "Study 4: FFN and norm type ($SIZE)"
