"""What `weight_updates: true` adds to an engine's start, and what it refuses before anything starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ng_cli.engines.weight_routes import is_loopback
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
        ({"engine_host": "0.0.0.0"}, "would put vLLM's admin routes"),
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
