#!/usr/bin/env bash
# Retrain the embedded default model (models/tiny-weather) from nothing, then check it through
# the real stack. About 11 min of training on 2 CPU cores, plus about a minute for the check.
#
# Training runs under the CPU vLLM venv's python (torch, transformers, tokenizers); the same seed
# gives the same weights. The check is tests/engine/test_embedded_model.py: vLLM serves the new
# model, its /tokenize must equal the training rendering, and the quickstart's stack must score
# the example rows at a mean reward >= 0.8. Arguments go to the training script, e.g. --seed 1
# (`~/.cache/ng_cli/vllm-cpu-venv/bin/python ng_cli/toolchain/train_weather_model.py --help`).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/build_vllm_cpu_env.sh
VENV="${NG_VLLM_VENV:-$HOME/.cache/ng_cli/vllm-cpu-venv}"

printf '\n== training models/tiny-weather\n'
"$VENV/bin/python" ng_cli/toolchain/train_weather_model.py --out models/tiny-weather "$@"

printf '\n== checking it through vLLM and the quickstart stack\n'
NG_REQUIRE_ENGINE=1 .venv/bin/python -m pytest tests/engine/test_embedded_model.py -q -p no:cacheprovider
