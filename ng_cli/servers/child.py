"""The entry point of one server process: `python -m ng_cli.servers.child <spec.json>`.

Reads (and deletes) the 0600 spec file, imports the implementation's `app.py`, validates its
config block, and serves on the socket the launcher bound (or binds host:port itself).
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import signal
import socket
import sys
from pathlib import Path

import uvicorn

from ng_cli.errors import NgError
from ng_cli.servers.check import BlockCheck, validated_config
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.redaction import redact_logging
from ng_cli.servers.spec import ServerSpec, read_spec

__all__ = ["GC_THRESHOLDS", "main", "relax_gc", "serve"]

_PR_SET_PDEATHSIG = 1


def serve(spec: ServerSpec) -> None:
    """Build the server described by `spec` and serve until SIGINT/SIGTERM."""
    server_class = load_server_class(Path(spec.app_path))
    if getattr(server_class, "run_in_own_folder", False):  # NeMo Gym's servers (nemo_gym_compat)
        os.chdir(Path(spec.app_path).parent)
    check = BlockCheck(
        name=spec.name,
        server_type=spec.server_type,
        implementation=spec.implementation,
        app_path=spec.app_path,
        config=spec.config,
        source=spec.source,
        sources=spec.sources,
    )
    config = validated_config(server_class, check)  # exactly what ng_run checked before starting
    server = server_class(
        config,
        name=spec.name,
        servers=spec.servers,
        head_url=spec.head_url,
        session_secret=spec.session_secret,
    )
    if spec.http_limits is not None:
        server.http.limit_connections(spec.http_limits)
    app = server.build_app(exit_on_startup_error=True)
    uv_config = uvicorn.Config(
        app,
        host=spec.host,
        port=spec.port,
        log_level="warning",
        access_log=False,
        timeout_keep_alive=30,
        timeout_graceful_shutdown=2,
        lifespan="on",
    )
    redact_logging(server.redactor)  # after uvicorn.Config, which installs uvicorn's handlers
    uv_server = uvicorn.Server(uv_config)
    sockets = [_listening_socket(spec.listen_fd)] if spec.listen_fd is not None else None
    relax_gc()
    uv_server.run(sockets=sockets)


GC_THRESHOLDS = (50_000, 20, 100)
"""(700, 10, 10) by default. A model call with token ids and logprobs makes ~3 containers a token
(vLLM's logprob entries): at the default, a server with 1,024 calls in flight spent 30% of its
CPU in the collector, mostly in full collections of ~0.1 s each, which stall every call
(bench/proxy_overhead.py --rl). Young objects are still collected, in fewer, larger passes."""


def relax_gc() -> None:
    """Collect less often, and never scan what start-up made (imports, the app: all long-lived)."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def _listening_socket(fd: int) -> socket.socket:
    """The socket ng_run bound for us, made non-inheritable: whatever this server spawns (a
    sandboxed program, a worker) must not be able to accept connections meant for it."""
    sock = socket.socket(fileno=fd)
    sock.set_inheritable(False)
    return sock


def _die_with_parent() -> None:
    """Ask Linux to SIGTERM us if ng_run dies, even by SIGKILL: no orphan keeps its port."""
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() == 1:  # the parent died before prctl took effect
        sys.exit("error: the launcher exited before this server started")


def main() -> None:
    _die_with_parent()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if len(sys.argv) != 2:
        sys.exit("usage: python -m ng_cli.servers.child <spec.json>")
    try:
        serve(read_spec(Path(sys.argv[1])))
    except NgError as error:
        print(f"error: {error.message}", file=sys.stderr)
        if error.hint:
            print(f"hint: {error.hint}", file=sys.stderr)
        sys.exit(error.exit_code)


if __name__ == "__main__":
    main()
