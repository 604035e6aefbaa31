"""The Python environment the servers run in: what is installed there, and pip to add to it.

Both run the target interpreter as a child (the one ng_run starts its servers with), so the
answer is that environment's and not the launcher's, and a test can point them at a scratch
virtual environment. Reading what is installed needs no network; only `pip_install` may.
"""

from __future__ import annotations

import subprocess
import sys
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import orjson
from packaging.utils import canonicalize_name

from ng_cli.errors import LaunchError
from ng_cli.packages.resolve import Distribution

__all__ = ["PROBE_TIMEOUT_S", "pip_install", "probe"]

PROBE_TIMEOUT_S = 60.0
_PROBE = """
import importlib.metadata as metadata, json, sys
found = {}
for dist in metadata.distributions():
    name = dist.metadata["Name"]
    if name and name not in found:  # the first on sys.path is the one imported
        found[name] = {"version": dist.version, "requires": list(dist.requires or [])}
json.dump(found, sys.stdout)
"""


def probe(python: str = sys.executable) -> dict[str, Distribution]:
    """Every distribution installed for `python`: canonical name -> version and requirements."""
    try:
        result = subprocess.run(
            [python, "-c", _PROBE], capture_output=True, timeout=PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LaunchError(f"could not ask {python} which packages it has: {exc}") from exc
    if result.returncode != 0:
        tail = result.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise LaunchError(f"could not ask {python} which packages it has:\n" + "\n".join(tail))
    found: dict[str, Distribution] = {}
    for name, entry in orjson.loads(result.stdout).items():
        found.setdefault(
            canonicalize_name(name), Distribution(str(entry["version"]), tuple(map(str, entry["requires"])))
        )
    return found


def pip_install(
    python: str,
    lines: Sequence[str],
    *,
    work_dir: Path,
    on_line: Callable[[str], None],
    env: Mapping[str, str] | None = None,
    servers: Sequence[str] = (),
) -> None:
    """`python -m pip install -r <lines>`; each output line goes to `on_line`. A failure is a
    LaunchError with pip's last lines and the servers whose requirements were asked for."""
    requirements = work_dir / "requirements.txt"
    requirements.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    command = [python, "-m", "pip", "install", "--disable-pip-version-check", "-r", str(requirements)]
    tail: deque[str] = deque(maxlen=25)
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=None if env is None else dict(env),
            text=True,
            errors="replace",
        )
    except OSError as exc:
        raise LaunchError(f"could not run pip with {python}: {exc}") from exc
    assert process.stdout is not None
    with process:
        for line in process.stdout:
            line = line.rstrip("\n")
            tail.append(line)
            on_line(line)
    if process.returncode != 0:
        asked = ", ".join(servers) or "the stack"
        raise LaunchError(
            f"pip could not install the requirements of {asked} (exit code {process.returncode}); "
            "its last lines:\n" + "\n".join(tail),
            hint="nothing was started; fix the requirement, or install it yourself and run again "
            "(a met requirement needs no pip and no network)",
        )
