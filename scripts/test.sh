#!/usr/bin/env bash
# The whole test suite, from a fresh clone: install, build the CPU vLLM engine env, lint, test.
# CI (.ci/run) runs exactly this. Real-engine and browser tests are required here
# (NG_REQUIRE_ENGINE=1, NG_REQUIRE_BROWSER=1, NG_REQUIRE_RAY=1, NG_REQUIRE_MCP=1): a missing engine,
# browser, Ray or MCP SDK fails, never skips.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev,report-test,ray,mcp]' 2>&1 \
    | { grep -v 'is ignored: it is neither a file nor a directory' || true; }  # this machine's pip config noise
bash scripts/build_vllm_cpu_env.sh
# The report's browser test drives the OS's Chromium (Playwright's own browser download is not used).
if ! command -v chromium >/dev/null 2>&1; then
  echo "== installing chromium (OS package) for the report's browser test"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

if [ "${NG_TEST_LINT:-1}" != 0 ]; then  # scripts/stress.sh turns it off after its first run
  echo "== ruff"
  .venv/bin/ruff check .
  .venv/bin/ruff format --check .

  echo "== mypy"
  .venv/bin/mypy
fi

echo "== pytest"
# --durations: where CI time goes, in every log (the slowest phases: setup, call, teardown).
# No arguments: two pytest processes at once on CI's two cores, every test that starts a vLLM
# engine or a Ray cluster in one (one engine or cluster at a time), the rest in the other; the
# second one's log is printed after the first. Two engine bench smokes (marker `bench`: each
# starts a stack of its own and only checks that its script runs to the end) run in the second,
# so that both take about as long. NG_TEST_MARK (a marker expression) narrows both processes
# (scripts/stress.sh: "engine or ray or integration"). Arguments (paths, -k, -m ...): one process.
export NG_REQUIRE_ENGINE=1 NG_REQUIRE_BROWSER=1 NG_REQUIRE_RAY=1 NG_REQUIRE_MCP=1
pytest=(.venv/bin/python -m pytest -p no:cacheprovider)
set +e
if [ "$#" -gt 0 ]; then
  "${pytest[@]}" --durations=25 "$@"
  codes=("$?")
else
  heavy="(engine or ray) and not bench"
  light="bench or not (engine or ray)"
  if [ -n "${NG_TEST_MARK:-}" ]; then
    heavy="($heavy) and ($NG_TEST_MARK)"
    light="($light) and ($NG_TEST_MARK)"
  fi
  rest_log=$(mktemp)
  "${pytest[@]}" --durations=25 -m "$light" >"$rest_log" 2>&1 &
  rest=$!
  echo "== pytest -m '$heavy' (the other tests run beside it: their log follows)"
  "${pytest[@]}" --durations=25 -m "$heavy"
  heavy_code=$?
  wait "$rest"
  rest_code=$?
  echo "== pytest -m '$light'"
  cat "$rest_log"
  rm -f "$rest_log"
  codes=("$heavy_code" "$rest_code")
fi
set -e
for code in "${codes[@]}"; do
  if [ "$code" -eq 5 ]; then
    echo "pytest collected no tests: that is a failure here" >&2
    exit 1
  fi
done
for code in "${codes[@]}"; do
  if [ "$code" -ne 0 ]; then
    exit "$code"
  fi
done
