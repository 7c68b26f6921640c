#!/usr/bin/env bash
# Study 5 — does the ranking survive scale? Two contrasts (pre- vs post-LN, learned vs rotary positions) at 4 sizes,
# 29.6k-321.8k parameters, 16 tokens per parameter (conf/experiment/study_scaling.yaml). From the repository root:
#   bash experiments/05_scaling/command.sh
# 3 arms x 4 sizes x (3 learning rates on seed 0 + the chosen one on seeds 1-3) = 72 jobs, two at a time
# (joblib launcher, one core each). Planned wall time on the 2-core machine: see /root/team/notes/15.md (~85 min).
# The sweep lives outside the work tree ($STUDIES/scaling) and resumes: re-running skips the jobs that completed
# and restarts the interrupted ones, so the study can be stopped and continued on the same machine.
# Then the report (per arm x size: chosen lr, verdicts on test/loss with Holm over the one-factor pairs, n-gram rows)
# and the scaling analysis (L(N) = E + A N^-alpha per arm, alpha's bootstrap interval, the log-log plot, crossings).
set -euo pipefail
[ -f .venv/bin/activate ] && . .venv/bin/activate
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 MPLBACKEND=Agg
STUDIES=${STUDIES:-$HOME/studies}
SWEEP=$STUDIES/scaling
OUT=experiments/05_scaling/cpu
JOBS=${JOBS:-2}
mkdir -p "$SWEEP" "$OUT"
python -m src.study experiment=study_scaling "hydra.sweep.dir=$SWEEP" hydra/launcher=joblib hydra.launcher.n_jobs=$JOBS \
  --out "$OUT"
python -m src.report scaling "$SWEEP" --size experiment/study_scaling/size --out "$OUT" --boot 1000 \
  --title "Study 5: loss against parameters, pre- vs post-LN and learned vs rotary positions (cpu)"
cp "$SWEEP/study_commands.sh" "$OUT/study_commands.sh"   # the exact training commands that ran
