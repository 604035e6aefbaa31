"""`ng_dump_config` through Typer's CliRunner: output, masking, --sources, exit codes."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from ng_cli.commands.dump_config import app, main
from ng_cli.errors import ConfigError

FIXTURE_REPO = Path(__file__).resolve().parents[2] / "fixtures" / "config" / "repo"
CLI_SECRET = "sk-cli-SECRET-0002"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE_REPO, root)
    monkeypatch.setenv("NG_REPO_ROOT", str(root))
    monkeypatch.setenv("NG_ENV_YAML", str(root / "env.test.yaml"))
    monkeypatch.chdir(tmp_path)
    return root


def _env_secret(repo: Path) -> str:
    value = yaml.safe_load((repo / "env.test.yaml").read_text())["policy_api_key"]
    assert isinstance(value, str)
    return value


def test_prints_the_tree_with_no_secret_value(repo: Path) -> None:
    result = CliRunner().invoke(
        app, ["-c", "conf/agent.yaml", f"++policy_model.responses_api_models.vllm_model.api_key={CLI_SECRET}"]
    )
    assert result.exit_code == 0, result.output
    assert _env_secret(repo) not in result.output
    assert CLI_SECRET not in result.output
    tree = yaml.safe_load(result.stdout)
    assert tree["policy_model"]["responses_api_models"]["vllm_model"]["api_key"] == "***"
    assert tree["config_paths"] == ["conf/model.yaml", "conf/echo.yaml", "conf/agent.yaml"]


@pytest.mark.usefixtures("repo")
def test_config_option_joins_typed_config_paths() -> None:
    result = CliRunner().invoke(app, ["+config_paths=[conf/echo.yaml]", "-c", "conf/overlay.yaml"])
    assert result.exit_code == 0, result.output
    tree = yaml.safe_load(result.stdout)
    assert tree["echo"]["resources_servers"]["echo_env"]["greeting"] == "hello from overlay.yaml"


@pytest.mark.usefixtures("repo")
@pytest.mark.parametrize("flag", ["--sources", "+show_sources=true"])
def test_sources_annotate_instances(flag: str) -> None:
    result = CliRunner().invoke(app, ["-c", "conf/agent.yaml", flag])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[lines.index("echo_agent:") - 1] == "# from: conf/agent.yaml:2"
    assert lines[lines.index("policy_model:") - 1] == "# from: conf/model.yaml:2"


@pytest.mark.usefixtures("repo")
def test_config_error_exits_2_without_traceback() -> None:
    result = CliRunner().invoke(
        app, ["-c", "conf/agent.yaml", "echo_agent.responses_api_agents.simple_agent.entrypont=x"]
    )
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: <command line>  cannot override")
    assert "\nhint: did you mean" in result.stderr
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.usefixtures("repo")
@pytest.mark.parametrize("flag", ["+verbose=true", "--verbose"])
def test_verbose_keeps_the_traceback(flag: str) -> None:
    result = CliRunner().invoke(app, ["-c", "conf/nope.yaml", flag])
    assert isinstance(result.exception, ConfigError)
    assert result.exc_info is not None
    assert result.exc_info[2] is not None
    assert result.exit_code == 1


@pytest.mark.usefixtures("repo")
def test_help_lists_options_and_config_keys() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for text in ("--config", "-c", "--sources", "--verbose", "config_paths", "show_sources", "dotenv_path"):
        assert text in result.stdout


@pytest.mark.usefixtures("repo")
def test_main_is_the_console_script(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["ng_dump_config", "-c", "conf/model.yaml"])
    with pytest.raises(SystemExit) as caught:
        main()
    assert caught.value.code == 0
    assert "policy_model:" in capsys.readouterr().out
