"""A server's `requirements.txt`, read line by line into what pip would be asked for.

NeMo Gym 0.7.0 gives most server folders a `requirements.txt` (pip's format); four declare their
packages in a `pyproject.toml` instead (`[project] dependencies`, with uv's `[tool.uv.sources]`
for a package from git or a path), which is read as the same lines (`requirements_file` says
which file a folder has; uv's overrides and exclusions are not pip's and are not read). Lines that name
NeMo Gym itself (`-e nemo-gym[dev] @ ../../`, `-e nemo-gym[dev,sandbox] @ ../..`, `-e ../../`,
`nemo-gym`) are skipped: here our compatibility layer stands in for the package. Relative paths
(`-e ./pocketshell[pcre]`) are made absolute against the file's folder, so one pip run can install
the requirements of several servers. Each kept line knows its server, file and line number, so
every message can name them.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from ng_cli.errors import ConfigError

__all__ = [
    "PYPROJECT_FILE",
    "REQUIREMENTS_FILE",
    "ServerRequirement",
    "is_nemo_gym_line",
    "read_requirements",
    "requirement_lines",
    "requirements_file",
]

REQUIREMENTS_FILE = "requirements.txt"
PYPROJECT_FILE = "pyproject.toml"
_NEMO_GYM = re.compile(
    r"^(-e\s+|--editable\s+)?(nemo[-_]gym(\[[^\]]*\])?\s*(@.*)?|\.\./\.\./?|\.\./\.\.)\s*$", re.I
)
_EGG = re.compile(r"[#&]egg=([A-Za-z0-9][A-Za-z0-9._-]*)")
_LOCAL = ("./", "../", "/", "file:")


@dataclass(frozen=True)
class ServerRequirement:
    """One line of a server's requirements.txt that pip must see satisfied."""

    server: str
    """The instance whose folder holds the file."""
    file: Path
    lineno: int
    line: str
    """The line as pip gets it (comment dropped, a relative path made absolute)."""
    requirement: Requirement | None
    """Parsed name, extras, version specifier and marker; None for a bare URL or path."""
    name: str | None
    """The canonical distribution name (also from a URL's `#egg=` or a wheel's file name), or None
    when the line does not say it (then only pip can tell whether it is installed)."""
    version: str | None = None
    """The version a wheel URL fixes (`..._sm-3.8.0-py3-none-any.whl`), when the line has one."""

    @property
    def where(self) -> str:
        return f"{self.file}:{self.lineno}"

    @property
    def is_direct(self) -> bool:
        """A URL or a path: the installed version says nothing about where it came from."""
        return self.requirement is None or self.requirement.url is not None

    def describe(self) -> str:
        return f"{self.server} ({self.where}: {self.line})"


def is_nemo_gym_line(line: str) -> bool:
    """Whether a requirements line names NeMo Gym itself (skipped: our layer stands in for it)."""
    return bool(_NEMO_GYM.match(line.strip()))


def requirements_file(folder: Path) -> Path | None:
    """The file that declares a server folder's packages: its `requirements.txt`, else a
    `pyproject.toml` with `[project] dependencies`, else None."""
    requirements = folder / REQUIREMENTS_FILE
    if requirements.is_file():
        return requirements
    pyproject = folder / PYPROJECT_FILE
    if pyproject.is_file() and "dependencies" in _project_table(pyproject):
        return pyproject
    return None


def requirement_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, pip's line) of a requirements.txt or a pyproject.toml, comments and NeMo
    Gym's own lines dropped."""
    if path.name == PYPROJECT_FILE:
        return _pyproject_lines(path)
    lines = (
        (n, _without_comment(raw)) for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
    )
    return [(lineno, line) for lineno, line in lines if line and not is_nemo_gym_line(line)]


def read_requirements(server: str, path: Path) -> list[ServerRequirement]:
    """The lines of `path` pip must see satisfied, NeMo Gym's own skipped; a ConfigError naming
    file:line for a line that is neither a requirement, a URL nor a path (e.g. a pip option)."""
    return [_parse(server, path, lineno, line) for lineno, line in requirement_lines(path)]


def _project_table(path: Path) -> dict[str, object]:
    try:
        project = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {})
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    return project if isinstance(project, dict) else {}


def _pyproject_lines(path: Path) -> list[tuple[int, str]]:
    """`[project] dependencies` as pip lines (NeMo Gym's own dropped), a package uv takes from git
    or a path (`[tool.uv.sources]`) written as pip's direct reference; each at the line naming it."""
    text = path.read_text(encoding="utf-8")
    document = tomllib.loads(text)
    dependencies = _project_table(path).get("dependencies", [])
    if not isinstance(dependencies, list) or not all(isinstance(item, str) for item in dependencies):
        raise ConfigError(f"{path}: [project] dependencies must be a list of requirement strings")
    sources = document.get("tool", {}).get("uv", {}).get("sources", {})
    lines = text.splitlines()
    found: list[tuple[int, str]] = []
    for dependency in dependencies:
        if is_nemo_gym_line(dependency):  # before its source: uv's path to NeMo Gym's root
            continue
        lineno = next((n for n, raw in enumerate(lines, 1) if f'"{dependency}"' in raw), 1)
        found.append((lineno, _with_source(dependency, sources, path.parent)))
    return found


def _with_source(dependency: str, sources: dict[str, object], folder: Path) -> str:
    try:
        name = canonicalize_name(Requirement(dependency).name)
    except InvalidRequirement:
        return dependency
    source = next((v for k, v in sources.items() if canonicalize_name(k) == name), None)
    if not isinstance(source, dict):
        return dependency
    if "git" in source:
        rev = source.get("rev") or source.get("tag") or source.get("branch")
        return f"{dependency.split(';')[0].strip()} @ git+{source['git']}" + (f"@{rev}" if rev else "")
    if "path" in source:
        return f"{'-e ' if source.get('editable') else ''}{(folder / str(source['path'])).resolve()}"
    return dependency


def _without_comment(raw: str) -> str:
    # pip: a comment starts at '#' at the line's start or after whitespace (URLs keep '#egg=').
    return re.sub(r"(^|\s)#.*$", "", raw).strip()


def _parse(server: str, path: Path, lineno: int, line: str) -> ServerRequirement:
    editable = re.match(r"^(-e|--editable)\s+(.*)$", line)
    target = editable.group(2).strip() if editable else line
    if target.startswith("-"):
        raise ConfigError(
            f"{path}:{lineno}: '{line}' is a pip option; a server's requirements.txt may list "
            "requirements, URLs and paths only",
            hint="put index options in pip's own config (pip.conf or PIP_* variables)",
        )
    if target.startswith(_LOCAL) or editable:
        local = _absolute(target, path.parent)
        line = f"-e {local}" if editable else local
        return ServerRequirement(server, path, lineno, line, None, _egg_name(target))
    if "://" in target and "@" not in target.split("://", 1)[0]:
        name, version = _url_name(target)
        return ServerRequirement(server, path, lineno, line, None, name, version)
    try:
        requirement = Requirement(target)
    except InvalidRequirement as exc:
        raise ConfigError(f"{path}:{lineno}: '{line}' is not a requirement pip understands: {exc}") from exc
    return ServerRequirement(server, path, lineno, line, requirement, canonicalize_name(requirement.name))


def _absolute(target: str, folder: Path) -> str:
    """A relative path (extras kept: `./pkg[x]`) made absolute against the file's folder."""
    if target.startswith("file:") or target.startswith("/"):
        return target
    match = re.match(r"^(.*?)(\[[^\]]*\])?$", target)
    assert match is not None
    return f"{(folder / match.group(1)).resolve()}{match.group(2) or ''}"


def _egg_name(target: str) -> str | None:
    egg = _EGG.search(target)
    return canonicalize_name(egg.group(1)) if egg else None


def _url_name(url: str) -> tuple[str | None, str | None]:
    """(name, version) a bare URL tells: a wheel's file name, else `#egg=`."""
    filename = urlsplit(url).path.rsplit("/", 1)[-1]
    if filename.endswith(".whl"):
        try:
            name, version, _, _ = parse_wheel_filename(filename)
            return str(name), str(version)
        except InvalidWheelFilename:
            pass
    return _egg_name(url), None
