#!/usr/bin/env bash
# Issue 24's GPU benchmarks (search reach), one stage per device call, tritune with its defaults
# (as a user runs it; a flag that changes the result is an arm of its own). Repository root, GPU machine:
#
#   export PYTHONPATH=$PWD/src
#   bash benchmarks/reach_gpu.sh faroff     # ~2 min: the far-off planted kernels at a 40-s deadline (faroff.py)
#   bash benchmarks/reach_gpu.sh suite10    # ~5-8 min: the suite, --budget-s 10 --cover 1; resumable
#   bash benchmarks/reach_gpu.sh llama      # ~8-9.5 min: the Llama step, capture + 200-s optimize + ABAB
#   bash benchmarks/reach_gpu.sh llama2     # ~6 min: the Llama step optimized twice on one machine (the
#                                           # second run reads the bytecode the first compiled), no ABAB
#   bash benchmarks/reach_gpu.sh generate   # ~9 min a call, 2-3 calls: tritune generate's table, default budget
#
# The "before" arm of llama and suite10 (another checkout's tritune, same GPU, same command):
# BEFORE_SRC=DIR (its src folder), or LLAMA_REV=REV (suite10: BEFORE_REV) where this copy has git
# (git worktree add). The device copy has no .git: make the checkout here and carry it, e.g.
#   echo /.before/ >> .git/info/exclude; mkdir -p .before && git archive REV src | tar -x -C .before
#   (carry [".before"]) BEFORE_SRC=.before/src bash benchmarks/reach_gpu.sh llama
#
# Each stage writes under $OUT (default runs/, at most 8 files come back): STAGE.log (GPU, driver,
# versions, date, git, the commands), its results, and the state the next call needs (STATE, default
# gpu_state/reach, stays on a warm machine; archived for a fresh one: OUT/state-suite10.tgz, which
# RESTORE=FILE unpacks, and OUT/ARM/state-llama.tgz for e2e.py --restore).
#
# Device seconds (H200 estimates, from the H100 runs of issues 11, 12 and 14): faroff ~120 s
# (capture ~20 s, workers ~15 s, 40 s deadline, re-time ~30 s); suite10 ~300-480 s (issue 12's
# 10-s arms took 226 s for 57 kernels with --max-candidates 16; the default 24 may take more: a
# second call resumes); llama ~450-540 s (gpt2's capture + 240-s optimize took 400 s, its ABAB
# 48 s; use LIMIT_S=560 and timeout 600); generate ~180 s a spec at 120 s, 6 specs: three calls
# (~25 min; GEN_SPECS="softmax swiglu" for one call).
set -uo pipefail
stage=${1:?stage: faroff | suite10 | llama | llama2 | generate}
out=${OUT:-runs}
state=${STATE:-gpu_state/reach}
mkdir -p "$out" "$state"
export PYTHONUNBUFFERED=1
[ -z "${CC:-}" ] && [ -x /opt/gcc/bin/gcc ] && export CC=/opt/gcc/bin/gcc
log="$out/$stage.log"
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  date -u +%Y-%m-%dT%H:%M:%SZ
  echo "git $(git rev-parse HEAD 2>/dev/null || echo 'none (device copy)')"
  echo "\$ bash benchmarks/reach_gpu.sh $* (BEFORE_SRC=${BEFORE_SRC:-} LLAMA_REV=${LLAMA_REV:-} BEFORE_REV=${BEFORE_REV:-})"
} | tee -a "$log"

# The src folder of the "before" tritune for REV (or BEFORE_SRC), on stdout; nothing when neither is set.
before_src() {
  local rev=$1
  if [ -n "${BEFORE_SRC:-}" ]; then
    [ -f "$BEFORE_SRC/tritune/__init__.py" ] || { echo "BEFORE_SRC=$BEFORE_SRC: no tritune package there" >&2; return 1; }
    (cd "$BEFORE_SRC" && pwd); return 0
  fi
  [ -z "$rev" ] && return 0
  git rev-parse --verify -q "$rev^{commit}" >/dev/null 2>&1 || {
    echo "rev $rev: no git history here (the device copy has none): carry a checkout, BEFORE_SRC=DIR (see the header)" >&2
    return 1; }
  local dir=/tmp/tritune-before-$rev
  [ -d "$dir" ] || git worktree add --detach "$dir" "$rev" >&2 || return 1
  echo "$dir/src"
}

case "$stage" in
faroff)  # item 3: fresh store, tritune optimize --deadline-s 40 (defaults otherwise), then the re-time
  rm -rf "$state/faroff"
  python3 benchmarks/faroff.py run --out "$out" --state "$state/faroff" --deadline-s "${DEADLINE_S:-40}" 2>&1 | tee -a "$log"
  python3 benchmarks/reach_summary.py faroff="$out/faroff_optimize.json" --json "$out/faroff_reach.json" \
      --markdown "$out/faroff_reach.md" 2>&1 | tee -a "$log"
  ;;
suite10)  # the knobs-plus-rewrites arm at 10 s a kernel, every kernel; resumable across calls
  src=$(before_src "${BEFORE_REV:-}") || exit 2
  arm=after; [ -n "$src" ] && arm=before
  dir="$state/suite10-$arm"
  # a fresh machine: RESTORE=state-suite10.tgz (an earlier call's, carried) goes on from it
  [ -n "${RESTORE:-}" ] && [ ! -d "$dir" ] && tar xzf "$RESTORE" -C "$state"
  run_env=(); [ -n "$src" ] && run_env=(env "PYTHONPATH=$src")
  limit=${LIMIT_S:-540}
  if ! python3 -c "import json,sys; sys.exit(0 if json.load(open('$dir/optimize.json')).get('finished') else 1)" 2>/dev/null; then
    if [ -f "$dir/capture/launches.jsonl" ]; then from=(--launches "$dir/capture")
    else from=(-- python3 benchmarks/suite/run.py); fi
    # budget 10 = the loop's floor: a deadline does not shrink a key's budget, it only stops the
    # run from starting keys (the next call resumes it)
    left=$((limit - SECONDS - 60))
    echo "\$ tritune optimize --out \$STATE/suite10-$arm --budget-s 10 --cover 1 --deadline-s $left ${from[*]}" | tee -a "$log"
    COLUMNS=160 "${run_env[@]}" python3 -m tritune optimize --out "$dir" --budget-s 10 --cover 1 --deadline-s "$left" \
        --no-report "${from[@]}" 2>&1 | tail -30 | tee -a "$log"
  fi
  cp "$dir/optimize.json" "$out/suite10-$arm.json" 2>/dev/null
  (cd "$state" && find "suite10-$arm" \( -name '*.db' -o -name '*.json' -o -name '*.jsonl' \) -not -path '*/capture/*' \
      -print0 | tar czf - --null -T -) > "$out/state-suite10.tgz"
  # today's arm at 10 s, committed: results/rewrites/suite-rewrites.json (issue 12, H100 2026-11-23, main
  # 6c737fe: --budget-s 10 --max-candidates 16 --cover 1 --ncu never; 26 of 57 improved, 2.01x on success)
  arms=("committed-10s-h100=benchmarks/results/rewrites/suite-rewrites.json")
  for a in before after; do [ -f "$state/suite10-$a/optimize.json" ] && arms+=("$a=$state/suite10-$a/optimize.json"); done
  python3 benchmarks/reach_summary.py "${arms[@]}" --json "$out/suite10_reach.json" --markdown "$out/suite10_reach.md" \
      2>&1 | head -8 | tee -a "$log"
  ;;
llama)  # item 1: capture, tritune optimize --deadline-s 200 (defaults), then ABAB in one process
  src=$(before_src "${LLAMA_REV:-}") || exit 2
  arm=after; extra=(); [ -n "$src" ] && { arm=before; extra=(--tritune-src "$src"); }
  python3 benchmarks/e2e.py llama --tasks optimize:default,measure:default --optimize-s 200 \
      --limit-s "${LIMIT_S:-560}" --state "$state/e2e-$arm" --out "$out/$arm" ${MEASURE_ARGS:+--measure-args "$MEASURE_ARGS"} \
      "${extra[@]}" 2>&1 | tee -a "$log"
  arms=()
  for a in before after; do
    [ -f "$state/e2e-$a/llama/opt/optimize.json" ] && arms+=("$a=$state/e2e-$a/llama/opt/optimize.json")
  done
  [ ${#arms[@]} -gt 0 ] && python3 benchmarks/reach_summary.py "${arms[@]}" --json "$out/llama_reach.json" \
      --markdown "$out/llama_reach.md" 2>&1 | head -8 | tee -a "$log"
  # the results a note needs, at the top of $OUT: a device call returns 8 files at most, and the
  # nested e2e folder and the archives are the first left behind (the state archive holds the
  # signing key: never commit it)
  cp "$state/e2e-$arm/llama/opt/optimize.json" "$out/llama-$arm-optimize.json" 2>/dev/null
  cp "$out/$arm/e2e/llama.json" "$out/llama-$arm-e2e.json" 2>/dev/null
  python3 - "$out/$arm/e2e/llama.json" <<'EOF' 2>&1 | tee -a "$log"
import json, sys
data = json.load(open(sys.argv[1]))
print(f"{data.get('gpu')} {data.get('date')}")
for name, task in (data.get("tasks") or {}).items():
    if task.get("status") != "pending":
        print(f"{name}: {task.get('status')} in {task.get('seconds') or 0:.0f} s {task.get('note') or ''}")
tuned = (data.get("modes") or {}).get("tritune") or {}
paired = tuned.get("speedup") or {}
if paired:
    print(f"step enabled vs disabled (one process, ABAB): {paired['speedup']:.3f}x {paired['verdict']} "
          f"(range {paired['range'][0]:.3f}-{paired['range'][1]:.3f}); Triton kernels {tuned.get('kernel_speedup')}; "
          f"losses agree: {(tuned.get('loss_check') or {}).get('ok')}")
cover = (data.get("coverage") or {}).get("default") or {}
if cover:
    print(f"optimize: {cover.get('optimized')} of {cover.get('keys')} keys ({cover.get('timed')} timed), "
          f"{cover.get('improved')} improved, coverage {cover.get('share')}; {cover.get('stopped') or ''}")
EOF
  ;;
llama2)  # a first and a second 200-s run on one machine: what a first run's missing bytecode costs
  python3 benchmarks/e2e.py llama --tasks optimize:default --optimize-s 200 --limit-s "${LIMIT_S:-300}" \
      --state "$state/e2e-twice" --out "$out/twice" 2>&1 | tail -3 | tee -a "$log"
  capture="$state/e2e-twice/llama/opt/capture"
  echo "\$ tritune optimize --launches \$STATE/e2e-twice/llama/opt/capture --out \$STATE/llama-second --deadline-s 200 --fresh" | tee -a "$log"
  python3 -m tritune optimize --launches "$capture" --out "$state/llama-second" --deadline-s 200 --fresh \
      --no-report 2>&1 | tail -4 | tee -a "$log"
  python3 benchmarks/reach_summary.py first="$state/e2e-twice/llama/opt/optimize.json" \
      second="$state/llama-second/optimize.json" --json "$out/llama2_reach.json" --markdown "$out/llama2_reach.md" \
      2>&1 | head -8 | tee -a "$log"
  cp "$state/e2e-twice/llama/opt/optimize.json" "$out/llama-first-optimize.json" 2>/dev/null
  cp "$state/llama-second/optimize.json" "$out/llama-second-optimize.json" 2>/dev/null
  rm -rf "$out/twice"  # its state archive holds the signing key; the device returns 8 files
  ;;
generate)  # tritune generate's table against torch.compile, its default budget (120 s); resumable
  # a spec starts only before LIMIT_S and is killed at SPEC_TIMEOUT_S: their sum stays under 600 s
  # (its per-spec copies are many files: the device returns 8, so they travel as one archive)
  python3 benchmarks/generate.py --out "$state/generate-out" --work "$state/generate" --budget-s 120 \
      --limit-s "${LIMIT_S:-320}" --spec-timeout-s "${SPEC_TIMEOUT_S:-250}" ${GEN_SPECS:+--specs $GEN_SPECS} 2>&1 | tee -a "$log"
  cp "$state/generate-out/generate.md" "$state/generate-out/generate.json" "$out/" 2>/dev/null
  tar czf "$out/generate.tgz" -C "$state" generate-out
  ;;
*) echo "unknown stage $stage: faroff | suite10 | llama | llama2 | generate" >&2; exit 2 ;;
esac
ls -la "$out"
