"""Server folders' own test suites (`ng_test`, `ng_test_all`) and their example data check.

A server folder is `<repo_root>/<server_type>/<implementation>/`. Its tests run with pytest in
the current environment (`sys.executable -m pytest <folder>`): one environment for the whole
project, no per-server virtualenv to build first. `data/example.jsonl` rows must be Responses
inputs: a JSON object with a `responses_create_params` object holding an `input`.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ng_cli.config.instances import SERVER_TYPES
from ng_cli.config.paths import display_path, repo_root
from ng_cli.errors import ConfigError, DataError, LaunchError

__all__ = [
    "EXAMPLE_DATA",
    "SuiteResult",
    "find_server_folders",
    "has_tests",
    "resolve_server_folder",
    "run_suite",
    "validate_example_data",
]

EXAMPLE_DATA = Path("data") / "example.jsonl"
NO_TESTS_COLLECTED = 5
"""pytest's exit code when a folder has test files but no test in them."""
TIMED_OUT = 124
"""`run_suite`'s exit code for a run stopped at its `timeout_s` (as `timeout(1)` reports it)."""
_MAX_LISTED_PROBLEMS = 20


@dataclass(frozen=True)
class SuiteResult:
    """One folder's pytest run."""

    folder: Path
    exit_code: int
    duration_s: float
    output_tail: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.exit_code in (0, NO_TESTS_COLLECTED)

    @property
    def status(self) -> str:
        if self.exit_code == 0:
            return "passed"
        if self.exit_code == NO_TESTS_COLLECTED:
            return "no tests collected"
        if self.exit_code == TIMED_OUT:
            return "timed out"
        return f"failed (pytest exit code {self.exit_code})"


def resolve_server_folder(entrypoint: object, *, cwd: Path) -> Path:
    """`resources_servers/<name>` (relative to the cwd or the repo root) -> an existing folder.

    A server folder of the working directory counts too: `ng_init_resources_server` writes there."""
    if not isinstance(entrypoint, str) or not entrypoint.strip():
        raise ConfigError(
            f"entrypoint: expected a server folder such as resources_servers/<name>, got {entrypoint!r}",
            hint="ng_test +entrypoint=resources_servers/example_single_tool_call",
        )
    raw = Path(entrypoint.strip().rstrip("/"))
    candidates = [raw] if raw.is_absolute() else [cwd / raw, repo_root() / raw]
    servers = find_server_folders(repo_root(), with_tests_only=False)
    if cwd.resolve() != repo_root():
        servers += find_server_folders(cwd, with_tests_only=False)
    known = [display_path(folder) for folder in servers]
    for candidate in candidates:
        if candidate.is_dir():
            folder = candidate.resolve()
            if folder not in {server.resolve() for server in servers}:
                raise ConfigError(
                    f"entrypoint: {entrypoint!r} ({folder}) is not a server folder of this project; "
                    "ng_test runs only <server_type>/<name> folders under the repo root or the current directory",
                    hint=f"server folders: {', '.join(known) or 'none'}",
                )
            return folder
    close = difflib.get_close_matches(raw.as_posix(), known, n=1)
    raise ConfigError(
        f"entrypoint: no folder {entrypoint!r} (tried {', '.join(str(c) for c in dict.fromkeys(candidates))})",
        hint=f"did you mean {close[0]}?" if close else f"server folders: {', '.join(known) or 'none'}",
    )


def has_tests(folder: Path) -> bool:
    """A `tests/` folder, or test files right in the folder."""
    return (folder / "tests").is_dir() or any(folder.glob("test_*.py"))


def find_server_folders(root: Path, *, with_tests_only: bool = True) -> list[Path]:
    """Every `<root>/<server_type>/<implementation>/`, sorted, optionally only those with tests."""
    folders = [
        folder
        for server_type in SERVER_TYPES
        if (root / server_type).is_dir()
        for folder in sorted((root / server_type).iterdir())
        if folder.is_dir() and not folder.name.startswith((".", "_"))
    ]
    return [folder for folder in folders if has_tests(folder)] if with_tests_only else folders


def run_suite(
    folder: Path,
    *,
    pytest_args: Sequence[str] = (),
    capture: bool = False,
    python: str | None = None,
    timeout_s: float | None = None,
) -> SuiteResult:
    """Run pytest on `folder` with this Python (or `python`: a server's own environment, as the
    NeMo Gym harness builds them); output goes to our stdout unless `capture`. A run past
    `timeout_s` is stopped and reported with exit code `TIMED_OUT`."""
    if python is None and importlib.util.find_spec("pytest") is None:
        raise LaunchError(
            f"ng_test runs pytest with {sys.executable}, which does not have it",
            hint="install the dev extra: pip install -e '.[dev]' (scripts/test.sh does)",
        )
    plugins = _plugins(folder)
    command = [python or sys.executable, "-m", "pytest", *plugins, str(folder), *pytest_args]
    project = folder.resolve().parents[1]  # the root that holds <server_type>/<name>: ours, or the cwd
    env = None
    if plugins:  # NeMo Gym runs a server's tests in its folder (`cd <folder> && pytest`)
        env = {**os.environ, "NG_NEMO_GYM_ROOT": str(project)}
        project = folder.resolve()
    started = time.monotonic()
    if not capture:
        code = subprocess.run(command, cwd=project, env=env, check=False).returncode
        return SuiteResult(folder, code, time.monotonic() - started)
    try:
        completed = subprocess.run(
            command, cwd=project, env=env, check=False, stdin=subprocess.DEVNULL, capture_output=True,
            text=True, timeout=timeout_s,
        )  # fmt: skip
    except subprocess.TimeoutExpired as expired:
        output = _text(expired.stdout) + _text(expired.stderr)
        tail = deque([*output.splitlines(), f"stopped after {timeout_s:.0f} s"], maxlen=40)
        return SuiteResult(folder, TIMED_OUT, time.monotonic() - started, tuple(tail))
    tail = deque((completed.stdout + completed.stderr).splitlines(), maxlen=40)
    return SuiteResult(folder, completed.returncode, time.monotonic() - started, tuple(tail))


def _text(output: str | bytes | None) -> str:
    """What a timed-out run had written (bytes on some platforms even with `text=True`)."""
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


def _plugins(folder: Path) -> list[str]:
    """NeMo Gym's servers' tests import `nemo_gym`: they run with our stand-ins loaded."""
    from ng_cli.servers.loading import imports_nemo_gym

    if any(imports_nemo_gym(path) for path in folder.glob("*.py")):
        return ["-p", "ng_cli.nemo_gym_compat.pytest_plugin"]
    return []


def validate_example_data(folder: Path) -> int:
    """Check `<folder>/data/example.jsonl`; returns the row count, or DataError naming each bad line."""
    path = folder / EXAMPLE_DATA
    name = display_path(path)
    if not path.is_file():
        raise DataError(
            f"{name}: no example data", hint="add a few rows (JSONL) the environment can be run on"
        )
    problems: list[str] = []
    rows = 0
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            problem = _row_problem(line)
            if problem:
                problems.append(f"{name}:{number}  {problem}")
            else:
                rows += 1
    if not problems and rows == 0:
        problems.append(f"{name}: the file has no rows")
    if problems:
        shown = problems[:_MAX_LISTED_PROBLEMS]
        more = len(problems) - len(shown)
        listing = "\n".join(f"  {problem}" for problem in shown) + (
            f"\n  ... and {more} more" if more else ""
        )
        raise DataError(
            f"{len(problems)} invalid line(s) in {name}:\n{listing}",
            hint='each line is one JSON object: {"responses_create_params": {"input": ...}, ...}',
        )
    return rows


def _row_problem(line: str) -> str | None:
    if not line.strip():
        return "empty line (JSONL has one JSON object per line)"
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        return f"not valid JSON: {exc.msg} at column {exc.colno}"
    if not isinstance(row, dict):
        return f"expected a JSON object, got {type(row).__name__}"
    params = row.get("responses_create_params")
    if not isinstance(params, dict):
        found = "missing" if params is None else f"a {type(params).__name__}"
        return f"'responses_create_params' must be an object, it is {found}"
    if "input" not in params:
        return "'responses_create_params' has no 'input'"
    if not isinstance(params["input"], str | list):
        return f"'responses_create_params.input' must be a string or a list, got {type(params['input']).__name__}"
    return None
