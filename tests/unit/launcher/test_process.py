"""Child processes: one process group, stdin closed, output relayed with names, tail kept.

These start short-lived Python subprocesses, hence the integration marker.
"""

from __future__ import annotations

import io
import os
import signal
import sys
import threading
from collections.abc import Iterator

import pytest
from rich.console import Console

from ng_cli.launcher.process import (
    LOG_TAIL_LINES,
    Child,
    ConsoleSink,
    describe_exit,
    group_exists,
    signal_groups,
    spawn_child,
)

pytestmark = pytest.mark.integration


class Lines:
    """A thread-safe LineSink that remembers what it got."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def __call__(self, name: str, line: str) -> None:
        with self._lock:
            self.lines.append((name, line))


@pytest.fixture
def children() -> Iterator[list[Child]]:
    started: list[Child] = []
    yield started
    for child in started:
        if child.exit_code() is None:
            child.process.kill()
        child.process.wait(timeout=5)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_output_is_relayed_and_the_tail_kept(children: list[Child]) -> None:
    sink = Lines()
    code = "import sys\nfor i in range(80): print(f'out {i}')\nprint('to stderr', file=sys.stderr)"
    child = spawn_child("tools_a", python(code), pgid=None, sink=sink)
    children.append(child)

    assert child.process.wait(timeout=10) == 0
    assert child.relay is not None
    child.relay.join(timeout=5)
    assert len(sink.lines) == 81
    assert sink.lines[0] == ("tools_a", "out 0")
    assert ("tools_a", "to stderr") in sink.lines
    tail = child.last_lines()
    assert len(tail) == LOG_TAIL_LINES
    assert tail[-1] == "to stderr"
    assert tail[0] == f"out {81 - LOG_TAIL_LINES}"


def test_children_share_one_new_process_group(children: list[Child]) -> None:
    sink = Lines()
    code = "import os, time; print(os.getpgid(0)); time.sleep(30)"
    first = spawn_child("a", python(code), pgid=None, sink=sink)
    children.append(first)
    second = spawn_child("b", python(code), pgid=first.pgid, sink=sink)
    children.append(second)

    assert first.pgid == first.pid != os.getpgid(0)
    assert os.getpgid(second.pid) == first.pid
    assert os.getsid(first.pid) == os.getsid(0)  # same session: still one job of the shell
    assert signal_groups({first.pgid}, signal.SIGTERM) == {first.pgid}
    assert first.process.wait(timeout=5) == -signal.SIGTERM
    assert second.process.wait(timeout=5) == -signal.SIGTERM
    assert not group_exists(first.pgid)
    assert signal_groups({first.pgid}, signal.SIGTERM) == set()


def test_stdin_is_closed(children: list[Child]) -> None:
    sink = Lines()
    code = "import sys; print(repr(sys.stdin.read()))"
    child = spawn_child("reader", python(code), pgid=None, sink=sink)
    children.append(child)

    assert child.process.wait(timeout=10) == 0
    assert child.relay is not None
    child.relay.join(timeout=5)
    assert sink.lines == [("reader", "''")]


def test_only_the_passed_descriptor_is_inherited(children: list[Child]) -> None:
    read_fd, write_fd = os.pipe()
    os.set_inheritable(write_fd, True)
    try:
        sink = Lines()
        code = f"import os; os.write({write_fd}, b'x'); print(' '.join(os.listdir('/proc/self/fd')))"
        child = spawn_child("fd", python(code), pass_fds=[write_fd], pgid=None, sink=sink)
        children.append(child)
        assert child.process.wait(timeout=10) == 0
        assert os.read(read_fd, 1) == b"x"
        assert child.relay is not None
        child.relay.join(timeout=5)
        inherited = {int(fd) for fd in sink.lines[0][1].split()}
        assert write_fd in inherited
        assert read_fd not in inherited
    finally:
        os.close(read_fd)
        os.close(write_fd)


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (0, "exit code 0"),
        (3, "exit code 3"),
        (-9, "exit code -9 (killed by SIGKILL)"),
        (-15, "(killed by SIGTERM)"),
    ],
)
def test_describe_exit(code: int, text: str) -> None:
    assert text in describe_exit(code)


def test_console_sink_prefixes_and_never_reads_markup() -> None:
    buffer = io.StringIO()
    sink = ConsoleSink(Console(file=buffer, width=200, color_system=None))

    sink("tools_a", "[bold]not markup[/bold] 100%")
    sink("tools_b", "second")

    assert buffer.getvalue().splitlines() == ["[tools_a] [bold]not markup[/bold] 100%", "[tools_b] second"]


def test_a_broken_sink_does_not_block_the_child(children: list[Child]) -> None:
    def broken(_name: str, _line: str) -> None:
        raise BrokenPipeError("stderr closed")

    code = "import sys\nfor i in range(20000): print('x' * 100)"  # ~2 MB, far more than a pipe holds
    child = spawn_child("chatty", python(code), pgid=None, sink=broken)
    children.append(child)

    assert child.process.wait(timeout=20) == 0
    assert child.relay is not None
    child.relay.join(timeout=5)
    assert child.last_lines()[-1] == "x" * 100
