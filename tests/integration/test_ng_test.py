"""`ng_test` and `ng_test_all` against a throw-away repo tree with passing and failing suites.

The tree is written per test (never under tests/, so the main run cannot collect its tests).
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from ng_cli.launcher.server_tests import TIMED_OUT, run_suite
from tests.fixtures.stack.harness import run_script

pytestmark = pytest.mark.integration

GOOD_ROW = '{"responses_create_params": {"input": [{"role": "user", "content": "hi"}]}, "expected": 1}'


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write(root / "resources_servers/good_env/tests/test_good.py", "def test_ok():\n    assert 1 + 1 == 2\n")
    write(root / "resources_servers/good_env/data/example.jsonl", f"{GOOD_ROW}\n{GOOD_ROW}\n")
    write(root / "resources_servers/bad_env/tests/test_bad.py", "def test_broken():\n    assert 1 == 2\n")
    write(root / "resources_servers/bad_data_env/test_here.py", "def test_ok():\n    pass\n")
    write(
        root / "resources_servers/bad_data_env/data/example.jsonl",
        f'{GOOD_ROW}\n{{"responses_create_params": \n{{"responses_create_params": [1]}}\n'
        '{"responses_create_params": {"tools": []}}\n',
    )
    write(root / "responses_api_models/empty_model/tests/helpers.py", "VALUE = 1\n")
    write(root / "responses_api_agents/untested_agent/app.py", "\n")
    return root


def test_passing_suite_exits_0(repo: Path) -> None:
    result = run_script("ng_test", "+entrypoint=resources_servers/good_env", root=repo)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_failing_suite_exits_with_pytests_code(repo: Path) -> None:
    result = run_script("ng_test", "+entrypoint=resources_servers/bad_env/", root=repo)

    assert result.returncode == 1
    assert "test_broken" in result.stdout
    assert "1 failed" in result.stdout


def test_valid_example_data_is_counted(repo: Path) -> None:
    result = run_script(
        "ng_test", "+entrypoint=resources_servers/good_env", "+should_validate_data=true", root=repo
    )

    assert result.returncode == 0
    assert "example data: 2 valid rows" in result.stderr


def test_invalid_example_data_names_every_bad_line(repo: Path) -> None:
    result = run_script(
        "ng_test", "+entrypoint=resources_servers/bad_data_env", "+should_validate_data=true", root=repo
    )

    assert result.returncode == 2
    assert "1 passed" in result.stdout  # the tests still ran
    assert "3 invalid line(s) in resources_servers/bad_data_env/data/example.jsonl" in result.stderr
    assert "example.jsonl:2  not valid JSON" in result.stderr
    assert "example.jsonl:3  'responses_create_params' must be an object, it is a list" in result.stderr
    assert "example.jsonl:4  'responses_create_params' has no 'input'" in result.stderr
    assert "example.jsonl:1 " not in result.stderr


def test_unknown_folder_suggests_the_closest(repo: Path) -> None:
    result = run_script("ng_test", "+entrypoint=resources_servers/good_en", root=repo)

    assert result.returncode == 2
    assert "no folder 'resources_servers/good_en'" in result.stderr
    assert "did you mean resources_servers/good_env?" in result.stderr


def test_ng_test_all_runs_every_folder_with_tests(repo: Path) -> None:
    result = run_script("ng_test_all", root=repo)

    assert result.returncode == 1
    rows = {
        line.split()[1]: line
        for line in result.stdout.splitlines()
        if "_servers/" in line or "_models/" in line
    }
    assert "passed" in rows["resources_servers/good_env"]
    assert "passed" in rows["resources_servers/bad_data_env"]
    assert "failed (pytest exit code 1)" in rows["resources_servers/bad_env"]
    assert "no tests collected" in rows["responses_api_models/empty_model"]
    assert "untested_agent" not in result.stdout
    assert "assert 1 == 2" in result.stdout  # the failed suite's output is shown


def test_ng_test_all_passes_when_every_suite_passes(repo: Path) -> None:
    (repo / "resources_servers/bad_env/tests/test_bad.py").write_text("def test_fixed():\n    pass\n")

    result = run_script("ng_test_all", root=repo)

    assert result.returncode == 0, result.stdout
    assert "failed" not in result.stdout


def test_a_suite_runs_with_the_interpreter_it_is_given(repo: Path, tmp_path: Path) -> None:
    """The NeMo Gym harness runs a server's tests in the server's own environment."""
    marker = tmp_path / "used"
    python = tmp_path / "python"
    write(
        python,
        f"""
        #!/bin/sh
        echo "$@" > {marker}
        exec {sys.executable} "$@"
    """,
    )
    python.chmod(0o755)

    result = run_suite(repo / "resources_servers/good_env", capture=True, python=str(python))

    assert result.status == "passed", result.output_tail
    assert marker.read_text().startswith("-m pytest ")


def test_a_suite_past_its_time_limit_is_stopped_and_says_so(repo: Path) -> None:
    write(
        repo / "resources_servers/stuck_env/tests/test_stuck.py",
        "import threading\n\ndef test_waits_forever():\n    threading.Event().wait()\n",
    )

    result = run_suite(repo / "resources_servers/stuck_env", capture=True, timeout_s=5)

    assert (result.exit_code, result.status, result.passed) == (TIMED_OUT, "timed out", False)
    assert result.output_tail[-1] == "stopped after 5 s"
