"""The stand-ins NeMo Gym's sandboxed and CLI agents import (harness_exa_search, its harness_agent,
opencode_sandboxed_agent under vibench_agent, claude_code_agent): each name resolves through
`nemo_gym.*` to the one object, and each behaves as NeMo Gym's where it can run here and refuses
as NeMo Gym's does where it cannot (no service endpoint in a sandbox without network, no
restricted network policy but OpenSandbox's). Here, not in tests/unit: the local provider builds
a real `PythonSandbox`."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from ng_cli.nemo_gym_compat.agent_adapter import agent_adapter_for
from ng_cli.nemo_gym_compat.api.base_resources_server import BaseRunRequest
from ng_cli.nemo_gym_compat.api.base_responses_api_agent import (
    BaseResponsesAPIAgentConfig,
    SimpleResponsesAPIAgent,
)
from ng_cli.nemo_gym_compat.api.config_types import ModelServerRef, ResourcesServerRef
from ng_cli.nemo_gym_compat.api.global_config import set_global_config_dict
from ng_cli.nemo_gym_compat.api.sandbox import (
    AsyncSandbox,
    AsyncSandboxCompose,
    ConnectableProvider,
    SandboxEndpoint,
    SandboxSpec,
    SupportsSandboxEndpoint,
    UnavailableProviderError,
    create_provider,
    rewrite_image,
)
from ng_cli.nemo_gym_compat.api.sandbox.access import DirectSandboxConnection, SandboxAccess
from ng_cli.nemo_gym_compat.api.sandbox.agent_tools import restricted_network_policy, seed_mcp_servers
from ng_cli.nemo_gym_compat.api.sandbox.utils import cpu_cap_env
from ng_cli.nemo_gym_compat.api.server_utils import apply_rollout_prefix
from ng_cli.nemo_gym_compat.api.skills import stage_skills

pytestmark = pytest.mark.integration


def test_their_imports_resolve_to_the_same_objects(tmp_path: Path) -> None:
    """`nemo_gym.sandbox.providers.*` are other module objects than `nemo_gym.sandbox`; their
    classes must still be its classes, or an agent's `isinstance` checks would never match."""
    code = """
        from ng_cli.servers import nemo_gym_finder as finder
        assert finder.install()
        import nemo_gym.sandbox as sandbox
        from nemo_gym.sandbox.providers.base import ConnectableProvider, SandboxEndpoint, SandboxSpec
        from nemo_gym.sandbox.providers.registry import create_provider
        from nemo_gym.sandbox.agent_tools import restricted_network_policy, seed_mcp_servers
        from nemo_gym.sandbox.utils import cpu_cap_env
        from nemo_gym.global_config import SKILLS_REF_KEY_NAME
        from nemo_gym.rollout_observability import AgentEpisode
        from nemo_gym.server_utils import apply_rollout_prefix
        from nemo_gym.skills import stage_skills
        from nemo_gym.sandbox.access import SandboxAccess
        from nemo_gym.sandbox.adapters.docker_compose import AsyncSandboxCompose
        from nemo_gym.global_config import OBSERVABILITY_ENABLED_KEY_NAME
        assert AsyncSandboxCompose is sandbox.AsyncSandboxCompose
        assert SandboxEndpoint is sandbox.SandboxEndpoint and SandboxSpec is sandbox.SandboxSpec
        assert ConnectableProvider is sandbox.ConnectableProvider
        assert create_provider is sandbox.create_provider
        print(SKILLS_REF_KEY_NAME, cpu_cap_env(3.9)["OMP_NUM_THREADS"])
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["skills_ref", "3"]


def test_an_endpoint_is_an_absolute_url_with_string_headers() -> None:
    endpoint = SandboxEndpoint(" https://sandbox.example:8443/relay ", {"X-Token": 7})  # type: ignore[dict-item]
    assert endpoint.endpoint == "https://sandbox.example:8443/relay"
    assert endpoint.headers == {"X-Token": "7"}
    for bad in ("", "relay/next", "127.0.0.1:18080"):
        with pytest.raises(ValueError, match="non-empty absolute URL"):
            SandboxEndpoint(bad)


def test_the_local_provider_has_no_endpoint_and_no_reattach() -> None:
    """harness_exa_search relays its model calls only through a provider with endpoints
    (`isinstance(provider, SupportsSandboxEndpoint)`); ours has none (no network in the sandbox),
    so it must answer no, and `AsyncSandbox.endpoint` refuses as NeMo Gym's does for such one."""
    provider = create_provider({"local": {}})
    assert not isinstance(provider, SupportsSandboxEndpoint)
    assert not isinstance(provider, ConnectableProvider)

    async def endpoint(port: Any, declared: tuple[int, ...]) -> SandboxEndpoint:
        sandbox = await AsyncSandbox(provider, SandboxSpec(ports=declared)).start()
        return await sandbox.endpoint(port)

    with pytest.raises(ValueError, match="between 1 and 65535"):
        asyncio.run(endpoint(True, (1,)))
    with pytest.raises(ValueError, match=r"18080 was not declared .* \[8000\]"):
        asyncio.run(endpoint(18080, (8000,)))
    with pytest.raises(NotImplementedError, match="'local' does not support service endpoints"):
        asyncio.run(endpoint(18080, (18080,)))


def test_restricted_network_fails_closed_but_for_opensandbox() -> None:
    with pytest.raises(ValueError, match="requires the OpenSandbox network-policy provider"):
        restricted_network_policy("local", ["http://10.0.0.5:8000/v1"])
    policy = restricted_network_policy("opensandbox", ["http://10.0.0.5:8000/v1", "http://10.0.0.5:9/mcp"])
    assert policy == {"defaultAction": "deny", "egress": [{"action": "allow", "target": "10.0.0.5"}]}
    for loopback in ("http://127.0.0.1:8000", "http://localhost:8000", "http://0.0.0.0:1"):
        with pytest.raises(ValueError, match="sandbox-reachable host"):
            restricted_network_policy("opensandbox", [loopback])


def test_compose_projects_are_refused_naming_what_they_need(tmp_path: Path) -> None:
    """terminal_bench_4 runs each task as a Compose project (a container per service)."""
    with pytest.raises(UnavailableProviderError, match="'docker' is not available here"):
        AsyncSandboxCompose({"docker": {}}, tmp_path / "task.yaml")
    with pytest.raises(UnavailableProviderError, match="needs a container runtime and the services' images"):
        AsyncSandboxCompose({"local": {}}, tmp_path / "task.yaml", service_specs={})


def test_sandbox_access_is_their_closed_shape() -> None:
    access = SandboxAccess(
        connection=DirectSandboxConnection(provider_config_ref="sandbox", descriptor={"id": "s-1"}),
        workdir="/app",
    )
    assert access.model_dump()["connection"] == {
        "kind": "direct",
        "provider_config_ref": "sandbox",
        "descriptor": {"id": "s-1"},
    }
    with pytest.raises(ValidationError, match="extra"):
        SandboxAccess.model_validate({**access.model_dump(), "lease": "x"})


def test_image_rewrites_take_the_first_matching_prefix() -> None:
    rewrites = [{"from": "docker.io/", "to": "mirror.local/"}, {"from": "docker.io/library/", "to": "x/"}]
    assert rewrite_image("docker.io/library/python:3.12", rewrites) == "mirror.local/library/python:3.12"
    assert rewrite_image("ghcr.io/a:b", rewrites) == "ghcr.io/a:b"
    assert rewrite_image(None, rewrites) is None


def test_cpu_caps_are_whole_cores_and_empty_when_unset() -> None:
    assert cpu_cap_env(None) == {}
    caps = cpu_cap_env(0.5)
    assert caps["OMP_NUM_THREADS"] == caps["GOMAXPROCS"] == "1"
    assert set(cpu_cap_env(2.9).values()) == {"2"}


class _Answer:
    def __init__(self, body: dict[str, Any]) -> None:
        self.ok, self.status, self._body = True, 200, orjson.dumps(body)

    async def read(self) -> bytes:
        return self._body


class _Client:
    def __init__(self, answers: dict[str, dict[str, Any]]) -> None:
        self.answers, self.calls = answers, list[tuple[str, str, Any, dict[str, str]]]()

    async def post(self, *, server_name: str, url_path: str, json: Any, cookies: dict[str, str]) -> _Answer:
        self.calls.append((server_name, url_path, json, cookies))
        return _Answer(self.answers[server_name])


def test_seeding_mcp_servers_passes_only_their_session_headers() -> None:
    set_global_config_dict(
        {"weather": {"resources_servers": {"weather": {"host": "0.0.0.0", "port": 4100}}},
         "bare": {"resources_servers": {"bare": {"host": "127.0.0.1", "port": 4101}}}}
    )  # fmt: skip
    token = {"X-NeMo-Gym-Session-Token": "t-1"}
    client = _Client({"weather": {"mcp": {"url_path": "/mcp", "headers": token}}, "bare": {}})
    body = BaseRunRequest.model_validate({"responses_create_params": {"input": "hi"}})
    weather = ResourcesServerRef(type="resources_servers", name="weather")
    try:
        entries = asyncio.run(
            seed_mcp_servers(client, [weather], body, {"ng_session": "s"}, timeout_s=2.5)  # type: ignore[arg-type]
        )
        assert entries == {
            "weather": {
                "url": "http://127.0.0.1:4100/mcp",
                "headers": token,
                "enabled": True,
                "timeout": 2500,
            }
        }
        assert client.calls == [("weather", "/seed_session", body.model_dump(), {"ng_session": "s"})]
        bare = ResourcesServerRef(type="resources_servers", name="bare")
        with pytest.raises(ValueError, match="bare must expose authenticated MCP tools"):
            asyncio.run(seed_mcp_servers(client, [bare], body, {}, timeout_s=1))  # type: ignore[arg-type]
    finally:
        set_global_config_dict({})


def test_skills_are_copied_once_and_a_missing_source_is_refused(tmp_path: Path) -> None:
    (tmp_path / "skills" / "search").mkdir(parents=True)
    (tmp_path / "skills" / "search" / "SKILL.md").write_text("---\nname: search\n---\n")
    stage_skills(str(tmp_path / "skills"), tmp_path / "config" / "skills")
    assert (tmp_path / "config" / "skills" / "search" / "SKILL.md").is_file()
    with pytest.raises(FileExistsError):
        stage_skills(str(tmp_path / "skills"), tmp_path / "config" / "skills")
    with pytest.raises(ValueError, match="Cannot stage skills"):
        stage_skills(str(tmp_path / "absent"), tmp_path / "other")


def test_a_rollout_prefix_only_with_a_rollout() -> None:
    assert apply_rollout_prefix("http://h:1/", None) == "http://h:1/"
    assert apply_rollout_prefix("http://h:1/", "r7") == "http://h:1/_ng_rollout/r7"


class _OwnModelConfig(BaseResponsesAPIAgentConfig):
    resources_server: ResourcesServerRef
    model_server: ModelServerRef | None = None


class _Agent(SimpleResponsesAPIAgent):
    async def responses(self, body: Any = None) -> Any:
        raise NotImplementedError

    async def run(self, body: Any = None) -> Any:
        raise NotImplementedError


class _OwnModelAgent(_Agent):
    config: _OwnModelConfig


class _PolicyConfig(BaseResponsesAPIAgentConfig):
    resources_server: ResourcesServerRef
    model_server: ModelServerRef


class _PolicyAgent(_Agent):
    config: _PolicyConfig


def test_model_server_is_optional_only_where_their_config_says_so() -> None:
    """claude_code_agent calls Anthropic's API itself (`model_server: Optional`): its block
    without one starts; an agent whose config needs one is still refused without it."""
    block = {"entrypoint": "app.py", "resources_server": {"type": "resources_servers", "name": "weather"}}
    config = agent_adapter_for(_OwnModelAgent).config_class.model_validate(block)
    assert config.model_server is None
    with pytest.raises(ValidationError, match="model_server"):
        agent_adapter_for(_PolicyAgent).config_class.model_validate(block)
    wrong = {**block, "model_server": {"type": "resources_servers", "name": "weather"}}
    with pytest.raises(ValidationError, match="model_server must refer to responses_api_models"):
        agent_adapter_for(_OwnModelAgent).config_class.model_validate(wrong)
