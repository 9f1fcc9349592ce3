#!/usr/bin/env bash
# A short run's fixed costs on the GPU machine (issue 24, section 1), one device call (~4 min):
# the environment's bytecode facts, then two 40-s `tritune optimize` runs of the 10-kernel suite
# file one after the other (the first after the capture, which fills an empty tritune bytecode
# folder with torch, Triton and tritune where the packages carry no bytecode, and which that run
# tops up; the second reads it), then a lane worker's start part by part
# (fixed_probe.py --phases, --profile). Repository root:
#
#   export PYTHONPATH=$PWD/src CC=/opt/gcc/bin/gcc
#   OUT=runs bash benchmarks/fixed_gpu.sh
#
# RUNS="1" runs the first only; PROBE=0 leaves the probe out (a shorter call, fewer files).
set -uo pipefail
out=${OUT:-runs}
state=${STATE:-gpu_state/fixed}
mkdir -p "$out" "$state"
export PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  date -u +%Y-%m-%dT%H:%M:%SZ
  python3 - <<'PY'
import importlib.util, os, sys, time
begin = time.perf_counter()
import torch, triton
print("torch", torch.__version__, "triton", triton.__version__, f"import {time.perf_counter() - begin:.2f} s")
print("PYTHONDONTWRITEBYTECODE", os.environ.get("PYTHONDONTWRITEBYTECODE"), "dont_write", sys.dont_write_bytecode)
pyc = importlib.util.cache_from_source(torch.__file__)
print("torch bytecode", pyc, os.path.exists(pyc), "package writable", os.access(os.path.dirname(torch.__file__), os.W_OK))
from tritune.worker import bytecode
print("tritune bytecode folder", bytecode.prefix())
PY
} > "$out/env.txt" 2>&1
for run in ${RUNS:-1 2}; do
  from=(); [ "$run" = 2 ] && from=(--launches "$state/run1/capture")
  { echo "run $run"; python3 benchmarks/fixed_costs.py --out "$state/run$run" --arms defaults --deadline-s 40 \
      "${from[@]}" 2>&1; grep -E "lane|built|timed|fixed|tritune optimize:" "$state/run$run/defaults.log" | head -20
  } >> "$out/logs.txt"
  cp "$state/run$run/fixed_costs.json" "$out/run${run}_fixed_costs.json"
  [ -f "$state/run$run/capture.log" ] && cat "$state/run$run/capture.log" >> "$out/logs.txt"
done
last=${RUNS:-1 2}; last=${last##* }
cp "$state/run$last/defaults/optimize.json" "$out/run${last}_optimize.json"
[ "${PROBE:-1}" = 0 ] || python3 benchmarks/fixed_probe.py --out "$out/probe.json" --arms after --phases --profile "$state/run1/capture" \
    >> "$out/logs.txt" 2>&1
ls "$out"  # 6 files: the device returns 8 at most
