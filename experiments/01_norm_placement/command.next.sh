#!/usr/bin/env bash
# Study 1, next run (issue 15: the fair-comparison protocol) — norm placement x warmup at 6 layers, five placements
# (pre, post, sandwich, deepnorm, rezero), each with and without warmup, each at its own best of 3 learning rates
# (seed 0, by val/loss), confirmed on seeds 1-5, verdicts on test/loss and the step-0 FFN gradient-norm ratio
# (last/first layer), Holm over every one-factor pair. Then step-0 gradient norms against depth (2/6/12/24 layers).
# From the repository root:   bash experiments/01_norm_placement/command.next.sh
# It replaces experiments/01_norm_placement/cpu when it has run; rename it to command.sh then (git mv).
# Jobs: 10 variants x (3 + 5) = 80 training jobs + 60 one-step jobs, two at a time; planned wall time and the
# measured seconds per job: /root/team/notes/15.md. Sweeps live in $STUDIES (outside the work tree) and resume:
# re-running skips completed jobs and restarts interrupted ones; the report is rewritten.
# The CPU plan's overrides below belong in conf/experiment/study_norm.yaml (listed in the note); once they are there,
# the PLAN array can go.
set -euo pipefail
[ -f .venv/bin/activate ] && . .venv/bin/activate
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 MPLBACKEND=Agg
SIZE=${SIZE:-cpu}   # SIZE=gpu: experiment=study_norm_gpu (its own sizes and warmup), same variants and protocol
STUDIES=${STUDIES:-$HOME/studies}; JOBS=${JOBS:-2}
EXP=study_norm; DEPTH=6; WARM=100; STEPS=500; VAL=125
[ "$SIZE" = gpu ] && EXP=study_norm_gpu && DEPTH=12 && WARM=1000
SWEEP=$STUDIES/norm/$SIZE; OUT=experiments/01_norm_placement/$SIZE
PLAN=(model.norm_placement=pre,post,sandwich,deepnorm,rezero "scheduler.warmup_steps=0,$WARM" "model.n_layer=choice($DEPTH)"
      "protocol.baseline=\"model.norm_placement=pre,scheduler.warmup_steps=$WARM,model.n_layer=$DEPTH\"")
[ "$SIZE" = cpu ] && PLAN+=(batch_size=32 trainer.max_steps=$STEPS trainer.val_check_interval=$VAL)
# the plan's fixed keys stay out of the job directory names (they are the same for every job)
NAMES="hydra.job.config.override_dirname.exclude_keys=[experiment,protocol.baseline,batch_size,trainer.max_steps,trainer.val_check_interval]"
mkdir -p "$SWEEP" "$OUT"
python -m src.study experiment=$EXP "${PLAN[@]}" "$NAMES" "hydra.sweep.dir=$SWEEP" hydra/launcher=joblib \
  hydra.launcher.n_jobs=$JOBS --out "$OUT"
cp "$SWEEP/study_commands.sh" "$OUT/study_commands.sh"
# Gradient norms at initialisation against depth (Xiong et al. 2020, Fig. 3: post-LN's grow toward the last layer,
# pre-LN's do not): one step per job, every placement at 2, 6, 12, 24 layers, seeds 1-3, nothing tuned (the
# gradient at step 0 does not depend on the learning rate); verdicts per layer and on the last/first ratio.
INIT=$STUDIES/norm_init/$SIZE
python -m src.train -m experiment=$EXP model.norm_placement=pre,post,sandwich,deepnorm,rezero model.n_layer=2,6,12,24 \
  seed=1,2,3 trainer.max_steps=1 scheduler.warmup_steps=0 test=false callbacks.ngram_reference=null '~protocol.tune' protocol.design=grid 'protocol.seeds=[1,2,3]' \
  'protocol.factors=[model.norm_placement,model.n_layer]' \
  'protocol.baseline="model.norm_placement=pre,model.n_layer=24"' \
  "hydra.job.config.override_dirname.exclude_keys=[experiment,trainer.max_steps,scheduler.warmup_steps,test,callbacks.ngram_reference,protocol.tune,protocol.design,protocol.seeds,protocol.factors,protocol.baseline]" \
  "hydra.sweep.dir=$INIT" hydra/launcher=joblib hydra.launcher.n_jobs=$JOBS || true   # a failed job is in its metrics.json
python -m src.report "$INIT" --out "$OUT/init" --metric grad_norm/decoder.ffn.last_over_first --extra --equivalence-margin 0.1 \
  --comparisons one_factor --title "Study 1: last/first-layer FFN gradient norm at step 0 against depth ($SIZE)"
# per layer, at the main study's depth: each placement against pre-LN (the run directories of that depth only)
python -m src.report "$INIT"/model.n_layer=$DEPTH,* --out "$OUT/init_layers" --metric grad_norm/decoder.ffn.last_over_first \
  --extra 'grad_norm/decoder.ffn@*' --comparisons baseline --baseline model.norm_placement=pre \
  --title "Study 1: per-layer FFN gradient norms at step 0, $DEPTH layers ($SIZE)"
