"""`ng_dump_config`, `ng_run +dry_run=true` and a server at start refuse a bad block alike.

The bad key sits on line 12 of its file; all three must name that line and the key, exit 2,
and print the same message (the child's comes from the spec ng_run would write for it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ng_cli.config.compose import compose_config
from ng_cli.launcher.plan import plan_stack
from ng_cli.servers.spec import write_spec

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
BAD = """\
# A vllm_model block with one key nobody defines.
policy_model:
  responses_api_models:
    vllm_model:
      entrypoint: app.py
      base_url: http://127.0.0.1:9/v1
      api_key: stub-key
      model: stub-model
      return_token_id_information: false
      uses_reasoning_parser: false
      tokenizer: null
      colour: blue
"""
EXPECTED = "bad.yaml:12  policy_model.responses_api_models.vllm_model.colour: unknown key 'colour'"


@pytest.fixture
def bad_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "env.yaml").write_text("{}\n")
    monkeypatch.setenv("NG_ENV_YAML", str(tmp_path / "env.yaml"))
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    return path


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, stderr
    return lines[0]


def _script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "400"}
    return subprocess.run(
        [str(BIN / name), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_dump_dry_run_and_start_refuse_the_same_key_on_its_line(bad_config: Path, tmp_path: Path) -> None:
    dump = _script("ng_dump_config", "-c", str(bad_config))
    dry_run = _script("ng_run", "-c", str(bad_config), "+dry_run=true")
    composed = compose_config([f"+config_paths=[{bad_config}]"], cwd=REPO)
    plan = plan_stack(composed, run_dir=tmp_path).with_ports({"policy_model": 1, "head_server": 2})
    spec_path = tmp_path / "policy_model.spec.json"
    write_spec(plan.spec_for("policy_model", listen_fd=None), spec_path)
    start = subprocess.run(
        [sys.executable, "-m", "ng_cli.servers.child", str(spec_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (dump.returncode, dry_run.returncode, start.returncode) == (2, 2, 2)
    assert dump.stdout == ""  # nothing half-written
    assert EXPECTED in _error_line(dump.stderr)
    assert _error_line(dump.stderr) == _error_line(dry_run.stderr) == _error_line(start.stderr)
    assert "Traceback" not in dump.stderr + dry_run.stderr + start.stderr


def test_a_nemo_gym_key_that_changes_nothing_is_one_warning(bad_config: Path) -> None:
    bad_config.write_text(BAD.replace("      colour: blue\n", ""))
    dump = _script("ng_dump_config", "-c", str(bad_config))
    assert dump.returncode == 0, dump.stderr
    warnings = [line for line in dump.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1
    assert "bad.yaml:11" in warnings[0]
    assert "'tokenizer' changes nothing here" in warnings[0]
