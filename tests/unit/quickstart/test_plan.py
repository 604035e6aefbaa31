"""The quickstart's plan: argv without secrets, the env file's permissions, the children's environment."""

from __future__ import annotations

import stat
from pathlib import Path

import yaml

from ng_cli.quickstart.plan import (
    EXAMPLE_AGENT,
    EXAMPLE_CONFIG_PATHS,
    MODEL_KEY,
    QuickstartPlan,
    child_env,
    collect_overrides,
    ng_run_args,
    write_env_file,
)

KEY = "sk-quickstart-SECRET"


def make_plan(tmp_path: Path) -> QuickstartPlan:
    return QuickstartPlan.default(tmp_path)


def test_default_paths_live_under_results(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    assert plan.output == tmp_path.resolve() / "results" / "example_rollouts.jsonl"
    assert plan.run_dir == tmp_path.resolve() / "results" / "quickstart"
    assert plan.env_file.parent == plan.ready_file.parent == plan.ng_run_log.parent == plan.run_dir


def test_with_changes_ignores_none_and_makes_paths_absolute(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    plan = make_plan(tmp_path).with_changes(num_repeats=None, max_output_tokens=8, output=Path("out/r.jsonl"))
    assert plan.num_repeats == 2
    assert plan.max_output_tokens == 8
    assert plan.output == tmp_path.resolve() / "out" / "r.jsonl"


def test_ng_run_args_name_the_example_stack_and_a_ready_file(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    args = ng_run_args(plan)
    assert args[0] == "+config_paths=[" + ",".join(EXAMPLE_CONFIG_PATHS) + "]"
    assert f"+ready_file={plan.ready_file}" in args
    assert "++head_server.port=0" in args
    assert "responses_api_models/local_vllm_model/configs/tiny_weather_cpu.yaml" in args[0]


def test_ng_run_args_serve_the_planned_model_directory(tmp_path: Path) -> None:
    plan = make_plan(tmp_path).with_changes(model_dir=tmp_path / "other-model")
    args = ng_run_args(plan)
    assert f"++{MODEL_KEY}={tmp_path.resolve() / 'other-model'}" in args
    assert not any(KEY in arg for arg in args)


def test_collect_overrides_start_over_with_the_planned_sizes(tmp_path: Path) -> None:
    plan = make_plan(tmp_path).with_changes(num_repeats=3, max_output_tokens=32)
    args = collect_overrides(plan)
    assert f"+agent_name={EXAMPLE_AGENT}" in args
    assert "+num_repeats=3" in args
    assert "+responses_create_params.max_output_tokens=32" in args
    assert not any(arg.startswith("+head_server_url=") for arg in args)  # agents are given directly
    assert "+overwrite=true" in args
    assert (tmp_path / "resources_servers").as_posix() in next(
        a for a in args if a.startswith("+input_jsonl_fpath=")
    )


def test_env_file_is_empty_by_default_and_private_even_over_an_older_file(tmp_path: Path) -> None:
    path = tmp_path / "run" / "env.yaml"
    path.parent.mkdir()
    path.write_text(f"policy_api_key: {KEY}\n")
    path.chmod(0o644)
    write_env_file(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert yaml.safe_load(path.read_text()) == {}
    write_env_file(path, {"policy_model_name": "m"})
    assert yaml.safe_load(path.read_text()) == {"policy_model_name": "m"}


def test_children_read_our_env_file_and_only_logs_get_wide_tables(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    base = {"PATH": "/bin", "NG_ENV_YAML": "/elsewhere/env.yaml"}
    assert child_env(plan, base=base) == {"PATH": "/bin", "NG_ENV_YAML": str(plan.env_file)}
    assert child_env(plan, is_logged=True, base=base)["COLUMNS"] == "120"
    assert child_env(plan, is_logged=True, base={**base, "COLUMNS": "90"})["COLUMNS"] == "90"
