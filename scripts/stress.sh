#!/usr/bin/env bash
# The proof that CI does not flake: the engine and integration tests (markers engine, ray,
# integration), RUNS times in a row from one fresh clone of the committed HEAD, with a CPU hog
# (a busy Python loop) beside them the whole time. Stops at the first red run. Each run is
# scripts/test.sh's two processes narrowed by NG_TEST_MARK; ruff and mypy run in the first only.
#   bash scripts/stress.sh [RUNS]      (default 5; each takes 35-50 min on a 2-core machine)
# Prints a line per run and writes the runs' logs and stress.json under a new folder in /tmp.
set -euo pipefail
runs=${1:-5}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/ng-stress.XXXXXX)
git clone -q "$repo" "$work/clone"
commit=$(git -C "$work/clone" rev-parse --short HEAD)
echo "stress: $runs runs of the engine and integration tests at $commit beside a CPU hog; logs in $work"

python3 -c "while True: pass" &
hog=$!
trap 'kill "$hog" 2>/dev/null || true' EXIT

results=()
for ((run = 1; run <= runs; run++)); do
  log="$work/run$run.log"
  lint=$([ "$run" -eq 1 ] && echo 1 || echo 0)
  start=$(date +%s)
  set +e
  (cd "$work/clone" && NG_TEST_MARK="engine or ray or integration" NG_TEST_LINT=$lint bash scripts/test.sh) >"$log" 2>&1
  code=$?
  set -e
  seconds=$(($(date +%s) - start))
  counts=$(grep -E '^=+ .*(passed|failed|error).* in [0-9.]+s' "$log" | sed -E 's/^=+ (.*) =+$/\1/' | paste -sd ';' -)
  echo "run $run: exit $code in ${seconds} s: $counts"
  results+=("{\"run\": $run, \"exit\": $code, \"seconds\": $seconds, \"pytest\": \"$counts\"}")
  if [ "$code" -ne 0 ]; then
    break
  fi
done
(IFS=,; echo "{\"commit\": \"$commit\", \"hog\": true, \"runs\": [${results[*]}]}") >"$work/stress.json"
echo "stress: $work/stress.json"
[ "$code" -eq 0 ]
