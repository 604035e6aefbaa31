"""Atomic whole-file writes on real files: all or nothing, no temp file left, a failure named cleanly."""

from __future__ import annotations

import resource
import signal
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ng_cli.errors import NgError
from ng_cli.outputs import write_atomically, write_bytes_atomically


def test_replaces_the_file_whole_with_a_plain_mode_and_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "out" / "metrics.json"
    write_bytes_atomically(target, b"old")
    write_bytes_atomically(target, b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert [p.name for p in target.parent.iterdir()] == ["metrics.json"]


def test_a_block_that_raises_commits_none_of_its_files(tmp_path: Path) -> None:
    first, second = tmp_path / "train.jsonl", tmp_path / "validation.jsonl"
    first.write_bytes(b"kept\n")

    def write_both_then_fail() -> None:
        with write_atomically(first, second) as (a, b):
            a.write(b"new train\n")
            b.write(b"new validation\n")
            raise RuntimeError("a bad row")

    with pytest.raises(RuntimeError):
        write_both_then_fail()
    assert first.read_bytes() == b"kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.jsonl"]


def test_a_symlinked_target_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    (tmp_path / "real.html").write_bytes(b"old")
    (tmp_path / "link.html").symlink_to(tmp_path / "real.html")
    write_bytes_atomically(tmp_path / "link.html", b"new")
    assert (tmp_path / "link.html").is_symlink()
    assert (tmp_path / "real.html").read_bytes() == b"new"


@contextmanager
def file_size_limit() -> Iterator[int]:
    """Writes past 4 KiB fail with EFBIG, as a full disk fails them with ENOSPC.

    Only around the write itself: the limit is the process's, so pytest's own report of the test
    (written to a log file larger than 4 KiB under CI) must come after it is lifted."""
    limit = 4096
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a killed process
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield limit
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def test_a_failed_write_leaves_the_target_as_it_was_and_says_so(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_bytes(b"the old report")
    with (
        pytest.raises(NgError, match=r"cannot write .*report.html: .*; nothing was written to it"),
        file_size_limit() as limit,
    ):
        write_bytes_atomically(target, b"x" * (4 * limit))
    assert target.read_bytes() == b"the old report"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]
