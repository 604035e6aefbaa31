"""Shared test setup.

Selecting subsets:
    pytest -m "not engine"            everything but the real-vLLM tests
    pytest -m integration             real uvicorn servers / subprocesses on loopback
    pytest -m engine                  real CPU vLLM (build it: bash scripts/build_vllm_cpu_env.sh)
    pytest tests/unit                 pure code, no sockets, a few seconds

`bash scripts/test.sh` (CI) runs everything, engine and browser tests included, with
NG_REQUIRE_ENGINE=1 and NG_REQUIRE_BROWSER=1 so that a missing engine or Chromium fails instead
of skipping (the report's browser test needs `apt-get install chromium` and the `report-test` extra),
on two pytest-xdist workers (`-n 2 --dist loadgroup`): see `pytest_collection_modifyitems`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ENGINE_TESTS = Path(__file__).parent / "engine"
ENGINES_AND_RAY = pytest.mark.xdist_group("engines_and_ray")

# NeMo Gym's own server tests, vendored unchanged as fixtures: they import `nemo_gym`, and run
# only under `ng_test` (which loads the stand-ins), from tests/integration/test_nemo_gym_servers.py.
collect_ignore_glob = ["fixtures/nemo_gym_servers/*"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist, every test that starts a vLLM engine or a Ray cluster runs on one
    worker (one `xdist_group`): the session's shared engines start once, two Ray clusters never
    run at once, and the two cores hold at most one engine beside the lighter tests."""
    for item in items:
        heavy = item.get_closest_marker("engine") or item.get_closest_marker("ray")
        if heavy or item.path.is_relative_to(ENGINE_TESTS):
            item.add_marker(ENGINES_AND_RAY)
