#!/usr/bin/env bash
# Where a lane worker's start goes when the capture's kernels come from a library (issue 24: the
# corpus files' fixed costs), one device call (~3 min). Liger's jsd (FILE) captured on a fresh
# machine, whose capture compiles the workers' bytecode (torch, Triton, tritune, then what the
# program imported under the roots), then a jailed worker's imports one by one, the capture's
# libraries last (fixed_probe.py --phases): with that folder, and with none
# (TRITUNE_BYTECODE=off); then the same with the wheels installed into site-packages (a root, as
# pip installs them for a user) and a fresh folder. Repository root, the wheels of
# corpus/README.md in .whl:
#
#   OUT=runs bash benchmarks/library_start_gpu.sh
set -uo pipefail
out=${OUT:-runs}
file=${FILE:-liger_jsd}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
wheels=(.whl/liger_kernel-*.whl .whl/fla_core-*.whl .whl/einops-*.whl)
pip=(python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade)
"${pip[@]}" --target /tmp/site "${wheels[@]}" || exit
for arm in target site; do
  if [ "$arm" = site ]; then "${pip[@]}" "${wheels[@]}" || exit; fi
  path=$PWD/src; [ "$arm" = target ] && path=$path:/tmp/site
  cap=gpu_state/lib/$arm/$file
  echo "== $arm: capture"
  PYTHONPATH=$path TRITUNE_BYTECODE=/tmp/bytecode-$arm python3 -m tritune capture --force --out "$cap" \
      -- python3 benchmarks/corpus/drivers/$file.py 2>&1 | tail -3
  echo "== $arm: phases"
  PYTHONPATH=$path TRITUNE_BYTECODE=/tmp/bytecode-$arm python3 benchmarks/fixed_probe.py \
      --out "$out/phases_$arm.json" --arms "" --phases "$cap" | cut -c1-3000
  if [ "$arm" = target ]; then
    echo "== $arm: phases, no bytecode folder"
    PYTHONPATH=$path TRITUNE_BYTECODE=off python3 benchmarks/fixed_probe.py \
        --out "$out/phases_${arm}_off.json" --arms "" --phases "$cap" | cut -c1-3000
  fi
done
ls "$out"
