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

A line is read as pip reads it (`pip_format`: continuations, comments, the options after a
requirement) and then parsed by `packaging`. What the shared pip run must not be given is refused
with file:line: pip options (index options would apply to every server's packages, `--hash` would
turn on hash-checking for the whole run), a URL that is not a direct reference pip installs from,
an editable VCS URL without `#egg=`, and ng-cli itself (it would replace the running code).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from ng_cli.errors import ConfigError
from ng_cli.packages.credentials import hide_credentials
from ng_cli.packages.pip_format import VCS_SCHEMES, logical_lines, read_text, split_options, url_scheme

__all__ = [
    "OWN_NAME",
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
OWN_NAME = canonicalize_name("ng-cli")
"""This project's distribution name: a server may not ask for it (it would replace the running code)."""
_NEMO_GYM = re.compile(
    r"^(-e\s+|--editable\s+)?(nemo[-_]gym(\[[^\]]*\])?\s*(@.*)?|\.\./\.\./?|\.\./\.\.)\s*$", re.I
)
_EGG = re.compile(r"[#&]egg=([A-Za-z0-9][A-Za-z0-9._-]*)")
_LOCAL = ("./", "../", "/", "file:")
_ANY_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")
_NO_HOST = frozenset({"file", "git+file", "hg+file", "svn+file", "bzr+file", "bzr+lp"})
_ARCHIVES = (
    ".zip",
    ".tar.gz",
    ".tgz",
    ".tar.bz2",
    ".tbz",
    ".tar.xz",
    ".txz",
    ".tar.lz",
    ".tlz",
    ".tar.lzma",
    ".tar",
)
_OPTIONS_REFUSED_HINT = "put index options in pip's own config (pip.conf or PIP_* variables)"


@dataclass(frozen=True)
class ServerRequirement:
    """One line of a server's requirements.txt that pip must see satisfied."""

    server: str
    """The instance whose folder holds the file."""
    file: Path
    lineno: int
    line: str
    """The line as pip gets it (comment dropped, a relative path made absolute); credentials in
    its URL included, so show `shown` instead."""
    requirement: Requirement | None
    """Parsed name, extras, version specifier and marker; None for an editable, a path, or a URL
    whose name the line does not say."""
    name: str | None
    """The canonical distribution name (also from a URL's `#egg=` or a wheel's file name), or None
    when the line does not say it (then only pip can tell whether it is installed)."""
    version: str | None = None
    """The version a wheel URL fixes (`..._sm-3.8.0-py3-none-any.whl`), when the line has one."""

    @property
    def where(self) -> str:
        return f"{self.file}:{self.lineno}"

    @property
    def shown(self) -> str:
        """The line as messages show it: a URL's password (or lone user name: a token) as `***`."""
        return hide_credentials(self.line)

    @property
    def is_direct(self) -> bool:
        """A URL or a path: the installed version says nothing about where it came from."""
        return self.requirement is None or self.requirement.url is not None

    def describe(self) -> str:
        return f"{self.server} ({self.where}: {self.shown})"


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
    if pyproject.is_file() and "dependencies" in _project_table(_toml(pyproject)):
        return pyproject
    return None


def requirement_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, pip's line) of a requirements.txt or a pyproject.toml, comments and NeMo
    Gym's own lines dropped (a line continued with a backslash is one line, at its first)."""
    if path.name == PYPROJECT_FILE:
        return _pyproject_lines(path)
    return [(lineno, line) for lineno, line in logical_lines(read_text(path)) if not is_nemo_gym_line(line)]


def read_requirements(server: str, path: Path) -> list[ServerRequirement]:
    """The lines of `path` pip must see satisfied, NeMo Gym's own skipped; a ConfigError naming
    file:line for a line pip should not be given (see the module's docstring)."""
    return [_parse(server, path, lineno, line) for lineno, line in requirement_lines(path)]


def _toml(path: Path) -> dict[str, object]:
    try:
        return tomllib.loads(read_text(path))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc


def _project_table(document: dict[str, object]) -> dict[str, object]:
    project = document.get("project", {})
    return project if isinstance(project, dict) else {}


def _pyproject_lines(path: Path) -> list[tuple[int, str]]:
    """`[project] dependencies` as pip lines (NeMo Gym's own dropped), a package uv takes from git
    or a path (`[tool.uv.sources]`) written as pip's direct reference; each at the line naming it."""
    document = _toml(path)
    dependencies = _project_table(document).get("dependencies", [])
    if not isinstance(dependencies, list) or not all(isinstance(item, str) for item in dependencies):
        raise ConfigError(f"{path}: [project] dependencies must be a list of requirement strings")
    tool = document.get("tool", {})
    uv = tool.get("uv", {}) if isinstance(tool, dict) else {}
    sources = uv.get("sources", {}) if isinstance(uv, dict) else {}
    lines = read_text(path).splitlines()
    found: list[tuple[int, str]] = []
    for dependency in dependencies:
        if is_nemo_gym_line(dependency):  # before its source: uv's path to NeMo Gym's root
            continue
        lineno = next((n for n, raw in enumerate(lines, 1) if f'"{dependency}"' in raw), 1)
        found.append(
            (lineno, _with_source(dependency, sources if isinstance(sources, dict) else {}, path.parent))
        )
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


def _parse(server: str, path: Path, lineno: int, line: str) -> ServerRequirement:
    where = f"{path}:{lineno}"
    target, options = split_options(line, where=where)
    if not target:  # pip: a line of options only; of those only -e / --editable is a requirement
        item = _editable(server, path, lineno, _editable_target(options, where, line))
    elif options:
        raise _refused_option(options[0], where, line, on_requirement=True)
    elif target.startswith(_LOCAL):
        item = ServerRequirement(
            server, path, lineno, _absolute(target, path.parent), None, _egg_name(target)
        )
    elif (scheme := url_scheme(target)) is not None:
        item = _bare_url(server, path, lineno, target, scheme)
    else:
        item = _named(server, path, lineno, target)
    _refuse_own_project(item)
    return item


def _editable_target(options: list[str], where: str, line: str) -> str:
    """What `-e` / `--editable` names; any other option (or a second word) is refused."""
    first, rest = options[0], options[1:]
    if first in ("-e", "--editable"):
        target, rest = (rest[0], rest[1:]) if rest else ("", [])
    elif first.startswith("--editable="):
        target = first.partition("=")[2]
    elif first.startswith("-e") and not first.startswith("--"):
        target = first[2:]  # -e./pkg, as optparse reads it
    else:
        raise _refused_option(first, where, line)
    if not target or target.startswith("-"):
        raise ConfigError(f"{where}: '{hide_credentials(line)}': -e needs a local path or a VCS URL after it")
    if rest:
        if rest[0].startswith("-"):
            raise _refused_option(rest[0], where, line, on_requirement=True)
        raise ConfigError(
            f"{where}: '{hide_credentials(line)}': -e takes one local path or VCS URL, then nothing "
            f"(found '{hide_credentials(rest[0])}' after it)"
        )
    return target


def _refused_option(option: str, where: str, line: str, *, on_requirement: bool = False) -> ConfigError:
    name = option.partition("=")[0] if option.startswith("--") else option[:2]
    shown = hide_credentials(line)
    if on_requirement:
        return ConfigError(
            f"{where}: '{shown}': '{name}' is a pip option on a requirement; a server's "
            "requirements.txt may not carry pip options (--hash would turn on hash-checking for the "
            "whole pip run, which the other servers' lines do not satisfy; build and index options "
            "would apply to every server's packages)",
            hint=_OPTIONS_REFUSED_HINT,
        )
    return ConfigError(
        f"{where}: '{shown}' is a pip option ('{name}'); a server's requirements.txt may list "
        "requirements, URLs and paths only",
        hint=_OPTIONS_REFUSED_HINT,
    )


def _editable(server: str, path: Path, lineno: int, target: str) -> ServerRequirement:
    """`-e <path>` (made absolute) or `-e <VCS URL>#egg=<name>` (kept as written)."""
    where, shown = f"{path}:{lineno}", hide_credentials(f"-e {target}")
    scheme = url_scheme(target)
    if scheme in VCS_SCHEMES:
        _check_url(target, scheme, where, shown)
        name = _egg_name(target)
        if name is None:
            raise ConfigError(
                f"{where}: '{shown}': an editable VCS URL needs '#egg=<name>' (pip cannot tell the "
                "package's name otherwise)",
                hint="add #egg=<name>, or drop the -e: '<name> @ git+https://...'",
            )
        return ServerRequirement(server, path, lineno, f"-e {target}", None, name)
    if scheme is not None and scheme != "file":
        raise ConfigError(
            f"{where}: '{shown}': an editable requirement is a local path or a VCS URL "
            f"(git+https://...), not a {scheme} URL"
        )
    if (other := _ANY_SCHEME.match(target)) is not None:
        raise _unknown_scheme(other.group("scheme"), where, shown)
    local = _absolute(target, path.parent)
    return ServerRequirement(server, path, lineno, f"-e {local}", None, _egg_name(target))


def _bare_url(server: str, path: Path, lineno: int, target: str, scheme: str) -> ServerRequirement:
    """A URL alone on its line (pip: a marker after it follows '; '): a VCS URL, a wheel or a
    source archive. Its name is the wheel's, else `#egg=`'s, else unknown (pip builds it to learn)."""
    where, shown = f"{path}:{lineno}", hide_credentials(target)
    url, _, marker = (part.strip() for part in target.partition("; "))
    if " " in url:
        raise ConfigError(f"{where}: '{shown}': a URL line is one URL, then '; <marker>' if any")
    _check_url(url, scheme, where, shown)
    if marker:
        try:
            Marker(marker)
        except InvalidMarker as exc:
            raise ConfigError(f"{where}: '{shown}': not a marker pip understands: {exc}") from exc
    filename = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    version: str | None = None
    if scheme in VCS_SCHEMES or filename.endswith(_ARCHIVES):
        name = _egg_name(url)
    elif filename.endswith(".whl"):
        try:
            wheel_name, wheel_version, _, _ = parse_wheel_filename(filename)
        except InvalidWheelFilename as exc:
            raise ConfigError(f"{where}: '{shown}': not a wheel's file name: {exc}") from exc
        name, version = str(wheel_name), str(wheel_version)
    else:
        raise ConfigError(
            f"{where}: '{shown}': a URL alone on a line must be a VCS URL (git+https://...), a wheel "
            "or a source archive",
            hint=f"name the package: '<name> @ {hide_credentials(url)}'",
        )
    requirement = Requirement(f"{name} @ {url}" + (f" ; {marker}" if marker else "")) if name else None
    return ServerRequirement(server, path, lineno, target, requirement, name, version)


def _named(server: str, path: Path, lineno: int, target: str) -> ServerRequirement:
    """`name[extras] specifier ; marker`, or PEP 508's direct reference `name @ url`."""
    where, shown = f"{path}:{lineno}", hide_credentials(target)
    if (other := _ANY_SCHEME.match(target)) is not None:
        raise _unknown_scheme(other.group("scheme"), where, shown)
    try:
        requirement = Requirement(target)
    except InvalidRequirement as exc:
        raise ConfigError(
            f"{where}: '{shown}' is not a requirement pip understands: {hide_credentials(str(exc))}"
        ) from exc
    if requirement.url is not None:
        scheme = url_scheme(requirement.url)
        if scheme is None:
            raise ConfigError(
                f"{where}: '{shown}': '{hide_credentials(requirement.url)}' is not a URL pip installs "
                "from (http, https, file, or a VCS URL such as git+https://)",
                hint="a local path is written on its own line: ./path or -e ./path",
            )
        _check_url(requirement.url, scheme, where, shown)
    return ServerRequirement(server, path, lineno, target, requirement, canonicalize_name(requirement.name))


def _check_url(url: str, scheme: str, where: str, shown: str) -> None:
    try:
        host = urlsplit(url).netloc
    except ValueError as exc:
        raise ConfigError(f"{where}: '{shown}': not a URL: {exc}") from exc
    if not host and scheme not in _NO_HOST:
        raise ConfigError(f"{where}: '{shown}': a {scheme} URL names a host (scheme://host/...)")


def _unknown_scheme(scheme: str, where: str, shown: str) -> ConfigError:
    return ConfigError(
        f"{where}: '{shown}': pip does not install from {scheme}:// URLs; a URL requirement is "
        "'<name> @ <url>' (http, https, file or VCS) or a VCS URL alone (git+https://...#egg=<name>)"
    )


def _refuse_own_project(item: ServerRequirement) -> None:
    """ng-cli itself (any spelling pip normalises to it, or a local path to its project) is refused."""
    if item.name == OWN_NAME or (item.requirement is None and _local_project_name(item.line) == OWN_NAME):
        raise ConfigError(
            f"{item.where}: '{item.shown}' asks for ng-cli, the project ng_run itself runs on: "
            "installing it would replace the running code",
            hint="drop the line: the servers run on the ng-cli that is already installed",
        )


def _local_project_name(line: str) -> str | None:
    """The project name in the pyproject.toml of a local path line (`-e /abs/dir[extra]`)."""
    target = line.removeprefix("-e ").strip()
    if target.startswith("file:"):
        target = unquote(urlsplit(target).path)
    if not target.startswith("/"):
        return None
    pyproject = Path(re.sub(r"\[[^\]]*\]$", "", target)) / PYPROJECT_FILE
    if not pyproject.is_file():
        return None
    try:
        name = _project_table(_toml(pyproject)).get("name")
    except ConfigError:
        return None
    return canonicalize_name(name) if isinstance(name, str) else None


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
