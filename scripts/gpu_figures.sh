#!/usr/bin/env bash
# Every GPU figure that docs/benchmarks.md leaves "not measured", in one call on a GPU
# machine without internet, inside a time budget (docs/scale.md, "Measuring the GPU
# figures"). Each step runs through scripts/offline_run.sh with its own time limit, cut to
# what is left of the budget; its output goes to OUT_DIR/STEP.log and one line per step
# (exit status, seconds) to OUT_DIR/summary.txt. A step that times out says so there and
# the next one still runs. The smoke configs run last and get whatever time is left.
#
#   bash scripts/gpu_figures.sh KIT_DIR OUT_DIR [BUDGET_SECONDS]   # default 520
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  echo "usage: bash scripts/gpu_figures.sh KIT_DIR OUT_DIR [BUDGET_SECONDS]" >&2
  exit 2
fi
kit=$1
out=$2
budget=${3:-520}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 POLYMNESIA_OFFLINE_KIT
POLYMNESIA_OFFLINE_KIT=$(cd "$kit" && pwd)
start=$(date +%s)

step() { # NAME LIMIT COMMAND...
  local name=$1 limit=$2 left t0 rc
  shift 2
  left=$((budget - ($(date +%s) - start)))
  if [ "$left" -lt 20 ]; then
    echo "$name: skipped, ${left}s of the budget left" | tee -a "$out/summary.txt"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  t0=$(date +%s)
  timeout "$limit" bash scripts/offline_run.sh "$kit" -- "$@" >"$out/$name.log" 2>&1
  rc=$?
  [ "$rc" -eq 124 ] && rc="124 (timed out at ${limit}s)"
  echo "$name: exit $rc, $(($(date +%s) - t0))s" | tee -a "$out/summary.txt"
}

{
  date -u +%FT%TZ
  echo "commit $(cat COMMIT 2>/dev/null || git rev-parse HEAD)"  # COMMIT: a snapshot's
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
} >"$out/summary.txt" 2>&1
step install 120 python3 -c 'import polymnesia, pydantic, datasets, lm_eval, quadprog'
step env 90 python3 -m polymnesia env --check --precision bf16
POLYMNESIA_ENGINE=fsdp2 step env_fsdp2 90 python3 -m polymnesia env --check --precision bf16
step train_throughput 150 python3 benchmarks/train_throughput.py --preset paper-400m \
  --vocab 8000 --batch 16 --block 1024 --precision bf16 --rounds 3
step eval_throughput 90 python3 benchmarks/eval_throughput.py --precision bf16 --preset base
step chunked_loss 75 python3 benchmarks/chunked_loss.py --preset base --vocab 256000 \
  --batch 8 --block 1024 --precision bf16 --rounds 1 --steps 10
step gpu_smoke 600 python3 -m pytest -m gpu tests/integration/test_gpu_smoke.py -q \
  -p no:cacheprovider --durations=0
