"""`ng_version` and `ng_help`: what they report, and that nothing absent is an error."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ng_cli.commands import help as help_command
from ng_cli.commands import version as version_command
from ng_cli.versions import engine_environment, installed_versions

REPO = Path(__file__).resolve().parents[3]


def fake_python(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "bin" / "python"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def test_an_absent_engine_environment_is_reported_not_raised(tmp_path: Path) -> None:
    engine = engine_environment(tmp_path / "nowhere" / "bin" / "python")
    assert engine.status == "absent"
    assert (engine.vllm, engine.torch, engine.ray) == (None, None, None)


def test_an_interpreter_answers_with_its_own_versions() -> None:
    """This environment's python stands in for the engine's: no vLLM or torch here, a known Python."""
    engine = engine_environment(Path(sys.executable))
    assert engine.status == "ok"
    assert engine.python == ".".join(map(str, sys.version_info[:3]))
    assert engine.vllm is None
    assert engine.torch is None


def test_a_hanging_interpreter_is_cut_by_the_timeout(tmp_path: Path) -> None:
    engine = engine_environment(fake_python(tmp_path, "exec sleep 30"), timeout_s=0.5)
    assert engine.status == "unreadable: no answer within 0.5 s"


def test_a_broken_interpreter_is_reported_with_its_last_words(tmp_path: Path) -> None:
    engine = engine_environment(fake_python(tmp_path, "echo 'libpython missing' >&2; exit 127"))
    assert engine.status == "unreadable: libpython missing"


def test_version_json_names_every_part(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NG_VLLM_VENV", str(tmp_path / "no-venv"))
    monkeypatch.setenv("NG_ENV_YAML", str(tmp_path / "env.yaml"))
    (tmp_path / "env.yaml").write_text("{}\n")
    result = CliRunner().invoke(version_command.app, ["+json=true"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["ng_cli"] == installed_versions().ng_cli
    assert report["engine"]["status"] == "absent"
    assert report["engine"]["python_path"] == str(tmp_path / "no-venv" / "bin" / "python")
    text = CliRunner().invoke(version_command.app, []).output
    assert "engine env" in text
    assert "absent" in text


def test_help_lists_every_script_of_pyproject_with_its_summary() -> None:
    every = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    scripts = {name: target for name, target in every.items() if not name.startswith("nemo_gym_")}
    summaries = help_command.command_summaries()
    assert set(summaries) == set(scripts)
    # NeMo Gym's aliases are counted, not listed (an environment installed before they were added has none)
    assert set(help_command.nemo_gym_aliases()) <= set(every) - set(scripts)
    for name, summary in summaries.items():
        assert summary
        assert not summary.startswith(f"`{name}`")
        assert summary != "(no summary)"
    output = CliRunner().invoke(help_command.app, []).output
    assert all(name in output for name in scripts)
