"""NeMo Gym 0.7.0's `gym` CLI and ours: its 32 subcommands, its legacy names, and what its
listings print, from `cases/gym_cli.json` (written by `nemo_gym_cli_oracle.py` running NeMo Gym's
own CLI; README.md beside this file).

The listings run over `catalog_tree/` copied to a temporary folder: `user/` is the working
directory, `install/` the install root (NeMo Gym's `PARENT_DIR`; here `NG_REPO_ROOT`), `extra/` a
`--search-dir`. NeMo Gym's JSON must come out unchanged (our `ng_list_benchmarks` adds its data
keys after NeMo Gym's, and a benchmark's view a `data` detail); where NeMo Gym refuses a name
(exit 1), ours exits 2 (a bad option, as every command here) with NeMo Gym's words.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from ng_cli.commands import umbrella
from ng_cli.commands.not_offered import NOT_OFFERED
from ng_cli.datasets.manifest import load_manifest
from tests.compat.case_files import CASES, load_cases

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DOCUMENT: dict[str, Any] = json.loads((CASES / "gym_cli.json").read_text())
DATA_KEYS = ["config", "agent", "num_repeats", "jsonl_fpath", "has_data", "prepare_script"]
"""What `ng_list_benchmarks +json=true` adds to each of NeMo Gym's objects."""
EXIT_HERE = {"env_schema_none": 1}
"""Our exit code where NeMo Gym's is 1 (else 2: an unknown name is a bad option here)."""
NEMO_GYM_EXITS_1 = ("unknown_benchmark", "benchmark_is_an_environment", "unknown_agent", "env_schema_none")


def _gym(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """`gym <argv>` through our umbrella, in this process: exit code, stdout, stderr."""
    monkeypatch.setattr(sys, "argv", ["gym", *argv])
    with pytest.raises(SystemExit) as exited:
        umbrella.main()
    captured = capsys.readouterr()
    code = exited.value.code
    return code if isinstance(code, int) else 0, captured.out, captured.err


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = (tmp_path / "tree").resolve()
    shutil.copytree(HERE / "catalog_tree", root)
    (tmp_path / "env.yaml").write_text("{}\n")
    monkeypatch.setenv("NG_ENV_YAML", str(tmp_path / "env.yaml"))
    monkeypatch.setenv("NG_REPO_ROOT", str(root / "install"))
    monkeypatch.setenv("NEMO_GYM_EXTRA_ROOTS", "")  # none; removed after (--search-dir sets it)
    monkeypatch.chdir(root / "user")
    return root


@pytest.mark.parametrize("case", load_cases("gym_cli"), ids=lambda case: case["id"])
def test_a_listing_prints_what_nemo_gym_prints(
    case: dict[str, Any], tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    theirs = case["nemo_gym"]
    code, out, err = _gym([token.replace("<tree>", str(tree)) for token in case["argv"]], monkeypatch, capsys)
    if theirs["exit"]:
        assert case["id"] in NEMO_GYM_EXITS_1
        assert code == EXIT_HERE.get(case["id"], 2), err
        assert f"error: {theirs['text'].strip()}" in err
        return
    assert code == 0, err
    ours = json.loads(out.replace(str(tree), "<tree>"))
    assert _as_nemo_gym_prints(ours, theirs["json"], case["argv"]) == theirs["json"]
    warnings = [line for line in theirs["stderr"].splitlines() if line.startswith("Warning: ")]
    assert [line for line in err.splitlines() if line.startswith("Warning: ")] == warnings


def _as_nemo_gym_prints(ours: Any, theirs: Any, argv: list[str]) -> Any:
    """Ours without what `ng_list_benchmarks` adds, after checking that it adds only that."""
    benchmarks = argv[:2] == ["list", "benchmarks"]
    if isinstance(ours, list):
        assert [entry["name"] for entry in ours] == [entry["name"] for entry in theirs]
        for entry, their_entry in zip(ours, theirs, strict=True):
            assert list(entry) == list(their_entry) + (DATA_KEYS if benchmarks else [])
        return [
            {key: entry[key] for key in their_entry} for entry, their_entry in zip(ours, theirs, strict=True)
        ]
    if benchmarks and "details" in ours:
        assert ours["details"].pop("data").endswith(("(present)", "(missing)"))
    return ours


@pytest.mark.usefixtures("tree")
def test_our_benchmark_data_keys_say_where_the_data_is(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _gym(["list", "benchmarks", "--json"], monkeypatch, capsys)
    assert code == 0, err
    listed = {entry["name"]: entry for entry in json.loads(out)}
    assert {key: listed["aime"][key] for key in DATA_KEYS} == {
        "config": "benchmarks/aime/config.yaml",
        "agent": "aime_agent",
        "num_repeats": 32,
        "jsonl_fpath": "benchmarks/aime/data/aime_benchmark.jsonl",
        "has_data": True,
        "prepare_script": "benchmarks/aime/prepare.py",
    }
    assert listed["pg19"]["has_data"] is False
    assert listed["mine"]["has_data"] is True  # under the working directory's root
    assert listed["suite_manifest"]["jsonl_fpath"] == "sm1.jsonl"  # the manifest's: the config has two


def test_nemo_gym_s_own_benchmarks_come_out_under_its_184_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """NeMo Gym's benchmarks/ as its code judged it (which files declare one benchmark, which
    manifests are valid, and theirs names and configs), rebuilt, lists NeMo Gym's names."""
    real = DOCUMENT["real_tree"]
    benchmarks = tmp_path / "nemo_gym" / "benchmarks"
    for path, is_benchmark in real["configs"]:
        (benchmarks / path).parent.mkdir(parents=True, exist_ok=True)
        (benchmarks / path).write_text(_ONE_BENCHMARK if is_benchmark else "{}\n")
    for manifest in real["manifests"]:
        (benchmarks / manifest["path"]).write_text(_manifest(manifest) if manifest["valid"] else "{}\n")
    (tmp_path / "empty").mkdir()
    (tmp_path / "env.yaml").write_text("{}\n")
    monkeypatch.setenv("NG_ENV_YAML", str(tmp_path / "env.yaml"))
    monkeypatch.setenv("NG_REPO_ROOT", str(tmp_path / "empty"))
    monkeypatch.setenv("NEMO_GYM_EXTRA_ROOTS", "")
    monkeypatch.chdir(tmp_path / "nemo_gym")
    code, out, err = _gym(["list", "benchmarks", "--json"], monkeypatch, capsys)
    assert code == 0, err
    names = [entry["name"] for entry in json.loads(out)]
    assert len(names) == 184
    assert names == real["names"]
    assert {"longmt_pg19", "livecodebench/v5_2408_2502/config", "apex25/config_with_system"} <= set(names)


_ONE_BENCHMARK = "a:\n  responses_api_agents:\n    simple_agent:\n      datasets:\n      - {name: b, type: benchmark, jsonl_fpath: d.jsonl}\n"


def _manifest(recorded: dict[str, Any]) -> str:
    """A manifest NeMo Gym accepts, with the recorded name, kind, config and experimental flag."""
    manifest = {
        "name": recorded["name"],
        "version": "1.0.0",
        "experimental": recorded["experimental"],
        "kind": recorded["kind"],
        "integration_profile": "external-agent-loop",
        "domain": "other",
        "description": "x",
        "modality": "text",
        "authors": ["x"],
        "reward": {"range": [0.0, 1.0], "higher_is_better": True},
        "config_path": recorded["config_path"],
        "resources_server": None,
        "agent_server": "a",
        "datasets": [{"name": "b", "type": "benchmark", "jsonl_fpath": "d.jsonl", "prepare_script": "p.py"}],
        "canonical_split": "benchmark",
        "prompt_source": "agent",
    }
    return json.dumps(manifest)  # JSON is YAML


@pytest.mark.skipif(
    not os.environ.get("NG_NEMO_GYM_ROOT"), reason="NG_NEMO_GYM_ROOT: NeMo Gym 0.7.0 unpacked"
)
def test_nemo_gym_s_own_root_lists_its_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same over NeMo Gym's real files (its wheel unpacked; README.md says how)."""
    (tmp_path / "env.yaml").write_text("{}\n")
    monkeypatch.setenv("NG_ENV_YAML", str(tmp_path / "env.yaml"))
    monkeypatch.setenv("NG_REPO_ROOT", str(tmp_path))
    monkeypatch.setenv("NEMO_GYM_EXTRA_ROOTS", "")
    monkeypatch.chdir(os.environ["NG_NEMO_GYM_ROOT"])
    code, out, err = _gym(["list", "benchmarks", "--json"], monkeypatch, capsys)
    assert code == 0, err
    assert [entry["name"] for entry in json.loads(out)] == DOCUMENT["real_tree"]["names"]


@pytest.mark.usefixtures("tree")
@pytest.mark.parametrize("name", sorted(DOCUMENT["commands"]))
def test_each_gym_subcommand_runs_here_or_says_why_not(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert len(DOCUMENT["commands"]) == 32
    command, _args = umbrella.translate(name.split())
    code, out, err = _gym([*name.split(), "--help"], monkeypatch, capsys)
    if command in NOT_OFFERED:
        assert code == 2
        assert f"is not offered by ng_cli: {NOT_OFFERED[command][0]}" in err
        assert f"hint: {NOT_OFFERED[command][1]}" in err
    else:
        assert command in umbrella.COMMANDS
        assert code == 0, err
        assert "Usage:" in out


@pytest.mark.parametrize("name", sorted(DOCUMENT["legacy"]))
def test_each_legacy_name_is_the_gym_form_nemo_gym_says(name: str) -> None:
    """NeMo Gym's `ng_<name>` re-enters `gym <LEGACY[name]>`: ours runs (or refuses) the same command."""
    assert umbrella.translate(DOCUMENT["legacy"][name])[0] == name


def test_every_nemo_gym_console_script_is_installed() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    installed = {
        entry.name
        for entry in importlib.metadata.entry_points(group="console_scripts")
        if entry.dist is not None and entry.dist.name == "ng-cli"
    }
    nemo_gym = set(DOCUMENT["console_scripts"])
    assert len([name for name in nemo_gym if name.startswith("nemo_gym_")]) == 26
    assert nemo_gym <= set(declared)
    assert nemo_gym <= installed


@pytest.mark.parametrize("case", load_cases("manifests"), ids=lambda case: case["id"])
def test_a_manifest_is_valid_where_nemo_gym_s_is(case: dict[str, Any], tmp_path: Path) -> None:
    """NeMo Gym lists a workload under its manifest only when the manifest is valid."""
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump(case["manifest"]))
    assert (load_manifest(path) is not None) == case["nemo_gym"]["valid"]
