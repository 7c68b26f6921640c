#!/usr/bin/env bash
# Copy every finished job's small files (configs, metrics, CSV logs; never checkpoints) from an
# output tree into an experiment's committed runs/ folder, keeping the relative paths.
#   bash experiments/collect_small_files.sh <output dir> <experiment runs dir>
set -euo pipefail
src="$1"; dest="$(mkdir -p "$2" && cd "$2" && pwd)"
(cd "$src" && find . -path '*/checkpoints' -prune -o -type f \( -name '*.json' -o -name '*.yaml' -o -name '*.csv' \) -print0 |
  xargs -0 -I{} cp --parents {} "$dest/")
echo "small files copied to $2"
