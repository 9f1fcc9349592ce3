#!/usr/bin/env bash
# Replay fidelity on the GPU machine (issue 24, section 3), in one device call:
# capture the suite as a user's program, then benchmarks/fidelity.py over it and over any other
# capture directories given as NAME=DIR (a model's `tritune optimize` capture, the Liger/fla corpus).
#
#   bash benchmarks/fidelity_gpu.sh [NAME=DIR ...]
#
# Writes $OUT/fidelity.json and $OUT/fidelity.md (and $OUT/cap-suite, the suite's capture).
set -euo pipefail
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
OUT="${OUT:-gpu_state/fidelity}"
mkdir -p "$OUT"
if [ ! -f "$OUT/cap-suite/launches.jsonl" ]; then
  python3 -m tritune capture --force --out "$OUT/cap-suite" -- python3 benchmarks/suite/run.py
fi
python3 benchmarks/fidelity.py suite="$OUT/cap-suite" "$@" --out "$OUT/fidelity.json" --md "$OUT/fidelity.md" \
  --limit-s "${LIMIT_S:-480}"
