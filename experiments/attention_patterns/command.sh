#!/usr/bin/env bash
# The attention-pattern demonstration of docs/attention.md (issue 59, item 8): one seed per point, a
# demonstration, not a verdict. Run from the repository root; results land in outputs/attention_patterns/
# (the small files are copied under experiments/attention_patterns/runs/ by STEP=collect).
#   STEP=copy bash experiments/attention_patterns/command.sh   # copy: window x depth (7 jobs, ~25 min on a free core)
#   STEP=text bash experiments/attention_patterns/command.sh   # text: sliding window vs causal, RoPE (~6 min)
#   STEP=collect bash experiments/attention_patterns/command.sh
set -euo pipefail
OUT=outputs/attention_patterns
case "${STEP:-}" in
  copy)
    # Study 2's copy task and model (2 x 128, RoPE, 16 symbols: the answer's i-th token sits 17 positions after
    # its source), with a causal sliding window of 4, 8 and 16 keys at 2 and 4 layers, and 24 keys (one layer
    # reaches the source) at 2 layers; lr 1e-3 (the rate study 2 chose for RoPE at 4 layers; at 2 layers every
    # rate of its grid learned copy), 1,500 steps (RoPE's first budget in study 2, where it learned copy), seed 1.
    for depth_windows in "2 4,8,16,24" "4 4,8,16"; do
      set -- $depth_windows
      python -m src.train -m experiment=study_length_generalization +experiment/study_length_generalization/task=copy \
        model/position=rope model/mask=sliding_window model.n_layer=$1 model.mask.window=$2 \
        optim.lr=1e-3 trainer.max_steps=1500 seed=1 hydra.sweep.dir=$OUT/copy_depth$1
    done
    ;;
  text)
    # Study 2's text setting (char Tiny Shakespeare, 4 x 80, T = 64, 1,500 steps) with RoPE at its tuned rate
    # (1e-2), a sliding window of 16 and 32 keys, seed 1; causal RoPE is study 2's own runs (seeds 1-5).
    python -m src.train -m experiment=study_positions model/position=rope model/mask=sliding_window \
      model.mask.window=16,32 optim.lr=1e-2 seed=1 cpu_threads=1 hydra.sweep.dir=$OUT/text
    ;;
  collect)
    bash experiments/collect_small_files.sh "$OUT" experiments/attention_patterns/runs
    ;;
  *) echo "set STEP=copy|text|collect (see the header of $0)"; exit 2 ;;
esac
