"""`ng_run` and `ng_collect_rollouts` as a user runs them, for the bench scripts (no pytest).

A bench runs on the README's install (`pip install -e .`, no dev extra), so it cannot use the
test fixtures (tests/fixtures imports pytest). This is the little a training bench needs: start
`ng_run` in a session of its own with an empty env.yaml of the run's own, wait for its ready
file, run collections against its head server, and stop everything (SIGINT, then SIGKILL to
each process group the ready file lists) whatever happened.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ng_cli.quickstart.plan import EXAMPLE_AGENT, EXAMPLE_CONFIG_PATHS, write_env_file

__all__ = ["ENGINE_KEY", "EXAMPLE_CONFIG_PATHS", "Collection", "Stack", "read_rows", "running_stack"]

ROOT = Path(__file__).resolve().parents[1]
ENGINE_KEY = "policy_model.responses_api_models.local_vllm_model"
"""The model instance of the example stack (`tiny_weather_cpu.yaml`): `++{ENGINE_KEY}.<key>=...`."""
READY_CAP_S = 1200.0
"""A cap for a hung start (a CPU vLLM on 2 busy cores takes minutes), not a measurement."""
STOP_CAP_S = 30.0


def console_script(name: str) -> str:
    """The project's console script beside this interpreter (the venv's), else the name for PATH."""
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.is_file() else name


def read_rows(path: Path) -> list[dict[str, Any]]:
    """A rollouts file's rows. Lines end at "\\n" only: str.splitlines() would also split at a
    U+0085 inside generated text, which JSON leaves unescaped."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().split("\n") if line.strip()]


@dataclass
class Collection:
    """One `ng_collect_rollouts` run in the background."""

    process: subprocess.Popen[str]
    output: Path

    def wait(self, timeout_s: float = 3600.0) -> list[dict[str, Any]]:
        """Its rows once it has ended; SystemExit with its output if it failed."""
        out, _ = self.process.communicate(timeout=timeout_s)
        if self.process.returncode != 0:
            raise SystemExit(f"ng_collect_rollouts failed ({self.process.returncode}):\n{out[-3000:]}")
        return read_rows(self.output)


@dataclass
class Stack:
    """A running `ng_run`: its head server, and the environment its collections run with."""

    process: subprocess.Popen[bytes]
    ready: dict[str, Any]
    env: dict[str, str]
    log: Path

    @property
    def head_url(self) -> str:
        return str(self.ready["head_url"])

    def collect(
        self,
        input_path: Path,
        output: Path,
        *,
        repeats: int,
        parallel: int,
        extra: Sequence[str] = (),
        agent: str = EXAMPLE_AGENT,
    ) -> Collection:
        """Start `ng_collect_rollouts` over `input_path` into `output` (its run files beside it)."""
        args = [
            f"+agent_name={agent}",
            f"+input_jsonl_fpath={input_path}",
            f"+output_jsonl_fpath={output}",
            f"+num_repeats={repeats}",
            f"+num_samples_in_parallel={parallel}",
            f"+head_server_url={self.head_url}",
            *extra,
        ]
        process = subprocess.Popen(
            [console_script("ng_collect_rollouts"), *args],
            cwd=ROOT, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        return Collection(process, output)


@contextlib.contextmanager
def running_stack(work: Path, config_paths: Sequence[str], overrides: Sequence[str] = ()) -> Iterator[Stack]:
    """`ng_run` over `config_paths` (repo-relative), ready; stopped with everything it started after."""
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "NG_ENV_YAML": str(write_env_file(work / "env.yaml")), "COLUMNS": "200"}
    ready_file, log_path = work / "ready.json", work / "ng_run.log"
    args = ["+config_paths=[" + ",".join(config_paths) + "]", "++head_server.port=0", *overrides]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [console_script("ng_run"), *args, f"+ready_file={ready_file}"],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C of the bench reaches it through our stop, not twice
        )  # fmt: skip
    ready: dict[str, Any] = {}
    # SIGTERM (a `timeout`, a job scheduler) would end this process without its finally blocks,
    # leaving ng_run, in a session of its own, serving: make it an exit that stops the stack.
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        ready = _wait_ready(process, ready_file, log_path)
        yield Stack(process, ready, env, log_path)
    finally:
        _stop(process, ready)
        signal.signal(signal.SIGTERM, previous)


def _wait_ready(process: subprocess.Popen[bytes], ready_file: Path, log_path: Path) -> dict[str, Any]:
    deadline = time.monotonic() + READY_CAP_S
    while not ready_file.is_file():
        if process.poll() is not None or time.monotonic() > deadline:
            state = (
                f"exited with code {process.returncode}" if process.returncode is not None else "not ready"
            )
            raise SystemExit(f"ng_run {state}; its log ends:\n{_tail(log_path)}")
        time.sleep(0.2)
    return dict(json.loads(ready_file.read_text()))


def _stop(process: subprocess.Popen[bytes], ready: dict[str, Any]) -> None:
    """SIGINT (ng_run stops its servers and engines), then SIGKILL to every group still there."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=STOP_CAP_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    children = [*ready.get("engines", []), *ready.get("servers", [])]
    for pid in {int(child["pid"]) for child in children if child.get("pid")}:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)  # what a server or engine started too
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # its own session's group


def _tail(path: Path, lines: int = 40) -> str:
    with path.open(errors="replace") as log:
        return "".join(deque(log, maxlen=lines))
