#!/usr/bin/env bash
# Study 3, next run (issue 15: the fair-comparison protocol) — decoder-only LM vs prefix LM vs encoder-decoder on
# Multi30k en->de (Raffel et al. 2020, T5 Table 2), twice: parameter-matched (the encoder-decoder's depth and d_ff
# solved to the decoder's count) and FLOPs-matched (each family trained for the steps at which its training FLOPs
# equal the encoder-decoder's; python -m src.study solves them from the model's own FLOPs count). Each family at its
# own best of 3 learning rates (seed 0, by val/loss), confirmed on seeds 1-5; verdicts on test/loss and on test BLEU
# and chrF (greedy decoding of the first $LIMIT test pairs, per confirm run), each family against the
# encoder-decoder, Holm over all of them.
# From the repository root:   bash experiments/03_families/command.next.sh
# It replaces experiments/03_families/cpu (params) and writes experiments/03_families/cpu_flops when it has run;
# rename it to command.sh then (git mv).
# Jobs: 2 matchings x 3 families x (3 + 5) = 48 training jobs + 30 BLEU evaluations, two at a time; planned wall time
# and measured seconds per job: /root/team/notes/15.md. Sweeps live in $STUDIES (outside the work tree) and resume;
# an evaluation newer than its checkpoint is not redone.
set -euo pipefail
[ -f .venv/bin/activate ] && . .venv/bin/activate
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 MPLBACKEND=Agg
SIZE=${SIZE:-cpu}   # SIZE=gpu: experiment=study_families_gpu (its own sizes), same variants and protocol
STUDIES=${STUDIES:-$HOME/studies}; JOBS=${JOBS:-2}
LIMIT=${LIMIT:-300}
DATA=${DATA:-../shared/data/multi30k_en_de}
EXP=study_families; [ "$SIZE" = gpu ] && EXP=study_families_gpu
MATCHES=${MATCHES:-params flops}   # MATCHES=params or MATCHES=flops runs one half (~53 / ~37 min on CPU)
STEPS=250                          # CPU: 250 steps x 64 pairs (~0.55 epoch); the encoder-decoder's steps under FLOPs matching
[ -f experiments/03_families/tokenizer/tokenizer.json ] || python experiments/03_families/build_tokenizer.py --data "$DATA"

bleu() {  # BLEU/chrF of every confirm run's last.ckpt, JOBS at a time; skipped when newer than the checkpoint
  local sweep=$1 run ckpt n=0
  for run in "$sweep"/*protocol.stage=confirm*/; do
    ckpt="$run/checkpoints/last.ckpt"
    [ -f "$ckpt" ] || continue
    [ "$run/eval_translation/metrics.json" -nt "$ckpt" ] && continue
    # run dirs are named after overrides ("…=…,seed=1"): quote them for Hydra's override grammar
    python -m src.eval "ckpt_path=\"$ckpt\"" benchmarks=[translation] "benchmarks.translation.path=\"$DATA\"" \
      benchmarks.translation.max_new_tokens=60 limit=$LIMIT progress=false "hydra.run.dir=\"${run}eval_translation\"" \
      > "${run}eval_translation.log" 2>&1 &
    n=$((n + 1)); [ $((n % JOBS)) -eq 0 ] && wait
  done
  wait
}

for MATCH in $MATCHES; do
  SWEEP=$STUDIES/families/$SIZE/$MATCH
  OUT=experiments/03_families/$SIZE; [ "$MATCH" = flops ] && OUT=experiments/03_families/${SIZE}_flops
  mkdir -p "$SWEEP" "$OUT"
  # validate twice per run: under FLOPs matching the decoder-only and prefix LM get 122 steps (half the FLOPs per step)
  VAL=125; [ "$MATCH" = flops ] && VAL=61
  PLAN=(); [ "$SIZE" = cpu ] && PLAN=(trainer.max_steps=$STEPS trainer.val_check_interval=$VAL)
  ARGS=(experiment=$EXP protocol.match=$MATCH "${PLAN[@]}"
        "hydra.job.config.override_dirname.exclude_keys=[experiment,protocol.match,trainer.max_steps,trainer.val_check_interval]"
        "hydra.sweep.dir=$SWEEP" hydra/launcher=joblib hydra.launcher.n_jobs=$JOBS)
  python -m src.study "${ARGS[@]}" --stage tune
  python -m src.study "${ARGS[@]}" --stage confirm
  bleu "$SWEEP"
  python -m src.study "${ARGS[@]}" --stage report --out "$OUT"
  cp "$SWEEP/study_commands.sh" "$OUT/study_commands.sh"
done
