#!/usr/bin/env bash
# Study 2 — positions and length extrapolation. Run from the repository root:  bash experiments/02_positions/command.sh
# Re-running skips the jobs that completed (sweep_resume) and redoes the rest; the report is rewritten.
set -euo pipefail
[ -f .venv/bin/activate ] && . .venv/bin/activate
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 MPLBACKEND=Agg
SIZE=${SIZE:-cpu}   # SIZE=gpu: experiment=study_positions_gpu
EXP=study_positions; [ "$SIZE" = gpu ] && EXP=study_positions_gpu
python -m src.train -m experiment=$EXP
python -m src.report outputs/studies/positions/$SIZE --out experiments/02_positions/$SIZE \
  --baseline model/position=learned --title "Study 2: positions and length extrapolation ($SIZE)"
