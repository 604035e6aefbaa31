"""`ng_init_resources_server` writes into the working directory, as NeMo Gym does."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ng_cli.commands.init_resources_server import app
from ng_cli.config import paths


def test_writes_under_the_working_directory_not_the_repo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from another project's root, the environment lands there (NeMo Gym 0.7.0
    `init_resources_server`: `Path(entrypoint).resolve()`), never in this repo."""
    repo = tmp_path / "repo"
    (repo / "resources_servers").mkdir(parents=True)
    project = tmp_path / "other_project"
    project.mkdir()
    monkeypatch.setenv("NG_REPO_ROOT", str(repo))
    monkeypatch.setenv("NG_ENV_YAML", str(tmp_path / "none.yaml"))
    (tmp_path / "none.yaml").write_text("{}\n")
    monkeypatch.chdir(project)
    result = CliRunner().invoke(app, ["+entrypoint=resources_servers/my_env"])
    assert result.exit_code == 0, result.output
    assert (project / "resources_servers" / "my_env" / "app.py").is_file()
    assert list((repo / "resources_servers").iterdir()) == []
    assert "next: ng_test +entrypoint=resources_servers/my_env" in result.output
    # ... and the stack finds it from there: the repo's implementations first, then the cwd's.
    assert paths.implementation_dir("resources_servers", "my_env") == project / "resources_servers" / "my_env"
    (repo / "resources_servers" / "my_env").mkdir()
    assert paths.implementation_dir("resources_servers", "my_env") == repo / "resources_servers" / "my_env"
