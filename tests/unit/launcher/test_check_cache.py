"""The config check remembered (`launcher/check_cache.py`): a clean check of an unchanged stack runs
its subprocess once; an edited app.py, a changed value or a refusal runs it again; no secret is
written; `NG_CONFIG_CHECK_CACHE=0` turns it off."""

from __future__ import annotations

import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from ng_cli.config.compose import ComposedConfig, compose_config
from ng_cli.errors import ConfigError
from ng_cli.launcher import check, check_cache
from ng_cli.launcher.check import check_instances
from ng_cli.servers.check import CheckReport
from tests.fixtures.stack.harness import STACK_ROOT

SECRET = "sk-SECRET-123"  # tests/fixtures/stack/env.yaml's policy_api_key


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "stack"
    shutil.copytree(STACK_ROOT, root, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("NG_REPO_ROOT", str(root))
    monkeypatch.delenv("NG_ENV_YAML", raising=False)
    monkeypatch.delenv("NG_CONFIG_CHECK_CACHE", raising=False)
    monkeypatch.setenv("NG_STATE_DIR", str(tmp_path / "state"))
    return root


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per run of the check's subprocess."""
    seen: list[int] = []
    real = check._run_check

    def counted(payload: bytes, python: str) -> CheckReport:
        seen.append(1)
        return real(payload, python)

    monkeypatch.setattr(check, "_run_check", counted)
    return seen


def composer(root: Path) -> Callable[..., ComposedConfig]:
    def compose(*overrides: str) -> ComposedConfig:
        return compose_config(["+config_paths=[configs/stack.yaml]", *overrides], cwd=root)

    return compose


def test_an_unchanged_stack_is_checked_once(stack: Path, runs: list[int], tmp_path: Path) -> None:
    compose = composer(stack)
    composed = compose()
    assert composed.instances["policy_model"].block["api_key"] == SECRET  # checked, so in the key
    first = check_instances(composed)
    assert check_instances(compose()) == first
    assert len(runs) == 1
    folder = tmp_path / "state" / "checks"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    stored = list(folder.iterdir())
    assert stored
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o600 for path in stored)
    assert not any(SECRET.encode() in path.read_bytes() for path in stored)


def test_an_edited_app_py_or_a_changed_value_is_checked_again(stack: Path, runs: list[int]) -> None:
    compose = composer(stack)
    check_instances(compose())
    app = stack / "resources_servers" / "echo_tools" / "app.py"
    app.write_text(app.read_text() + "\n# edited\n")
    check_instances(compose())
    assert len(runs) == 2
    check_instances(compose("++tools_a.resources_servers.echo_tools.greeting=changed"))
    assert len(runs) == 3
    check_instances(compose())  # the edited tree's report was kept
    assert len(runs) == 3


def test_a_refused_config_is_never_remembered(stack: Path, runs: list[int]) -> None:
    compose = composer(stack)
    app = stack / "resources_servers" / "echo_tools" / "app.py"
    app.write_text(app.read_text().replace('greeting: str = "hello"', "greeting: int = 0"))
    for attempt in (1, 2):
        with pytest.raises(ConfigError, match="greeting"):
            check_instances(compose())
        assert len(runs) == attempt


def test_turned_off_it_checks_every_time(
    stack: Path, runs: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NG_CONFIG_CHECK_CACHE", "0")
    compose = composer(stack)
    check_instances(compose())
    check_instances(compose())
    assert len(runs) == 2


def test_roots_too_large_to_stat_are_not_remembered(
    stack: Path, runs: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(check_cache, "MAX_FILES", 3)  # ng_cli alone holds hundreds of .py files
    compose = composer(stack)
    check_instances(compose())
    check_instances(compose())
    assert len(runs) == 2
