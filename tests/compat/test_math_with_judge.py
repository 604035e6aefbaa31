"""math_with_judge scores as NeMo Gym 0.7.0 does: the same reward on every case of
`cases/math_with_judge.json`, whose `nemo_gym` results come from NeMo Gym's own
`LibraryJudgeMathResourcesServer.verify` (resources_servers/math_with_judge/app.py; judge off).

Our environment runs as it is served: `/verify` over HTTP, math-verify in its worker pool.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ng_cli.servers.loading import load_server_class
from ng_cli.servers.testing import serve_in_thread
from tests.compat.case_files import load_cases, response_of

pytestmark = pytest.mark.integration

APP = Path(__file__).resolve().parents[2] / "resources_servers" / "math_with_judge" / "app.py"
CASES = load_cases("math_with_judge")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    server_class = load_server_class(APP)
    server = server_class(server_class.config_class.model_validate({"verify_workers": 1}), name="math")
    with serve_in_thread(server.build_app(), startup_timeout_s=60) as served:
        yield served


def _verify(url: str, case: dict[str, Any]) -> dict[str, Any]:
    row = {
        "responses_create_params": {"input": [{"role": "user", "content": "Solve it."}]},
        "response": response_of(case["output"]),
        "expected_answer": case["expected_answer"],
    }
    request = urllib.request.Request(
        f"{url}/verify", data=orjson.dumps(row), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        return dict(orjson.loads(answer.read()))


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_reward_agrees_with_nemo_gym(url: str, case: dict[str, Any]) -> None:
    ours = _verify(url, case)
    theirs = case["nemo_gym"]
    assert (ours["reward"], ours["library_reward"]) == (theirs["reward"], theirs["library_reward"])


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_extracted_answer_agrees_with_nemo_gym(url: str, case: dict[str, Any]) -> None:
    """What math-verify read, as NeMo Gym reports it (sympy's form: `1/2`, `Interval.Ropen(1, 2)`),
    so pass@k / majority@k over `extracted_answer` group answers as NeMo Gym's do."""
    assert _verify(url, case)["extracted_answer"] == case["nemo_gym"]["extracted_answer"]
