#!/usr/bin/env bash
# The proof that CI does not flake: RUNS runs in a row from one fresh clone of COMMIT (default:
# the committed HEAD), with a CPU hog (a busy Python loop) beside them the whole time; stops at
# the first red run. The first run is the whole of scripts/test.sh (the README's command: install,
# lint, every test); the others are the engine and integration tests (markers engine, ray,
# integration: scripts/test.sh's two processes narrowed by NG_TEST_MARK, no lint).
#   bash scripts/stress.sh [RUNS [COMMIT]]   (default 5; 55-66 min a run beside the hog on a 2-core machine)
# Prints a line per run and writes the runs' logs and stress.json under a new folder in /tmp.
set -euo pipefail
runs=${1:-5}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/ng-stress.XXXXXX)
chmod 755 "$work"  # mktemp's 0700 would keep the code_execution sandbox's unprivileged uids out of the clone
git clone -q "$repo" "$work/clone"
git -C "$work/clone" checkout -q "${2:-HEAD}"
commit=$(git -C "$work/clone" rev-parse --short HEAD)
echo "stress: $runs runs at $commit beside a CPU hog (the first the whole suite); logs in $work"

python3 -c "while True: pass" &
hog=$!
trap 'kill "$hog" 2>/dev/null || true' EXIT

results=()
for ((run = 1; run <= runs; run++)); do
  log="$work/run$run.log"
  if [ "$run" -eq 1 ]; then
    mark="" lint=1
  else
    mark="engine or ray or integration" lint=0
  fi
  start=$(date +%s)
  set +e
  (cd "$work/clone" && NG_TEST_MARK=$mark NG_TEST_LINT=$lint bash scripts/test.sh) >"$log" 2>&1
  code=$?
  set -e
  seconds=$(($(date +%s) - start))
  counts=$(grep -E '^=+ .*(passed|failed|error).* in [0-9.]+s' "$log" | sed -E 's/^=+ (.*) =+$/\1/' | paste -sd ';' -)
  echo "run $run: exit $code in ${seconds} s: $counts"
  results+=("{\"run\": $run, \"tests\": \"${mark:-all}\", \"exit\": $code, \"seconds\": $seconds, \"pytest\": \"$counts\"}")
  if [ "$code" -ne 0 ]; then
    break
  fi
done
(IFS=,; echo "{\"commit\": \"$commit\", \"hog\": true, \"runs\": [${results[*]}]}") >"$work/stress.json"
echo "stress: $work/stress.json"
[ "$code" -eq 0 ]
