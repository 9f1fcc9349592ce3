#!/usr/bin/env bash
# The "done when" on the GPU machine, as a user would type it: capture a script, bench it;
# capture a torch.compile'd program (Inductor kernels), bench it. Outputs under $OUT.
#   PYTHONPATH=src bash benchmarks/capture_bench_gpu.sh
set -uo pipefail
out=${OUT:-runs}
export TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
date -u +%Y-%m-%dT%H:%M:%SZ
for program in user_program compiled_model; do
  echo "\$ tritune capture --out \$OUT/$program -- python3 examples/$program.py"
  python3 -m tritune capture --out "$out/$program" --force -- python3 "examples/$program.py"
  echo "\$ tritune bench \$OUT/$program"
  COLUMNS=200 python3 -m tritune bench "$out/$program"
  python3 -m tritune bench "$out/$program" --json --methods median > "$out/$program.bench.json"
done
