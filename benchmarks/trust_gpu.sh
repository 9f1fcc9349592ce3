#!/usr/bin/env bash
# Issue 10 on the GPU, in one device call: guard regions, compute-sanitizer, signed stores.
#   PYTHONPATH=$PWD/src bash benchmarks/trust_gpu.sh
# 1. guard_gpu.py: the planted out-of-bounds candidates verified with CUDA, 10 seeds each
# 2. optimize a few suite kernels (a store with real accepted decisions)
# 3. store verify under this TRITUNE_HOME (signed) and under a fresh one (not signed, exit 1)
# 4. tritune run with the store: applied, --check passes; under a fresh TRITUNE_HOME: skipped
# 5. another user (a fresh TRITUNE_HOME) imports the store: re-verified, re-timed, signed; then applied
# 6. compute-sanitizer memcheck on every accepted variant, and on a planted overrun (the control)
set -uo pipefail
out=${OUT:-runs/trust}
state=${STATE:-gpu_state}
mkdir -p "$out" "$state"
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$(mktemp -d)} TRITUNE_HOME="$state/home"
log="$out/trust.log"
only=${ONLY:-col_mean,matmul,row_sum,rms_norm}
step() { echo "\$ $*" | tee -a "$log"; "$@" 2>&1 | tee -a "$log"; echo "exit ${PIPESTATUS[0]}" | tee -a "$log"; }
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
date -u +%Y-%m-%dT%H:%M:%SZ
} | tee -a "$log"

step python3 benchmarks/guard_gpu.py --json "$out/guard_gpu.json"
COLUMNS=160 step python3 -m tritune optimize --out "$state/trust" --max-candidates 8 --budget-s 30 --ncu never \
    -- python3 benchmarks/suite/run.py --only "$only"
step python3 -m tritune store verify "$state/trust/decisions.db"
TRITUNE_HOME=$(mktemp -d) step python3 -m tritune store verify "$state/trust/decisions.db"
step python3 -m tritune run --store "$state/trust/decisions.db" -- python3 benchmarks/suite/run.py --only "$only" --check
TRITUNE_HOME=$(mktemp -d) step python3 -m tritune run --store "$state/trust/decisions.db" \
    -- python3 benchmarks/suite/run.py --only "$only" --check
other=$(mktemp -d)
TRITUNE_HOME=$other step python3 -m tritune store import "$state/trust/decisions.db" --into "$state/imported.db" \
    --launches "$state/trust/capture"
TRITUNE_HOME=$other step python3 -m tritune run --store "$state/imported.db" \
    -- python3 benchmarks/suite/run.py --only "$only" --check
step python3 benchmarks/sanitize_store.py --store "$state/trust/decisions.db" --launches "$state/trust/capture" \
    --out "$out/sanitize.json"
step python3 benchmarks/guard_gpu.py --control "$state/control"
step python3 benchmarks/sanitize_store.py --store "$state/control/control.db" --launches "$state/control/capture" \
    --out "$out/sanitize_control.json"
cp "$state/trust/optimize.json" "$out/trust_optimize.json" 2>/dev/null
