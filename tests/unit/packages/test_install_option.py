"""`install_requirements` is ng_run's option: a boolean, known to the typo check."""

from __future__ import annotations

from pathlib import Path

import pytest

from ng_cli.config.compose import compose_config
from ng_cli.config.toplevel import check_top_level_keys
from ng_cli.errors import ConfigError
from ng_cli.launcher.packages import install_option
from ng_cli.launcher.supervise import RUN_OPTIONS


@pytest.fixture(autouse=True)
def _no_env_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "env.yaml").write_text("{}\n")
    monkeypatch.setenv("NG_ENV_YAML", str(tmp_path / "env.yaml"))


def test_the_option_is_a_boolean(tmp_path: Path) -> None:
    assert install_option(compose_config([], cwd=tmp_path)) is False
    assert install_option(compose_config(["+install_requirements=true"], cwd=tmp_path)) is True
    with pytest.raises(ConfigError, match="install_requirements: expected true or false, got 'yes'"):
        install_option(compose_config(["+install_requirements=yes"], cwd=tmp_path))


def test_ng_run_knows_the_option_and_suggests_it_for_a_typo(tmp_path: Path) -> None:
    check_top_level_keys(
        compose_config(["+install_requirements=true"], cwd=tmp_path), RUN_OPTIONS, command="ng_run"
    )
    with pytest.raises(ConfigError, match="did you mean 'install_requirements'"):
        check_top_level_keys(
            compose_config(["+install_requirement=true"], cwd=tmp_path), RUN_OPTIONS, command="ng_run"
        )
