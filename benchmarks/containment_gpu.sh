#!/usr/bin/env bash
# Issue 23 on a GPU machine, in one device call: what the jail finds on this kernel, a jailed
# worker compiling and launching a CUDA kernel, the jail's tests, and `tritune optimize` with its
# defaults (ncu installed) on three suite kernels jailed and with --unsafe-no-jail, then
# `tritune run --check` of the jailed run's decisions. Writes $OUT/containment_gpu.log and
# $OUT/optimize-{jailed,unjailed}.json; benchmarks/containment/summary.py reads them.
#   PYTHONPATH=$PWD/src bash benchmarks/containment_gpu.sh
set -uo pipefail
out=${OUT:-runs}
state=${STATE:-$(mktemp -d)}
only=${ONLY:-vector_add,row_softmax,layer_norm}
deadline=${DEADLINE_S:-60}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
log="$out/containment_gpu.log"
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
uname -r
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
date -u +%Y-%m-%dT%H:%M:%SZ
python3 -c "from tritune.worker import jail; s = jail.status(); print('jail:', s.describe(), 'missing:', s.missing, 'toolchains:', jail._toolchains())"
} 2>&1 | tee -a "$log"

echo "== a jailed worker on the GPU" | tee -a "$log"
python3 - <<'PY' 2>&1 | tee -a "$log"
import sys, time
sys.path.insert(0, "tests")
from tritune.worker import jail
from tritune.worker.pool import Worker
for name, policy in (("jailed", jail.policy()), ("unjailed", None)):
    start = time.monotonic()
    with Worker(300, preload=("torch", "triton"), jail=policy) as w:
        ready = w.start()
        started = time.monotonic() - start
        out = w.call("jail_jobs:gpu_add")
    print(name, "start", f"{started:.1f}s", "ok" if out.ok else "FAILED", out.value if out.ok else out.failure)
PY

echo "== the jail's tests here" | tee -a "$log"
timeout 150 python3 -m pytest -q -p no:cacheprovider -x tests/worker/test_worker_jail.py 2>&1 | tail -15 | tee -a "$log"

for arm in jailed unjailed; do
  flags=""
  [ "$arm" = unjailed ] && flags="--unsafe-no-jail"
  echo "== optimize $arm ($only, --deadline-s $deadline, defaults otherwise)" | tee -a "$log"
  start=$(date +%s)
  timeout $((deadline + 120)) python3 -m tritune optimize --out "$state/$arm" --deadline-s "$deadline" $flags \
      -- python3 benchmarks/suite/run.py --only "$only" 2>&1 | tail -25 | tee -a "$log"
  echo "wall $(( $(date +%s) - start )) s" | tee -a "$log"
  cp "$state/$arm/optimize.json" "$out/optimize-$arm.json" 2>/dev/null
done

echo "== tritune run --check with the jailed run's decisions" | tee -a "$log"
timeout 120 python3 -m tritune run --store "$state/jailed/decisions.db" \
    -- python3 benchmarks/suite/run.py --only "$only" --check 2>&1 | tail -8 | tee -a "$log"
python3 benchmarks/containment/summary.py "$out"/optimize-jailed.json "$out"/optimize-unjailed.json 2>&1 | tee -a "$log"
