"""Secrets never leave the 0600 spec files: not argv, not the environment, not dumps, not /config.

The fixture stack's env.yaml holds `policy_api_key: sk-SECRET-123`, interpolated into the model
server's `api_key`. A real `ng_run` is started and every place a secret could leak is read.
"""

from __future__ import annotations

import dataclasses
import json
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ng_cli.config.compose import compose_config
from ng_cli.launcher.plan import plan_stack
from ng_cli.launcher.stack import Stack, make_run_dir
from tests.fixtures.stack.harness import (
    SECRET,
    STACK_ROOT,
    NgRun,
    get_json,
    marked_pids,
    run_script,
)

pytestmark = pytest.mark.integration


def proc_text(pid: int, name: str) -> str:
    return (Path("/proc") / str(pid) / name).read_bytes().replace(b"\0", b" ").decode(errors="replace")


@pytest.mark.usefixtures("stack")
def test_no_secret_in_any_process_argv_or_environment(running: NgRun) -> None:
    run = running

    pids = [run.process.pid, *marked_pids(run.marker)]
    assert len(pids) >= 5  # ng_run + 4 children
    for pid in pids:
        assert SECRET not in proc_text(pid, "cmdline")
        assert SECRET not in proc_text(pid, "environ")


def test_head_server_serves_the_config_masked(running: NgRun, stack: dict[str, Any]) -> None:
    run = running

    config = get_json(f"{stack['head_url']}/config")
    servers = get_json(f"{stack['head_url']}/servers")

    assert config["policy_api_key"] == "***"
    assert config["policy_model"]["responses_api_models"]["canned_model"]["api_key"] == "***"
    assert SECRET not in json.dumps(config) + json.dumps(servers)
    assert SECRET not in run.output


def test_spec_files_are_gone_once_children_read_them(stack: dict[str, Any]) -> None:
    run_dir = Path(stack["run_dir"])
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
    assert list(run_dir.iterdir()) == []


def test_ng_dump_config_masks_the_secret() -> None:
    dump = run_script("ng_dump_config", "-c", "configs/stack.yaml")

    assert dump.returncode == 0, dump.stderr

    assert "api_key" in dump.stdout
    assert "***" in dump.stdout
    assert SECRET not in dump.stdout + dump.stderr


@pytest.fixture
def sleeping_stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    """The fixture stack's plan with children that never read (so never delete) their spec."""
    monkeypatch.setenv("NG_REPO_ROOT", str(STACK_ROOT))
    monkeypatch.delenv("NG_ENV_YAML", raising=False)
    plan = plan_stack(
        compose_config(["+config_paths=[configs/stack.yaml]", "++head_server.port=0"], cwd=STACK_ROOT),
        run_dir=make_run_dir(),
    )
    idle = (sys.executable, "-c", "import time; time.sleep(60)")
    plan = dataclasses.replace(
        plan,
        servers=tuple(
            dataclasses.replace(server, command=(*idle, str(server.spec_path))) for server in plan.servers
        ),
    )
    stack = Stack.start(plan, sink=lambda _name, _line: None)
    try:
        yield stack
    finally:
        stack.stop()


def test_spec_files_are_private_and_hold_the_only_copy(sleeping_stack: Stack) -> None:
    plan = sleeping_stack.plan
    spec_path = plan.server("policy_model").spec_path
    assert spec_path is not None

    assert stat.S_IMODE(plan.run_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(spec_path.stat().st_mode) == 0o600
    assert json.loads(spec_path.read_text())["config"]["api_key"] == SECRET
    for child in sleeping_stack.children.values():
        assert SECRET not in proc_text(child.pid, "cmdline")
        assert SECRET not in proc_text(child.pid, "environ")

    sleeping_stack.stop()

    assert not plan.run_dir.exists()
    assert all(child.exit_code() is not None for child in sleeping_stack.children.values())
