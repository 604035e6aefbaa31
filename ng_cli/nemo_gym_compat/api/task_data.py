"""`nemo_gym.task_data`: a server's `task_data.py` schema (`TaskData`) loaded and applied to rows.

A NeMo Gym server may ship `task_data.py` beside its `app.py`, exporting `TaskData` (a pydantic
model, or a type `TypeAdapter` accepts) for the task-owned fields of its dataset rows, written
flat. Its own tests (osworld's) load it with `load_task_data_schema(folder)` and validate rows
after `normalize_task_fields(row)`, which drops the framework's keys and splices a legacy
`verifier_metadata` dict and a migrated `task_data` dict up to the top level. Both as NeMo Gym
0.7.0's; its whole-file validator (`TaskDataValidator`, data tooling) is not stood in for.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from ng_cli.nemo_gym_compat.api import _resolve_under_cwd_or_install

__all__ = [
    "LEGACY_METADATA_KEY",
    "RESERVED_ROW_KEYS",
    "TASK_DATA_EXPORT_NAME",
    "TASK_DATA_MODULE_NAME",
    "TASK_DATA_ROW_KEY",
    "TaskDataSchemaError",
    "find_server_dir",
    "load_task_data_schema",
    "normalize_task_fields",
]

TASK_DATA_MODULE_NAME = "task_data"
TASK_DATA_EXPORT_NAME = "TaskData"
LEGACY_METADATA_KEY = "verifier_metadata"
TASK_DATA_ROW_KEY = "task_data"
RESERVED_ROW_KEYS = frozenset(
    {"responses_create_params", "agent_ref", "task_source", "_ng_task_index", "_ng_rollout_index"}
)
"""The framework's row keys: never part of a server's `TaskData`."""


class TaskDataSchemaError(Exception):
    """A server's `task_data.py` exists but cannot be imported or exports no usable `TaskData`."""


def find_server_dir(server_name: str, base_folder: str = "resources_servers") -> Path | None:
    """`<base_folder>/<server_name>` under the working directory, else NeMo Gym's root; None if
    neither has it."""
    candidate = _resolve_under_cwd_or_install(Path(base_folder) / server_name)
    return candidate if candidate.is_dir() else None


def load_task_data_schema(server_dir: Path) -> TypeAdapter[Any] | None:
    """A `TypeAdapter` for `<server_dir>/task_data.py`'s `TaskData`; None when the file is absent.

    Raises `TaskDataSchemaError` naming the file when it cannot be imported or lacks `TaskData`."""
    module_path = Path(server_dir) / f"{TASK_DATA_MODULE_NAME}.py"
    if not module_path.is_file():
        return None
    module_name = f"nemo_gym_task_data.{Path(server_dir).name}"
    spec = importlib.util.spec_from_file_location(module_name, module_path)
    if spec is None or spec.loader is None:
        raise TaskDataSchemaError(f"Could not build an import spec for {module_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # before exec: dataclass/typing machinery looks it up
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        sys.modules.pop(module_name, None)
        raise TaskDataSchemaError(f"Failed to import {module_path}: {error}") from error
    task_data = getattr(module, TASK_DATA_EXPORT_NAME, None)
    if task_data is None:
        raise TaskDataSchemaError(
            f"{module_path} does not export `{TASK_DATA_EXPORT_NAME}`. Export a Pydantic model "
            "(or a TypeAdapter-compatible union alias) under that name."
        )
    try:
        return TypeAdapter(task_data)
    except Exception as error:
        raise TaskDataSchemaError(
            f"`{TASK_DATA_EXPORT_NAME}` in {module_path} is not TypeAdapter-compatible: {error}"
        ) from error


def normalize_task_fields(row: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The row's task-owned fields, flat, and the keys found twice with different values.

    A non-dict `verifier_metadata` / `task_data` is kept as it is, for the schema to refuse."""
    fields = {key: value for key, value in row.items() if key not in RESERVED_ROW_KEYS}
    conflicts: list[str] = []
    for container_key in (LEGACY_METADATA_KEY, TASK_DATA_ROW_KEY):
        container = fields.pop(container_key, None)
        if isinstance(container, dict):
            for key, value in container.items():
                if key in fields and fields[key] != value:
                    conflicts.append(key)
                    continue
                fields[key] = value
        elif container is not None:
            fields[container_key] = container
    return fields, conflicts
