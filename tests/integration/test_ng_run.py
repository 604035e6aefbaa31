"""`ng_run` end to end: the real console script starts the fixture stack (head + 4 servers).

The fixture repo (tests/fixtures/stack) holds two resources servers, a model server and an
agent. Every test finds the stack through `+ready_file=...` (the JSON ng_run writes once all
servers answer /health) and tags ng_run's environment with a unique marker, so the children
can be found in /proc (they inherit it) and none can outlive a test unnoticed.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ng_cli.launcher.ports import bind_listener, is_port_free
from ng_cli.launcher.stack import STOP_TIMEOUT_S
from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.stack.harness import (
    SECRET,
    Launcher,
    NgRun,
    get_json,
    marked_pids,
    post_json,
    run_script,
)

pytestmark = pytest.mark.integration

SERVER_NAMES = ["tools_a", "tools_b", "policy_model", "relay"]


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    launcher = Launcher(tmp_path)
    try:
        yield launcher
    finally:
        launcher.cleanup()


LEFTOVER_CAP_S = 10.0
"""After ng_run has exited (it reaps its children), a marked process is a leak; the wait for the
kernel to finish tearing down a SIGKILLed grandchild is an event, capped here, not a 1 s race."""


def assert_all_gone(run: NgRun, *, within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while marked_pids(run.marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marked_pids(run.marker) == [], f"processes survived ng_run:\n{run.output}"


def test_every_server_answers_and_the_head_lists_them(running: NgRun, stack: dict[str, Any]) -> None:
    run = running

    head = stack["head_url"]
    assert get_json(f"{head}/health")["status"] == "ok"
    listed = get_json(f"{head}/servers")
    assert [server["name"] for server in listed] == SERVER_NAMES
    assert {server["name"]: server["pid"] for server in listed} == run.pids()
    assert all(server["is_ready"] for server in listed)
    for server in listed:
        assert get_json(f"{server['url']}/health") == {"status": "ok", "server": server["name"]}
    assert set(run.pids().values()) <= set(marked_pids(run.marker))
    assert "[tools_a] tools_a: hello from tools_a" in run.output  # child output relayed
    assert "stack ready" in run.output


def test_servers_reach_each_other_without_discovery(stack: dict[str, Any]) -> None:
    relay = next(server["url"] for server in stack["servers"] if server["name"] == "relay")

    verdict = post_json(
        f"{relay}/run", {"responses_create_params": {"input": "hi"}, "expected": "canned answer"}
    )

    assert verdict["reward"] == 1.0
    assert verdict["response"]["output_text"] == "canned answer"


@pytest.mark.usefixtures("stack")
def test_children_are_one_process_group_apart_from_ng_run(running: NgRun) -> None:
    run = running

    groups = {os.getpgid(pid) for pid in run.pids().values()}
    assert len(groups) == 1
    assert groups != {os.getpgid(run.process.pid)}
    for pid in run.pids().values():
        with open(f"/proc/{pid}/fd/0", "rb") as stdin:  # /dev/null, never ng_run's stdin
            assert os.path.realpath(f"/proc/{pid}/fd/0") == "/dev/null"
            assert stdin.read() == b""


def test_a_killed_child_is_reported_and_the_stack_stops(launcher: Launcher) -> None:
    run = launcher.start()
    run.wait_ready()
    ports = run.ports()

    os.kill(run.pids()["tools_b"], signal.SIGKILL)
    code = run.wait_exit(timeout_s=STOP_TIMEOUT_S + 5)

    assert code == 1
    assert "server 'tools_b'" in run.output
    assert "exit code -9 (killed by SIGKILL)" in run.output
    assert "[tools_b] tools_b: hello from tools_b" in run.output  # its last lines are shown
    assert_all_gone(run, within_s=LEFTOVER_CAP_S)
    assert all(is_port_free("127.0.0.1", port) for port in ports)
    assert not run.ready_file.exists()


@pytest.mark.parametrize(("signum", "expected_code"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)])
def test_a_signal_stops_everything_within_five_seconds(
    launcher: Launcher, signum: int, expected_code: int
) -> None:
    run = launcher.start()
    stack = run.wait_ready()
    ports = run.ports()

    started = time.monotonic()
    run.process.send_signal(signum)
    code = run.wait_exit(timeout_s=STOP_TIMEOUT_S + 2)
    assert_all_gone(run, within_s=max(0.0, STOP_TIMEOUT_S - (time.monotonic() - started)))

    assert time.monotonic() - started < STOP_TIMEOUT_S
    assert code == expected_code
    assert all(is_port_free("127.0.0.1", port) for port in ports)
    assert not Path(stack["run_dir"]).exists()
    assert not run.ready_file.exists()


def test_children_do_not_outlive_a_sigkilled_ng_run(launcher: Launcher) -> None:
    """SIGKILL cannot be caught by ng_run; the children's parent-death signal still stops them."""
    run = launcher.start()
    run.wait_ready()
    ports = run.ports()

    run.process.kill()
    run.wait_exit(timeout_s=HANG_CAP_S)
    assert_all_gone(run, within_s=STOP_TIMEOUT_S)

    assert marked_pids(run.marker) == []
    assert all(is_port_free("127.0.0.1", port) for port in ports)


def test_a_crash_before_ready_shows_its_last_lines(launcher: Launcher) -> None:
    run = launcher.start("++tools_b.resources_servers.echo_tools.fail_on_startup=boom-before-ready")

    code = run.wait_exit(timeout_s=HANG_CAP_S)

    assert code == 1
    error = run.output[run.output.index("error: ") :]
    assert "server 'tools_b'" in error
    assert "exited before it was ready" in error
    assert "exit code" in error
    assert "last 50 lines of 'tools_b'" in error
    assert "boom-before-ready" in error
    assert "start-up line 1\n" not in error  # only the tail: 60 lines were printed
    assert_all_gone(run, within_s=LEFTOVER_CAP_S)
    assert not run.ready_file.exists()


def test_config_error_exits_2_and_starts_nothing(launcher: Launcher) -> None:
    run = launcher.start("++relay.responses_api_agents.relay_agent.entrypoint=missing.py")

    code = run.wait_exit(timeout_s=HANG_CAP_S)

    assert code == 2
    assert "instance 'relay'" in run.output
    assert "missing.py" in run.output
    assert marked_pids(run.marker) == []


def test_a_taken_head_port_is_a_clear_error(launcher: Launcher) -> None:
    holder = bind_listener("127.0.0.1", 0, owner="someone else")
    try:
        run = launcher.start(f"++head_server.port={holder.getsockname()[1]}")
        code = run.wait_exit(timeout_s=HANG_CAP_S)
    finally:
        holder.close()

    assert code == 1
    assert "already in use" in run.output
    assert "head_server" in run.output
    assert_all_gone(run, within_s=LEFTOVER_CAP_S)


def test_dry_run_prints_the_plan_and_starts_nothing(launcher: Launcher) -> None:
    run = launcher.start("+dry_run=true")

    code = run.wait_exit(timeout_s=HANG_CAP_S)

    assert code == 0
    for name in SERVER_NAMES:
        assert name in run.output
    assert "api_key: '***'" in run.output
    assert SECRET not in run.output
    assert marked_pids(run.marker) == []


def test_ng_status_lists_every_server_up(running: NgRun, stack: dict[str, Any]) -> None:
    run = running

    status = run_script("ng_status", f"+head_server_url={stack['head_url']}")

    assert status.returncode == 0, status.stdout + status.stderr
    rows = [line for line in status.stdout.splitlines() if any(name in line for name in SERVER_NAMES)]
    assert len(rows) == 4
    for row, (name, pid) in zip(rows, run.pids().items(), strict=True):
        assert name in row
        assert str(pid) in row
        assert " up " in row


def test_ng_status_reports_a_hung_server_down(launcher: Launcher) -> None:
    run = launcher.start()
    stack = run.wait_ready()
    frozen = run.pids()["policy_model"]

    os.kill(frozen, signal.SIGSTOP)  # alive for ng_run, silent for /health
    try:
        status = run_script("ng_status", f"+head_server_url={stack['head_url']}", "+probe_timeout_s=5")
    finally:
        os.kill(frozen, signal.SIGCONT)

    assert status.returncode == 1
    row = next(line for line in status.stdout.splitlines() if "policy_model" in line)
    assert "down" in row
    assert sum(" up " in line for line in status.stdout.splitlines()) == 3


def test_ng_status_explains_an_unreachable_head_server() -> None:
    probe = bind_listener("127.0.0.1", 0, owner="probe")
    port = probe.getsockname()[1]
    probe.close()

    status = run_script("ng_status", f"+head_server_url=http://127.0.0.1:{port}")

    assert status.returncode == 1
    assert f"the head server at http://127.0.0.1:{port} is unreachable" in status.stderr
    assert "ng_run" in status.stderr  # the hint says how to start one
