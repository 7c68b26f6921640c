#!/usr/bin/env bash
# Study 2 — positions and length generalization (issue 28), in two parts. From the repository root:
#   bash experiments/02_positions/command.sh                    # every step below, in order; re-running resumes
#   STEP=synthetic-tune bash experiments/02_positions/command.sh   # one step:
#     synthetic-tune | synthetic-confirm | synthetic-report | text-tune | text-confirm | text-report | export
#     | synthetic-first-budget (the reports of part 1's first, too short budget, from runs/synthetic_cpu_first_budget)
# REPORT_STAGES=tune: part 1's reports of the tune stage alone (a stop inside a task's confirm stage lands that).
# Part 1 (conf/experiment/study_length_generalization.yaml): learned, sinusoidal, rope, alibi, t5_bias, none x copy,
#   reverse, addition, induction, mqar, trained at one size and tested at 1x, 2x, 4x by exact match; 30 variants x
#   (5 learning rates on seed 0 + the chosen one on seeds 1-5) = 300 jobs. The ablation of the training sizes,
#   task=copy_mixed (copy trained at every size 1-16, not 16 alone: data.train_min_length=1), the same 60 jobs again.
#   The ablation of the model's size and the lengths tested, task=copy_mixed_deep (copy_mixed with 4 layers, 12,000
#   steps, tested at 16, 18, 20, 24, 32 symbols): 6 schemes x (3 learning rates + 5 seeds) = 48 jobs. The ablation of
#   the task's format, task=copy_binary (copy_mixed_deep over binary strings, data.alphabet=2): 48 jobs again.
# Part 2 (conf/experiment/study_positions.yaml): the six schemes on character-level Tiny Shakespeare at T=64, test
#   perplexity at 1x, 2x, 4x, 8x, RoPE also with linear, dynamic and YaRN scaling at evaluation time; 6 x (3 + 5) =
#   48 jobs. The plan and its measured cost: experiments/02_positions/README.md.
# SIZE=gpu: the GPU sizes (experiment=study_length_generalization_gpu, study_positions_gpu), one job at a time.
# The sweeps live outside the work tree ($STUDIES/positions_*; checkpoints are large). Each step first restores the
# jobs committed under experiments/02_positions/runs/<part>_<size> (src.studies.export --restore), skips the completed
# ones and runs the rest; `STEP=export` copies the finished jobs' small files back there (never checkpoints).
set -euo pipefail
[ -f .venv/bin/activate ] && . .venv/bin/activate
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 MPLBACKEND=Agg
SIZE=${SIZE:-cpu}; STUDIES=${STUDIES:-$HOME/studies}; STEP=${STEP:-all}; JOBS=${JOBS:-2}
SYN=study_length_generalization; TXT=study_positions
if [ "$SIZE" = gpu ]; then SYN=${SYN}_gpu; TXT=${TXT}_gpu; JOBS=${JOBS_GPU:-1}; fi   # one job per GPU
HERE=experiments/02_positions; OUT=$HERE/$SIZE
SWEEP_SYN=$STUDIES/positions_synthetic_$SIZE; RUNS_SYN=$HERE/runs/synthetic_$SIZE
SWEEP_TXT=$STUDIES/positions_text_$SIZE; RUNS_TXT=$HERE/runs/text_$SIZE
LAUNCH=(hydra/launcher=joblib hydra.launcher.n_jobs=$JOBS)
# The tasks swept in part 1 (TASKS=addition runs one; the stages of one task can finish before the next starts).
TASKS=${TASKS:-copy,reverse,addition,induction,mqar,copy_mixed,copy_mixed_deep,copy_binary}
[ "$SIZE" = gpu ] && TASKS=${TASKS_GPU:-copy_gpu,reverse_gpu,addition_gpu,induction_gpu,mqar_gpu}
run() { [ "$STEP" = all ] || [ "$STEP" = "$1" ]; }
restore() { [ -d "$2" ] && python -m src.studies.export --restore "$2" "$1" || true; }   # <sweep> <runs>
mkdir -p "$SWEEP_SYN" "$SWEEP_TXT" "$OUT"

# Part 1, synthetic. 1-2: every scheme x task at its own best of the protocol's learning rates (seed 0, by val/loss
# on the answer), then the chosen one on seeds 1-5.
for stage in tune confirm; do
  if run synthetic-$stage; then
    restore "$SWEEP_SYN" "$RUNS_SYN"
    python -m src.study experiment=$SYN "hydra.sweep.dir=$SWEEP_SYN" "${LAUNCH[@]}" \
      "+experiment/study_length_generalization/task=$TASKS" --stage $stage
    python -m src.studies.export "$SWEEP_SYN" "$RUNS_SYN"
  fi
done
# 3. One report per task (each task its own Holm family: the 15 pairs of schemes on exact match at 1x, 2x and 4x the
#    training size; on induction also the probes' induction step), read from the committed runs.
declare -A LONGER=([copy]="@32 @64" [copy_mixed]="@32 @64" [copy_mixed_deep]="@18 @20 @24 @32" [copy_binary]="@18 @20 @24 @32" [reverse]="@32 @64"
                   [addition]="@6 @12"
                   [induction]="@64 @128" [mqar]="@16 @32"
                   [copy_gpu]="@128 @256" [reverse_gpu]="@128 @256" [addition_gpu]="@8 @16" [induction_gpu]="@256 @512"
                   [mqar_gpu]="@32 @64")   # 2x and 4x each task's training size (copy_mixed_deep: 1.125x-2x)
declare -A SPAN=([copy_mixed_deep]="1x, 1.125x, 1.25x, 1.5x, 2x" [copy_binary]="1x, 1.125x, 1.25x, 1.5x, 2x")   # the report's title; default 1x, 2x, 4x
report_tasks() {   # <runs dir> <out dir> <title prefix> <tasks, comma-separated>
  for task in ${4//,/ }; do
    extra=(); for n in ${LONGER[$task]}; do extra+=("test/exact_match$n"); done
    [ "${task%_gpu}" = induction ] && extra+=(probe/induction_step)
    python -m src.report "$1"/+experiment.study_length_generalization.task=$task,* --out "$2/$task" \
      --baseline model/position=sinusoidal --comparisons one_factor --extra "${extra[@]}" ${REPORT_STAGES:+--stages $REPORT_STAGES} \
      --title "$3 on $task, exact match at ${SPAN[$task]:-1x, 2x, 4x} the training size ($SIZE)"
  done
}
if run synthetic-report; then
  python -m src.studies.export "$SWEEP_SYN" "$RUNS_SYN"
  report_tasks "$RUNS_SYN" "$OUT/synthetic" "Study 2, part 1: positions" "$TASKS"
  # 3c. The ablation of the training sizes: copy trained at 16 alone (task=copy) vs at every size 1-16
  #     (task=copy_mixed), each scheme at its own tuned rate in each. Its Holm family: the six pairs that differ in
  #     the task alone (the same scheme, the other training sizes) x 3 lengths; the schemes' own pairs are in the
  #     two tasks' reports.
  if [[ ",$TASKS," == *,copy_mixed,* ]]; then
    python -m src.report "$RUNS_SYN"/+experiment.study_length_generalization.task=copy,* \
      "$RUNS_SYN"/+experiment.study_length_generalization.task=copy_mixed,* --out "$OUT/synthetic/copy_train_sizes" \
      --baseline model/position=sinusoidal,experiment/study_length_generalization/task=copy \
      --comparisons factor:experiment/study_length_generalization/task \
      --extra test/exact_match@32 test/exact_match@64 ${REPORT_STAGES:+--stages $REPORT_STAGES} \
      --title "Study 2, part 1, ablation: copy trained at size 16 alone vs at every size 1-16 ($SIZE)"
  fi
  # 3d. The ablation of the model's size: copy at every size 1-16 with 2 layers and 6,000 steps (task=copy_mixed) vs
  #     4 layers and 12,000 steps (task=copy_mixed_deep). Its Holm family: the six same-scheme pairs x the lengths
  #     both tested (1x, 2x); the schemes' pairs at 1.125x-1.5x are in copy_mixed_deep's own report.
  if [[ ",$TASKS," == *,copy_mixed_deep,* ]]; then
    python -m src.report "$RUNS_SYN"/+experiment.study_length_generalization.task=copy_mixed,* \
      "$RUNS_SYN"/+experiment.study_length_generalization.task=copy_mixed_deep,* --out "$OUT/synthetic/copy_model_size" \
      --baseline model/position=sinusoidal,experiment/study_length_generalization/task=copy_mixed \
      --comparisons factor:experiment/study_length_generalization/task \
      --extra test/exact_match@32 ${REPORT_STAGES:+--stages $REPORT_STAGES} \
      --title "Study 2, part 1, ablation: copy at every size 1-16, 2 layers x 6,000 steps vs 4 layers x 12,000 ($SIZE)"
  fi
  # 3e. The ablation of the task's format: copy_mixed_deep over 10 symbols vs over 2 (task=copy_binary), each scheme at
  #     its own tuned rate in each. Its Holm family: the six same-scheme pairs x the five lengths tested (1x-2x).
  if [[ ",$TASKS," == *,copy_binary,* ]]; then
    python -m src.report "$RUNS_SYN"/+experiment.study_length_generalization.task=copy_mixed_deep,* \
      "$RUNS_SYN"/+experiment.study_length_generalization.task=copy_binary,* --out "$OUT/synthetic/copy_format" \
      --baseline model/position=sinusoidal,experiment/study_length_generalization/task=copy_mixed_deep \
      --comparisons factor:experiment/study_length_generalization/task \
      --extra test/exact_match@18 test/exact_match@20 test/exact_match@24 test/exact_match@32 \
      ${REPORT_STAGES:+--stages $REPORT_STAGES} \
      --title "Study 2, part 1, ablation: copy at every size 1-16 (4 layers) over 10 symbols vs over 2 ($SIZE)"
  fi
fi
# 3b. The record of the first budget (1,500 steps; 3,000 on induction): its 72 tune runs (seed 0), too short for most
#    schemes to learn the tasks at 1x (README, "The first budget"), reported from their committed runs alone.
if [ "$STEP" = synthetic-first-budget ]; then
  report_tasks "${RUNS_SYN}_first_budget" "$OUT/synthetic_first_budget" \
    "Study 2, part 1, first budget (tune stage, seed 0): positions" copy,reverse,addition,induction
fi

# Part 2, text. 4-5: the same two stages; 6: the report, every pair of schemes on test/loss and on the test
#    perplexity at 2x, 4x, 8x, RoPE's evaluation-time scalings as variants of their own (--eval-variants).
for stage in tune confirm; do
  if run text-$stage; then
    restore "$SWEEP_TXT" "$RUNS_TXT"
    python -m src.study experiment=$TXT "hydra.sweep.dir=$SWEEP_TXT" "${LAUNCH[@]}" --stage $stage
    python -m src.studies.export "$SWEEP_TXT" "$RUNS_TXT"
  fi
done
if run text-report; then
  python -m src.studies.export "$SWEEP_TXT" "$RUNS_TXT"
  python -m src.report "$RUNS_TXT" --out "$OUT/text" --eval-variants \
    --title "Study 2, part 2: positions on Tiny Shakespeare, perplexity at 1x-8x the training length ($SIZE)"
fi
# 7. The finished jobs' small files into the repository (configs, metrics.json, CSV logs; never checkpoints).
if run export; then
  python -m src.studies.export "$SWEEP_SYN" "$RUNS_SYN"; python -m src.studies.export "$SWEEP_TXT" "$RUNS_TXT"
fi
case "$STEP" in   # the last line names what this step wrote
  synthetic-tune|synthetic-confirm|text-tune|text-confirm|export) echo "Study 2 ($SIZE): $STEP done; runs in $SWEEP_SYN, $SWEEP_TXT, small files exported to $HERE/runs/ (commit them)" ;;
  synthetic-first-budget) echo "Study 2 ($SIZE): first-budget reports in $OUT/synthetic_first_budget/<task>/ (report.md)" ;;
  synthetic-report) echo "Study 2 ($SIZE): reports in $OUT/synthetic/<task>/ (report.md) for $TASKS" ;;
  text-report) echo "Study 2 ($SIZE): report in $OUT/text/ (report.md)" ;;
  *) echo "Study 2 ($SIZE): reports in $OUT/synthetic/<task>/ and $OUT/text/ (report.md); committed runs in $HERE/runs/" ;;
esac
