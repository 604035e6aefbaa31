"""The pytest plugin `ng_test` loads for a NeMo Gym server folder, run as ng_test runs it."""

from __future__ import annotations

import textwrap
from pathlib import Path

from ng_cli.launcher.server_tests import run_suite

CHILD_TEST = """
import subprocess
import sys


def test_an_interpreter_the_test_starts_imports_the_servers_modules():
    done = subprocess.run(
        [sys.executable, "-c", "from resources_servers.quiz.helper import VALUE; print(VALUE)"],
        capture_output=True, text=True, check=False,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "42"), done.stderr
"""


def test_child_interpreters_find_nemo_gyms_root_as_an_installed_nemo_gym_gives_them(tmp_path: Path) -> None:
    """Ray's workers unpickle a server's remote tasks by module name (spider2_lite)."""
    folder = tmp_path / "resources_servers" / "quiz"
    (folder / "tests").mkdir(parents=True)
    (tmp_path / "resources_servers" / "__init__.py").write_text("")
    (folder / "__init__.py").write_text("")
    (folder / "helper.py").write_text("VALUE = 42\n")
    (folder / "app.py").write_text("from nemo_gym.base_resources_server import SimpleResourcesServer\n")
    (folder / "tests" / "test_child.py").write_text(textwrap.dedent(CHILD_TEST))

    result = run_suite(folder, pytest_args=["-q", "-p", "no:cacheprovider"], capture=True)

    assert result.status == "passed", "\n".join(result.output_tail)
