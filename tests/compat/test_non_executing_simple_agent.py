"""NeMo Gym's structured_outputs v4 rows run under the agent their config names,
`non_executing_simple_agent`, and earn what NeMo Gym gives them.

NeMo Gym 0.7.0's agent (responses_api_agents/non_executing_simple_agent/app.py: `run` posts the
row's `responses_create_params` to its `responses`, which posts them to the model once and
returns the model's Response; `verify` gets that Response) asks the model once and verifies its
answer as it came. The rewards are NeMo Gym's own verify on the same answers (the `v4-example-*`
cases of `cases/structured_outputs.json`). Under `simple_agent`, which runs the call, the model
was asked again and shown the resources server's "no route" error.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest

from ng_cli.config.compose import compose_config
from ng_cli.config.paths import implementation_dir
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.testing import serve_rollout_stack
from tests.compat.case_files import load_cases

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
NEMO_GYM_ROOT = REPO / "tests" / "fixtures" / "nemo_gym"
V4_CONFIG = "resources_servers/structured_outputs/configs/structured_outputs_v4.yaml"
V4_ROWS = {
    row["source_record_id"]: row
    for row in map(
        json.loads,
        (NEMO_GYM_ROOT / "resources_servers/structured_outputs/data/structured_outputs_v4_example.jsonl")
        .read_text()
        .splitlines(),
    )
}
CASES = [case for case in load_cases("structured_outputs") if case["id"].startswith("v4-example-")]
Environment = load_server_class(REPO / "resources_servers" / "structured_outputs" / "app.py")


def _agent_of_the_v4_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """The agent class NeMo Gym's unchanged v4 config names, as ng_run would find it."""
    env_yaml = tmp_path / "env.yaml"
    env_yaml.write_text("policy_base_url: http://127.0.0.1:9/v1\npolicy_api_key: k\npolicy_model_name: m\n")
    monkeypatch.setenv("NG_ENV_YAML", str(env_yaml))
    files = f"{V4_CONFIG},responses_api_models/vllm_model/configs/vllm_model.yaml"
    composed = compose_config([f"+config_paths=[{files}]"], cwd=NEMO_GYM_ROOT)
    instance = composed.instances["structured_outputs_v4_simple_agent"]
    assert instance.implementation == "non_executing_simple_agent"
    agent_class = load_server_class(
        implementation_dir(instance.server_type, instance.implementation) / "app.py"
    )
    agent_class.validate_config(instance.block, instance=instance.name)  # NeMo Gym's block, as it is
    return agent_class


def _run(agent_url: str, row: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{agent_url}/run", data=orjson.dumps(row), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        return dict(orjson.loads(reply.read()))


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_v4_rows_earn_nemo_gyms_reward_after_one_model_call(
    case: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    agent_class = _agent_of_the_v4_config(monkeypatch, tmp_path)
    row = V4_ROWS[case["id"].removeprefix("v4-example-")]
    with serve_rollout_stack(Environment, agent_class, lambda _body: case["output"]) as stack:
        verdict = _run(stack.agent_url, row)
    assert (verdict["reward"], verdict["error_type"]) == (
        case["nemo_gym"]["reward"],
        case["nemo_gym"]["error_type"],
    )
    assert stack.model.requests == [row["responses_create_params"]]  # NeMo Gym's agent: one call, as sent
    assert verdict["response"]["output"] == case["output"]  # verified as the model answered


def test_under_simple_agent_the_answer_call_was_run_and_the_model_saw_an_error() -> None:
    """What the v4 rows met before this agent existed (the config was refused; mapping it to
    simple_agent would do this): the call goes to the resources server, which has no such route."""
    case = CASES[0]
    row = V4_ROWS[case["id"].removeprefix("v4-example-")]
    simple_agent = load_server_class(REPO / "responses_api_agents" / "simple_agent" / "app.py")
    answers = iter([case["output"], [{"type": "message", "role": "assistant", "content": "?"}]])
    with serve_rollout_stack(Environment, simple_agent, lambda _body: next(answers)) as stack:
        _run(stack.agent_url, row)
    assert len(stack.model.requests) == 2
    (shown,) = [
        item for item in stack.model.requests[1]["input"] if item.get("type") == "function_call_output"
    ]
    assert "no route POST /" in shown["output"]
