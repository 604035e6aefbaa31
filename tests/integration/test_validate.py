"""`ng_validate`: NeMo Gym's `gym env validate` for a config, on this repo's own configs."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ng_cli.commands.validate import app

pytestmark = pytest.mark.integration

CONFIGS = (
    "+config_paths=[resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml,"
    "responses_api_models/vllm_model/configs/vllm_model.yaml]"
)


@pytest.fixture(autouse=True)
def empty_env_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "env.yaml").write_text("{}\n")
    monkeypatch.setenv("NG_ENV_YAML", str(tmp_path / "env.yaml"))
    monkeypatch.chdir(Path(__file__).resolve().parents[2])


def test_a_config_without_model_settings_passes_with_a_warning_unless_strict() -> None:
    result = CliRunner().invoke(app, [CONFIGS])
    assert result.exit_code == 0, result.output
    assert "✓ Config is valid" in result.output
    assert "will not start as-is" in result.output
    strict = CliRunner().invoke(app, [CONFIGS, "+strict=true"])
    assert strict.exit_code == 2
    assert "'policy_base_url' is not set" in strict.output


def test_a_bad_server_block_is_refused_and_manifests_are_named() -> None:
    bad = CliRunner().invoke(app, [CONFIGS, "++policy_model.responses_api_models.vllm_model.no_such_key=1"])
    assert bad.exit_code == 2
    assert "no_such_key" in bad.output
    manifest = CliRunner().invoke(app, [CONFIGS, "+onboarding_name=aime24"])
    assert manifest.exit_code == 2
    assert "manifest-backed workloads" in manifest.output


def _stack(root: Path, app_py: str, model_block: str) -> str:
    """A repo root with one resources server (its app.py as given) and a model block; the config's path."""
    folder = root / "resources_servers" / "needs_pkg"
    (folder / "configs").mkdir(parents=True)
    (folder / "app.py").write_text(app_py)
    (folder / "configs" / "needs_pkg.yaml").write_text(
        "needs_pkg:\n  resources_servers:\n    needs_pkg:\n      entrypoint: app.py\n"
        "judge:\n  responses_api_models:\n    vllm_model:\n" + model_block
    )
    return "+config_paths=[resources_servers/needs_pkg/configs/needs_pkg.yaml]"


def test_a_server_needing_a_module_not_installed_here_is_not_checked_and_warned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NeMo Gym's validate imports no server (each runs in its own environment); a missing package
    is this environment's, so the config passes, saying which block went unchecked. Missing model
    keys (a file another completes: benchmarks/aalcr/config.yaml) wait as placeholders do."""
    block = (
        "      entrypoint: app.py\n      model: m\n"
        "      return_token_id_information: false\n      uses_reasoning_parser: false\n"
    )
    configs = _stack(tmp_path, "import no_such_module_for_ng_validate\n", block)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, [configs])
    said = " ".join(result.output.split())
    assert result.exit_code == 0, said
    assert "not checked here, will not start as-is: instance 'needs_pkg'" in said
    assert "No module named 'no_such_module_for_ng_validate'" in said
    assert "+install_requirements=true" in said
    assert "judge.responses_api_models.vllm_model.base_url: missing required key 'base_url'" in said
    strict = CliRunner().invoke(app, [configs, "+strict=true"])
    assert strict.exit_code == 2
    assert "No module named 'no_such_module_for_ng_validate'" in strict.output


def test_an_app_py_that_is_broken_is_still_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    block = (
        "      entrypoint: app.py\n      base_url: http://127.0.0.1:8000/v1\n      api_key: k\n      model: m\n"
        "      return_token_id_information: false\n      uses_reasoning_parser: false\n"
    )
    configs = _stack(tmp_path, "def broken(:\n", block)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, [configs])
    assert result.exit_code == 2
    assert "SyntaxError" in result.output


def test_a_misspelt_key_beside_a_missing_one_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a block whose every problem is a value still to be given waits; a wrong key does not."""
    block = (
        "      entrypoint: app.py\n      base_ur: http://127.0.0.1:8000/v1\n      api_key: k\n      model: m\n"
        "      return_token_id_information: false\n      uses_reasoning_parser: false\n"
    )
    configs = _stack(tmp_path, "", block)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, [configs])
    said = " ".join(result.output.split())
    assert result.exit_code == 2, said
    assert "unknown key 'base_ur'" in said
