"""Every console script reads its `+key` options through one seam (`config.command_options`).

Over every script in pyproject.toml: its module declares its options as one pydantic model
(`OPTIONS`); an unknown `+key` exits 2 naming the command, with the nearest option for a near
typo; NeMo Gym options we do not implement are refused with the reason; booleans mean the same
in every model (`+dry_run=yes` is `+dry_run=true`); the checks come before any work.
"""

from __future__ import annotations

import importlib
import typing
from pathlib import Path
from typing import Any

import pytest
import typer
from pydantic import BaseModel, TypeAdapter, ValidationError
from typer.testing import CliRunner

from ng_cli.config.command_options import CommonOptions, option_names
from tests.fixtures.commands import (
    NOT_OFFERED_MODULE,
    SCRIPTS,
    UMBRELLA_MODULE,
    command_modules,
    command_options_models,
)
from tests.fixtures.stack.harness import STACK_ROOT

COMMANDS = sorted(command_modules())


pytestmark = pytest.mark.usefixtures("empty_workdir")


def invoke(command: str, *args: str) -> tuple[int, str]:
    app: typer.Typer = importlib.import_module(command_modules()[command]).app
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_every_script_is_a_command_an_umbrella_or_a_refusal() -> None:
    for name, target in SCRIPTS.items():
        module_name, _, function = target.partition(":")
        module = importlib.import_module(module_name)
        assert callable(getattr(module, function)), name
        if module_name not in (NOT_OFFERED_MODULE, UMBRELLA_MODULE):
            assert issubclass(module.OPTIONS, BaseModel), name


def test_every_nemo_gym_alias_points_at_the_ng_command_of_the_same_name() -> None:
    aliases = {name: target for name, target in SCRIPTS.items() if name.startswith("nemo_gym_")}
    assert len(aliases) == 26  # NeMo Gym 0.7.0's pyproject: one per documented ng_* command
    for name, target in aliases.items():
        assert SCRIPTS["ng_" + name.removeprefix("nemo_gym_")] == target, name


@pytest.mark.parametrize("command", COMMANDS)
def test_an_unknown_key_exits_2_naming_the_command(command: str) -> None:
    code, output = invoke(command, "+foo_bar_baz=1")
    assert code == 2, output
    assert f"<command line>  foo_bar_baz: unknown option of {command}" in output
    assert "Traceback" not in output


@pytest.mark.parametrize("command", COMMANDS)
def test_a_near_typo_names_the_nearest_option(command: str) -> None:
    names = [n for n in option_names(command_options_models()[command]) if len(n) > 3] or ["verbose"]
    meant = names[0]
    code, output = invoke(command, f"+{meant[:-1]}=1")
    assert code == 2, output
    assert f"{meant[:-1]}: unknown option of {command} (did you mean +{meant}?)" in output


@pytest.mark.parametrize(
    ("command", "key"),
    [
        ("ng_collect_rollouts", "skills"),
        ("ng_collect_rollouts", "prompt_config"),
        ("ng_collect_rollouts", "rollout_collection_driver"),
        ("ng_collect_rollouts", "upload_rollouts"),
        ("ng_collect_rollouts", "health_check_workers"),
        ("ng_e2e_collect_rollouts", "prompt_config"),
        ("ng_e2e_collect_rollouts", "reuse_existing_data_preparation"),
        ("ng_prepare_data", "should_download"),
        ("ng_prepare_data", "data_source"),
        ("ng_aggregate_rollouts", "health_check_ignored_checks"),
        ("ng_test_all", "num_shards"),
        ("ng_init_resources_server", "scaffold_kind"),
        ("ng_validate", "manifest_path"),
        ("ng_run", "skip_venv_if_present"),
        ("ng_report", "hf_token"),
    ],
)
def test_a_nemo_gym_option_we_do_not_run_is_refused_with_the_reason(command: str, key: str) -> None:
    code, output = invoke(command, f"+{key}=1")
    assert code == 2, output
    assert f"{key}: not offered by {command}: NeMo Gym's +{key} " in output
    assert "hint: " in output


def test_a_key_of_a_sibling_command_is_refused_on_the_command_line_and_accepted_from_a_file(
    empty_workdir: Path,
) -> None:
    code, output = invoke("ng_collect_rollouts", "+dry_run=true")
    assert code == 2
    assert "dry_run: an option of ng_run, not of ng_collect_rollouts" in output
    (empty_workdir / "shared.yaml").write_text("dry_run: true\n")
    code, output = invoke("ng_collect_rollouts", "-c", "shared.yaml", "+foo_bar_baz=1")
    assert "dry_run" not in output  # the file's ng_run key is accepted; only the unknown one is named
    assert "foo_bar_baz: unknown option of ng_collect_rollouts" in output


def _bool_fields() -> list[tuple[str, str, Any]]:
    found = []
    for command, model in command_options_models().items():
        for name, field in {**model.model_fields, **CommonOptions.model_fields}.items():
            if bool in (field.annotation, *typing.get_args(field.annotation)):
                found.append((command, field.alias or name, field.annotation))
    return found


BOOL_FIELDS = _bool_fields()


def test_the_boolean_options_are_many() -> None:
    assert len({key for _, key, _ in BOOL_FIELDS}) >= 10


@pytest.mark.parametrize(("command", "key", "annotation"), BOOL_FIELDS)
def test_every_boolean_option_reads_yes_1_and_true_alike(command: str, key: str, annotation: Any) -> None:
    adapter = TypeAdapter(annotation)
    for spelling in ("yes", "1", 1, "true", True, "True", "on"):
        assert adapter.validate_python(spelling) is True, (command, key, spelling)
    for spelling in ("no", "0", 0, "false", False, "off"):
        assert adapter.validate_python(spelling) is False, (command, key, spelling)
    with pytest.raises(ValidationError):
        adapter.validate_python("maybe")


@pytest.mark.parametrize("spelling", ["yes", "1", "true", "YES", "on"])
def test_ng_run_dry_run_yes_1_and_true_all_print_the_plan(
    spelling: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NG_REPO_ROOT", str(STACK_ROOT))
    monkeypatch.delenv("NG_ENV_YAML", raising=False)
    monkeypatch.chdir(STACK_ROOT)
    code, output = invoke("ng_run", "-c", "configs/stack.yaml", f"+dry_run={spelling}")
    assert code == 0, output
    assert "app_path" in output  # the plan's details: printed, nothing started
    assert "ready in" not in output


def test_a_bad_boolean_is_refused_naming_the_key() -> None:
    code, output = invoke("ng_version", "+json=maybe")
    assert code == 2
    assert "json" in output
    assert "valid boolean" in output


@pytest.mark.parametrize("verbose", ["+verbose=yes", "+verbose=1", "+verbose=TRUE"])
def test_verbose_reads_true_the_same_way(verbose: str) -> None:
    from ng_cli.commands._app import wants_verbose

    assert wants_verbose([verbose])
    assert not wants_verbose(["+verbose=no"])


def test_options_are_checked_before_a_stack_is_contacted(empty_workdir: Path) -> None:
    # nothing listens on port 9: a contacted stack would be exit 1 "unreachable", not exit 2
    for command, extra in [
        ("ng_status", []),
        ("ng_collect_rollouts", ["+input_jsonl_fpath=absent.jsonl", "+output_jsonl_fpath=o.jsonl"]),
        ("ng_update_weights", ["+path=/ckpt", "+version=2"]),
    ]:
        code, output = invoke(command, "+head_server_url=http://127.0.0.1:9", *extra, "+foo_bar_baz=1")
        assert code == 2, (command, output)
        assert "foo_bar_baz: unknown option" in output
    assert not (empty_workdir / "o.jsonl").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_help_lists_every_option_from_the_model(command: str) -> None:
    code, output = invoke(command, "--help")
    assert code == 0, output
    flat = " ".join(output.split())
    for key in option_names(command_options_models()[command]):
        assert key in flat, (command, key)
    for reason in getattr(command_options_models()[command], "not_offered", {}):
        assert reason in flat, (command, reason)


def test_ng_prepare_data_needs_no_model_credentials(empty_workdir: Path) -> None:
    """It calls no model: a config whose policy_* values are unset (empty env.yaml) still collates."""
    configs = (
        "+config_paths=[resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml,"
        "responses_api_models/vllm_model/configs/vllm_model.yaml]"
    )
    code, output = invoke(
        "ng_prepare_data", configs, "+mode=example_validation", f"+output_dirpath={empty_workdir / 'out'}"
    )
    assert code == 0, output
    assert (empty_workdir / "out" / "example.jsonl").is_file()
    # a command that does call the model still needs them
    code, output = invoke("ng_dump_config", configs)
    assert code == 2
    assert "'policy_api_key' is not set" in output


def test_ng_quickstart_flags_and_keys_are_one_model() -> None:
    code, output = invoke("ng_quickstart", "--num-repeats", "0")
    assert code == 2
    assert "num_repeats: Input should be greater than or equal to 1" in output
    code, output = invoke("ng_quickstart", "+num_repeat=3")
    assert code == 2
    assert "did you mean +num_repeats?" in output


def test_a_sibling_commands_refusal_is_named_with_its_reason(empty_workdir: Path) -> None:
    """NeMo Gym's benchmarks/gdpval/config.yaml sets the collector's rollout_collection_driver;
    ng_validate on it names ng_collect_rollouts' reason (it said 'unknown option of ng_validate')."""
    (empty_workdir / "shared.yaml").write_text("rollout_collection_driver: custom.Driver\n")
    code, output = invoke("ng_validate", "-c", "shared.yaml")
    assert code == 2
    said = " ".join(output.split())
    assert (
        "rollout_collection_driver: not offered by ng_collect_rollouts: NeMo Gym's +rollout_collection_driver "
        in said
    )
    assert "unknown option" not in said
