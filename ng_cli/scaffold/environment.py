"""A new resources server from the template: checked name, every file written, or none.

    parse_entrypoint("resources_servers/my_env")  -> "my_env"   (ConfigError otherwise)
    init_resources_server(...)                    -> the folder, complete

The files are rendered into a hidden sibling folder first and renamed into place in one step,
so a failure part-way (a full disk, a bad template) never leaves a half-written environment.
The example rows are built here rather than templated, so they always parse and always match
the rule the template's verifier applies.
"""

from __future__ import annotations

import json
import keyword
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path, PurePosixPath

from ng_cli.errors import ConfigError

__all__ = ["RESOURCES_SERVERS", "NewEnvironment", "init_resources_server", "parse_entrypoint"]

RESOURCES_SERVERS = "resources_servers"
_NAME = re.compile(r"[a-z][a-z0-9_]*")
_HINT = "ng_init_resources_server +entrypoint=resources_servers/<name>   (name: lower_snake_case)"
_FILES = {
    "app.py": "app.py.tmpl",
    "configs/{name}.yaml": "config.yaml.tmpl",
    "tests/test_app.py": "test_app.py.tmpl",
    "README.md": "README.md.tmpl",
}
_EXAMPLE_SUMS = ((17, 25), (123, 456), (-8, 15), (1000, 2024), (7, 0))
_TOOL = {
    "type": "function",
    "name": "add",
    "description": "Add two integers and return their sum.",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
    "strict": True,
}


@dataclass(frozen=True)
class NewEnvironment:
    """What `init_resources_server` wrote."""

    name: str
    folder: Path
    files: tuple[Path, ...]


def parse_entrypoint(entrypoint: object, *, root: Path) -> str:
    """The environment name of `resources_servers/<name>`; ConfigError for anything else."""
    if not isinstance(entrypoint, str) or not entrypoint.strip():
        raise ConfigError(f"entrypoint: expected resources_servers/<name>, got {entrypoint!r}", hint=_HINT)
    raw = entrypoint.strip().rstrip("/")
    path = Path(raw)
    if path.is_absolute():
        try:
            path = path.resolve().relative_to(root.resolve())
        except ValueError:
            raise ConfigError(
                f"entrypoint: {raw!r} is outside {root / RESOURCES_SERVERS}", hint=_HINT
            ) from None
    parts = PurePosixPath(path.as_posix()).parts
    if len(parts) != 2 or parts[0] != RESOURCES_SERVERS:
        raise ConfigError(
            f"entrypoint: {raw!r} is not a folder directly under {RESOURCES_SERVERS}/", hint=_HINT
        )
    name = parts[1]
    if not _NAME.fullmatch(name) or keyword.iskeyword(name):
        raise ConfigError(
            f"entrypoint: {name!r} is not a valid environment name: it must be a lower_snake_case "
            "Python identifier (it names the config's instances and the server's module)",
            hint=_HINT,
        )
    return name


def init_resources_server(entrypoint: object, *, root: Path) -> NewEnvironment:
    """Write `<root>/resources_servers/<name>/` from the template; refuse if it exists.

    The command passes the working directory as `root`, as NeMo Gym does."""
    name = parse_entrypoint(entrypoint, root=root)
    parent = root / RESOURCES_SERVERS
    folder = parent / name
    if folder.exists() or folder.is_symlink():
        raise ConfigError(
            f"entrypoint: {RESOURCES_SERVERS}/{name} already exists; nothing was written",
            hint="choose another name, or remove the folder first",
        )
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=parent))
    try:
        written = _render(staging, name)
        staging.chmod(0o755)
        os.rename(staging, folder)  # atomic; fails if the folder appeared meanwhile
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return NewEnvironment(name=name, folder=folder, files=tuple(folder / path for path in written))


def _render(target: Path, name: str) -> list[Path]:
    """Write every file of the environment under `target`; returns their relative paths."""
    templates = resources.files("ng_cli.scaffold") / "templates"
    class_name = "".join(part.capitalize() for part in name.split("_") if part)
    written: list[Path] = []
    for relative, template in _FILES.items():
        text = (templates / template).read_text(encoding="utf-8")
        text = text.replace("__NAME__", name).replace("__CLASS__", class_name)
        written.append(_write(target, Path(relative.format(name=name)), text))
    written.append(_write(target, Path("data/example.jsonl"), example_rows()))
    return written


def _write(target: Path, relative: Path, text: str) -> Path:
    path = target / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return relative


def example_rows() -> str:
    """Five addition tasks the template's rule can score (JSONL)."""
    lines = []
    for a, b in _EXAMPLE_SUMS:
        row = {
            "responses_create_params": {
                "input": [
                    {
                        "role": "system",
                        "content": "Use the add tool to add the two numbers, then answer with the sum.",
                    },
                    {"role": "user", "content": f"What is {a} + {b}?"},
                ],
                "tools": [_TOOL],
            },
            "expected_answer": a + b,
        }
        lines.append(json.dumps(row) + "\n")
    return "".join(lines)
