#!/usr/bin/env bash
# Issue 24 section 2, store-seeded starts on the GPU (tritune's defaults otherwise: ncu auto, jailed).
#   PYTHONPATH=$PWD/src bash benchmarks/prior_gpu.sh        (~4 min on an H200)
# a:       the vector add (BLOCK=16) at 64M elements, a fresh store (40 s a kernel)
# fresh:   the vector add at 16M (another shape bucket), a fresh store (20 s)
# seeded:  the same, on a copy of a's store: its first candidate is a's decided config
# scale:   another elementwise source (BLOCK_SIZE=16) at 64M, on a copy of a's store: seeded by
#          category and size (a's BLOCK is its BLOCK_SIZE: the same knob role)
# fresh_scale: that kernel on a fresh store
set -uo pipefail
out=${OUT:-runs}/prior
state=${STATE:-gpu_state}/prior
rm -rf "$state"; mkdir -p "$state" "$out"
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$(mktemp -d)}
log="$out/prior.log"
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
date -u +%Y-%m-%dT%H:%M:%SZ
} | tee -a "$log"
prog=benchmarks/prior/program.py
copy() {  # a consistent copy of a store (its WAL included)
  python3 -c "import sqlite3, sys; a = sqlite3.connect(sys.argv[1]); b = sqlite3.connect(sys.argv[2]); a.backup(b)" "$1" "$2"
}
arm() {  # NAME BUDGET STORE -- args of the program
  name=$1 budget=$2 store=$3; shift 3
  echo "\$ tritune optimize --out \$STATE/$name --store $store --budget-s $budget -- python3 $prog $*" | tee -a "$log"
  python3 -m tritune optimize --out "$state/$name" --store "$store" --budget-s "$budget" --no-report \
      -- python3 "$prog" "$@" 2>&1 | tee -a "$log"
  cp "$state/$name/optimize.json" "$out/$name.json"
}
arm a 40 "$state/a.db" add 67108864
copy "$state/a.db" "$state/seeded.db"; copy "$state/a.db" "$state/scale.db"
arm fresh 20 "$state/fresh.db" add 16777216
arm seeded 20 "$state/seeded.db" add 16777216
arm fresh_scale 20 "$state/fresh_scale.db" scale 67108864
arm scale 20 "$state/scale.db" scale 67108864
python3 benchmarks/prior_summary.py a="$state/a" fresh="$state/fresh" seeded="$state/seeded" \
    fresh_scale="$state/fresh_scale" scale="$state/scale" | tee "$out/prior.md" | tee -a "$log"
