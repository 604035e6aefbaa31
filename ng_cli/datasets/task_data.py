"""A resources server's `task_data.py` (NeMo Gym's per-server row schema) as JSON Schema.

NeMo Gym 0.7.0 (`nemo_gym/task_data.py` `load_task_data_schema`, shown by `gym env schema`): a
server folder may ship `task_data.py` exporting `TaskData`, a pydantic model or any type
`pydantic.TypeAdapter` accepts, describing the task-owned fields of its dataset rows. It imports
only the standard library, pydantic and other servers' `task_data` modules
(`from resources_servers.<other>.task_data import ...`), so it loads without the server's
requirements; the roots are put on `sys.path` while it loads, as NeMo Gym's are.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from ng_cli.errors import NgError

__all__ = ["server_folder", "task_data_schema"]


def server_folder(entrypoint: str, roots: list[Path]) -> Path:
    """`resources_servers/<name>` under the first root where it is a server folder (an `app.py`,
    `requirements.txt` or `pyproject.toml` in it); else under the first root (for the message)."""
    path = Path(entrypoint)
    if path.is_absolute():
        return path
    markers = ("app.py", "requirements.txt", "pyproject.toml")
    found = (root / path for root in roots if any((root / path / marker).is_file() for marker in markers))
    return next(found, roots[0] / path)


def task_data_schema(folder: Path, roots: list[Path]) -> dict[str, Any] | None:
    """`TaskData`'s JSON Schema; None when the folder has no `task_data.py`; NgError (exit 1) when it
    does not load or export a usable `TaskData`."""
    module_path = folder / "task_data.py"
    if not module_path.is_file():
        return None
    module_name = f"nemo_gym_task_data.{folder.name}"
    spec = importlib.util.spec_from_file_location(module_name, module_path)
    if spec is None or spec.loader is None:
        raise NgError(f"Could not build an import spec for {module_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    added = [str(root) for root in roots if str(root) not in sys.path]
    sys.path[:0] = added
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        sys.modules.pop(module_name, None)
        raise NgError(f"Failed to import {module_path}: {error}") from error
    finally:
        for entry in added:
            sys.path.remove(entry)
    task_data = getattr(module, "TaskData", None)
    if task_data is None:
        raise NgError(
            f"{module_path} does not export `TaskData`. Export a Pydantic model "
            "(or a TypeAdapter-compatible union alias) under that name."
        )
    try:
        schema: dict[str, Any] = TypeAdapter(task_data).json_schema()
    except Exception as error:
        raise NgError(f"`TaskData` in {module_path} is not TypeAdapter-compatible: {error}") from error
    return schema
