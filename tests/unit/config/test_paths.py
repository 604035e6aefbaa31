"""Repo root, env.yaml location, implementation folders, config file lookup."""

from __future__ import annotations

from pathlib import Path

import pytest

from ng_cli.config import paths
from ng_cli.errors import ConfigError


def test_default_repo_root_holds_pyproject_and_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NG_REPO_ROOT", raising=False)
    root = paths.repo_root()
    assert (root / "pyproject.toml").is_file()
    assert (root / "ng_cli" / "config" / "paths.py").is_file()


def test_repo_root_and_env_yaml_follow_the_environment(
    repo: Path, cwd: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert paths.repo_root() == repo.resolve()
    assert paths.env_yaml_path(cwd) == ((repo / "env.test.yaml").resolve(), True)
    monkeypatch.delenv("NG_ENV_YAML")
    (repo / "env.yaml").write_text("a: 1\n")
    assert paths.env_yaml_path(cwd) == (repo.resolve() / "env.yaml", False)


def test_env_yaml_in_the_working_directory_comes_first(
    repo: Path, cwd: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NeMo Gym reads env.yaml from the cwd before its install root (0.7.0 `_resolve_under_cwd_or_install`)."""
    monkeypatch.delenv("NG_ENV_YAML")
    (repo / "env.yaml").write_text("a: 1\n")
    (cwd / "env.yaml").write_text("a: 2\n")
    assert paths.env_yaml_path(cwd) == (cwd.resolve() / "env.yaml", False)
    (cwd / "env.yaml").unlink()
    (repo / "env.yaml").unlink()
    assert paths.env_yaml_path(cwd) == (cwd.resolve() / "env.yaml", False)  # where to put one


def test_available_implementations_skip_hidden_and_private_folders(repo: Path) -> None:
    (repo / "resources_servers" / "__pycache__").mkdir()
    (repo / "resources_servers" / ".hidden").mkdir()
    (repo / "resources_servers" / "notes.txt").write_text("x")
    assert paths.available_implementations("resources_servers") == ["echo_env", "math_env"]
    assert paths.available_implementations("no_such_type") == []
    assert (
        paths.implementation_dir("resources_servers", "echo_env")
        == repo.resolve() / "resources_servers/echo_env"
    )


def test_resolve_config_path_prefers_the_cwd(repo: Path, cwd: Path) -> None:
    (cwd / "conf").mkdir()
    (cwd / "conf" / "model.yaml").write_text("a: 1\n")
    assert paths.resolve_config_path("conf/model.yaml", cwd=cwd) == (cwd / "conf/model.yaml").resolve()
    assert paths.resolve_config_path("conf/echo.yaml", cwd=cwd) == (repo / "conf/echo.yaml").resolve()


@pytest.mark.usefixtures("repo")
def test_missing_absolute_path_lists_only_itself(cwd: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        paths.resolve_config_path("/nonexistent/x.yaml", cwd=cwd, listed_in="conf/a.yaml:3")
    assert (
        str(caught.value)
        == "config file not found: /nonexistent/x.yaml (listed in conf/a.yaml:3); tried:\n  /nonexistent/x.yaml"
    )


def test_display_path(repo: Path, tmp_path: Path) -> None:
    assert paths.display_path(repo / "conf" / "a.yaml") == "conf/a.yaml"
    assert paths.display_path(tmp_path / "x.yaml") == str(tmp_path / "x.yaml")
