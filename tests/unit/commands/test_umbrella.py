"""`ng` / `gym`: our commands under one name, NeMo Gym 0.7.0's `gym <group> <command>` forms, and
its commands not offered here refused with the reason."""

from __future__ import annotations

import importlib
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
    ],
)
def test_translate(argv: list[str], command: str, args: list[str]) -> None:
    assert umbrella.translate(argv) == (command, args)


def test_an_unknown_command_is_an_error() -> None:
    with pytest.raises(ConfigError, match="not a command"):
        umbrella.translate(["eval", "frobnicate"])


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
