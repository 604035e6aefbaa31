"""TRL's NeMo Gym client against ng_cli on the real CPU vLLM and the embedded model.

The client (tests/fixtures/trainers/nemo_gym_trl_client.py) imports `nemo_gym.cli`,
`nemo_gym.rollout_collection` and `nemo_gym.server_utils` as TRL's `grpo_nemo_gym.py` does, with
those names answered by ng_cli (`ng_cli.trainer_api.install`). Its start dict is TRL's: the engine
at `policy_base_url` with the key "EMPTY" (as `trl vllm-serve` runs), served under the model's
path, both aiohttp connector limits. Every rollout must carry the token fields, every turn's prompt
must extend the turns before it (TRL's assert), and the reward must be what the environment's
`/verify` says of that response; after `shutdown()` no process of the stack is left.
"""

from __future__ import annotations

import json
import socket
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ng_cli.trainer_api import install, uninstall
from tests.engine.conftest import EMBEDDED_MODEL_DIR
from tests.fixtures.stack.harness import MARKER_VAR, marked_pids
from tests.fixtures.vllm_engine import VllmServer

ROOT = Path(__file__).resolve().parents[2]
GYM_CONFIGS = [
    "resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml",
    "responses_api_models/vllm_model/configs/vllm_model_for_training.yaml",
]
AGENT = "example_single_tool_call_simple_agent"
MODEL_NAME = str(EMBEDDED_MODEL_DIR)
"""What TRL passes as model_name: the trainer's model, which `trl vllm-serve` serves under that name."""


@pytest.fixture(scope="module")
def keyless_engine(vllm_env: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:  # noqa: ARG001
    """The embedded model served as `trl vllm-serve` serves the trainer's model: key "EMPTY"."""
    with VllmServer.start(
        EMBEDDED_MODEL_DIR,
        api_key="EMPTY",
        served_model_name=MODEL_NAME,
        log_dir=tmp_path_factory.mktemp("trl"),
    ) as server:
        yield server


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("NG_REPO_ROOT", raising=False)
    monkeypatch.delenv("NG_ENV_YAML", raising=False)
    assert install()
    try:
        from tests.fixtures.trainers import nemo_gym_trl_client

        yield nemo_gym_trl_client
    finally:
        uninstall()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def prompts(count: int) -> list[str]:
    """TRL's dataset: one JSON row per prompt, each naming its agent."""
    lines = (ROOT / "resources_servers/example_single_tool_call/data/example.jsonl").read_text().splitlines()
    return [json.dumps({**json.loads(line), "agent_ref": {"name": AGENT}}) for line in lines[:count]]


def verify(url: str, row: dict[str, Any], response: dict[str, Any]) -> float:
    """The environment's own /verify on a response, asked directly."""
    body = json.dumps({**row, "response": response}).encode()
    request = urllib.request.Request(f"{url}/verify", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return float(json.loads(answer.read())["reward"])


def test_trl_rollout_func_trains_on_contiguous_token_ids_scored_by_verify(
    keyless_engine: VllmServer, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = uuid.uuid4().hex
    monkeypatch.setenv(MARKER_VAR, marker)  # every process of the stack inherits it
    head_port = free_port()
    helper = client.start_gym(
        GYM_CONFIGS, MODEL_NAME, engine_host="127.0.0.1", engine_port=keyless_engine.port, head_port=head_port
    )
    try:
        trainer = SimpleNamespace(args=SimpleNamespace(temperature=1.0, top_p=1.0, max_completion_length=96))
        given = prompts(5) * 2
        rollout_func = client.make_rollout_func(head_port)
        out = rollout_func(given, trainer)
        environment = helper.stack.plan.server("example_single_tool_call").url
        verified = [verify(environment, row, result["response"]) for row, result in rollout_func.seen]
    finally:
        helper.shutdown()
    assert marked_pids(marker) == []

    assert len(out["env_reward"]) == len(given)
    assert out["env_reward"] == [result["reward"] for _, result in rollout_func.seen] == verified
    for first, ids, mask, logprobs in zip(
        out["prompt_ids"], out["completion_ids"], out["env_mask"], out["logprobs"], strict=True
    ):
        assert first
        assert len(ids) == len(mask) == len(logprobs) > 0
        assert all(score <= 0.0 for score in logprobs)
    for _, result in rollout_func.seen:
        turns = [item for item in result["response"]["output"] if "generation_token_ids" in item]
        assert turns
        assert all("prompt_token_ids" in t and "generation_log_probs" in t for t in turns)
    # Some rollouts called the tool and answered after it: TRL's contiguity check ran between turns.
    assert any(0 in mask for mask in out["env_mask"])
