#!/usr/bin/env bash
# The GPU runs of docs/engine.md ("On a GPU"), one step per device call, in the order given, on a
# machine with no network: the engine venv is installed from the offline wheelhouse parts carried
# as .wh01 .. .wh05 (docs/engine.md "Air-gapped install"); the project's own dependencies that
# neither vLLM nor the image brings travel as wheels in .whl, with the last part (made where there
# is network: `pip download --only-binary=:all: --python-version 3.12 --implementation cp
# --platform manylinux_2_17_x86_64 --platform any -d .whl` of pyproject.toml's dependencies and
# pytest-asyncio, after `pip wheel --no-deps -w .whl antlr4-python3-runtime==4.9.3`, which has no
# wheel; less what the runtime list or torch bring, 10 MB; pip takes from it only what is missing).
# Every step writes its figures and logs under $OUT (default bench/results/gpu).
#
#   bash bench/gpu_session.sh stage .wh01        (once per part but the last)
#   bash bench/gpu_session.sh install .wh05      (the last part: join, verify, install; + the project)
#   bash bench/gpu_session.sh quickstart         (the quick start's stack on the GPU; the Gemma refit check)
#   bash bench/gpu_session.sh replicas           (two engines sharing the GPU, one killed; the Gemma quirk via ng_run)
#   bash bench/gpu_session.sh dense8b [NAME ARGS] (an 8B-shaped dummy model: start-up and through-stack efficiency;
#                                                 NAME names the result files, ARGS go to bench/engine_efficiency.py)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-bench/results/gpu}"
mkdir -p "$OUT"
VENV=/tmp/vllm-venv
STAGE=/tmp/ng-wh
PY="$VENV/bin/python"
export NG_VLLM_VENV="$VENV" PYTHONUNBUFFERED=1 NG_GPU_RESULTS="$OUT"

step="${1:?usage: gpu_session.sh stage|install|quickstart|replicas|dense8b [part]}"
case "$step" in
  stage)
    bash scripts/build_vllm_env.sh --wheelhouse "${2:?part folder}" --stage "$STAGE" --stage-only
    ;;
  install)
    started=$(date +%s)
    bash scripts/build_vllm_env.sh --wheelhouse "${2:?last part folder}" --stage "$STAGE" --python python3 --venv "$VENV"
    # The project's servers run in the same interpreter (vLLM brings fastapi, pydantic, uvicorn ...);
    # pip takes from the carried wheels only what neither the venv nor the image already has;
    # pytest-asyncio for tests/gpu (the image has pytest).
    "$PY" -m pip install -q --no-index --find-links .whl --no-build-isolation -e . pytest-asyncio
    "$PY" -c "import vllm, torch, ng_cli; print('vllm', vllm.__version__, 'torch', torch.__version__, torch.cuda.get_device_name(0))" \
      | tee "$OUT/install.txt"
    echo "install took $(( $(date +%s) - started )) s" | tee -a "$OUT/install.txt"
    nvidia-smi -L | tee -a "$OUT/install.txt"
    ;;
  quickstart)
    mkdir -p /tmp/ng-models
    "$PY" ng_cli/engines/tiny_model.py --arch gemma3 --out /tmp/ng-models/tiny-gemma3 > /dev/null
    "$PY" bench/gemma_dummy_refit.py --model /tmp/ng-models/tiny-gemma3 --out "$OUT/gemma_dummy_refit.json" \
      > "$OUT/gemma_dummy_refit.log" 2>&1 || echo "gemma_dummy_refit failed: see its log"
    "$PY" -m pytest -p no:cacheprovider -x -q tests/gpu -k quickstart 2>&1 | tee "$OUT/pytest_quickstart.txt"
    ;;
  replicas)
    "$PY" -m pytest -p no:cacheprovider -q tests/gpu -k "two_replicas or gemma3" 2>&1 | tee "$OUT/pytest_replicas.txt"
    ;;
  dense8b)
    mkdir -p /tmp/ng-models
    "$PY" ng_cli/engines/tiny_model.py --arch llama3-8b --out /tmp/ng-models/llama3-8b-shape > /dev/null
    name="${2:-engine_efficiency_8b_graphs}"
    shift $(( $# > 1 ? 2 : 1 ))
    "$PY" bench/engine_efficiency.py --config responses_api_models/local_vllm_model/configs/gpu_dense_8b_dummy.yaml \
      --stack --concurrency 64 256 1024 --waves 4 --rounds 3 --max-tokens 128 --agent-workers 4 "$@" \
      --out "$OUT/$name.json" 2>&1 | tee "$OUT/$name.txt"
    ;;
  *)
    echo "unknown step $step" >&2
    exit 2
    ;;
esac
