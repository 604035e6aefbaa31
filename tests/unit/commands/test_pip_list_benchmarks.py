"""`ng_pip_list` and `ng_list_benchmarks`: NeMo Gym's commands, for this repo's one environment and
for NeMo Gym's benchmarks/ layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ng_cli.commands import list_benchmarks, pip_list

pytestmark = pytest.mark.usefixtures("empty_env_yaml")


def test_pip_list_lists_this_environments_packages_in_pips_formats() -> None:
    result = CliRunner().invoke(pip_list.app, ["+format=json"])
    assert result.exit_code == 0, result.output
    names = {package["name"].lower() for package in json.loads(result.output)}
    assert {"ng-cli", "pydantic", "typer"} <= names
    table = CliRunner().invoke(pip_list.app, ["+entrypoint=resources_servers/example_single_tool_call"])
    assert table.exit_code == 0, table.output
    assert "Package list for: resources_servers/example_single_tool_call" in table.output
    missing = CliRunner().invoke(pip_list.app, ["+entrypoint=resources_servers/no_such_env"])
    assert missing.exit_code == 2


def test_list_benchmarks_says_none_ship_and_finds_nemo_gym_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(list_benchmarks.app, [])
    assert result.exit_code == 0, result.output
    assert "ng_cli ships no benchmark" in result.output
    config = tmp_path / "benchmarks" / "aime24" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(
        "aime24_agent:\n  responses_api_agents:\n    simple_agent:\n      datasets:\n"
        "      - {name: aime24, type: benchmark, jsonl_fpath: benchmarks/aime24/data/aime24.jsonl,"
        " num_repeats: 32, prepare_script: benchmarks/aime24/prepare.py}\n"
        "      - {name: ex, type: example, jsonl_fpath: x.jsonl}\n"
    )
    variant = config.parent / "config_with_system.yaml"
    variant.write_text(config.read_text().replace("name: aime24,", "name: aime24_system,"))
    listed = json.loads(CliRunner().invoke(list_benchmarks.app, ["+json=true"]).output)
    assert listed == [
        {
            "name": "aime24",  # NeMo Gym's name: the folder of a config.yaml, any other config by its path
            "kind": "benchmark",
            "status": "no-manifest",
            "domain": None,
            "description": None,
            "version": None,
            "integration_profile": None,
            "modality": None,
            "licensing": None,
            "lifecycle": None,
            "config": "benchmarks/aime24/config.yaml",
            "agent": "aime24_agent",
            "num_repeats": 32,
            "jsonl_fpath": "benchmarks/aime24/data/aime24.jsonl",
            "has_data": False,
            "prepare_script": "benchmarks/aime24/prepare.py",
        },
        {
            "name": "aime24/config_with_system",
            "kind": "benchmark",
            "status": "no-manifest",
            "domain": None,
            "description": None,
            "version": None,
            "integration_profile": None,
            "modality": None,
            "licensing": None,
            "lifecycle": None,
            "config": "benchmarks/aime24/config_with_system.yaml",
            "agent": "aime24_agent",
            "num_repeats": 32,
            "jsonl_fpath": "benchmarks/aime24/data/aime24.jsonl",
            "has_data": False,
            "prepare_script": "benchmarks/aime24/prepare.py",
        },
    ]
    table = CliRunner().invoke(list_benchmarks.app, [])
    assert "aime24/config_with_system" in table.output
    assert "missing" in table.output
