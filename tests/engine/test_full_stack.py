"""The whole chain with real processes: CPU vLLM -> ng_run -> ng_collect_rollouts (the quickstart: test_embedded_model.py).

`ng_run` (a subprocess) serves the example weather environment, its simple_agent and vllm_model
in its training configuration (token ids on) against the session's real vLLM; the real
`ng_collect_rollouts` runs the 5 example rows through it; then `ng_run` gets a SIGINT. A module
fixture does all of that once per variant and records what happened; the tests judge the record.

Two variants. `free`: the model answers as it likes (random weights: usually one text turn).
`forced`: vllm_model's `extra_body` constrains every answer to a `get_weather("Paris")` call
(structured outputs, docs/engine.md), so every rollout is several turns of tool calls and tool
outputs, which exercises the later turns' token ids. vLLM replaces our constraint with its own
for `strict` tools, so that variant's input is the example data without `strict`.

The model's weights are random, so nothing here asserts on words or rewards' values: only on
structure, on the token-id contract, and on agreement with vLLM's own `/tokenize`.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from ng_cli.conversion import to_chat_request
from ng_cli.errors import LaunchError
from ng_cli.launcher.ports import is_port_free
from ng_cli.launcher.stack import STOP_TIMEOUT_S
from ng_cli.protocol.responses import Response, ResponsesRequest
from ng_cli.quickstart.plan import EXAMPLE_AGENT, EXAMPLE_INPUT, write_env_file
from ng_cli.rollouts.failures import FailureKind
from ng_cli.rollouts.resume import OutputPaths
from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.stack.harness import MARKER_VAR, marked_pids
from tests.fixtures.stack_process import StackProcess
from tests.fixtures.vllm_engine import VllmServer

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CONFIG_PATHS = (
    "resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml",
    "responses_api_models/vllm_model/configs/vllm_model_for_training.yaml",
)
NUM_ROWS = 5
MAX_OUTPUT_TOKENS = 64
"""Per model call: fits the forced tool call (about 50 tokens) and keeps 10 turns under the 2k context."""
TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")
FORCED_STEPS = 3
FORCED_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
FORCED_CONFIG = {
    "policy_model": {
        "responses_api_models": {
            "vllm_model": {"extra_body": {"structured_outputs": {"choice": [FORCED_CALL]}}}
        }
    },
    EXAMPLE_AGENT: {"responses_api_agents": {"simple_agent": {"max_steps": FORCED_STEPS}}},
}


@dataclass(frozen=True)
class FullRun:
    """What one start -> collect -> SIGINT cycle produced."""

    rows: list[dict[str, Any]]
    failures: list[dict[str, Any]]
    collect: subprocess.CompletedProcess[str]
    stack_log: str
    stop_code: int
    stop_s: float
    leftover_pids: list[int]
    ports_free: bool
    ready_file_left: bool
    run_dir_left: bool


def _env(env_file: Path, marker: str) -> dict[str, str]:
    env = {**os.environ, "NG_ENV_YAML": str(env_file), MARKER_VAR: marker, "COLUMNS": "200"}
    env.pop("NG_REPO_ROOT", None)
    return env


def _start_stack(tmp: Path, env: dict[str, str], config_paths: list[str]) -> StackProcess:
    ready_file = tmp / "ready.json"
    command = [
        str(BIN / "ng_run"),
        "+config_paths=[" + ",".join(config_paths) + "]",
        f"+ready_file={ready_file}",
        "++head_server.port=0",
    ]
    try:
        return StackProcess.start(
            command, env=env, cwd=ROOT, ready_file=ready_file, log_path=tmp / "ng_run.log", timeout_s=600
        )
    except LaunchError as error:
        pytest.fail(f"ng_run did not get ready: {error}", pytrace=False)


def _collect(
    stack: StackProcess, data: Path, output: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    command = [
        str(BIN / "ng_collect_rollouts"),
        f"+agent_name={EXAMPLE_AGENT}",
        f"+input_jsonl_fpath={data}",
        f"+output_jsonl_fpath={output}",
        f"+num_samples_in_parallel={NUM_ROWS}",
        f"+responses_create_params.max_output_tokens={MAX_OUTPUT_TOKENS}",
        f"+head_server_url={stack.head_url}",
    ]
    return subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def _stop_with_sigint(stack: StackProcess, marker: str) -> tuple[int, float, list[int]]:
    started = time.monotonic()
    stack.process.send_signal(signal.SIGINT)
    code = stack.process.wait(timeout=STOP_TIMEOUT_S + 5)
    seconds = time.monotonic() - started
    deadline = time.monotonic() + HANG_CAP_S  # the teardown of a SIGKILLed grandchild
    while marked_pids(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return code, seconds, marked_pids(marker)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _forced_inputs(tmp: Path) -> tuple[list[str], Path]:
    """The extra config file and the example rows without `strict` on their tools."""
    config = tmp / "forced_tool_calls.yaml"
    config.write_text(yaml.safe_dump(FORCED_CONFIG))
    data = tmp / "example_not_strict.jsonl"
    rows = _read_jsonl(ROOT / EXAMPLE_INPUT)
    for row in rows:
        for tool in row["responses_create_params"]["tools"]:
            tool.pop("strict", None)
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return [*CONFIG_PATHS, str(config)], data


def _full_run(engine: VllmServer, tmp: Path, *, is_forced: bool) -> Iterator[FullRun]:
    """Start the stack, collect the 5 example rows, stop the stack with SIGINT; record it all."""
    env_file = write_env_file(
        tmp / "env.yaml",
        {
            "policy_base_url": engine.base_url,
            "policy_api_key": engine.api_key,
            "policy_model_name": engine.model,
        },
    )
    config_paths, data = _forced_inputs(tmp) if is_forced else (list(CONFIG_PATHS), ROOT / EXAMPLE_INPUT)
    marker = uuid.uuid4().hex
    env = _env(env_file, marker)
    stack = _start_stack(tmp, env, config_paths)
    try:
        urls = [stack.head_url, *(server["url"] for server in stack.ready["servers"])]
        output = tmp / "rollouts.jsonl"
        collect = _collect(stack, data, output, env)
        stop_code, stop_s, leftovers = _stop_with_sigint(stack, marker)
        yield FullRun(
            rows=_read_jsonl(output),
            failures=_read_jsonl(OutputPaths.for_output(output).failures),
            collect=collect,
            stack_log=stack.log_path.read_text(errors="replace"),
            stop_code=stop_code,
            stop_s=stop_s,
            leftover_pids=leftovers,
            ports_free=all(is_port_free("127.0.0.1", int(url.rsplit(":", 1)[1])) for url in urls),
            ready_file_left=stack.ready_file.exists(),
            run_dir_left=Path(stack.ready["run_dir"]).exists(),
        )
    finally:
        stack.stop()
        for pid in marked_pids(marker):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def free_run(vllm_engine: VllmServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FullRun]:
    yield from _full_run(vllm_engine, tmp_path_factory.mktemp("free"), is_forced=False)


@pytest.fixture(scope="module")
def forced_run(vllm_engine: VllmServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FullRun]:
    yield from _full_run(vllm_engine, tmp_path_factory.mktemp("forced"), is_forced=True)


@pytest.fixture(params=["free_run", "forced_run"])
def full_run(request: pytest.FixtureRequest) -> FullRun:
    """Each variant's record, for the tests that hold for both."""
    run: FullRun = request.getfixturevalue(request.param)
    return run


def _model_calls(output: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(start, end) index ranges of the items each model call produced; tool outputs separate them."""
    calls, start = [], None
    for index, item in enumerate([*output, {"type": "function_call_output"}]):
        if item["type"] == "function_call_output":
            if start is not None:
                calls.append((start, index))
            start = None
        elif start is None:
            start = index
    return calls


def _tokenize(engine: VllmServer, params: dict[str, Any]) -> list[int]:
    """vLLM's own tokenization of the chat request vllm_model sends for these Responses params."""
    chat = to_chat_request(ResponsesRequest.model_validate(params), model=engine.model, wants_token_ids=False)
    payload = {"model": engine.model, "messages": chat["messages"], "add_generation_prompt": True}
    if "tools" in chat:
        payload["tools"] = chat["tools"]
    request = urllib.request.Request(
        f"{engine.root_url}/tokenize",
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {engine.api_key}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return list(json.loads(response.read())["tokens"])


def test_every_row_gets_one_scored_rollout(full_run: FullRun) -> None:
    assert full_run.collect.returncode == 0, full_run.collect.stderr[-3000:]
    assert len(full_run.rows) == NUM_ROWS
    assert sorted(row["_ng_task_index"] for row in full_run.rows) == list(range(NUM_ROWS))
    for row in full_run.rows:
        assert isinstance(row["reward"], float | int)
        assert not isinstance(row["reward"], bool)
        assert math.isfinite(row["reward"])
        assert 0.0 <= row["reward"] <= 1.0
        assert row["expected_city"]  # the input row's own fields travel with the rollout
    assert "done: all 5 rollouts have a reward" in full_run.collect.stderr


def test_no_failures_or_only_typed_ones(full_run: FullRun) -> None:
    kinds = {kind.value for kind in FailureKind}
    for failure in full_run.failures:
        assert failure["kind"] in kinds, failure
        assert failure["message"], failure
    assert len(full_run.rows) + len(full_run.failures) == NUM_ROWS


def test_responses_are_well_formed(full_run: FullRun) -> None:
    for row in full_run.rows:
        response = Response.model_validate(row["response"])
        output = row["response"]["output"]
        assert response.output
        called: set[str] = set()
        for item in output:
            assert item["type"] in ("message", "function_call", "function_call_output"), item["type"]
            if item["type"] == "message":
                assert item["role"] == "assistant"
                assert all(part["type"] == "output_text" for part in item["content"])
            elif item["type"] == "function_call":
                assert item["name"] == "get_weather"
                assert isinstance(item["arguments"], str)
                called.add(item["call_id"])
            else:
                assert item["call_id"] in called  # a tool output answers an earlier call
                assert isinstance(json.loads(item["output"]), dict)


def test_forced_tool_calls_reach_the_environment_every_turn(forced_run: FullRun) -> None:
    for row in forced_run.rows:
        output = row["response"]["output"]
        assert [item["type"] for item in output] == ["function_call", "function_call_output"] * FORCED_STEPS
        for call, result in zip(output[::2], output[1::2], strict=True):
            assert json.loads(call["arguments"]) == {"city": "Paris"}
            assert result["call_id"] == call["call_id"]
            weather = json.loads(result["output"])
            assert weather["city"] == "Paris", weather  # the tool ran; no error envelope
        assert row["reward"] == 0.0  # max_steps ended it before any final answer


def test_every_model_call_carries_consistent_token_ids(full_run: FullRun) -> None:
    for row in full_run.rows:
        output, usage = row["response"]["output"], row["response"]["usage"]
        calls = _model_calls(output)
        assert calls
        for start, end in calls:
            last = output[end - 1]
            assert all(field not in item for item in output[start : end - 1] for field in TOKEN_FIELDS)
            prompt, generated, logprobs = (last[field] for field in TOKEN_FIELDS)
            assert prompt
            assert all(isinstance(token, int) for token in prompt)
            assert 0 < len(generated) == len(logprobs) <= MAX_OUTPUT_TOKENS
            assert all(math.isfinite(lp) and lp <= 0 for lp in logprobs)
        # The agent sums usage over the turns; the token ids must account for all of it.
        token_items = [output[end - 1] for _, end in calls]
        assert usage["output_tokens"] == sum(len(item["generation_token_ids"]) for item in token_items)
        assert usage["input_tokens"] == sum(len(item["prompt_token_ids"]) for item in token_items)


def test_prompt_token_ids_equal_vllm_tokenize(full_run: FullRun, vllm_engine: VllmServer) -> None:
    """Every turn's prompt ids are vLLM's tokenization of that turn's conversation.

    vllm_model re-renders the whole conversation each turn today. When it splices the previous
    turn's exact ids instead (DESIGN.md, token-exact multi-turn), later turns will extend the
    previous prompt + generation rather than equal a fresh /tokenize; keep the first-turn check.
    """
    for row in full_run.rows:
        params, output = row["responses_create_params"], row["response"]["output"]
        for start, end in _model_calls(output):
            turn = {**params, "input": [*params["input"], *output[:start]]}
            assert output[end - 1]["prompt_token_ids"] == _tokenize(vllm_engine, turn), (
                row["_ng_task_index"],
                start,
            )


def test_ng_run_stops_cleanly_on_sigint(full_run: FullRun) -> None:
    assert full_run.stop_code == 130, full_run.stack_log[-3000:]
    assert full_run.stop_s < STOP_TIMEOUT_S
    assert full_run.leftover_pids == []
    assert full_run.ports_free
    assert not full_run.ready_file_left
    assert not full_run.run_dir_left
