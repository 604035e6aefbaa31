"""What `weight_updates: true` adds to an engine's start, and what it refuses before anything starts."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from ng_cli.config.schema import validate_block
from ng_cli.engines.config import LocalVllmModelConfig
from ng_cli.engines.weight_routes import ADMIN_KEY_ENV, engine_admin_key, is_loopback
from ng_cli.errors import ConfigError
from tests.unit.engines.test_engine_plan import model_dir, plan


def test_updates_add_dev_mode_the_key_guard_and_the_worker_extension(tmp_path: Path) -> None:
    engine = plan(model_dir(tmp_path), devices=(), weight_updates=True).engines[0]
    argv = engine.argv()
    assert argv[argv.index("--middleware") + 1] == "engine_guard.KeyOnEveryRoute"
    assert argv[argv.index("--worker-extension-cls") + 1] == "engine_worker.WeightsExtension"
    assert engine.env["VLLM_SERVER_DEV_MODE"] == "1"


def test_without_updates_nothing_is_added(tmp_path: Path) -> None:
    engine = plan(model_dir(tmp_path), devices=()).engines[0]
    assert "--middleware" not in engine.argv()
    assert "VLLM_SERVER_DEV_MODE" not in engine.env


def test_a_tensor_push_adds_vllms_weight_transfer_config(tmp_path: Path) -> None:
    engine = plan(
        model_dir(tmp_path),
        weight_updates=True,
        weight_transfer="nccl",
        vllm_serve_kwargs={"load_format": "dummy"},
    ).engines[0]
    argv = engine.argv()
    assert json.loads(argv[argv.index("--weight-transfer-config") + 1]) == {"backend": "nccl"}


@pytest.mark.parametrize(
    ("block", "reason"),
    [
        (
            {"vllm_serve_kwargs": {"load_format": "dummy"}},
            "load_format: dummy with weight_updates: true cannot be",
        ),
        ({"vllm_serve_kwargs": {"middleware": "x.Y"}}, "vllm_serve_kwargs.middleware is set by ng_run"),
    ],
)
def test_combinations_that_cannot_work_are_refused_naming_the_key(
    tmp_path: Path, block: dict[str, object], reason: str
) -> None:
    with pytest.raises(ConfigError, match=reason):
        plan(model_dir(tmp_path), devices=(), weight_updates=True, **block)


def test_a_transfer_backend_needs_updates_on(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="weight_transfer: ipc needs weight_updates: true"):
        plan(model_dir(tmp_path), devices=(), weight_transfer="ipc")


def test_loopback_hosts() -> None:
    assert is_loopback("127.0.0.1")
    assert is_loopback("localhost")
    assert is_loopback("::1")
    assert not is_loopback("0.0.0.0")
    assert not is_loopback("10.1.2.3")


def test_each_engine_gets_its_own_admin_key_bound_to_its_url(tmp_path: Path) -> None:
    """Issue 42: an engine on any node takes updates; its admin routes open to a key only the model
    server (which holds the secret) can derive, and only for that engine's URL."""
    planned = plan(model_dir(tmp_path), devices=(), weight_updates=True, engine_host="0.0.0.0")
    on_node = replace(planned.engines[0], host="10.0.0.3", port=8001)
    env = planned.env_of(on_node, {ADMIN_KEY_ENV: "inherited"})
    assert env[ADMIN_KEY_ENV] == engine_admin_key(planned.admin_secret, "http://10.0.0.3:8001")
    assert env[ADMIN_KEY_ENV] not in (planned.api_key, planned.admin_secret)
    moved = planned.env_of(replace(on_node, port=8002), {})
    assert moved[ADMIN_KEY_ENV] != env[ADMIN_KEY_ENV]  # another URL, another key
    everywhere = planned.env_of(replace(on_node, host="0.0.0.0"), {})  # called at 127.0.0.1
    assert everywhere[ADMIN_KEY_ENV] == engine_admin_key(planned.admin_secret, "http://127.0.0.1:8001")
    overrides = planned.with_ports([8001], []).server_overrides()
    assert overrides["engine_admin_secret"] == planned.admin_secret
    assert planned.admin_secret not in repr(planned)
    assert planned.admin_secret not in " ".join(on_node.argv())


def test_no_admin_secret_without_updates(tmp_path: Path) -> None:
    planned = plan(model_dir(tmp_path), devices=())
    on_node = replace(planned.engines[0], host="10.0.0.3", port=8001)
    assert ADMIN_KEY_ENV not in planned.env_of(on_node, {})
    assert "engine_admin_secret" not in planned.with_ports([8001], []).server_overrides()


def test_an_admin_key_needs_a_secret() -> None:
    with pytest.raises(ValueError, match="no admin secret"):
        engine_admin_key("", "http://10.0.0.3:8001")


@pytest.mark.parametrize(
    ("updates", "token_ids", "token_exact", "warned"),
    [
        (True, True, False, True),
        (True, True, "auto", False),
        (True, False, False, False),
        (False, True, False, False),
    ],
)
def test_training_engines_with_token_ids_but_no_token_exact_are_warned(
    tmp_path: Path, updates: bool, token_ids: bool, token_exact: bool | str, warned: bool
) -> None:
    """TRL's script failed its contiguity assert on two H200s for want of token_exact."""
    block = {
        "entrypoint": "app.py",
        "model": str(tmp_path),
        "weight_updates": updates,
        "return_token_id_information": token_ids,
        "token_exact": token_exact,
        "uses_reasoning_parser": False,
    }
    config = validate_block(LocalVllmModelConfig, block=block)
    assert (
        any(
            warning.startswith("token_exact: false with weight_updates") for warning in config.config_warnings
        )
        is warned
    )
