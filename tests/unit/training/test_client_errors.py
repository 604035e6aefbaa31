"""What `WeightsClient` raises for the model server's error answers."""

from __future__ import annotations

import io
import json
import urllib.error

from ng_cli.errors import UpstreamHTTPError
from ng_cli.training.client import _error_of
from ng_cli.upstream.weights import WeightUpdateError


def http_error(status: int, body: object) -> urllib.error.HTTPError:
    data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    return urllib.error.HTTPError("http://m/admin", status, "x", {}, io.BytesIO(data))  # type: ignore[arg-type]


def test_a_refused_update_keeps_its_phase_engine_and_rollback() -> None:
    envelope = {"error": {"message": "failed in reload", "type": "WeightUpdateError", "phase": "reload",
                          "engine": "http://e:1", "rolled_back": True, "version": 2, "timings": {}}}  # fmt: skip
    error = _error_of(http_error(409, envelope), "policy_model")
    assert isinstance(error, WeightUpdateError)
    assert (error.message, error.phase, error.engine, error.rolled_back, error.version) == (
        "failed in reload", "reload", "http://e:1", True, 2,
    )  # fmt: skip
    assert error.exit_code == 2


def test_other_answers_are_http_errors_naming_the_server() -> None:
    unauthorized = _error_of(http_error(401, {"error": {"message": "needs the key"}}), "policy_model")
    assert isinstance(unauthorized, UpstreamHTTPError)
    assert (unauthorized.message, unauthorized.status) == ("policy_model: needs the key", 401)
    garbage = _error_of(http_error(502, "<html>bad gateway</html>"), "policy_model")
    assert isinstance(garbage, UpstreamHTTPError)
    assert garbage.message == "policy_model: <html>bad gateway</html>"
