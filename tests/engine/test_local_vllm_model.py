"""local_vllm_model on the real CPU engine: ng_run starts two engines from config, a SIGKILLed one
fails over, restarts and rejoins, no request of the run fails, and SIGINT leaves nothing behind.

The stack is the quick start's (example_single_tool_call + the shipped tiny_weather_cpu.yaml) with
`data_parallel_size: 2`: two independent engines of models/tiny-weather, balanced by the model
server's pool. The engine is the subject here, so everything is real: vLLM, ng_run, the servers,
the collector.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ng_cli.engines.local_vllm import is_vllm_env_ready, vllm_venv_dir
from ng_cli.launcher.ports import is_port_free
from ng_cli.quickstart.plan import (
    EXAMPLE_AGENT,
    EXAMPLE_INPUT,
    QuickstartPlan,
    child_env,
    ng_run_args,
    write_env_file,
)
from ng_cli.quickstart.processes import StackProcess, console_script
from tests.fixtures.stack.harness import MARKER_VAR, marked_pids

ROOT = Path(__file__).resolve().parents[2]
ENGINE_KEY = "policy_model.responses_api_models.local_vllm_model"
FIRST_REPEATS, SECOND_REPEATS = 12, 4  # x 5 example rows
KILL_AFTER_ROWS = 8


@dataclass
class Stack:
    process: StackProcess
    env: dict[str, str]
    tmp: Path
    marker: str

    @property
    def model_url(self) -> str:
        return next(s["url"] for s in self.process.ready["servers"] if s["name"] == "policy_model")

    @property
    def engines(self) -> list[dict[str, object]]:
        return list(self.process.ready["engines"])

    def log(self) -> str:
        return self.process.log_path.read_text(errors="replace")


def _requests_per_endpoint(model_url: str) -> dict[str, float]:
    """`ng_model_upstream_requests_total{outcome="ok"}` per endpoint, from the model server's /metrics."""
    with urllib.request.urlopen(f"{model_url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    pattern = re.compile(r'ng_model_upstream_requests_total\{endpoint="([^"]+)",outcome="ok"\} ([0-9.e+]+)')
    return {endpoint: float(value) for endpoint, value in pattern.findall(text)}


def _metric(model_url: str, name: str) -> float:
    with urllib.request.urlopen(f"{model_url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    match = re.search(rf"^{name} ([0-9.e+]+)$", text, re.MULTILINE)
    return float(match[1]) if match else 0.0


def _collect(stack: Stack, name: str, repeats: int) -> subprocess.Popen[str]:
    output = stack.tmp / f"{name}.jsonl"
    args = [
        f"+agent_name={EXAMPLE_AGENT}",
        f"+input_jsonl_fpath={ROOT / EXAMPLE_INPUT}",
        f"+output_jsonl_fpath={output}",
        f"+num_repeats={repeats}",
        "+num_samples_in_parallel=16",
        "+responses_create_params.max_output_tokens=128",
        f"+head_server_url={stack.process.head_url}",
    ]
    return subprocess.Popen(
        [str(console_script("ng_collect_rollouts")), *args],
        cwd=ROOT, env=stack.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def _rows(path: Path) -> list[dict[str, object]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _wait_for(predicate: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if not is_vllm_env_ready():
        reason = (
            f"the CPU vLLM env is not built at {vllm_venv_dir()}; run: bash scripts/build_vllm_cpu_env.sh"
        )
        if os.environ.get("NG_REQUIRE_ENGINE", "").strip().lower() not in ("", "0", "false", "no"):
            pytest.fail(f"NG_REQUIRE_ENGINE is set and {reason}", pytrace=False)
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("local_vllm")
    plan = QuickstartPlan.default(ROOT).with_changes(run_dir=tmp / "run")
    write_env_file(plan.env_file)
    marker = uuid.uuid4().hex
    env = {**child_env(plan, is_logged=True), MARKER_VAR: marker}
    args = [
        *ng_run_args(plan),
        f"++{ENGINE_KEY}.vllm_serve_kwargs.data_parallel_size=2",
        f"++{ENGINE_KEY}.max_restarts=2",
        f"++{ENGINE_KEY}.health_probe_interval_s=1",
    ]
    process = StackProcess.start(
        [str(console_script("ng_run")), *args],
        env=env, cwd=ROOT, ready_file=plan.ready_file, log_path=plan.ng_run_log, timeout_s=600,
    )  # fmt: skip
    try:
        yield Stack(process, env, tmp, marker)
    finally:
        process.stop()
        for pid in marked_pids(marker):
            os.kill(pid, signal.SIGKILL)


def test_two_engines_one_killed_mid_run_nothing_lost_and_it_rejoins(stack: Stack) -> None:
    engines = stack.engines
    assert [engine["name"] for engine in engines] == ["policy_model/engine-0", "policy_model/engine-1"]
    assert all(engine["devices"] == "cpu" and engine["pid"] for engine in engines)
    first_url, second_url = (str(engine["url"]) for engine in engines)

    # A run of 60 rollouts; engine-0 is SIGKILLed once some have landed.
    collector = _collect(stack, "first", FIRST_REPEATS)
    _wait_for(lambda: len(_rows(stack.tmp / "first.jsonl")) >= KILL_AFTER_ROWS, 300, "the first rollouts")
    os.kill(int(engines[0]["pid"]), signal.SIGKILL)  # type: ignore[call-overload]
    out, _ = collector.communicate(timeout=600)
    assert collector.returncode == 0, out[-3000:]
    rows = _rows(stack.tmp / "first.jsonl")
    assert len(rows) == 5 * FIRST_REPEATS
    assert all("reward" in row for row in rows)
    assert not (stack.tmp / "first_failures.jsonl").exists(), out[-3000:]
    spread = _requests_per_endpoint(stack.model_url)
    assert spread[first_url] > 0, spread  # sessions used both engines
    assert spread[second_url] > 0, spread
    assert _metric(stack.model_url, "ng_model_failovers_total") > 0  # engine-0's sessions moved

    # ng_run restarts it (backoff), and the pool takes it back once it serves again.
    _wait_for(lambda: "policy_model/engine-0 is serving again" in stack.log(), 400, "engine-0 to serve again")
    log = stack.log()
    assert "policy_model/engine-0 exited (exit code -9 (killed by SIGKILL)); restarting it in 1 s" in log
    _wait_for(lambda: _healthy(stack.model_url, first_url), 60, "the model server to readmit engine-0")
    before = _requests_per_endpoint(stack.model_url)
    second = _collect(stack, "second", SECOND_REPEATS)
    out, _ = second.communicate(timeout=600)
    assert second.returncode == 0, out[-3000:]
    assert len(_rows(stack.tmp / "second.jsonl")) == 5 * SECOND_REPEATS
    after = _requests_per_endpoint(stack.model_url)
    assert after[first_url] > before[first_url]  # the restarted engine serves sessions again

    # SIGINT: ng_run stops both engines and everything vLLM spawned; no port stays bound.
    ports = [int(str(engine["url"]).rsplit(":", 1)[1].split("/")[0]) for engine in engines]
    assert stack.process.stop() == []
    assert marked_pids(stack.marker) == []
    assert all(is_port_free("127.0.0.1", port) for port in ports)


def _healthy(model_url: str, endpoint: str) -> bool:
    with urllib.request.urlopen(f"{model_url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return f'ng_model_endpoint_healthy{{endpoint="{endpoint}"}} 1.0' in text
