"""`install_requirements` is ng_run's option: a boolean by the one rule, known to the typo check."""

from __future__ import annotations

from pathlib import Path

import pytest

from ng_cli.config.command_options import command_options
from ng_cli.config.compose import compose_config
from ng_cli.config.run_options import RunOptions
from ng_cli.errors import ConfigError
from ng_cli.packages.environment import PIP_TIMEOUT_S

pytestmark = pytest.mark.usefixtures("empty_env_yaml")


def _options(tmp_path: Path, *overrides: str) -> RunOptions:
    return command_options(compose_config(list(overrides), cwd=tmp_path), RunOptions, command="ng_run")


def test_the_option_is_a_boolean(tmp_path: Path) -> None:
    assert _options(tmp_path).install_requirements is False
    assert _options(tmp_path, "+install_requirements=true").install_requirements is True
    assert _options(tmp_path, "+install_requirements=yes").install_requirements is True
    with pytest.raises(ConfigError, match="install_requirements"):
        _options(tmp_path, "+install_requirements=maybe")


def test_ng_run_suggests_the_option_for_a_typo(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"did you mean \+install_requirements"):
        _options(tmp_path, "+install_requirement=true")


def test_the_pip_step_has_a_time_bound_option(tmp_path: Path) -> None:
    assert _options(tmp_path).install_requirements_timeout_s == PIP_TIMEOUT_S  # the step's own default
    assert _options(tmp_path, "+install_requirements_timeout_s=90").install_requirements_timeout_s == 90
    for bad in ("0", "-5", "soon"):
        with pytest.raises(ConfigError, match="install_requirements_timeout_s"):
            _options(tmp_path, f"+install_requirements_timeout_s={bad}")
