"""`nemo_gym.testing.session_conformance`: a server's session routes held to NeMo Gym's contract,
through the app its `setup_webserver()` builds (example_single_tool_call's tests call it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi import HTTPException
from pydantic import PrivateAttr

from ng_cli.nemo_gym_compat.api.base_resources_server import (
    BaseResourcesServerConfig,
    BaseSeedSessionRequest,
    BaseSeedSessionResponse,
    BaseVerifyRequest,
    BaseVerifyResponse,
    ResourcesCloseSessionRequest,
    ResourcesCloseSessionResponse,
    ResourcesSeedSessionRequest,
    ResourcesSeedSessionResponse,
    SimpleResourcesServer,
)
from ng_cli.nemo_gym_compat.api.config_types import BaseServerConfig
from ng_cli.nemo_gym_compat.api.episode_types import EpisodeId, TaskId
from ng_cli.nemo_gym_compat.api.server_utils import ServerClient
from ng_cli.nemo_gym_compat.api.testing.session_conformance import check_resources_session_contract
from tests.unit.nemo_gym_compat.test_finder import _python

SEED = ResourcesSeedSessionRequest(
    resources_session_id="contract-session",
    episode_id=EpisodeId(rollout_id="rollout", attempt=0),
    task_id=TaskId(taskset="example", task_id="0"),
    task_data={},
)


class _Stateless(SimpleResourcesServer):
    """NeMo Gym's default session routes: keeps nothing."""

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        return BaseVerifyResponse(**body.model_dump(), reward=1.0)


class _Stateful(_Stateless):
    """Refuses to seed a session again once it is closed (example_single_tool_call's rule)."""

    _closed: set[str] = PrivateAttr(default_factory=set)

    async def seed_session(
        self, body: ResourcesSeedSessionRequest | BaseSeedSessionRequest
    ) -> ResourcesSeedSessionResponse | BaseSeedSessionResponse:
        if isinstance(body, ResourcesSeedSessionRequest):
            if body.resources_session_id in self._closed:
                raise HTTPException(status_code=409, detail="session closed")
            return ResourcesSeedSessionResponse(resources_session_id=body.resources_session_id)
        return BaseSeedSessionResponse()

    async def close_resources_session(
        self, body: ResourcesCloseSessionRequest
    ) -> ResourcesCloseSessionResponse:
        self._closed.add(body.resources_session_id)
        return ResourcesCloseSessionResponse(resources_session_id=body.resources_session_id)


class _OtherSession(_Stateless):
    async def seed_session(
        self, body: ResourcesSeedSessionRequest | BaseSeedSessionRequest
    ) -> ResourcesSeedSessionResponse | BaseSeedSessionResponse:
        return ResourcesSeedSessionResponse(
            resources_session_id=f"not-{getattr(body, 'resources_session_id', '')}"
        )


def _app(server_class: type[SimpleResourcesServer]) -> object:
    client = ServerClient(
        head_server_config=BaseServerConfig(host="127.0.0.1", port=1), global_config_dict={}
    )
    config = BaseResourcesServerConfig(host="127.0.0.1", port=1, entrypoint="app.py", name="weather")
    return server_class(config=config, server_client=client).setup_webserver()


def test_a_server_that_keeps_state_follows_the_contract() -> None:
    check_resources_session_contract(_app(_Stateful), SEED, keeps_state=True)  # type: ignore[arg-type]


def test_the_default_routes_answer_an_environment_servers_seed_with_its_session() -> None:
    check_resources_session_contract(_app(_Stateless), SEED, keeps_state=False)  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match="seed after close recreated contract-session: 200"):
        check_resources_session_contract(_app(_Stateless), SEED, keeps_state=True)  # type: ignore[arg-type]


def test_a_seed_that_answers_another_session_is_named() -> None:
    with pytest.raises(AssertionError, match=r"^seed returned another session"):
        check_resources_session_contract(_app(_OtherSession), SEED, keeps_state=False)  # type: ignore[arg-type]


def test_an_agents_legacy_seed_still_gets_an_empty_answer() -> None:
    from fastapi.testclient import TestClient

    answer = TestClient(_app(_Stateless)).post("/seed_session", json={})  # type: ignore[arg-type]
    assert (answer.status_code, answer.json()) == (200, {})


def test_the_helper_is_found_under_nemo_gyms_name(tmp_path: Path) -> None:
    done = _python(
        """
        from ng_cli.servers import nemo_gym_finder as finder
        assert finder.install()
        from nemo_gym.testing.session_conformance import check_resources_session_contract
        print(check_resources_session_contract.__module__)
        """,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ng_cli.nemo_gym_compat.api.testing.session_conformance"]
