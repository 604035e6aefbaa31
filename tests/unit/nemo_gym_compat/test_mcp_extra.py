"""A NeMo Gym block that sets `expose_tools_over_mcp` without the `mcp` extra (or with an SDK of
another major version) is refused at config time, naming the key and the command that installs it.

The environment's answer is stubbed (`find_spec`, the installed version): a real one can only be
the one this machine has."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import pytest

from ng_cli.config.schema import ServerConfig
from ng_cli.errors import ConfigError
from ng_cli.nemo_gym_compat import mcp_extra
from ng_cli.nemo_gym_compat.adapter import adapter_for
from ng_cli.nemo_gym_compat.api.base_resources_server import (
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)

BLOCK = {"entrypoint": "app.py", "domain": "agent", "expose_tools_over_mcp": True}


class _Weather(SimpleResourcesServer):
    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        return BaseVerifyResponse(**body.model_dump(), reward=0.0)


def _validated(block: dict[str, Any]) -> ServerConfig:
    return adapter_for(_Weather).validate_config(block, instance="example_mcp_weather")


def _environment(monkeypatch: pytest.MonkeyPatch, *, installed: str | None) -> None:
    def find_spec(name: str, *_args: Any) -> object | None:
        return None if name == "mcp" and installed is None else object()

    def version(_name: str) -> str:
        assert installed is not None
        return installed

    monkeypatch.setattr(mcp_extra.importlib.util, "find_spec", find_spec)
    monkeypatch.setattr(mcp_extra.importlib.metadata, "version", version)


def test_without_the_extra_the_key_is_a_config_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    _environment(monkeypatch, installed=None)
    with pytest.raises(ConfigError) as raised:
        _validated(dict(BLOCK))
    message = raised.value.message
    assert "example_mcp_weather.expose_tools_over_mcp" in message
    assert "the `mcp` package), which is not installed" in message
    assert "pip install 'ng-cli[mcp]'" in message


def test_an_sdk_of_another_major_version_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    _environment(monkeypatch, installed="1.28.1")
    with pytest.raises(ConfigError, match=r"mcp>=2\.3,<3, and mcp 1\.28\.1 is installed"):
        _validated(dict(BLOCK))


def test_off_or_installed_it_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    _environment(monkeypatch, installed=None)
    off, on = {**BLOCK, "expose_tools_over_mcp": False}, dict(BLOCK)
    assert _validated(off).model_dump()["expose_tools_over_mcp"] is False
    _environment(monkeypatch, installed="2.3.0")
    assert _validated(on).model_dump()["expose_tools_over_mcp"] is True
    assert importlib.metadata.version("x") == "2.3.0"  # the stub answered, not this machine
