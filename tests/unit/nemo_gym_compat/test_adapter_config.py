"""A NeMo Gym server's block reaches its own config class as NeMo Gym hands it over."""

from __future__ import annotations

from ng_cli.nemo_gym_compat.adapter import adapter_for
from ng_cli.nemo_gym_compat.api.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)


class _Config(BaseResourcesServerConfig):
    num_workers: int | None  # required, as arena declares it; its YAML says `num_workers: null`
    length_range: list[int] | None  # required; the YAML sets it to null
    domain: str = "rlhf"


class _Server(SimpleResourcesServer):
    config: _Config

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        return BaseVerifyResponse(**body.model_dump(), reward=1.0)


def test_explicit_nulls_and_num_workers_reach_their_config_class() -> None:
    served = adapter_for(_Server)
    block = {"entrypoint": "app.py", "num_workers": None, "length_range": None, "domain": "rlhf"}
    server = served(served.validate_config(block, instance="arena_like"), name="arena_like")
    inner = server.inner.config
    assert isinstance(inner, _Config)
    assert (inner.num_workers, inner.length_range, inner.domain) == (None, None, "rlhf")
