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
