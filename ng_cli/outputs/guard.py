"""The output guard: before anything is written, refuse an output that is an input or cannot be written.

A command takes its outputs and its inputs from the user's options, and one path can name the
other in many ways: the same string, `dir/../in.jsonl`, a symlink, a hard link, or a file the
command derives from an output (`<stem>_failures.jsonl`, `<dir>/<split>.jsonl`). So a command
lists every file it will write (`writes`) and every file it reads (`reads`) and calls
`check_outputs` before its first write and before it starts a server. Refused, each with a
ConfigError (exit 2) naming the option, the output and the reason, with nothing written:

    an output that is an input          same resolved path, or the same inode (a hard link)
    an output that is a directory       or any other non-regular file: /dev/null, /dev/full, a FIFO
    a folder path through a file        `blocker/out.jsonl` where `blocker` is a file
    a folder it cannot create files in  tried with a probe file, created and removed at once:
                                        permission bits say nothing for root, or for /proc

Why refuse a device rather than write to it: whole files are written beside their name and
renamed into place (`atomic`), which would swap a device node for a plain file, and the files a
command derives from an output would land beside the device (`/dev/null_failures.jsonl`).
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ng_cli.errors import ConfigError

__all__ = ["Input", "Output", "check_outputs", "reads", "same_file", "writes"]


@dataclass(frozen=True)
class Output:
    """A file a command will write, and the option it comes from."""

    key: str
    """The option that names it, or names the output it is derived from (`output_jsonl_fpath`)."""
    given: Path
    """That option's value, as the user wrote it."""
    path: Path
    """The file written: `given` itself, or a file derived from it."""

    def over(self, read: Input) -> str:
        """The message: this output and the input it would overwrite."""
        derived = "" if self.path == self.given else f" would write {self.path}, which"
        return (
            f"{self.key}: {self.given}{derived} is the same file as {read.what}; "
            "writing it would overwrite that input, so nothing was written"
        )


@dataclass(frozen=True)
class Input:
    """A file a command reads, and how to name it in a message."""

    path: Path
    what: str
    """E.g. `input_jsonl_fpath: in.jsonl`."""


def writes(key: str, given: Path, *paths: Path) -> list[Output]:
    """The files written under one option: `paths` (default: `given` itself)."""
    return [Output(key, given, path) for path in paths or (given,)]


def reads(key: str, path: Path, *beside: Path) -> list[Input]:
    """The file one option names, and the files that go with it (its `_failures.jsonl`, ...)."""
    named = Input(path, f"{key}: {path}")
    return [named, *(Input(other, f"{other} (which goes with {key}: {path})") for other in beside)]


def check_outputs(outputs: Iterable[Output], inputs: Iterable[Input]) -> None:
    """ConfigError unless every output may be written: none is an input, each is writable."""
    outputs, inputs = list(outputs), list(inputs)
    for output in outputs:
        for read in inputs:
            if same_file(output.path, read.path):
                raise ConfigError(
                    output.over(read),
                    hint=f"give +{output.key} a path that is not a file this command reads",
                )
    probed: set[Path] = set()
    for output in outputs:
        reason = _unwritable(output.path, probed)
        if reason is not None:
            derived = "" if output.path == output.given else f" (from {output.given})"
            raise ConfigError(
                f"{output.key}: cannot write {output.path}{derived}: {reason}; nothing was written",
                hint=f"give +{output.key} a file path in a folder you can write to",
            )


def same_file(a: Path, b: Path) -> bool:
    """The same file: the same inode when both exist (hard links too), else the same resolved path."""
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _unwritable(path: Path, probed: set[Path]) -> str | None:
    """Why `path` cannot be written as a whole regular file, or None."""
    try:
        mode = path.stat().st_mode  # follows a symlink: what matters is what it points at
    except FileNotFoundError:
        mode = None
    except NotADirectoryError:
        mode = None  # a file in the folder path: named below
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    if mode is not None and stat.S_ISDIR(mode):
        return "it is a directory"
    if mode is not None and not stat.S_ISREG(mode):
        return "it is not a regular file (a device, pipe or socket)"
    folder = _nearest_existing(Path(os.path.realpath(path)).parent)
    if not folder.is_dir():
        return f"a part of its folder path ({folder}) is a file, not a directory"
    if folder not in probed:
        try:
            fd, probe = tempfile.mkstemp(prefix=".ng-write-probe.", dir=folder)
        except OSError as exc:
            return f"cannot create files in {folder} ({exc.strerror or type(exc).__name__})"
        os.close(fd)
        os.unlink(probe)
        probed.add(folder)
    return None


def _nearest_existing(folder: Path) -> Path:
    """`folder`, or the closest ancestor that exists (where its missing folders would be made)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder
