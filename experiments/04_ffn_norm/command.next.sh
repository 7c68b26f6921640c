#!/usr/bin/env bash
# Study 4, next run (issue 15: the fair-comparison protocol) — GELU vs SwiGLU (SwiGLU's d_ff solved to the GELU
# parameter count) x LayerNorm vs RMSNorm x QK-norm (none vs rmsnorm per head; Narang et al. 2021, Shazeer 2020;
# QK-norm: Henry et al. 2020, Qwen 3 / OLMo 2), 4 layers x d_model 64 on char-level Tiny Shakespeare; each of the 8
# combinations at its own best of 3 learning rates (seed 0, by val/loss), confirmed on seeds 1-5; verdicts on
# test/loss for every pair that differs in one factor, Holm over all 12, "no difference" only as TOST within 0.02 nats.
# From the repository root:   bash experiments/04_ffn_norm/command.next.sh
# It replaces experiments/04_ffn_norm/cpu when it has run; rename it to command.sh then (git mv).
# Jobs: 8 x (3 + 5) = 64, two at a time; planned wall time and measured seconds per job: /root/team/notes/15.md.
# The sweep lives in $STUDIES (outside the work tree) and resumes.
# The CPU plan's overrides below belong in conf/experiment/study_ffn_norm.yaml (listed in the note).
set -euo pipefail
[ -f .venv/bin/activate ] && . .venv/bin/activate
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 MPLBACKEND=Agg
SIZE=${SIZE:-cpu}   # SIZE=gpu: experiment=study_ffn_norm_gpu (its own sizes), same variants and protocol
STUDIES=${STUDIES:-$HOME/studies}; JOBS=${JOBS:-2}
EXP=study_ffn_norm; [ "$SIZE" = gpu ] && EXP=study_ffn_norm_gpu
STEPS=900; VAL=300
SWEEP=$STUDIES/ffn_norm/$SIZE; OUT=experiments/04_ffn_norm/$SIZE
PLAN=(model/qk_norm=none,rmsnorm 'protocol.factors=[model/ffn,model/norm,model/qk_norm]'
      'protocol.baseline="model/ffn=gelu,model/norm=layernorm,model/qk_norm=none"')
[ "$SIZE" = cpu ] && PLAN+=(batch_size=32 trainer.max_steps=$STEPS trainer.val_check_interval=$VAL)
NAMES="hydra.job.config.override_dirname.exclude_keys=[experiment,protocol.factors,protocol.baseline,batch_size,trainer.max_steps,trainer.val_check_interval]"
mkdir -p "$SWEEP" "$OUT"
python -m src.study experiment=$EXP "${PLAN[@]}" "$NAMES" "hydra.sweep.dir=$SWEEP" hydra/launcher=joblib \
  hydra.launcher.n_jobs=$JOBS --out "$OUT"
cp "$SWEEP/study_commands.sh" "$OUT/study_commands.sh"
