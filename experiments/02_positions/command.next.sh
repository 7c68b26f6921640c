#!/usr/bin/env bash
# Study 2, next run (issue 15: the fair-comparison protocol) — positions and length extrapolation: learned, sinusoidal,
# rope, alibi, none, t5_bias trained at T=64, each at its own best of 3 learning rates (seed 0, by val/loss), confirmed
# on seeds 1-5; verdicts on test/loss and on the test-split perplexity at 2x, 4x, 8x the training length, each scheme
# against sinusoidal (Press et al. 2022's baseline; a learned table has no rows past 1x, so against it every longer
# length would be "no test"), Holm over all of them; RoPE also scored with linear, dynamic (NTK) and YaRN scaling at
# every length (extrapolation/<scaling>/ppl@<n>x, tabulated as secondary metrics).
# From the repository root:   bash experiments/02_positions/command.next.sh
# It replaces experiments/02_positions/cpu when it has run; rename it to command.sh then (git mv).
# Jobs: 6 variants x (3 + 5) = 48, two at a time; planned wall time and measured seconds per job:
# /root/team/notes/15.md. The sweep lives in $STUDIES (outside the work tree) and resumes.
# The CPU plan's overrides below belong in conf/experiment/study_positions.yaml (listed in the note).
set -euo pipefail
[ -f .venv/bin/activate ] && . .venv/bin/activate
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 MPLBACKEND=Agg
SIZE=${SIZE:-cpu}   # SIZE=gpu: experiment=study_positions_gpu (its own sizes), same variants and protocol
STUDIES=${STUDIES:-$HOME/studies}; JOBS=${JOBS:-2}
EXP=study_positions; [ "$SIZE" = gpu ] && EXP=study_positions_gpu
LAYERS=4; STEPS=900; VAL=300
SWEEP=$STUDIES/positions/$SIZE; OUT=experiments/02_positions/$SIZE
PLAN=(model/position=learned,sinusoidal,rope,alibi,none,t5_bias
      'callbacks.extrapolation.factors=[1,2,4,8]' '+callbacks.extrapolation.scalings=[linear,dynamic,yarn]'
      'protocol.secondary=[extrapolation/ppl@2x,extrapolation/ppl@4x,extrapolation/ppl@8x,"extrapolation/*/ppl@*"]'
      'protocol.baseline="model/position=sinusoidal"')
[ "$SIZE" = cpu ] && PLAN+=(model.n_layer=$LAYERS batch_size=32 trainer.max_steps=$STEPS trainer.val_check_interval=$VAL)
NAMES="hydra.job.config.override_dirname.exclude_keys=[experiment,callbacks.extrapolation.factors,callbacks.extrapolation.scalings,protocol.secondary,protocol.baseline,model.n_layer,batch_size,trainer.max_steps,trainer.val_check_interval]"
mkdir -p "$SWEEP" "$OUT"
python -m src.study experiment=$EXP "${PLAN[@]}" "$NAMES" "hydra.sweep.dir=$SWEEP" hydra/launcher=joblib \
  hydra.launcher.n_jobs=$JOBS --out "$OUT"
cp "$SWEEP/study_commands.sh" "$OUT/study_commands.sh"
