#!/usr/bin/env bash
# Issue 5's GPU benchmarks, one stage per device call, resumable across calls and machines.
#   PYTHONPATH=src bash benchmarks/optimize_gpu.sh suite            # the kernel suite (benchmarks/suite), then enable_check
#   PYTHONPATH=src bash benchmarks/optimize_gpu.sh models bert ...  # harvest + optimize a sample of each model
#   PYTHONPATH=src bash benchmarks/optimize_gpu.sh rewrites         # issue 12: the suite, knobs only vs with rewrites
# State (captures, stores, results) lives in $STATE (default gpu_state/): the stage tars it into
# $OUT/state.tgz, and the next call carries it back (device tool: carry ["gpu_state"]), so an
# interrupted stage continues where it stopped. Logs and results are copied to $OUT.
set -uo pipefail
stage=${1:?stage: suite | models NAME...}; shift
out=${OUT:-runs}
state=${STATE:-gpu_state}
mkdir -p "$state" "$out"
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$(mktemp -d)}
log="$out/$stage.log"
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
date -u +%Y-%m-%dT%H:%M:%SZ
} | tee -a "$log"
deadline=${DEADLINE_S:-380}

case "$stage" in
smoke)  # three suite kernels and a torch.compile'd block, end to end, small budgets
  only=vector_add,row_softmax,matmul
  python3 -m tritune optimize --out "$state/smoke" --max-candidates 6 --budget-s 60 \
      -- python3 benchmarks/suite/run.py --only $only 2>&1 | tee -a "$log"
  python3 benchmarks/enable_check.py --store "$state/smoke/decisions.db" --only $only --json "$out/enable_smoke.json" 2>&1 | tee -a "$log"
  python3 -m tritune run --store "$state/smoke/decisions.db" -- python3 benchmarks/suite/run.py --only $only --check 2>&1 | tee -a "$log"
  cp "$state/smoke/optimize.json" "$out/smoke.json"
  python3 -m tritune optimize --out "$state/block" --max-kernels 3 --max-candidates 6 --budget-s 60 --ncu never \
      -- python3 examples/compiled_model.py 2>&1 | tee -a "$log"
  python3 -m tritune run --store "$state/block/decisions.db" -- python3 examples/compiled_model.py 2>&1 | tail -5 | tee -a "$log"
  cp "$state/block/optimize.json" "$out/block.json"
  ;;
suite)
  echo "\$ tritune optimize --out \$STATE/suite --budget-s 60 --max-candidates 10 --deadline-s $deadline -- python3 benchmarks/suite/run.py" | tee -a "$log"
  COLUMNS=160 python3 -m tritune optimize --out "$state/suite" --budget-s 60 --max-candidates 10 \
      --deadline-s "$deadline" -- python3 benchmarks/suite/run.py 2>&1 | tee -a "$log"
  if [ -z "${SKIP_CHECK:-}" ] && python3 -c "import json,sys; sys.exit(0 if json.load(open('$state/suite/optimize.json')).get('finished') else 1)"; then
    echo "\$ python3 benchmarks/enable_check.py --store \$STATE/suite/decisions.db" | tee -a "$log"
    python3 benchmarks/enable_check.py --store "$state/suite/decisions.db" --json "$out/enable_check.json" 2>&1 | tee -a "$log"
    echo "\$ tritune run --store \$STATE/suite/decisions.db -- python3 benchmarks/suite/run.py --check" | tee -a "$log"
    python3 -m tritune run --store "$state/suite/decisions.db" -- python3 benchmarks/suite/run.py --check 2>&1 | tail -40 | tee -a "$log"
  fi
  cp "$state/suite/optimize.json" "$out/suite.json" 2>/dev/null
  cp "$state/suite/report.md" "$out/suite_report.md" 2>/dev/null
  ;;
rewrites)  # the suite, knobs only then with the source rewrites, same budgets; resumable; then the table
  budget=${BUDGET_S:-20}  # every kernel (--cover 1): the table is over the suite, not its time
  for arm in knobs rewrites; do
    if python3 -c "import json,sys; sys.exit(0 if json.load(open('$state/suite-$arm/optimize.json')).get('finished') else 1)" 2>/dev/null; then
      continue
    fi
    without=(); [ "$arm" = knobs ] && without=(--without source-rewrite)
    if [ -f "$state/suite-knobs/capture/launches.jsonl" ]; then src=(--launches "$state/suite-knobs/capture")
    else src=(-- python3 benchmarks/suite/run.py); fi
    left=$((deadline - SECONDS - 40)); [ "$left" -lt 30 ] && break
    echo "\$ tritune optimize --out \$STATE/suite-$arm --budget-s $budget --max-candidates 16 --cover 1 --ncu never --deadline-s $left ${without[*]} ${src[*]}" | tee -a "$log"
    COLUMNS=160 python3 -m tritune optimize --out "$state/suite-$arm" --budget-s "$budget" --max-candidates 16 \
        --cover 1 --ncu never --deadline-s "$left" --no-report "${without[@]}" "${src[@]}" 2>&1 | tail -25 | tee -a "$log"
  done
  for arm in knobs rewrites; do cp "$state/suite-$arm/optimize.json" "$out/suite-$arm.json" 2>/dev/null; done
  if [ -f "$out/suite-knobs.json" ] && [ -f "$out/suite-rewrites.json" ]; then
    python3 benchmarks/rewrites_summary.py "$out/suite-knobs.json" "$out/suite-rewrites.json" \
        --json "$out/rewrites_table.json" 2>&1 | tee -a "$log"
  fi
  ;;
check)  # the suite's decisions (carried in $STATE/suite) applied: enable_check and the suite's own --check
  echo "\$ python3 benchmarks/enable_check.py --store \$STATE/suite/decisions.db" | tee -a "$log"
  python3 benchmarks/enable_check.py --store "$state/suite/decisions.db" --json "$out/enable_check.json" 2>&1 | tee -a "$log"
  echo "\$ tritune run --store \$STATE/suite/decisions.db -- python3 benchmarks/suite/run.py --check" | tee -a "$log"
  python3 -m tritune run --store "$state/suite/decisions.db" -- python3 benchmarks/suite/run.py --check 2>&1 | tail -40 | tee -a "$log"
  shift 0
  [ $# -gt 0 ] && exec env DEADLINE_S=$((deadline - SECONDS)) bash "$0" models "$@"
  ;;
models)
  remaining=$#
  for model in "$@"; do
    if [ ! -f "$state/$model/launches.jsonl" ]; then
      echo "\$ tritune harvest --model $model --out \$STATE/$model" | tee -a "$log"
      python3 -m tritune harvest --model "$model" --out "$state/$model" 2>&1 | tail -5 | tee -a "$log"
    fi
    left=$(( (deadline - SECONDS) / remaining )); remaining=$((remaining - 1)); [ "$left" -lt 30 ] && left=30
    echo "\$ tritune optimize --out \$STATE/$model-opt --launches \$STATE/$model --sample ${SAMPLE:-24} --ncu never --budget-s 60 --max-candidates 10 --deadline-s $left" | tee -a "$log"
    COLUMNS=160 python3 -m tritune optimize --out "$state/$model-opt" --launches "$state/$model" --sample "${SAMPLE:-24}" \
        --ncu never --budget-s 60 --max-candidates 10 --deadline-s "$left" --no-report 2>&1 | tee -a "$log"
    cp "$state/$model-opt/optimize.json" "$out/$model.json" 2>/dev/null
  done
  ;;
*) echo "unknown stage $stage" >&2; exit 2 ;;
esac
# stores and results (not the captures: saved index tensors reach 64 MiB), for the next call to carry
find "$state" \( -name '*.db' -o -name '*.json' -o -name '*.jsonl' -o -name '*.md' \) -not -path '*/capture/*' \
    -not -path '*/sources/*' -print0 | tar czf "$out/state.tgz" --null -T - 2>/dev/null
ls -la "$out"
