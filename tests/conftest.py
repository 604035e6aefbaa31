"""Shared test setup.

Selecting subsets:
    pytest -m "not engine"            everything but the real-vLLM tests
    pytest -m integration             real uvicorn servers / subprocesses on loopback
    pytest -m engine                  real CPU vLLM (build it: bash scripts/build_vllm_cpu_env.sh)
    pytest tests/unit                 pure code, no sockets, a few seconds

`bash scripts/test.sh` (CI) runs everything, engine and browser tests included, with
NG_REQUIRE_ENGINE=1 and NG_REQUIRE_BROWSER=1 so that a missing engine or Chromium fails instead
of skipping (the report's browser test needs `apt-get install chromium` and the `report-test` extra).
It runs two pytest processes at once: `-m "engine or ray"` (every test that starts a vLLM engine or
a Ray cluster: one at a time) and the rest beside it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# NeMo Gym's own server tests, vendored unchanged as fixtures: they import `nemo_gym`, and run
# only under `ng_test` (which loads the stand-ins), from tests/integration/test_nemo_gym_servers.py.
collect_ignore_glob = ["fixtures/nemo_gym_servers/*"]


@pytest.fixture
def empty_env_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty env.yaml in tmp_path, named by NG_ENV_YAML, so that no env.yaml of the machine's
    reaches a command under test."""
    path = tmp_path / "env.yaml"
    path.write_text("{}\n")
    monkeypatch.setenv("NG_ENV_YAML", str(path))
    return path


@pytest.fixture
def empty_workdir(empty_env_yaml: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_path as the working directory, with `empty_env_yaml`."""
    monkeypatch.chdir(empty_env_yaml.parent)
    return empty_env_yaml.parent
