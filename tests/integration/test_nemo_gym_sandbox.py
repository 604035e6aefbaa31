"""NeMo Gym's `nemo_gym.sandbox`, over our sandbox: a NeMo Gym server runs model-written code there.

litmus_agent (NeMo Gym's, unchanged in tests/fixtures/nemo_gym_servers) serves its
`stateful_python_code_exec` tool through `AsyncSandbox`; with `sandbox_provider: {local: {}}`
the code runs in `ng_cli.sandbox` (no network, no descriptor of the server). A provider that
needs what no machine here has (its config's own `opensandbox`) is refused by name before the
server starts. The forged-reward attack (model code serving on inherited listening sockets,
issue 24) forges nothing through it.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from pydantic import ValidationError

from ng_cli.rollouts import CollectConfig, collect_rollouts
from ng_cli.rollouts.progress import NullView
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.spec import ServerAddress
from ng_cli.servers.testing import (
    ScriptedModel,
    assistant_message,
    function_call,
    serve_in_child,
    serve_in_thread,
)
from resources_servers.code_execution.tests.test_code_execution_forgery import ATTACKER, PROBE_FDS

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        sys.platform != "linux" or os.geteuid() != 0,
        reason="the sandbox needs Linux and root (namespaces, mounts, setuid)",
    ),
]

LITMUS = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "nemo_gym_servers"
    / "resources_servers"
    / "litmus_agent"
)
THEIR_SIMPLE_AGENT = LITMUS.parents[1] / "responses_api_agents" / "simple_agent" / "app.py"
TOOL = "stateful_python_code_exec"


def litmus_block(**provider: Any) -> dict[str, Any]:
    """Their config's block, with the provider swapped (their config names opensandbox)."""
    config = yaml.safe_load((LITMUS / "configs" / "litmus_agent.yaml").read_text())
    block = dict(config["litmus_agent"]["resources_servers"]["litmus_agent"])
    limits = {"uid_base": 100_000 + secrets.randbelow(100_000) * 8, "concurrency": 4, "cpu_time_s": 2}
    block.update(
        float_rel_tol=1e-6, float_abs_tol=1e-6, code_exec_timeout_s=5, code_exec_max_output_chars=10000,
        sandbox_provider=provider or {"local": limits},
    )  # fmt: skip
    return block


def _post_text(url: str, body: dict[str, Any]) -> str:
    request = urllib.request.Request(
        url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        return str(answer.read().decode())


def test_their_server_runs_model_code_in_our_sandbox(tmp_path: Path) -> None:
    with serve_in_child(LITMUS / "app.py", litmus_block(), name="litmus_agent", spec_dir=tmp_path) as server:
        tool = f"{server.url}/{TOOL}"
        first = _post_text(tool, {"code": "x = 21\nprint(x * 2)"})
        held = _post_text(tool, {"code": PROBE_FDS})
        port = server.url.rsplit(":", 1)[1]
        reach = (
            f"import socket\ntry:\n socket.create_connection(('127.0.0.1', {port}), 2); print('REACHED')\n"
        )
        network = _post_text(tool, {"code": reach + "except OSError as e:\n print('unreachable', e.errno)"})
    assert first.strip() == "42"
    assert json.loads(held.strip().splitlines()[-1]) == []  # nothing of the server reaches the code
    assert network.strip().splitlines()[-1].startswith("unreachable")


def test_a_provider_we_cannot_have_is_refused_before_start() -> None:
    """Their config as shipped names opensandbox: refused by name when the block is checked, which
    ng_run does for every server before it starts any."""
    server_class = load_server_class(LITMUS / "app.py")
    with pytest.raises(ValidationError) as refused:
        server_class.config_class.model_validate(litmus_block(opensandbox={"connection": {"domain": "x"}}))
    message = str(refused.value)
    assert "'opensandbox' is not available here" in message
    assert "remote sandbox service" in message
    assert "{local: {}}" in message
    with pytest.raises(ValidationError, match="'e2b' is not available here"):
        server_class.config_class.model_validate(litmus_block(e2b={}))


TOOL_SPEC = {
    "type": "function", "name": TOOL, "description": "Run Python code; the session keeps its state.",
    "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
}  # fmt: skip
ROWS = [
    {"responses_create_params": {"input": [{"role": "user", "content": f"How many heavy atoms are in {smiles}?"}],
                                 "tools": [TOOL_SPEC]},
     "expected_answer": str(n), "answer_type": "float", "answer_format": "fmt_00", "match": {"rule": "exact"},
     "method": "tool", "property": "HeavyAtomCount", "smiles": smiles}
    for n, smiles in enumerate(["CCO", "O", "CC(=O)O", "c1ccccc1", "CCN"], start=3)
]  # fmt: skip
"""Rows of litmus_agent's data/example.jsonl shape (its rows are not vendored: their licence),
with its code tool offered."""
REPEATS = 8
"""5 rows x 8 repeats: the 40 rollouts of the collection that first showed the leak (issue 24)."""


def _raw_outputs(request: dict[str, Any]) -> list[str]:
    """The tool outputs a request carries, as text (litmus_agent's tool answers plain text)."""
    items = request.get("input")
    return [
        str(item.get("output"))
        for item in (items if isinstance(items, list) else [])
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]


async def attacker_policy(request: dict[str, Any]) -> list[dict[str, Any]]:
    """First the attacker program as a tool call, then a wrong answer: an honest reward is 0."""
    await asyncio.sleep(4.2)  # past the agent's keep-alive: /verify then opens a fresh connection
    if not _raw_outputs(request):
        return [function_call(TOOL, {"code": ATTACKER})]
    return [assistant_message("I cannot tell ((0))")]


@pytest.mark.slow
async def test_programs_serving_on_inherited_sockets_forge_no_reward(tmp_path: Path) -> None:
    """Their litmus_agent with their own simple_agent (which passes the tool's plain-text answer
    on to the model, as theirs does), each in its own process as ng_run starts them."""
    rows = tmp_path / "rows.jsonl"
    rows.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in ROWS))
    output = tmp_path / "rollouts.jsonl"
    model = ScriptedModel(attacker_policy)
    agent_block = {
        "entrypoint": "app.py", "max_steps": 4,
        "resources_server": {"type": "resources_servers", "name": "litmus_agent"},
        "model_server": {"type": "responses_api_models", "name": "policy_model"},
    }  # fmt: skip
    with (
        serve_in_thread(model.build_app()) as model_url,
        serve_in_child(LITMUS / "app.py", litmus_block(), name="litmus_agent", spec_dir=tmp_path) as env,
        serve_in_child(
            THEIR_SIMPLE_AGENT, agent_block, name="litmus_agent_agent", spec_dir=tmp_path,
            session_secret=env.session_secret,
            servers={
                "litmus_agent": ServerAddress(server_type="resources_servers", implementation="litmus_agent", url=env.url),
                "policy_model": ServerAddress(server_type="responses_api_models", implementation="scripted", url=model_url),
            },
        ) as agent,
    ):  # fmt: skip
        config = CollectConfig(
            input_jsonl_fpath=rows, output_jsonl_fpath=output, agent_name="agent",
            agent_urls={"agent": agent.url}, num_repeats=REPEATS, num_samples_in_parallel=40,
            max_attempts=1, rollout_timeout_s=120,
        )  # fmt: skip
        await collect_rollouts(config, view=NullView())
    rollouts = [orjson.loads(line) for line in output.read_text().splitlines()]
    forged = [rollout for rollout in rollouts if rollout["reward"] != 0.0]
    assert len(forged) == 0, f"{len(forged)} of {len(rollouts)} rollouts got a forged reward"
    assert len(rollouts) == len(ROWS) * REPEATS
    # Every attacker ran in our sandbox, found no listening socket to serve on, and the model saw so.
    ran = [outputs[-1] for outputs in map(_raw_outputs, model.requests) if outputs]
    assert len(ran) == len(rollouts)
    assert all(output.strip() == "listeners 0" for output in ran), ran[:3]
