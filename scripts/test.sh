#!/usr/bin/env bash
# The whole test suite, from a fresh clone: install, build the CPU vLLM engine env, lint, test.
# CI (.ci/run) runs exactly this. Real-engine and browser tests are required here
# (NG_REQUIRE_ENGINE=1, NG_REQUIRE_BROWSER=1, NG_REQUIRE_RAY=1): a missing engine, browser or Ray
# fails, never skips.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev,report-test,ray]' 2>&1 \
    | { grep -v 'is ignored: it is neither a file nor a directory' || true; }  # this machine's pip config noise
bash scripts/build_vllm_cpu_env.sh
# The report's browser test drives the OS's Chromium (Playwright's own browser download is not used).
if ! command -v chromium >/dev/null 2>&1; then
  echo "== installing chromium (OS package) for the report's browser test"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .

echo "== mypy"
.venv/bin/mypy

echo "== pytest"
set +e
# --durations: where CI time goes, in every log (the slowest 25 phases: setup, call, teardown).
# Two xdist workers (CI has 2 cores): the engine and Ray tests run on one of them, in one group
# (tests/conftest.py), while the rest share both.
NG_REQUIRE_ENGINE=1 NG_REQUIRE_BROWSER=1 NG_REQUIRE_RAY=1 .venv/bin/python -m pytest -p no:cacheprovider \
    -n 2 --dist loadgroup --durations=25 "$@"
code=$?
set -e
if [ "$code" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here" >&2
  exit 1
fi
exit "$code"
