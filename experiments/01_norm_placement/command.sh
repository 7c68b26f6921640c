#!/usr/bin/env bash
# Study 1 — norm placement x warmup at depth (issue 27). From the repository root:
#   bash experiments/01_norm_placement/command.sh            # every step below, in order; re-running resumes
#   STEP=init bash experiments/01_norm_placement/command.sh  # one step: pilot | init | xavier | tune | confirm | report | export
# Sweeps live in $STUDIES (outside the work tree: checkpoints are large). Each sweep starts from the jobs committed
# under experiments/01_norm_placement/runs/ (src.studies.export --restore), skips the completed ones and reruns the
# rest; `STEP=export` copies the finished jobs' small files back there (never checkpoints) for the next commit.
set -euo pipefail
[ -f .venv/bin/activate ] && . .venv/bin/activate
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 MPLBACKEND=Agg
SIZE=${SIZE:-cpu}   # SIZE=gpu: experiment=study_norm_gpu (24 x 384, warmup 0 / 1000), same protocol; no pilot
STUDIES=${STUDIES:-$HOME/studies}; JOBS=${JOBS:-2}; STEP=${STEP:-all}
EXP=study_norm; [ "$SIZE" = gpu ] && EXP=study_norm_gpu
HERE=experiments/01_norm_placement; RUNS=$HERE/runs/$SIZE; OUT=$HERE/$SIZE
PILOT=$STUDIES/norm_pilot/$SIZE; MAIN=$STUDIES/norm/$SIZE; INIT=$STUDIES/norm_init/$SIZE; XAV=$STUDIES/norm_init_xavier/$SIZE
LAUNCH=(hydra/launcher=joblib hydra.launcher.n_jobs=$JOBS)
run() { [ "$STEP" = all ] || [ "$STEP" = "$1" ]; }
restore() { [ -d "$RUNS/$1" ] && python -m src.studies.export --restore "$RUNS/$1" "$2" || true; }

# 0. Pilot (chose the depth and the length): pre vs post at 6, 12, 24 layers, seed 0, 500 steps, no warmup at lr 3e-3 and
#    1e-2, warmup 100 at 1e-2; then the 12-layer baseline at 1000 and 1500 steps. ('protocol.tune={}' merges into the
#    study's tune node and leaves it as it was: the pilot report shows each variant's best lr on its one seed, and every
#    lr's validation loss in its Tuning table.)
if run pilot && [ "$SIZE" = cpu ]; then
  restore pilot "$PILOT"
  P=(experiment=$EXP model.norm_placement=pre,post seed=0 'protocol.tune={}' protocol.design=grid 'protocol.seeds=[0]'
     hydra.sweep.dir=$PILOT "${LAUNCH[@]}")
  # the 500-step size the pilot ran at (then the config's own; left out of the job names, which it did not name)
  P500=(trainer.max_steps=500 trainer.val_check_interval=125 model.n_layer=6,12,24
        "hydra.job.config.override_dirname.exclude_keys=[experiment,trainer.max_steps,trainer.val_check_interval]")
  python -m src.train -m "${P[@]}" "${P500[@]}" optim.lr=3e-3,1e-2 scheduler.warmup_steps=0
  python -m src.train -m "${P[@]}" "${P500[@]}" optim.lr=1e-2 scheduler.warmup_steps=100
  python -m src.train -m "${P[@]}" model.norm_placement=pre model.n_layer=12 optim.lr=1e-2 scheduler.warmup_steps=100 \
    trainer.max_steps=1000,1500 trainer.val_check_interval=250
  python -m src.report $PILOT --out $OUT/pilot --comparisons one_factor --baseline \
    model.n_layer=6,model.norm_placement=pre,optim.lr=0.01,scheduler.warmup_steps=100 \
    --title "Study 1 pilot: pre vs post at 6, 12, 24 layers (seed 0; timing and where post-LN fails)"
fi

# 1. Gradient norms at initialisation against depth (Xiong et al. 2020, Fig. 3): one step per job, every placement
#    at 2, 6, 12, 24 layers, seeds 1-5; verdicts on the last/first-layer FFN ratio (each pair differing in one factor).
INIT_ARGS=(experiment=$EXP model.n_layer=2,6,12,24 seed=1,2,3,4,5 trainer.max_steps=1 scheduler.warmup_steps=0 test=false
  callbacks.ngram_reference=null '~protocol.tune' protocol.design=grid 'protocol.seeds=[1,2,3,4,5]' "${LAUNCH[@]}")
if run init; then
  restore init "$INIT"
  python -m src.train -m "${INIT_ARGS[@]}" model.norm_placement=pre,post,sandwich,deepnorm,rezero \
    'protocol.factors=[model.norm_placement,model.n_layer]' 'protocol.baseline="model.norm_placement=pre,model.n_layer=24"' \
    hydra.sweep.dir=$INIT || true   # a failed job says why in its metrics.json; the report lists it
  python -m src.report $INIT --out $OUT/init --metric grad_norm/decoder.ffn.last_over_first --extra --equivalence-margin 0.1 \
    --comparisons one_factor --title "Study 1: last/first-layer FFN gradient norm at step 0 against depth ($SIZE)"
fi
# 2. Ablation of the initialisation (the first suspect when post-LN's growth does not appear): the paper's Xavier
#    init (fairseq) for pre and post, against GPT-2's from step 1, same depths and seeds.
if run xavier; then
  restore xavier "$XAV"
  python -m src.train -m "${INIT_ARGS[@]}" model.norm_placement=pre,post model/init=xavier \
    'protocol.factors=[model.norm_placement,model.n_layer,model/init]' \
    'protocol.baseline="model.norm_placement=pre,model.n_layer=24,model/init=xavier"' hydra.sweep.dir=$XAV || true
  python -m src.report $XAV "$INIT"/*norm_placement=pre* "$INIT"/*norm_placement=post* --out $OUT/init_xavier \
    --metric grad_norm/decoder.ffn.last_over_first --extra --equivalence-margin 0.1 --comparisons one_factor \
    --baseline model.norm_placement=pre,model.n_layer=24,model/init=xavier \
    --title "Study 1: the initialisation ablation, GPT-2's vs Xavier, step-0 gradient-norm ratio ($SIZE)"
fi

# 3-4. The training study: five placements x warmup 0/100 (AdamW), then Muon for pre and post, each variant at its
#    own best of 3 learning rates (seed 0), confirmed on seeds 1-5; two invocations share one sweep directory.
STUDY=(experiment=$EXP hydra.sweep.dir=$MAIN "${LAUNCH[@]}")
# Muon's pre-LN variants chose the grid's edge 3e-2 in the tune stage (every AdamW variant chose inside the grid), so
# Muon's grid extends to 1e-1; the tuning table shows the candidates each variant ran. (The grid is how the runs
# are read, not what a job computes: it stays out of the jobs' directory names, so the finished jobs are found.)
MUON=(optim=muon model.norm_placement=pre,post 'protocol.tune={optim.lr:[1.0e-3,3.0e-3,1.0e-2,3.0e-2,1.0e-1]}'
      'hydra.job.config.override_dirname.exclude_keys=[experiment,protocol.tune]')
if run tune; then
  restore main "$MAIN"
  python -m src.study "${STUDY[@]}" --stage tune
  python -m src.study "${STUDY[@]}" "${MUON[@]}" --stage tune
fi
if run confirm; then
  python -m src.study "${STUDY[@]}" --stage confirm
  python -m src.study "${STUDY[@]}" "${MUON[@]}" --stage confirm
fi
# The report reads the committed runs (runs/$SIZE/main, refreshed from the sweep first when it is here), so anyone
# recomputes it from the repository alone.
if run report; then
  [ -d "$MAIN" ] && python -m src.studies.export "$MAIN" "$RUNS/main"
  python -m src.report $RUNS/main --out $OUT --title "Study 1: norm placement x warmup at 12 layers, AdamW and Muon ($SIZE)"
  cp "$MAIN/study_commands.sh" "$OUT/study_commands.sh" 2>/dev/null || true
fi

# 5. The finished jobs' small files into the repository (configs, metrics.json, CSV logs; never checkpoints).
if run export; then
  for pair in "pilot:$PILOT" "init:$INIT" "xavier:$XAV" "main:$MAIN"; do
    [ -d "${pair#*:}" ] && python -m src.studies.export "${pair#*:}" "$RUNS/${pair%%:*}"
  done
fi
echo "Study 1 ($SIZE): reports in $OUT/ (pilot, init, init_xavier, report.md); committed runs in $RUNS/"
