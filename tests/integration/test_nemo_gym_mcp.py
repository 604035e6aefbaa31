"""NeMo Gym's `expose_tools_over_mcp`, on its example_mcp_weather served unchanged
(tests/fixtures/nemo_gym_servers) by our child process and by ng_run from NeMo Gym's root.

* An MCP client (the `mcp` package's, in both protocol eras: the initialize handshake Claude Code
  speaks, and 2026's) lists `get_weather` with its description and its pydantic body's schema, and
  calls it with the token the rollout's /seed_session answer carries: the call lands in that
  rollout's session, so /verify pays 1.0 for the weather sentence, and 0.0 to a rollout that says
  the same without the call. No token, no call.
* A setup NeMo Gym refuses (a handler its direct dispatch cannot reproduce, middleware of the
  server's own) is a config error naming the key, the route and why; the process exits 2.
* `ng_run` from NeMo Gym's root starts the server alone (its config's Claude Code agent, which
  needs the Claude Code CLI and an Anthropic key, taken out with `~`): /health, /mcp.
* NeMo Gym's own tests pass against our stand-ins: the server's `tests/` under ng_test, and NeMo
  Gym's unit tests of the exposure itself (its tests/unit_tests/test_mcp_auto_exposure.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from ng_cli.launcher.server_tests import run_suite
from ng_cli.servers.spec import ServerSpec, listed_urls, write_spec
from ng_cli.servers.testing import assistant_message, function_call, serve_in_child
from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.mcp_required import require_mcp
from tests.fixtures.stack_process import StackProcess, console_script

pytestmark = pytest.mark.integration
require_mcp()

from mcp import Client  # noqa: E402 - after require_mcp, which skips the module without the extra
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

NEMO_GYM_ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "nemo_gym_servers"
WEATHER = NEMO_GYM_ROOT / "resources_servers" / "example_mcp_weather"
CONFIG = "resources_servers/example_mcp_weather/configs/example_mcp_weather.yaml"
BLOCK = {"entrypoint": "app.py", "domain": "agent", "verified": False, "expose_tools_over_mcp": True}
TOKEN_HEADER = "X-NeMo-Gym-Session-Token"
SENTENCE = "The weather in Tokyo is sunny and 72 F."


async def _seed(http: httpx.AsyncClient, city: str) -> dict[str, Any]:
    seed = await http.post("/seed_session", json={"verifier_metadata": {"expected_city": city}})
    assert seed.status_code == 200, seed.text
    metadata: dict[str, Any] = seed.json()["mcp"]
    return metadata


def _mcp_client(url: str, headers: dict[str, str], mode: str) -> Client:
    transport = streamable_http_client(url, http_client=httpx.AsyncClient(headers=headers, timeout=60))
    return Client(transport, mode=mode)  # type: ignore[arg-type]


def _verify_body(output: list[dict[str, Any]]) -> dict[str, Any]:
    response = {"id": "r", "created_at": 0, "model": "claude", "object": "response", "output": output}
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "Weather in Tokyo?"}], "tools": []},
        "response": response,
        "verifier_metadata": {"expected_city": "Tokyo"},
    }


async def _rollouts(url: str, mode: str) -> dict[str, Any]:
    """One rollout that calls the tool over MCP, one that only says the sentence, one tokenless call."""
    found: dict[str, Any] = {}
    async with httpx.AsyncClient(base_url=url, timeout=60) as agent:  # keeps the rollout's cookies
        metadata = await _seed(agent, "Tokyo")
        found["metadata"] = metadata
        async with _mcp_client(url + metadata["url_path"], metadata["headers"], mode) as client:
            found["tools"] = (await client.list_tools()).tools
            found["call"] = await client.call_tool("get_weather", {"city": "Tokyo"})
        namespaced = "mcp__example_mcp_weather__get_weather"  # as Claude Code records an MCP tool
        called = [
            function_call(namespaced, {"city": "Tokyo"}, call_id="c1"),
            {"type": "function_call_output", "call_id": "c1", "output": json.dumps({"weather": SENTENCE})},
            assistant_message(SENTENCE),
        ]
        found["verified"] = (await agent.post("/verify", json=_verify_body(called))).json()
    async with httpx.AsyncClient(base_url=url, timeout=60) as agent:
        await _seed(agent, "Tokyo")
        found["uncalled"] = (
            await agent.post("/verify", json=_verify_body([assistant_message(SENTENCE)]))
        ).json()
    async with _mcp_client(url + "/mcp", {}, mode) as client:
        found["tokenless"] = await client.call_tool("get_weather", {"city": "Tokyo"})
    return found


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["handshake_era", "2026_era"])
def test_an_mcp_client_calls_their_tool_in_the_rollouts_session(tmp_path: Path, mode: str) -> None:
    with serve_in_child(WEATHER / "app.py", BLOCK, name="example_mcp_weather", spec_dir=tmp_path) as child:
        found = asyncio.run(_rollouts(child.url, mode))

    metadata = found["metadata"]
    assert (metadata["server_name"], metadata["url_path"], metadata["transport"]) == (
        "example_mcp_weather",
        "/mcp",
        "http",
    )
    assert set(metadata["headers"]) == {TOKEN_HEADER}
    [tool] = found["tools"]
    assert (tool.name, tool.description) == ("get_weather", "Get a deterministic weather report for a city.")
    assert tool.input_schema["properties"] == {"city": {"title": "City", "type": "string"}}
    assert tool.input_schema["required"] == ["city"]

    call = found["call"]
    assert not call.is_error, call
    assert call.structured_content == {"weather": SENTENCE}
    assert json.loads(call.content[0].text) == {"weather": SENTENCE}

    verified = found["verified"]
    assert (verified["reward"], verified["tool_call_seen"], verified["final_response_mentions_weather"]) == (
        1.0,
        True,
        True,
    )
    assert verified["response"]["output"][0]["name"] == "mcp__example_mcp_weather__get_weather"  # as sent

    uncalled = found["uncalled"]
    assert (uncalled["reward"], uncalled["tool_call_seen"], uncalled["final_response_mentions_weather"]) == (
        0.0,
        False,
        True,
    )
    assert found["tokenless"].is_error
    assert f"Missing {TOKEN_HEADER}" in found["tokenless"].content[0].text


_REFUSED_APP = """
from fastapi import Depends, FastAPI
from pydantic import BaseModel
from starlette.middleware.gzip import GZipMiddleware

from nemo_gym.base_resources_server import BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer


class Note(BaseModel):
    text: str


def author() -> str:
    return "me"


class NoteServer(SimpleResourcesServer):
    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.post("/take_note")(self.take_note)
        if {middleware}:
            app.add_middleware(GZipMiddleware)
        return app

    async def take_note(self, body: Note{extra_param}) -> dict:
        return {{"noted": body.text}}

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        return BaseVerifyResponse(**body.model_dump(), reward=0.0)
"""


@pytest.mark.parametrize(
    ("middleware", "extra_param", "why"),
    [
        (
            False,
            ", who: str = Depends(author)",
            "NoteServer tool 'take_note' (route '/take_note') cannot be dispatched directly: "
            "DI marker default on 'who': fastapi.params.Depends",
        ),
        (True, "", "NoteServer installs non-Gym middleware ['starlette.middleware.gzip.GZipMiddleware']"),
    ],
    ids=["dependency_injection", "own_middleware"],
)
def test_a_setup_they_refuse_is_a_config_error(
    tmp_path: Path, middleware: bool, extra_param: str, why: str
) -> None:
    folder = tmp_path / "resources_servers" / "notes"
    folder.mkdir(parents=True)
    (folder / "app.py").write_text(_REFUSED_APP.format(middleware=middleware, extra_param=extra_param))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    spec = ServerSpec(
        name="notes",
        server_type="resources_servers",
        implementation="notes",
        app_path=str(folder / "app.py"),
        config=BLOCK,
        port=port,
        session_secret="s" * 32,
    )
    write_spec(spec, tmp_path / "notes.spec.json")
    started = subprocess.run(
        [sys.executable, "-m", "ng_cli.servers.child", str(tmp_path / "notes.spec.json")],
        capture_output=True, text=True, timeout=HANG_CAP_S, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert started.returncode == 2, started.stderr
    first, second = started.stderr.strip().splitlines()[-2:]
    assert first.startswith(f"error: notes.expose_tools_over_mcp: {why}"), started.stderr
    assert second == "hint: set expose_tools_over_mcp: false to serve the tools over HTTP only"

    # The same server without the key starts: the refusal is MCP's alone.
    with serve_in_child(
        folder / "app.py", {**BLOCK, "expose_tools_over_mcp": False}, name="n", spec_dir=tmp_path
    ):
        pass


async def _through_the_stack(url: str) -> list[str]:
    async with httpx.AsyncClient(base_url=url, timeout=60) as agent:
        assert (await agent.get("/health")).json()["status"] == "ok"
        metadata = await _seed(agent, "Paris")
    async with _mcp_client(url + metadata["url_path"], metadata["headers"], "legacy") as client:
        return [tool.name for tool in (await client.list_tools()).tools]


def test_ng_run_from_their_root_starts_the_server_alone(tmp_path: Path, empty_env_yaml: Path) -> None:
    ready = tmp_path / "ready.json"
    stack = StackProcess.start(
        [
            str(console_script("ng_run")),
            f"+config_paths=[{CONFIG}]",
            "~example_mcp_weather_claude_code_agent",
            "~example_mcp_weather_environment_server",
            "++head_server.port=0",
            f"+ready_file={ready}",
        ],
        env={**os.environ, "NG_ENV_YAML": str(empty_env_yaml)}, cwd=NEMO_GYM_ROOT, ready_file=ready,
        log_path=tmp_path / "ng_run.log", timeout_s=HANG_CAP_S,
    )  # fmt: skip
    try:
        servers = listed_urls(httpx.get(f"{stack.head_url}/servers", timeout=30).json())
        assert sorted(servers) == ["example_mcp_weather"]
        tools = asyncio.run(_through_the_stack(servers["example_mcp_weather"]))
    finally:
        assert stack.stop() == []
    assert tools == ["get_weather"]


def test_their_own_tests_pass_under_ng_test() -> None:
    result = run_suite(WEATHER, pytest_args=["-q", "-p", "no:cacheprovider"], capture=True)
    assert result.exit_code == 0, "\n".join(result.output_tail)
    assert "6 passed" in result.output_tail[-1]  # the two over /mcp included: none skipped


# NeMo Gym's tests of its own source layout, which ours does not share: its server_utils imported
# bare in a subprocess (no stand-ins loaded there), and its run_webserver's AST (a server is started
# by ng_run here; the adapter exposes the tools, tested above).
_ABOUT_THEIR_SOURCE = [
    "test_server_utils_imports_mcp_auto_exposure_lazily",
    "test_run_webserver_guards_maybe_auto_expose_behind_flag",
]


def test_their_unit_tests_of_the_exposure_pass_against_ours() -> None:
    suite = NEMO_GYM_ROOT / "tests" / "unit_tests" / "test_mcp_auto_exposure.py"
    deselect = ["-k", "not (" + " or ".join(_ABOUT_THEIR_SOURCE) + ")"]
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "ng_cli.nemo_gym_compat.pytest_plugin", "-p", "no:cacheprovider",
         "-q", str(suite), *deselect],
        cwd=NEMO_GYM_ROOT, env={**os.environ, "NG_NEMO_GYM_ROOT": str(NEMO_GYM_ROOT)},
        capture_output=True, text=True, timeout=HANG_CAP_S, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-6000:] + completed.stderr[-2000:]
    assert "44 passed, 2 deselected" in completed.stdout.strip().splitlines()[-1]
