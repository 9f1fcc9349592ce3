#!/usr/bin/env bash
# The LLM proposer on the kernel suite, for a user with an OpenAI-compatible endpoint (issue 13).
# Not run by the project: its machines reach no model endpoint.
#
#   export TRITUNE_LLM_API_KEY=...        # or OPENAI_API_KEY; a local server may need none
#   LLM_URL=http://127.0.0.1:8000/v1 LLM_MODEL=NAME [LLM_PRICE=IN,OUT] [ONLY=gemv,matmul] \
#       PYTHONPATH=src bash benchmarks/llm_suite.sh
#
# Three arms over the same capture, same budget per kernel (BUDGET_S, default 1320 s: TritonForge's
# ~22 minutes a kernel): the model-free families alone, the model alone (--families llm), and the
# model-free families then the model. Each arm resumes where it stopped (run it again); the table
# (TritonForge's: success rate, mean speedup on success, time and cost per kernel) goes to
# $OUT/llm_table.json and the screen. Needs a GPU: under the interpreter times mean nothing.
set -uo pipefail
: "${LLM_URL:?set LLM_URL to the endpoint's base URL (e.g. http://127.0.0.1:8000/v1)}"
: "${LLM_MODEL:?set LLM_MODEL to the model the endpoint serves}"
out=${OUT:-runs}
state=${STATE:-llm_state}
budget=${BUDGET_S:-1320}
mkdir -p "$out" "$state"
only=(); [ -n "${ONLY:-}" ] && only=(--only "$ONLY")
llm=(--llm "$LLM_URL" --llm-model "$LLM_MODEL"); [ -n "${LLM_PRICE:-}" ] && llm+=(--llm-price "$LLM_PRICE")
common=(--budget-s "$budget" --cover 1 --no-report)
for arm in model-free llm-alone both; do
  case $arm in
    model-free) extra=() ;;
    llm-alone) extra=(--families llm "${llm[@]}") ;;
    both) extra=("${llm[@]}") ;;
  esac
  if [ -f "$state/model-free/capture/launches.jsonl" ]; then src=(--launches "$state/model-free/capture")
  else src=(-- python3 benchmarks/suite/run.py "${only[@]}"); fi
  echo "\$ tritune optimize --out \$STATE/$arm ${common[*]} ${extra[*]} ${src[*]}"
  python3 -m tritune optimize --out "$state/$arm" "${common[@]}" "${extra[@]}" "${src[@]}" || true
  cp "$state/$arm/optimize.json" "$out/llm-$arm.json" 2>/dev/null
done
python3 benchmarks/llm_summary.py model-free="$out/llm-model-free.json" llm-alone="$out/llm-llm-alone.json" \
    both="$out/llm-both.json" --json "$out/llm_table.json"
