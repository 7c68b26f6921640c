#!/usr/bin/env bash
# Study 3 — encoder-decoder vs prefix LM vs causal decoder on Multi30k en->de at matched parameters.
# From the repository root:  bash experiments/03_families/command.sh
# 1. the byte-level BPE tokenizer (committed; rebuilt only when missing), 2. the sweep (3 variants x 2 seeds;
# re-running skips completed jobs), 3. BLEU/chrF of each run's last.ckpt on the first $LIMIT test pairs with the
# evaluation CLI (greedy decoding; skipped when newer than the checkpoint), 4. the report.
set -euo pipefail
[ -f .venv/bin/activate ] && . .venv/bin/activate
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 MPLBACKEND=Agg
SIZE=${SIZE:-cpu}   # SIZE=gpu: experiment=study_families_gpu
LIMIT=${LIMIT:-500}
DATA=${DATA:-../shared/data/multi30k_en_de}
EXP=study_families; [ "$SIZE" = gpu ] && EXP=study_families_gpu
[ -f experiments/03_families/tokenizer/tokenizer.json ] || python experiments/03_families/build_tokenizer.py --data "$DATA"
python -m src.train -m experiment=$EXP
# Follow-up: does the encoder-decoder catch up with 3x the steps (~2 epochs)? One seed each, same sweep directory.
[ "$SIZE" = cpu ] && python -m src.train -m experiment=$EXP +experiment/study_families=prefix_lm,encoder_decoder \
  seed=1 trainer.max_steps=900 trainer.val_check_interval=300
for run in outputs/studies/families/$SIZE/*/; do
  ckpt="$run/checkpoints/last.ckpt"
  [ -f "$ckpt" ] || continue
  [ "$run/eval_translation/metrics.json" -nt "$ckpt" ] && continue
  # run dirs are named after overrides ("…=…,seed=1"): quote them for Hydra's override grammar
  python -m src.eval "ckpt_path=\"$ckpt\"" benchmarks=[translation] "benchmarks.translation.path=\"$DATA\"" \
    benchmarks.translation.max_new_tokens=60 limit=$LIMIT progress=false "hydra.run.dir=\"${run}eval_translation\""
done
python -m src.report outputs/studies/families/$SIZE --out experiments/03_families/$SIZE \
  --baseline experiment/study_families=encoder_decoder --title "Study 3: model families on Multi30k en-de ($SIZE)"
