#!/usr/bin/env bash
# A first run on a machine whose packages carry no bytecode (the GPU image: PYTHONDONTWRITEBYTECODE,
# no .pyc in site-packages), the capture's bytecode fill before and after a change, one device call
# (~6 min): Liger's jsd file end to end (corpus/run.py: capture, a 40-s optimize, measure) with the
# tritune of OLD_SRC, then with this tree's, then OLD_SRC again (each with a bytecode folder of its
# own, so each is a machine's first run; old, new, old so that neither side alone runs on warm
# disk caches), then fixed_gpu.sh's first run of the 10-kernel file with this tree. Repository
# root, with the wheels of corpus/README.md in .whl and the old tree unpacked in .old:
#
#   git archive REV src | tar -x -C .old
#   export CC=/opt/gcc/bin/gcc; OUT=runs bash benchmarks/first_run_gpu.sh
#
# ARMS="new" runs this tree's jsd alone, FIXED=0 leaves fixed_gpu.sh out, PHASES=1 adds a worker's
# start part by part on the new arm's capture (fixed_probe.py --phases, its bytecode folder).
set -uo pipefail
out=${OUT:-runs}
old=${OLD_SRC:-$PWD/.old/src}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/liger_kernel-*.whl .whl/fla_core-*.whl .whl/einops-*.whl || exit
for arm in ${ARMS:-old1 new old2}; do
  src=$old; [ "$arm" = new ] && src=$PWD/src
  echo "== jsd $arm: $src"
  TRITUNE_BYTECODE=/tmp/bytecode-$arm PYTHONPATH=$src:/tmp/site python3 benchmarks/corpus/run.py \
      --out "/tmp/out-$arm" --state "gpu_state/first-$arm" --deadline-s 40 --limit-s 240 --only liger_jsd
  cp "/tmp/out-$arm/results.json" "$out/jsd_$arm.json"
done
if [ "${PHASES:-0}" = 1 ]; then
  echo "== phases: new"
  TRITUNE_BYTECODE=/tmp/bytecode-new PYTHONPATH=$PWD/src:/tmp/site python3 benchmarks/fixed_probe.py \
      --out "$out/phases_new.json" --arms "" --phases gpu_state/first-new/liger_jsd/capture | cut -c1-1500
fi
if [ "${FIXED:-1}" = 1 ]; then
  echo "== fixed_gpu.sh, first run"
  RUNS=1 PROBE=0 OUT=$out/fixed PYTHONPATH=$PWD/src bash benchmarks/fixed_gpu.sh
fi
ls -R "$out"  # 7 files: the device returns 8 at most
