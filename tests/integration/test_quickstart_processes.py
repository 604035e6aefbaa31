"""`StackProcess` and `run_foreground` against stand-ins for ng_run: ready, dead, deaf, leaky.

A stand-in is a small Python script that behaves like ng_run in one respect: it writes the ready
file (listing a "server" child it started in its own process group), then exits 130 on SIGINT,
or dies first, or ignores SIGINT, or leaves its server behind.
"""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ng_cli.errors import LaunchError
from ng_cli.quickstart.processes import StackProcess, run_foreground

pytestmark = pytest.mark.integration

FAKE_NG_RUN = textwrap.dedent(
    """
    import json, os, signal, subprocess, sys, time
    mode, ready_file = sys.argv[1], sys.argv[2]
    print("fake ng_run starting", flush=True)
    if mode == "dies":
        print("boom: port in use", flush=True)
        sys.exit(3)
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    def on_sigint(signum, frame):
        if mode != "leaky":
            server.kill()
            server.wait()
        sys.exit(130)
    signal.signal(signal.SIGINT, signal.SIG_IGN if mode == "deaf" else on_sigint)
    payload = {"head_url": "http://127.0.0.1:1", "servers": [{"name": "tools", "pid": server.pid}]}
    tmp = ready_file + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(payload, handle)
    os.replace(tmp, ready_file)
    while True:
        time.sleep(0.05)
    """
)


def start(tmp_path: Path, mode: str, *, timeout_s: float = 10) -> StackProcess:
    script = tmp_path / "fake_ng_run.py"
    script.write_text(FAKE_NG_RUN)
    ready_file = tmp_path / "ready.json"
    return StackProcess.start(
        [sys.executable, str(script), mode, str(ready_file)],
        env=dict(os.environ),
        cwd=tmp_path,
        ready_file=ready_file,
        log_path=tmp_path / "ng_run.log",
        timeout_s=timeout_s,
    )


def is_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_ready_then_a_clean_stop_on_sigint(tmp_path: Path) -> None:
    stack = start(tmp_path, "clean")
    assert stack.head_url == "http://127.0.0.1:1"
    server = stack.server_pids["tools"]
    assert is_alive(server)

    assert stack.stop() == []
    assert stack.process.returncode == 130
    assert not is_alive(server)
    assert stack.stop() == []  # idempotent


def test_a_stale_ready_file_is_not_mistaken_for_a_ready_stack(tmp_path: Path) -> None:
    (tmp_path / "ready.json").write_text('{"head_url": "http://stale"}')
    with pytest.raises(LaunchError, match="exited with code 3"):
        start(tmp_path, "dies")


def test_death_before_ready_reports_the_exit_code_and_the_log_tail(tmp_path: Path) -> None:
    with pytest.raises(LaunchError) as caught:
        start(tmp_path, "dies")
    assert "ng_run exited with code 3 before the stack was ready" in caught.value.message
    assert "boom: port in use" in caught.value.message
    assert str(tmp_path / "ng_run.log") in (caught.value.hint or "")


def test_a_stack_that_never_gets_ready_is_stopped(tmp_path: Path) -> None:
    script = tmp_path / "slow.py"
    script.write_text("import time\nprint('still starting', flush=True)\ntime.sleep(60)\n")
    started = time.monotonic()
    with pytest.raises(LaunchError, match="not ready within 1 s") as caught:
        StackProcess.start(
            [sys.executable, str(script)],
            env=dict(os.environ),
            cwd=tmp_path,
            ready_file=tmp_path / "ready.json",
            log_path=tmp_path / "ng_run.log",
            timeout_s=1,
        )
    assert "still starting" in caught.value.message
    assert time.monotonic() - started < 15


def test_an_ng_run_deaf_to_sigint_is_killed_with_its_servers(tmp_path: Path) -> None:
    stack = start(tmp_path, "deaf")
    server = stack.server_pids["tools"]

    problems = stack.stop(timeout_s=0.5)

    assert stack.process.returncode == -signal.SIGKILL
    assert any("after SIGINT (expected 130)" in problem for problem in problems)
    assert any("'tools'" in problem and "outlived ng_run" in problem for problem in problems)
    assert not is_alive(server)


def test_a_server_left_behind_is_killed_and_reported(tmp_path: Path) -> None:
    stack = start(tmp_path, "leaky")
    server = stack.server_pids["tools"]

    problems = stack.stop()

    assert problems == [f"server 'tools' (pid {server}) outlived ng_run; killed it"]
    assert not is_alive(server)


def test_run_foreground_returns_the_exit_code(tmp_path: Path) -> None:
    code = run_foreground(
        [sys.executable, "-c", "raise SystemExit(4)"], env=dict(os.environ), cwd=tmp_path, timeout_s=30
    )
    assert code == 4


@pytest.mark.parametrize("sigint_ignored_here", [False, True], ids=["plain", "under-nohup"])
def test_run_foreground_stops_a_command_that_overruns(tmp_path: Path, sigint_ignored_here: bool) -> None:
    """Also when we run with SIGINT ignored (nohup, `cmd &` in a script), which a child inherits."""
    marker = tmp_path / "interrupted"
    script = (
        "import sys, time\n"
        "try:\n    time.sleep(60)\n"
        f"except KeyboardInterrupt:\n    open({str(marker)!r}, 'w').close()\n    sys.exit(130)\n"
    )
    previous = signal.signal(
        signal.SIGINT, signal.SIG_IGN if sigint_ignored_here else signal.default_int_handler
    )
    try:
        with pytest.raises(LaunchError, match="did not finish within 2 s"):
            run_foreground([sys.executable, "-c", script], env=dict(os.environ), cwd=tmp_path, timeout_s=2)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert marker.exists()  # it got a SIGINT first, and had time to react


def test_run_foreground_stops_the_child_when_interrupted(tmp_path: Path) -> None:
    """Ctrl-C, or SIGTERM turned into KeyboardInterrupt: the child must not outlive us."""
    pid_file = tmp_path / "pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_foreground([sys.executable, "-c", script], env=dict(os.environ), cwd=tmp_path, timeout_s=30)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - started < 15
    assert not is_alive(int(pid_file.read_text()))
