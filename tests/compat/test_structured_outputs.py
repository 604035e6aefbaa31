"""structured_outputs scores NeMo Gym's rows as NeMo Gym 0.7.0 does: the same reward and
`error_type` on every case of `cases/structured_outputs.json`, whose `nemo_gym` results come from
NeMo Gym's own `StructuredOutputsResourcesServer.verify`
(resources_servers/structured_outputs/app.py).

Our environment runs as it is served (`/verify` over HTTP), so a case it cannot score shows up as
the HTTP error it would be.
"""

from __future__ import annotations

import urllib.error
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

APP = Path(__file__).resolve().parents[2] / "resources_servers" / "structured_outputs" / "app.py"
CASES = load_cases("structured_outputs")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    server_class = load_server_class(APP)
    server = server_class(server_class.config_class.model_validate({}), name="structured_outputs")
    with serve_in_thread(server.build_app()) as served:
        yield served


def _verify(url: str, case: dict[str, Any]) -> dict[str, Any]:
    row = {
        "responses_create_params": {"input": [{"role": "user", "content": "Answer."}]},
        "response": response_of(case["output"]),
        **case["row"],
    }
    request = urllib.request.Request(
        f"{url}/verify", data=orjson.dumps(row), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return dict(orjson.loads(answer.read()))
    except urllib.error.HTTPError as error:
        pytest.fail(f"/verify answered HTTP {error.code}: {error.read()[:300]!r}")


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_reward_and_error_type_agree_with_nemo_gym(url: str, case: dict[str, Any]) -> None:
    ours = _verify(url, case)
    theirs = case["nemo_gym"]
    assert (ours["reward"], ours["error_type"]) == (theirs["reward"], theirs["error_type"])


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_error_message_agrees_with_nemo_gym(url: str, case: dict[str, Any]) -> None:
    """The message's first line; a schema's fault (`SchemaError`) is worded by the metaschema
    that checks it (NeMo Gym: OpenAPI 3.1's, ours: JSON Schema 2020-12's), so only its kind
    and the value at fault are compared there."""
    ours = _verify(url, case)["error_message"]
    theirs = case["nemo_gym"]["error_message"]
    if theirs is None or ours is None:
        assert ours == theirs
    elif theirs.startswith("SchemaError: "):
        assert ours.split(" is ")[0] == theirs.split(" is ")[0]
    else:
        assert ours.splitlines()[0] == theirs.splitlines()[0]
