#!/usr/bin/env bash
# Study 1 — norm placement x warmup x depth. Run from the repository root:  bash experiments/01_norm_placement/command.sh
# Re-running skips the jobs that completed (sweep_resume) and redoes the rest; the report is rewritten.
set -euo pipefail
[ -f .venv/bin/activate ] && . .venv/bin/activate
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 MPLBACKEND=Agg
SIZE=${SIZE:-cpu}   # SIZE=gpu: experiment=study_norm_gpu (6 vs 12 layers; warmup 0 vs 1000)
EXP=study_norm; [ "$SIZE" = gpu ] && EXP=study_norm_gpu
python -m src.train -m experiment=$EXP
# Follow-up at a higher learning rate (3e-3 did not break post-LN without warmup at 6 layers): the same sweep at
# lr 1e-2, deep models only. Its jobs land in the same sweep directory (their names include optim.lr=0.01).
[ "$SIZE" = cpu ] && python -m src.train -m experiment=$EXP optim.lr=1e-2 model.n_layer=6
WARM=100; DEEP=6; [ "$SIZE" = gpu ] && WARM=1000 && DEEP=12
python -m src.report outputs/studies/norm/$SIZE --out experiments/01_norm_placement/$SIZE \
  --baseline model.norm_placement=pre,scheduler.warmup_steps=$WARM,model.n_layer=$DEEP \
  --title "Study 1: norm placement x warmup x depth ($SIZE)"
