"""`ng` / `gym`: our commands under one name, NeMo Gym 0.7.0's `gym <group> <command>` forms, and
its commands not offered here refused with the reason."""

from __future__ import annotations

import importlib
import os
import re
import sys
import tomllib
from pathlib import Path

import orjson
import pytest

from ng_cli.commands import umbrella
from ng_cli.commands.not_offered import NOT_OFFERED
from ng_cli.errors import ConfigError
from tests.fixtures.nemo_gym_metrics.compare import load

REPO = Path(__file__).resolve().parents[3]
NEMO_GYM_0_7_0_COMMANDS = [
    "run",
    "test",
    "test_all",
    "dev_test",
    "init_resources_server",
    "list_benchmarks",
    "prepare_benchmark",
    "collect_rollouts",
    "e2e_collect_rollouts",
    "aggregate_rollouts",
    "materialize_prompts",
    "reward_profile",
    "upload_dataset_to_gitlab",
    "download_dataset_from_gitlab",
    "prepare_data",
    "upload_dataset_to_hf",
    "download_dataset_from_hf",
    "gitlab_to_hf_dataset",
    "delete_dataset_from_gitlab",
    "dump_config",
    "validate",
    "help",
    "status",
    "pip_list",
    "version",
    "reinstall",
]


@pytest.mark.parametrize(
    ("argv", "command", "args"),
    [
        (["collect_rollouts", "+agent_name=a"], "collect_rollouts", ["+agent_name=a"]),
        (["ng_status"], "status", []),
        (["reward-profile", "+x=1"], "reward_profile", ["+x=1"]),
        (
            [
                "eval",
                "run",
                "--no-serve",
                "--agent",
                "a",
                "-i",
                "in.jsonl",
                "-o",
                "out.jsonl",
                "--num-repeats=4",
                "--temperature",
                "0.7",
            ],
            "collect_rollouts",
            [
                "++agent_name=a",
                "++input_jsonl_fpath=in.jsonl",
                "++output_jsonl_fpath=out.jsonl",
                "++num_repeats=4",
                "++responses_create_params.temperature=0.7",
            ],
        ),
        (["eval", "run", "--config", "a.yaml"], "e2e_collect_rollouts", ["--config", "a.yaml"]),
        (["env", "start", "--config", "a.yaml", "+x=1"], "run", ["--config", "a.yaml", "+x=1"]),
        (["env", "test", "--resources-server", "my_env"], "test", ["+entrypoint=resources_servers/my_env"]),
        (["env", "test", "--all"], "test_all", []),
        (
            ["eval", "aggregate", "-i", "r-*.jsonl", "-o", "r.jsonl"],
            "aggregate_rollouts",
            ["++input_glob=r-*.jsonl", "++output_jsonl_fpath=r.jsonl"],
        ),
        (
            ["eval", "profile", "--inputs", "m.jsonl", "--rollouts", "r.jsonl"],
            "reward_profile",
            ["++materialized_inputs_jsonl_fpath=m.jsonl", "++rollouts_jsonl_fpath=r.jsonl"],
        ),
        (["env", "packages", "--json"], "pip_list", ["+format=json"]),
        (["env", "validate", "--strict"], "validate", ["+strict=true"]),
        (["--version"], "version", []),
        ([], "help", []),
        (["dataset", "download", "--repo-id", "x"], "download_dataset_from_hf", ["--repo-id", "x"]),
        (["dataset", "upload", "--storage", "gitlab"], "upload_dataset_to_gitlab", ["--storage", "gitlab"]),
        (["dataset", "download", "--storage=gitlab"], "download_dataset_from_gitlab", ["--storage=gitlab"]),
        (
            ["list", "benchmarks", "aime24", "--json"],
            "list_benchmarks",
            ['+component_name="aime24"', "+json=true"],
        ),
        (
            ["list", "environments", "--kind", "benchmark", "--domain=math", "--status", "no-manifest"],
            "list_environments",
            ["++catalog_kind=benchmark", "++domain=math", "++status=no-manifest"],
        ),
        (["list", "resources-servers"], "list_resources_servers", []),
        (["search", "math"], "search", ['+query="math"']),
        (
            ["search", "agents", "two words", "--json"],
            "search",
            ["+component_type=agents", '+query="two words"', "+json=true"],
        ),
        (
            ["env", "schema", "--resources-server", "my_env"],
            "show_schema",
            ["+entrypoint=resources_servers/my_env"],
        ),
        (["env", "publish", "my_env"], "env_publish", ["my_env"]),
        (["eval", "health-check", "results"], "eval_health_check", ["results"]),
    ],
)
def test_translate(argv: list[str], command: str, args: list[str]) -> None:
    assert umbrella.translate(argv) == (command, args)


def test_an_unknown_command_is_an_error() -> None:
    with pytest.raises(ConfigError, match="not a command"):
        umbrella.translate(["eval", "frobnicate"])
    with pytest.raises(ConfigError, match="'frob' is not a type to search"):
        umbrella.translate(["search", "frob", "x"])


def test_nemo_gym_selectors_name_the_config_files_they_stand_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--benchmark/--environment/--resources-server/--model-type/--agent-type NAME[/FLAVOR]` become
    `+config_paths=[...]` of the files NeMo Gym's `_asset_config_path` picks (the first root's)."""
    files = [
        "benchmarks/aime24/config.yaml",
        "benchmarks/aime24/config_with_system.yaml",
        "benchmarks/lcb/v5/config.yaml",
        "resources_servers/my_env/configs/my_env.yaml",
        "resources_servers/my_env/configs/strict.yaml",
        "responses_api_models/vllm_model/configs/vllm_model.yaml",
        "responses_api_agents/simple_agent/configs/simple_agent.yaml",
    ]
    for name in files:
        (tmp_path / "install" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "install" / name).write_text("{}\n")
    (tmp_path / "user" / "benchmarks" / "aime24").mkdir(parents=True)
    (tmp_path / "user" / "benchmarks" / "aime24" / "config.yaml").write_text("{}\n")
    monkeypatch.setenv("NG_REPO_ROOT", str(tmp_path / "install"))
    monkeypatch.setenv("NEMO_GYM_EXTRA_ROOTS", "")
    monkeypatch.chdir(tmp_path / "user")
    install, user = tmp_path.resolve() / "install", tmp_path.resolve() / "user"
    argv = ["env", "start", "--benchmark", "aime24", "--model-type", "vllm_model", "+x=1"]
    assert umbrella.translate(argv) == (
        "run",
        [f"+config_paths=[{user}/benchmarks/aime24/config.yaml,{install}/{files[5]}]", "+x=1"],
    )
    command, args = umbrella.translate(
        [
            "eval",
            "run",
            "--benchmark",
            "aime24/config_with_system",
            "--benchmark=lcb/v5/config",
            "--resources-server",
            "my_env/strict",
            "--agent-type",
            "simple_agent",
        ]
    )
    assert command == "e2e_collect_rollouts"
    assert args == [
        f"+config_paths=[{install}/{files[1]},{install}/{files[2]},{install}/{files[4]},{install}/{files[6]}]"
    ]
    with pytest.raises(
        ConfigError,
        match=re.escape("implies config `benchmarks/aime25/config.yaml`, which does not exist. Did you mean"),
    ):
        umbrella.translate(["env", "start", "--benchmark", "aime25"])


def test_search_dir_is_a_root_searched_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEMO_GYM_EXTRA_ROOTS", "/already")
    args = umbrella.translate(["list", "benchmarks", "--search-dir", "a", "--search-dir=/b", "--json"])
    assert args == ("list_benchmarks", ["+json=true"])
    assert os.environ["NEMO_GYM_EXTRA_ROOTS"] == os.pathsep.join(
        [str(Path("a").absolute()), "/b", "/already"]
    )


def test_every_nemo_gym_command_runs_here_or_says_why_not() -> None:
    for name in NEMO_GYM_0_7_0_COMMANDS:
        assert name in umbrella.COMMANDS or name in NOT_OFFERED, name
    for module in umbrella.COMMANDS.values():
        assert callable(importlib.import_module(f"ng_cli.commands.{module}").main)


def test_every_installed_command_is_reachable_through_ng() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    for name, target in scripts.items():
        if name in ("ng", "gym"):
            assert target == "ng_cli.commands.umbrella:main"
            continue
        command = name.removeprefix("nemo_gym_").removeprefix("ng_")
        if command in NOT_OFFERED:
            assert target == "ng_cli.commands.not_offered:main"
        else:
            assert target == f"ng_cli.commands.{umbrella.COMMANDS[command]}:main", name


def test_gym_eval_profile_runs_our_reward_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "env.yaml").write_text("{}\n")
    monkeypatch.setenv("NG_ENV_YAML", str(tmp_path / "env.yaml"))
    materialized, rollouts = tmp_path / "m.jsonl", tmp_path / "r.jsonl"
    materialized.write_bytes(
        b"".join(orjson.dumps(r) + b"\n" for r in load("single_repeat_materialized_inputs.json"))
    )
    rollouts.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in load("single_repeat_rollouts.json")))
    monkeypatch.setattr(
        sys, "argv", ["gym", "eval", "profile", "--inputs", str(materialized), "--rollouts", str(rollouts)]
    )
    with pytest.raises(SystemExit) as exited:
        umbrella.main()
    assert exited.value.code == 0
    assert (tmp_path / "r_reward_profiling.jsonl").is_file()
    assert "Reward profile completion: 2/2" in capsys.readouterr().out


def test_a_command_not_offered_exits_2_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["gym", "dataset", "upload", "--name", "x"])
    with pytest.raises(SystemExit) as exited:
        umbrella.main()
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "ng_upload_dataset_to_hf is not offered by ng_cli" in err
    assert "network beyond the package registries" in err
