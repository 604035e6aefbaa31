"""Whole files written atomically: a hidden temp file beside the target, fsynced, renamed into place.

A reader, or a crash, sees the old file or the new one, never half of one; when writing fails
(a full disk) the temp file is removed and the target is left as it was (an NgError, exit 1). Several files can be
staged together and committed only if all of them were written (`ng_prepare_data` writes every
split or none). The collector's rollouts and failures files are not written this way: they grow
a line at a time, so that a stopped run resumes.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from ng_cli.errors import NgError

__all__ = ["StagedFile", "write_atomically", "write_bytes_atomically"]

_MODE = 0o644
"""What a plain `open(path, "w")` gives under the usual umask (mkstemp makes 0600)."""


class StagedFile:
    """A file being written beside `path`; `commit` renames it into place, `discard` drops it.

    A symlinked `path` is written through: the file it points at is replaced, the link stays.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._target = Path(os.path.realpath(path))
        self._file: IO[bytes] | None = None
        try:
            self._target.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(
                prefix=f".{self._target.name}.", suffix=".tmp", dir=self._target.parent
            )
        except OSError as exc:
            raise _failed(path, exc) from None
        self.temp = Path(name)
        self._file = os.fdopen(fd, "wb")

    def write(self, data: bytes) -> int:
        """Write to the temp file; a failure (ENOSPC) drops it and leaves `path` as it was."""
        try:
            return self._open().write(data)
        except OSError as exc:
            self.discard()
            raise _failed(self.path, exc) from None

    def commit(self) -> None:
        """Flush, fsync and rename the temp file into place."""
        file = self._open()
        try:
            file.flush()
            os.fsync(file.fileno())
            file.close()
            os.chmod(self.temp, _MODE)
            os.replace(self.temp, self._target)
        except OSError as exc:
            self.discard()
            raise _failed(self.path, exc) from None
        self._file = None

    def discard(self) -> None:
        """Drop the temp file (a no-op once committed)."""
        if self._file is None:
            return
        with contextlib.suppress(OSError):
            self._file.close()
        self._file = None
        self.temp.unlink(missing_ok=True)

    def _open(self) -> IO[bytes]:
        if self._file is None:
            raise ValueError(f"{self.path}: already committed or discarded")
        return self._file


@contextlib.contextmanager
def write_atomically(*paths: Path) -> Iterator[tuple[StagedFile, ...]]:
    """Stage a file for each path; commit them all when the block ends, drop them all if it raises."""
    staged: list[StagedFile] = []
    try:
        for path in paths:
            staged.append(StagedFile(path))
        yield tuple(staged)
        for file in staged:
            file.commit()
    finally:
        for file in staged:
            file.discard()


def write_bytes_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data`, atomically."""
    with write_atomically(path) as (file,):
        file.write(data)


def _failed(path: Path, exc: OSError) -> NgError:
    return NgError(f"cannot write {path}: {exc.strerror or exc}; nothing was written to it")
