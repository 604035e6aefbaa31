"""`nemo_gym.task_data`: a server's `task_data.py` schema loaded and its rows normalized, as
osworld's own tests use them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from ng_cli.nemo_gym_compat.api.task_data import (
    TaskDataSchemaError,
    load_task_data_schema,
    normalize_task_fields,
)

SCHEMA = """
from pydantic import BaseModel, ConfigDict

class TaskData(BaseModel):
    model_config = ConfigDict(extra="allow")
    question: str
    answer: int
"""


def _server(tmp_path: Path, source: str | None) -> Path:
    folder = tmp_path / "resources_servers" / "quiz"
    folder.mkdir(parents=True)
    if source is not None:
        (folder / "task_data.py").write_text(textwrap.dedent(source))
    return folder


def test_a_schema_validates_the_flat_fields_of_legacy_and_migrated_rows(tmp_path: Path) -> None:
    adapter = load_task_data_schema(_server(tmp_path, SCHEMA))
    assert adapter is not None
    for container in ("verifier_metadata", "task_data"):
        row = {"responses_create_params": {"input": "q"}, "_ng_task_index": 3, "question": "2+2?"}
        row[container] = {"answer": 4}
        fields, conflicts = normalize_task_fields(row)
        assert (fields, conflicts) == ({"question": "2+2?", "answer": 4}, [])
        assert adapter.validate_python(fields).answer == 4
    with pytest.raises(ValidationError):
        adapter.validate_python({"question": "2+2?"})


def test_a_key_given_twice_with_different_values_is_reported_and_the_top_level_kept() -> None:
    row = {"answer": 4, "verifier_metadata": {"answer": 5, "extra": 1}, "task_data": "not a dict"}
    assert normalize_task_fields(row) == ({"answer": 4, "extra": 1, "task_data": "not a dict"}, ["answer"])


def test_no_schema_file_is_none_and_a_broken_one_is_named(tmp_path: Path) -> None:
    assert load_task_data_schema(_server(tmp_path / "a", None)) is None
    with pytest.raises(TaskDataSchemaError, match=r"task_data\.py does not export `TaskData`"):
        load_task_data_schema(_server(tmp_path / "b", "X = 1\n"))
    with pytest.raises(TaskDataSchemaError, match=r"Failed to import .*task_data\.py: division by zero"):
        load_task_data_schema(_server(tmp_path / "c", "1 / 0\n"))
