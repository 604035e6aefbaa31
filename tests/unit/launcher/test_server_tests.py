"""Finding server folders and checking example data (files in tmp_path; pytest runs are integration)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from ng_cli.errors import ConfigError, DataError, LaunchError
from ng_cli.launcher.server_tests import (
    SuiteResult,
    find_server_folders,
    has_tests,
    resolve_server_folder,
    run_suite,
    validate_example_data,
)

ROW = {"responses_create_params": {"input": "What is 2 + 2?"}, "expected_answer": "4"}


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NG_REPO_ROOT", str(tmp_path))
    for folder in (
        "resources_servers/math_env/tests",
        "resources_servers/plain_env",
        "responses_api_models/m",
    ):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "responses_api_models/m/test_m.py").write_text("")
    (tmp_path / "resources_servers/_private").mkdir()
    return tmp_path


def write_rows(folder: Path, lines: list[str]) -> Path:
    path = folder / "data" / "example.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def test_server_folders_with_tests(root: Path) -> None:
    assert find_server_folders(root) == [root / "responses_api_models/m", root / "resources_servers/math_env"]
    assert root / "resources_servers/plain_env" in find_server_folders(root, with_tests_only=False)
    assert not has_tests(root / "resources_servers/plain_env")


def test_entrypoint_resolves_from_cwd_or_repo_root(root: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    assert (
        resolve_server_folder("resources_servers/math_env/", cwd=elsewhere)
        == root / "resources_servers/math_env"
    )
    assert (
        resolve_server_folder("math_env", cwd=root / "resources_servers")
        == root / "resources_servers/math_env"
    )


@pytest.mark.usefixtures("root")
def test_a_server_folder_of_the_working_directory_is_accepted(tmp_path: Path) -> None:
    """Where ng_init_resources_server writes, run from another project's root."""
    project = tmp_path / "project"
    (project / "resources_servers" / "new_env" / "tests").mkdir(parents=True)
    assert (
        resolve_server_folder("resources_servers/new_env", cwd=project)
        == project / "resources_servers" / "new_env"
    )


@pytest.mark.parametrize("value", [None, "", 3])
def test_entrypoint_must_be_given(root: Path, value: object) -> None:
    with pytest.raises(ConfigError, match="entrypoint: expected a server folder"):
        resolve_server_folder(value, cwd=root)


def test_unknown_entrypoint_suggests_a_folder(root: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_server_folder("resources_servers/math_evn", cwd=root)
    assert caught.value.hint == "did you mean resources_servers/math_env?"


def test_valid_rows_are_counted(root: Path) -> None:
    folder = root / "resources_servers/math_env"
    write_rows(folder, [json.dumps(ROW), json.dumps({**ROW, "responses_create_params": {"input": []}})])

    assert validate_example_data(folder) == 2


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("", "empty line"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"input": "hi"}', "'responses_create_params' must be an object, it is missing"),
        ('{"responses_create_params": "hi"}', "'responses_create_params' must be an object, it is a str"),
        ('{"responses_create_params": {"tools": []}}', "'responses_create_params' has no 'input'"),
        (
            '{"responses_create_params": {"input": 5}}',
            "'responses_create_params.input' must be a string or a list, got int",
        ),
    ],
)
def test_each_bad_line_is_named(root: Path, line: str, problem: str) -> None:
    folder = root / "resources_servers/math_env"
    write_rows(folder, [json.dumps(ROW), line, json.dumps(ROW)])

    with pytest.raises(DataError) as caught:
        validate_example_data(folder)
    assert f"resources_servers/math_env/data/example.jsonl:2  {problem}" in caught.value.message
    assert ":1 " not in caught.value.message
    assert ":3 " not in caught.value.message


def test_long_lists_of_problems_are_cut(root: Path) -> None:
    folder = root / "resources_servers/math_env"
    write_rows(folder, ["{}"] * 25)

    with pytest.raises(DataError) as caught:
        validate_example_data(folder)
    assert caught.value.message.startswith("25 invalid line(s)")
    assert "example.jsonl:20 " in caught.value.message
    assert "example.jsonl:21 " not in caught.value.message
    assert "... and 5 more" in caught.value.message


def test_missing_or_empty_data_is_an_error(root: Path) -> None:
    folder = root / "resources_servers/math_env"
    with pytest.raises(DataError, match="no example data"):
        validate_example_data(folder)
    write_rows(folder, [])
    with pytest.raises(DataError, match="no rows"):
        validate_example_data(folder)


@pytest.mark.parametrize(
    ("code", "passed", "status"),
    [(0, True, "passed"), (5, True, "no tests collected"), (1, False, "failed (pytest exit code 1)")],
)
def test_suite_result_status(code: int, passed: bool, status: str) -> None:
    result = SuiteResult(Path("x"), code, 1.0)
    assert (result.passed, result.status) == (passed, status)


def test_an_environment_without_pytest_is_told_how_to_get_it(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pytest" else real_find_spec(name, *a)
    )
    with pytest.raises(LaunchError) as raised:
        run_suite(root / "responses_api_models/m")
    assert "does not have it" in raised.value.message
    assert "pip install -e '.[dev]'" in (raised.value.hint or "")
