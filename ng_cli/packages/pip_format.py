"""pip's requirements-file format below the requirement itself: the file's text, its logical lines,
a line's requirement and its options, and the URL schemes pip installs from.

These follow pip's own reader (`pip/_internal/req/req_file.py`: `join_lines`, `ignore_comments`,
`break_args_options`; `pip/_internal/utils/urls.py` and `vcs/` for the schemes), which is not a
public API, so the few rules are written here; the requirement itself is parsed by `packaging`
(`requirements._parse`).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from ng_cli.errors import ConfigError
from ng_cli.packages.credentials import hide_credentials

__all__ = ["URL_SCHEMES", "VCS_SCHEMES", "logical_lines", "read_text", "split_options", "url_scheme"]

VCS_SCHEMES = frozenset(
    {
        *("git", "git+http", "git+https", "git+ssh", "git+git", "git+file"),
        *("hg", "hg+file", "hg+http", "hg+https", "hg+ssh", "hg+static-http"),
        *("svn", "svn+ssh", "svn+http", "svn+https", "svn+svn", "svn+file"),
        *("bzr", "bzr+http", "bzr+https", "bzr+ssh", "bzr+sftp", "bzr+ftp", "bzr+lp", "bzr+file"),
    }
)
"""The version-control URL schemes pip knows (`pip._internal.vcs`)."""
URL_SCHEMES = frozenset({"http", "https", "file", "ftp", *VCS_SCHEMES})
"""Every scheme pip reads a line as a URL for (`pip._internal.utils.urls.is_url`)."""

# pip: a comment starts at '#' at the line's start or after whitespace (a URL keeps its '#egg=').
_COMMENT = re.compile(r"(^|\s+)#.*$")
_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):")


def read_text(path: Path) -> str:
    """The file as UTF-8 text (a leading byte-order mark dropped); a ConfigError naming the file,
    and the line of the first byte that is not UTF-8, instead of a decoding traceback."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        lineno = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"{path}:{lineno}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
            hint="save the file as UTF-8",
        ) from exc


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(number of its first line, text) of every line pip reads: a line ending in a backslash
    joined with the next (not a comment's), comments dropped, blank lines left out."""
    joined: list[tuple[int, str]] = []
    pending: list[str] = []
    first = 0
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.endswith("\\") and not _COMMENT.match(line):
            first = first if pending else lineno
            pending.append(line[:-1])
            continue
        if _COMMENT.match(line):
            line = " " + line  # pip: so the comment is still one after joining
        if pending:
            joined.append((first, "".join([*pending, line])))
            pending = []
        else:
            joined.append((lineno, line))
    if pending:
        joined.append((first, "".join(pending)))
    stripped = ((lineno, _COMMENT.sub("", line).strip()) for lineno, line in joined)
    return [(lineno, line) for lineno, line in stripped if line]


def split_options(line: str, *, where: str) -> tuple[str, list[str]]:
    """(the requirement, the options after it), as pip splits a line: the requirement is every
    word before the first that starts with '-'; the options are shell words (pip `shlex`es them)."""
    words = line.split()
    index = next((n for n, word in enumerate(words) if word.startswith("-")), len(words))
    try:
        options = shlex.split(" ".join(words[index:]))
    except ValueError as exc:
        raise ConfigError(f"{where}: '{hide_credentials(line)}': the options cannot be read: {exc}") from exc
    return " ".join(words[:index]), options


def url_scheme(text: str) -> str | None:
    """The scheme, lower-cased, when pip reads `text` as a URL (`git+https`, `https`, `file`)."""
    match = _SCHEME.match(text)
    scheme = match.group("scheme").lower() if match else None
    return scheme if scheme in URL_SCHEMES else None
