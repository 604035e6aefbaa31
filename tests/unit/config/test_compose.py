"""compose_config: merge order, includes, path resolution, interpolation, and its error messages."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from ng_cli.config.compose import compose_config
from ng_cli.config.sources import COMMAND_LINE
from ng_cli.errors import ConfigError

WriteFile = Callable[[Path, str], Path]
ECHO_GREETING = "echo.resources_servers.echo_env.greeting"


def _line_of(path: Path, needle: str) -> int:
    """1-based line of the first line containing `needle` (so tests don't hard-code lines)."""
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        if needle in text:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


# -- merge order -------------------------------------------------------------------------------


def test_later_file_overrides_earlier_file(repo: Path, cwd: Path) -> None:
    config = compose_config(["+config_paths=[conf/echo.yaml,conf/overlay.yaml]"], cwd=cwd)
    assert config.get(ECHO_GREETING) == "hello from overlay.yaml"
    assert (
        config.sources[ECHO_GREETING]
        == f"conf/overlay.yaml:{_line_of(repo / 'conf/overlay.yaml', 'greeting')}"
    )


def test_env_yaml_overrides_files(repo: Path, cwd: Path) -> None:
    config = compose_config(["+config_paths=[conf/echo.yaml,conf/overlay.yaml]"], cwd=cwd)
    env_value = yaml.safe_load((repo / "env.test.yaml").read_text())["policy_model_name"]
    assert config.get("policy_model_name") == env_value
    assert config.get("policy_model.responses_api_models.vllm_model.model") == env_value
    assert config.sources["policy_model_name"].startswith("env.test.yaml:")


@pytest.mark.usefixtures("repo")
def test_command_line_overrides_env_yaml_and_files(cwd: Path) -> None:
    config = compose_config(
        [
            "+config_paths=[conf/echo.yaml,conf/overlay.yaml]",
            "+policy_model_name=cli-model",
            f"{ECHO_GREETING}=cli",
        ],
        cwd=cwd,
    )
    assert config.get("policy_model_name") == "cli-model"
    assert config.get("policy_model.responses_api_models.vllm_model.model") == "cli-model"
    assert config.get(ECHO_GREETING) == "cli"
    assert config.sources["policy_model_name"] == COMMAND_LINE
    assert config.sources.origins("policy_model_name")[0].startswith("conf/overlay.yaml:")


@pytest.mark.usefixtures("repo")
def test_command_line_wins_whatever_its_position(cwd: Path) -> None:
    config = compose_config(["+policy_model_name=first", "+config_paths=[conf/model.yaml]"], cwd=cwd)
    assert config.get("policy_model_name") == "first"


# -- includes ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("repo")
def test_includes_merge_depth_first_before_the_including_file(cwd: Path) -> None:
    config = compose_config(["+config_paths=[conf/agent.yaml]"], cwd=cwd)
    assert config.get("config_paths") == ["conf/model.yaml", "conf/echo.yaml", "conf/agent.yaml"]
    assert list(config.instances) == ["policy_model", "echo", "echo_agent"]


@pytest.mark.usefixtures("repo")
def test_a_file_listed_twice_is_read_once(cwd: Path) -> None:
    config = compose_config(["+config_paths=[conf/model.yaml,conf/agent.yaml,./conf/model.yaml]"], cwd=cwd)
    assert config.get("config_paths").count("conf/model.yaml") == 1


def test_a_later_duplicate_does_not_reapply_over_files_in_between(
    repo: Path, cwd: Path, write: WriteFile
) -> None:
    write(repo / "conf/again.yaml", "config_paths: [conf/echo.yaml]\n")
    config = compose_config(["+config_paths=[conf/echo.yaml,conf/overlay.yaml,conf/again.yaml]"], cwd=cwd)
    assert config.get(ECHO_GREETING) == "hello from overlay.yaml"


@pytest.mark.usefixtures("repo")
def test_include_cycles_terminate(cwd: Path) -> None:
    config = compose_config(["+config_paths=[conf/cycle_a.yaml]"], cwd=cwd)
    assert (config.get("from_a"), config.get("from_b")) == ("a", "b")
    assert config.get("config_paths") == ["conf/cycle_b.yaml", "conf/cycle_a.yaml"]


def test_config_paths_come_from_env_yaml_when_the_command_line_has_none(
    repo: Path, cwd: Path, write: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = write(repo / "env.paths.yaml", "config_paths: [conf/echo.yaml]\npolicy_api_key: k\n")
    monkeypatch.setenv("NG_ENV_YAML", str(env))
    config = compose_config(["+policy_base_url=u", "+policy_model_name=m"], cwd=cwd)
    assert set(config.instances) == {"policy_model", "echo"}
    assert compose_config(["+config_paths=[conf/cycle_a.yaml]"], cwd=cwd).instances == {}


@pytest.mark.usefixtures("repo")
def test_command_line_config_paths_overrides_are_concatenated(cwd: Path) -> None:
    config = compose_config(["+config_paths=[conf/echo.yaml]", "+config_paths=[conf/overlay.yaml]"], cwd=cwd)
    assert config.get(ECHO_GREETING) == "hello from overlay.yaml"


@pytest.mark.usefixtures("repo")
def test_comma_separated_config_paths_are_accepted(cwd: Path) -> None:
    config = compose_config(["+config_paths=conf/echo.yaml,conf/overlay.yaml"], cwd=cwd)
    assert config.get(ECHO_GREETING) == "hello from overlay.yaml"


# -- path resolution -----------------------------------------------------------------------------


@pytest.mark.usefixtures("repo")
def test_paths_resolve_against_the_cwd_before_the_repo_root(cwd: Path, write: WriteFile) -> None:
    write(cwd / "conf/overlay.yaml", "policy_model_name: from-cwd\nfrom_cwd: true\n")
    config = compose_config(["+config_paths=[conf/overlay.yaml]"], cwd=cwd)
    assert config.get("from_cwd") is True
    assert config.get(ECHO_GREETING) is None


@pytest.mark.usefixtures("repo")
def test_paths_fall_back_to_the_repo_root(cwd: Path) -> None:
    config = compose_config(["+config_paths=[conf/echo.yaml,conf/overlay.yaml]"], cwd=cwd)
    assert config.get(ECHO_GREETING) == "hello from overlay.yaml"


@pytest.mark.usefixtures("repo")
def test_absolute_paths_are_used_as_given(cwd: Path, write: WriteFile, tmp_path: Path) -> None:
    outside = write(tmp_path / "elsewhere" / "x.yaml", "marker: outside\n")
    config = compose_config([f"+config_paths=[{outside}]"], cwd=cwd)
    assert config.get("marker") == "outside"
    assert config.get("config_paths") == [str(outside)]


def test_missing_file_lists_both_places_tried(repo: Path, cwd: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        compose_config(["+config_paths=[conf/nope.yaml]"], cwd=cwd)
    message = str(caught.value)
    assert "config file not found: conf/nope.yaml" in message
    assert str(cwd / "conf/nope.yaml") in message
    assert str(repo / "conf/nope.yaml") in message


def test_missing_include_names_the_including_file_and_line(repo: Path, cwd: Path, write: WriteFile) -> None:
    parent = write(
        repo / "conf/parent.yaml", "a: 1\nconfig_paths:\n  - conf/model.yaml\n  - conf/gone.yaml\n"
    )
    with pytest.raises(ConfigError, match=r"listed in conf/parent\.yaml:4"):
        compose_config(["+config_paths=[conf/parent.yaml]"], cwd=cwd)
    assert _line_of(parent, "gone") == 4


# -- env.yaml ----------------------------------------------------------------------------------


def test_env_yaml_at_the_repo_root_is_the_default(
    repo: Path, cwd: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NG_ENV_YAML")
    (repo / "env.test.yaml").rename(repo / "env.yaml")
    config = compose_config(["+config_paths=[conf/model.yaml]"], cwd=cwd)
    assert config.sources["policy_api_key"].startswith("env.yaml:")


def test_env_yaml_in_the_working_directory_wins_over_the_repo_root(
    repo: Path, cwd: Path, write: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A project run from its own root reads its env.yaml, as NeMo Gym does (cwd first)."""
    monkeypatch.delenv("NG_ENV_YAML")
    (repo / "env.test.yaml").rename(repo / "env.yaml")
    write(
        cwd / "env.yaml", "policy_model_name: from-cwd\npolicy_api_key: k\npolicy_base_url: http://h:1/v1\n"
    )
    config = compose_config(["+config_paths=[conf/model.yaml]"], cwd=cwd)
    assert config.get("policy_model_name") == "from-cwd"
    assert config.sources["policy_model_name"] == f"{cwd / 'env.yaml'}:1"


@pytest.mark.usefixtures("repo")
def test_no_env_yaml_is_fine_when_nothing_needs_it(cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NG_ENV_YAML")
    assert compose_config(["+config_paths=[conf/cycle_a.yaml]"], cwd=cwd).get("policy_api_key") is None


def test_an_explicit_env_yaml_must_exist(repo: Path, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NG_ENV_YAML", str(repo / "missing.yaml"))
    with pytest.raises(ConfigError, match="NG_ENV_YAML points at"):
        compose_config([], cwd=cwd)


@pytest.mark.usefixtures("repo")
def test_dotenv_path_override_selects_another_env_file(cwd: Path, write: WriteFile) -> None:
    write(cwd / "env.dev.yaml", "policy_model_name: dev-model\npolicy_api_key: k\npolicy_base_url: u\n")
    config = compose_config(["+config_paths=[conf/model.yaml]", "+dotenv_path=env.dev.yaml"], cwd=cwd)
    assert config.get("policy_model_name") == "dev-model"
    assert "dotenv_path" not in config.tree


# -- interpolation ---------------------------------------------------------------------------------


@pytest.mark.usefixtures("repo")
def test_interpolations_resolve_against_the_root(cwd: Path) -> None:
    config = compose_config(["+config_paths=[conf/model.yaml]", "++policy_base_url=http://h:1/v1"], cwd=cwd)
    assert config.get("policy_model.responses_api_models.vllm_model.base_url") == "http://h:1/v1"


@pytest.mark.usefixtures("repo")
def test_command_line_values_may_interpolate(cwd: Path) -> None:
    config = compose_config(["+config_paths=[conf/model.yaml]", "+copy=${policy_model_name}-x"], cwd=cwd)
    assert config.get("copy") == f"{config.get('policy_model_name')}-x"


def test_missing_root_key_points_to_env_yaml_and_the_command_line(
    repo: Path, cwd: Path, write: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = write(repo / "env.partial.yaml", "policy_base_url: u\npolicy_model_name: m\n")
    monkeypatch.setenv("NG_ENV_YAML", str(env))
    with pytest.raises(ConfigError) as caught:
        compose_config(["+config_paths=[conf/model.yaml]"], cwd=cwd)
    line = _line_of(repo / "conf/model.yaml", "api_key")
    assert str(caught.value) == (
        f"conf/model.yaml:{line}  policy_model.responses_api_models.vllm_model.api_key: "
        "${policy_api_key} cannot be resolved: 'policy_api_key' is not set"
    )
    assert caught.value.hint is not None
    assert f"policy_api_key: expected in env.yaml ({env})" in caught.value.hint
    assert "++policy_api_key=..." in caught.value.hint


@pytest.mark.usefixtures("repo")
def test_all_unresolvable_values_are_reported_together(cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NG_ENV_YAML")
    with pytest.raises(ConfigError) as caught:
        compose_config(["+config_paths=[conf/model.yaml]"], cwd=cwd)
    message = str(caught.value)
    assert message.startswith("3 config values cannot be resolved:")
    for name in ("policy_base_url", "policy_api_key", "policy_model_name"):
        assert f"'{name}' is not set" in message
        assert f"++{name}=..." in (caught.value.hint or "")
    assert f"expected in env.yaml ({cwd.resolve() / 'env.yaml'})" in (caught.value.hint or "")


def test_failing_resolver_names_key_and_file(repo: Path, cwd: Path, write: WriteFile) -> None:
    write(repo / "conf/envvar.yaml", "deep:\n  token_file: ${oc.env:NG_TEST_SURELY_UNSET_VAR}\n")
    with pytest.raises(
        ConfigError, match=r"conf/envvar\.yaml:2  deep\.token_file: .*NG_TEST_SURELY_UNSET_VAR"
    ):
        compose_config(["+config_paths=[conf/envvar.yaml]"], cwd=cwd)


def test_malformed_interpolation_names_file_line_and_key(repo: Path, cwd: Path, write: WriteFile) -> None:
    write(repo / "conf/broken.yaml", "ok: 1\nouter:\n  bad: ${unclosed\n")
    with pytest.raises(ConfigError, match=r"conf/broken\.yaml:3  outer\.bad: "):
        compose_config(["+config_paths=[conf/broken.yaml]"], cwd=cwd)


def test_unset_value_names_key_instance_and_file(repo: Path, cwd: Path, write: WriteFile) -> None:
    path = write(
        repo / "conf/needs.yaml",
        """
        judge:
          resources_servers:
            math_env:
              entrypoint: app.py
              judge_model: ???
        """,
    )
    with pytest.raises(ConfigError) as caught:
        compose_config(["+config_paths=[conf/needs.yaml]"], cwd=cwd)
    line = _line_of(path, "judge_model")
    message = str(caught.value)
    assert message.startswith(f"conf/needs.yaml:{line}  judge.resources_servers.math_env.judge_model:")
    assert "in instance 'judge' (resources_servers/math_env)" in message
    assert "++judge.resources_servers.math_env.judge_model=..." in (caught.value.hint or "")
    compose_config(
        ["+config_paths=[conf/needs.yaml]", "judge.resources_servers.math_env.judge_model=m"], cwd=cwd
    )


# -- YAML errors ---------------------------------------------------------------------------------


def test_yaml_syntax_error_names_file_line_and_column(repo: Path, cwd: Path, write: WriteFile) -> None:
    path = write(repo / "conf/syntax.yaml", "a: 1\nb:\n  c: d: e\n")
    with pytest.raises(ConfigError) as caught:
        compose_config(["+config_paths=[conf/syntax.yaml]"], cwd=cwd)
    column = path.read_text().splitlines()[2].index("d:") + len("d")  # PyYAML marks the second ':'
    assert str(caught.value).startswith(f"conf/syntax.yaml:3:{column + 1}  YAML syntax error: ")
    assert "mapping values are not allowed here" in str(caught.value)


@pytest.mark.usefixtures("repo")
def test_tree_get_handles_lists_and_absent_keys(cwd: Path) -> None:
    config = compose_config(["+config_paths=[conf/agent.yaml]"], cwd=cwd)
    datasets = "echo_agent.responses_api_agents.simple_agent.datasets"
    assert config.get(f"{datasets}.0.type") == "example"
    assert config.get(f"{datasets}.5.type", "absent") == "absent"
    assert config.get("nope.deeper", 3) == 3


@pytest.mark.usefixtures("repo")
def test_omegaconf_scalar_rules_apply(cwd: Path) -> None:
    config = compose_config(["+config_paths=[conf/echo.yaml]"], cwd=cwd)
    assert config.get("echo.resources_servers.echo_env.learning_rate") == pytest.approx(1e-6)
    assert config.get("echo.resources_servers.echo_env.released") == "2024-01-01"


@pytest.mark.usefixtures("repo")
def test_sources_of_deleted_keys_are_dropped(cwd: Path) -> None:
    config = compose_config(["+config_paths=[conf/echo.yaml]", f"~{ECHO_GREETING}"], cwd=cwd)
    assert ECHO_GREETING not in config.sources
    assert config.get(ECHO_GREETING) is None


@pytest.mark.usefixtures("repo")
def test_result_is_plain_and_frozen(cwd: Path) -> None:
    config = compose_config(["+config_paths=[conf/agent.yaml]"], cwd=cwd)
    assert type(config.tree["echo"]) is dict
    with pytest.raises(AttributeError):
        config.tree = {}  # type: ignore[misc]
    yaml.safe_dump(config.tree)  # only plain types
