"""NeMo Gym's own servers, unchanged (tests/fixtures/nemo_gym_servers), served by our stack.

* example_session_state_mgmt keeps its per-rollout counter across a rollout's calls under our
  simple_agent: 5 of 5 rows correct, whether the server reads the rollout from our `ng_session`
  or (a stack secret it cannot verify) only from its own cookie, which the agent carries.
* false_statement_judge reaches its judge (a real uvicorn stub on loopback) through the model
  server its config names; a failed judge call is a masked row, never a reward.
* `ng_test` runs the server's own tests.
* example_multi_turn_gymnasium (NeMo Gym's `GymnasiumServer`, which builds its own `FastAPI()`)
  is served inside our plumbing: it answers `/health`, its errors come in our envelope, and its
  recorded rollouts replayed through our gymnasium_agent earn the rewards NeMo Gym recorded.
* ng_run from their root serves session state, gymnasium and speed_bench configs (speed_bench with
  our speed_bench_agent: one model call per user turn) and ng_collect_rollouts scores every row.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import orjson
import pytest
from fastapi import Request

from ng_cli.launcher.server_tests import run_suite
from ng_cli.servers import nemo_gym_finder as finder
from ng_cli.servers.app import JSONResponse, build_app, read_json_object
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.spec import ServerAddress
from ng_cli.servers.testing import (
    assistant_message,
    function_call,
    serve_agent,
    serve_in_child,
    serve_in_thread,
    tool_outputs,
)
from responses_api_agents.gymnasium_agent.app import GymnasiumAgent
from responses_api_agents.simple_agent.app import SimpleAgent
from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.stack_process import StackProcess
from tests.fixtures.stub_vllm import StubProcess

pytestmark = pytest.mark.integration

NEMO_GYM_ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "nemo_gym_servers"
ROOT = NEMO_GYM_ROOT / "resources_servers"
BIN = Path(sys.executable).parent
COUNTER = ROOT / "example_session_state_mgmt"
JUDGE = ROOT / "false_statement_judge"
GYMNASIUM = ROOT / "example_multi_turn_gymnasium"


def _rows(folder: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (folder / "data" / "example.jsonl").read_bytes().splitlines()]


def _counting_policy(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Adds what the prompt says, then reads the counter, then answers with what it read."""
    items = body["input"]
    prompt = next(item["content"] for item in items if item.get("role") == "user")
    outputs = tool_outputs(body)
    if not outputs:
        return [
            function_call("increment_counter", {"count": int(n)}) for n in re.findall(r"add (\d+)", prompt)
        ]
    if "count" not in outputs[-1]:
        return [function_call("get_counter_value", {})]
    return [assistant_message(f"The count is {outputs[-1]['count']}.")]


@pytest.mark.parametrize("same_secret", [True, False], ids=["ng_session", "their_cookie_only"])
def test_stateful_server_keeps_state_across_a_rollout(tmp_path: Path, same_secret: bool) -> None:
    block = {"entrypoint": "app.py", "domain": "agent", "verified": False, "description": "counter"}
    with serve_in_child(COUNTER / "app.py", block, name="counter", spec_dir=tmp_path) as child:
        secret = child.session_secret if same_secret else "another-stack-secret"
        with serve_agent(
            SimpleAgent,
            _counting_policy,
            resources_url=child.url,
            resources_server_type="resources_servers",
            resources_name="counter",
            session_secret=secret,
        ) as stack:
            rewards = [
                httpx.post(f"{stack.agent_url}/run", json=row, timeout=60).json()["reward"]
                for row in _rows(COUNTER)
            ]
    assert rewards == [1.0] * 5


def test_their_own_tests_pass_under_ng_test() -> None:
    result = run_suite(COUNTER, pytest_args=["-q", "-p", "no:cacheprovider"], capture=True)
    assert result.exit_code == 0, "\n".join(result.output_tail)  # not 5: their test ran (pytest.ini)


class StubJudge:
    """A model server on loopback that answers as a judge would, or fails on demand."""

    def __init__(self) -> None:
        self.verdict = "The proof does not hold.\n<points>2</points>"
        self.fail = False
        self.prompts: list[str] = []

    def app(self) -> Any:
        app = build_app("stub_judge")

        @app.post("/v1/responses")
        async def responses(request: Request) -> JSONResponse:
            body = await read_json_object(request)
            self.prompts.append(body["input"][0]["content"])
            if self.fail:
                return JSONResponse({"error": {"message": "judge down"}}, status_code=500)
            return JSONResponse(
                {
                    "id": "r",
                    "object": "response",
                    "created_at": 0,
                    "model": "judge",
                    "status": "completed",
                    "output": [assistant_message(self.verdict)],
                }
            )

        return app


@pytest.fixture
def judged_server() -> Iterator[tuple[str, StubJudge]]:
    judge = StubJudge()
    with serve_in_thread(judge.app()) as judge_url:
        server_class = load_server_class(JUDGE / "app.py")
        block = {
            "entrypoint": "app.py",
            "domain": "math",
            "judge_model_server": {"type": "responses_api_models", "name": "judge_model"},
            "judge_responses_create_params": {"input": [], "max_output_tokens": 512, "temperature": 0.0},
        }
        servers = {
            "judge_model": ServerAddress(
                server_type="responses_api_models", implementation="vllm_model", url=judge_url
            )
        }
        server = server_class(
            server_class.validate_config(block, instance="judged"), name="judged", servers=servers
        )
        try:
            with serve_in_thread(server.build_app()) as url:
                yield url, judge
        finally:
            finder.uninstall()


def test_a_judge_in_their_config_is_one_of_our_model_servers(judged_server: tuple[str, StubJudge]) -> None:
    url, judge = judged_server
    row = _rows(JUDGE)[0]
    response = {
        "id": "p",
        "object": "response",
        "created_at": 0,
        "model": "policy",
        "output": [assistant_message("Here is a proof ... the statement is false as written.")],
    }
    verified = httpx.post(f"{url}/verify", json={**row, "response": response}, timeout=60).json()
    assert (verified["reward"], verified["judge_points"], verified["mask_sample"]) == (1.0, 2, False)
    assert row["question"].strip()[:40] in judge.prompts[0]  # their prompt file, filled from the row

    judge.fail = True
    failed = httpx.post(f"{url}/verify", json={**row, "response": response}, timeout=60)
    assert failed.status_code == 500  # this server calls its judge without call_judge: no failsafe


def test_call_judge_and_judge_failsafe_as_theirs() -> None:
    """`call_judge` against a real model-server stub; a failed call is a masked row, not a score."""
    import asyncio

    from ng_cli.nemo_gym_compat.api.base_resources_server import BaseVerifyRequest, BaseVerifyResponse
    from ng_cli.nemo_gym_compat.api.judge import JudgeError, call_judge, judge_failsafe
    from ng_cli.nemo_gym_compat.api.openai_utils import NeMoGymResponse
    from ng_cli.nemo_gym_compat.api.server_utils import ServerClient, close_client_session

    judge = StubJudge()
    judge.verdict = "[[A=B]]"
    with serve_in_thread(judge.app()) as judge_url:
        port = int(judge_url.rsplit(":", 1)[1])
        client = ServerClient.model_validate(
            {
                "head_server_config": {"host": "127.0.0.1", "port": 1},
                "global_config_dict": {
                    "judge": {"responses_api_models": {"x": {"host": "127.0.0.1", "port": port}}}
                },
            }
        )
        request = {"input": [{"role": "user", "content": "same?"}]}
        body = BaseVerifyRequest.model_validate(
            {
                "responses_create_params": request,
                "response": {"id": "r", "created_at": 0, "model": "m", "output": []},
            }
        )

        async def verify(body: BaseVerifyRequest) -> BaseVerifyResponse:
            verdict = await call_judge(
                client,
                server_name="judge",
                url_path="/v1/responses",
                json=request,
                response_model=NeMoGymResponse,
            )
            return BaseVerifyResponse(**body.model_dump(), reward=float("[[A=B]]" in verdict.output_text))

        async def both() -> tuple[Any, Any]:
            try:
                scored = await judge_failsafe(verify)(body=body)
                judge.fail = True
                with pytest.raises(JudgeError, match="500"):
                    await call_judge(
                        client,
                        server_name="judge",
                        url_path="/v1/responses",
                        json=request,
                        response_model=NeMoGymResponse,
                    )
                masked = await judge_failsafe(verify)(body=body)
                return scored, masked
            finally:
                await close_client_session()

        scored, masked = asyncio.run(both())
    assert (scored.reward, scored.mask_sample) == (1.0, False)
    row = orjson.loads(masked.body)
    assert (row["reward"], row["mask_sample"], row["failure_kind"]) == (0.0, True, "judge_failed")


SPEED_BENCH_ROWS = [
    {"responses_create_params": {"input": [{"role": "user", "content": text} for text in turns]},
     "verifier_metadata": {"src_id": f"t{n}", "num_turns": len(turns)}}
    for n, turns in enumerate([["Hi."], ["One?", "Two?"], ["A?", "B?", "C?"], ["X."], ["Y.", "Z."]])
]  # fmt: skip
"""Rows of speed_bench's data/example.jsonl shape (that file is not vendored: its licence)."""


@pytest.mark.parametrize(
    ("server", "agent_name"),
    [
        ("example_session_state_mgmt", "example_session_state_mgmt_environment_server"),
        ("example_multi_turn_gymnasium", "example_multi_turn_gymnasium_agent"),  # our gymnasium_agent
        ("speed_bench", "speed_bench_simple_agent"),  # our speed_bench_agent
    ],
)
def test_ng_run_from_their_root_collects_scored_rollouts(
    tmp_path: Path, server: str, agent_name: str
) -> None:
    """Their config + a model config, from NeMo Gym's root: ng_run starts their app.py unchanged
    and ng_collect_rollouts gets a reward for each of its example rows (an echo model: 0.0;
    speed_bench's is 0.0 always, and the stub engine has no spec-decode counters)."""
    rows_path = ROOT / server / "data" / "example.jsonl"
    if server == "speed_bench":
        rows_path = tmp_path / "rows.jsonl"
        rows_path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in SPEED_BENCH_ROWS))
    configs = [
        f"resources_servers/{server}/configs/{server}.yaml",
        "responses_api_models/vllm_model/configs/vllm_model.yaml",
    ]
    with StubProcess() as engine:
        (tmp_path / "env.yaml").write_text(
            f"policy_base_url: {engine.base_url}\npolicy_api_key: stub-key\npolicy_model_name: stub-model\n"
        )
        env = {**os.environ, "NG_ENV_YAML": str(tmp_path / "env.yaml")}
        ready, log_path = tmp_path / "ready.json", tmp_path / "ng_run.log"
        stack = StackProcess.start(
            [str(BIN / "ng_run"), "+config_paths=[" + ",".join(configs) + "]", "++head_server.port=0", f"+ready_file={ready}"],
            env=env, cwd=NEMO_GYM_ROOT, ready_file=ready, log_path=log_path, timeout_s=HANG_CAP_S,
        )  # fmt: skip
        try:
            collect = subprocess.run(
                [
                    str(BIN / "ng_collect_rollouts"),
                    f"+agent_name={agent_name}",
                    f"+head_server_url={stack.head_url}",
                    f"+input_jsonl_fpath={rows_path}",
                    f"+output_jsonl_fpath={tmp_path / 'out.jsonl'}",
                ],
                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, check=False,
            )  # fmt: skip
        finally:
            stack.stop()
    assert collect.returncode == 0, collect.stderr + log_path.read_text()
    rows = [orjson.loads(line) for line in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert [type(row["reward"]) for row in rows] == [float] * 5
    assert server in log_path.read_text()
    if server == "speed_bench":  # one model call per user turn, its usage summed for speed_bench
        assert sorted(len(row["response"]["output"]) for row in rows) == [1, 1, 2, 2, 3]
        assert all(row["spec_decode_unavailable"] and row["num_generated_tokens"] > 0 for row in rows)


def test_their_gymnasium_server_is_served_inside_our_plumbing(tmp_path: Path) -> None:
    """Their `GymnasiumServer.setup_webserver()` returns a bare `FastAPI()`: without our plumbing
    ng_run would wait for a `/health` it never answers (serve_in_child waits for it too)."""
    block = {"entrypoint": "app.py", "domain": "knowledge", "allowed_agents": ["gymnasium_agent"]}
    rows = _rows(GYMNASIUM)
    recorded = [
        orjson.loads(line)
        for line in (GYMNASIUM / "data" / "example_rollouts.jsonl").read_bytes().splitlines()
    ]
    answers = {
        rows[r["_ng_task_index"]]["responses_create_params"]["input"][0]["content"]: [
            item["content"][0]["text"] for item in r["response"]["output"] if item.get("role") == "assistant"
        ]
        for r in recorded
    }
    wrong_task = recorded[0]["_ng_task_index"]
    wrong_prompt = rows[wrong_task]["responses_create_params"]["input"][0]["content"]

    def policy(body: dict[str, Any]) -> list[dict[str, Any]]:
        prompt = body["input"][0]["content"]
        turn = sum(1 for item in body["input"] if item.get("role") == "assistant")
        last = turn == len(answers[prompt]) - 1
        return [
            assistant_message("I do not know." if prompt == wrong_prompt and last else answers[prompt][turn])
        ]

    with serve_in_child(GYMNASIUM / "app.py", block, name="multi_turn", spec_dir=tmp_path) as child:
        assert httpx.get(f"{child.url}/health", timeout=10).json()["server"] == "multi_turn"
        bad = httpx.post(f"{child.url}/step", json={"response": "not a response"}, timeout=10)
        assert bad.status_code == 422
        assert "invalid request body" in bad.json()["error"]["message"]  # our envelope, not theirs
        with serve_agent(
            GymnasiumAgent,
            policy,
            resources_url=child.url,
            resources_server_type="resources_servers",
            resources_name="multi_turn",
            session_secret=child.session_secret,
            agent_config={"max_steps": 5},
        ) as stack:
            rewards = {
                task: httpx.post(f"{stack.agent_url}/run", json=row, timeout=60).json()["reward"]
                for task, row in enumerate(rows)
            }
    expected = {r["_ng_task_index"]: r["reward"] for r in recorded} | {wrong_task: 0.0}
    assert rewards == expected
