"""Every error a rollout can raise maps to one failure class with the right retry decision."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ng_cli.errors import (
    ContextOverflowError,
    InvalidOutputError,
    UpstreamHTTPError,
    UpstreamTimeoutError,
    UpstreamUnavailableError,
)
from ng_cli.rollouts.failures import FailureKind, FailureLog, classify, read_failures


def envelope(message: str, *, type_: str = "UpstreamHTTPError", server: str = "policy_model") -> str:
    return orjson.dumps({"error": {"message": message, "type": type_, "code": 0, "server": server}}).decode()


def http_error(status: int, body: str = "") -> UpstreamHTTPError:
    return UpstreamHTTPError(
        f"POST http://x/run answered HTTP {status}", status=status, body=body, endpoint="http://x/run"
    )


CASES = [
    pytest.param(
        UpstreamTimeoutError("slow", endpoint="http://x/run"),
        FailureKind.TIMEOUT,
        True,
        id="upstream-timeout",
    ),
    pytest.param(TimeoutError(), FailureKind.TIMEOUT, True, id="asyncio-timeout"),
    pytest.param(
        UpstreamUnavailableError("refused"), FailureKind.UPSTREAM_UNAVAILABLE, True, id="unavailable"
    ),
    pytest.param(
        ConnectionResetError("reset"), FailureKind.UPSTREAM_UNAVAILABLE, True, id="connection-reset"
    ),
    pytest.param(http_error(500), FailureKind.HTTP_5XX, True, id="500"),
    pytest.param(http_error(502, envelope("model died")), FailureKind.HTTP_5XX, True, id="502-envelope"),
    pytest.param(http_error(503), FailureKind.HTTP_5XX, True, id="503"),
    pytest.param(http_error(400), FailureKind.HTTP_4XX, False, id="400"),
    pytest.param(http_error(404), FailureKind.HTTP_4XX, False, id="404"),
    pytest.param(http_error(422), FailureKind.HTTP_4XX, False, id="422"),
    pytest.param(http_error(408), FailureKind.HTTP_4XX, True, id="408-retried"),
    pytest.param(http_error(429), FailureKind.HTTP_4XX, True, id="429-retried"),
    pytest.param(
        http_error(400, envelope("too long", type_="ContextOverflowError")),
        FailureKind.CONTEXT_OVERFLOW,
        False,
        id="overflow-envelope",
    ),
    pytest.param(
        ContextOverflowError("too long", status=400), FailureKind.CONTEXT_OVERFLOW, False, id="overflow-typed"
    ),
    pytest.param(InvalidOutputError("no reward"), FailureKind.INVALID_OUTPUT, True, id="invalid-output"),
    pytest.param(KeyError("oops"), FailureKind.INTERNAL, False, id="bug"),
]


@pytest.mark.parametrize(("error", "kind", "retryable"), CASES)
def test_classify(error: Exception, kind: FailureKind, retryable: bool) -> None:
    failure = classify(error, attempt=2, task_index=7, rollout_index=3)
    assert failure.kind is kind
    assert failure.is_retryable is retryable
    assert (failure.attempt, failure.task_index, failure.rollout_index) == (2, 7, 3)
    assert failure.message


def test_http_failures_keep_status_endpoint_and_the_servers_words() -> None:
    failure = classify(http_error(502, envelope("engine exploded")), attempt=1, task_index=0, rollout_index=0)
    assert failure.status == 502
    assert failure.endpoint == "http://x/run"
    assert failure.message == "HTTP 502 from policy_model (UpstreamHTTPError): engine exploded"


def test_non_envelope_bodies_fall_back_to_the_error_text() -> None:
    failure = classify(http_error(500, "<html>proxy error</html>"), attempt=1, task_index=0, rollout_index=0)
    assert failure.message == "POST http://x/run answered HTTP 500"


def test_bugs_keep_their_type_in_the_message() -> None:
    failure = classify(KeyError("missing"), attempt=1, task_index=0, rollout_index=0)
    assert failure.message == "KeyError: 'missing'"


def test_long_messages_are_cut_to_one_line() -> None:
    failure = classify(InvalidOutputError("x\n" * 5000), attempt=1, task_index=0, rollout_index=0)
    assert "\n" not in failure.message
    assert len(failure.message) < 2100


def test_failure_record_has_stable_keys_first() -> None:
    failure = classify(http_error(429), attempt=3, task_index=4, rollout_index=1)
    record = failure.to_record(agent="a", input_line=9)
    assert list(record)[:4] == ["_ng_task_index", "_ng_rollout_index", "agent", "input_line"]
    assert record["kind"] == "http_4xx"
    assert record["attempt"] == 3
    assert record["status"] == 429
    orjson.dumps(record)  # plain JSON types only


def test_failure_log_appends_and_rewrite_keeps_only_this_runs_lines(tmp_path: Path) -> None:
    path = tmp_path / "out_failures.jsonl"
    earlier = FailureLog(path)
    earlier.append(
        classify(http_error(500), attempt=3, task_index=0, rollout_index=0), agent="a", input_line=1
    )
    earlier.close()
    log = FailureLog(path)
    start = log.start_offset
    assert start == path.stat().st_size > 0
    log.append(classify(TimeoutError(), attempt=3, task_index=5, rollout_index=1), agent="a", input_line=6)
    assert [r["_ng_task_index"] for r in read_failures(path)] == [0, 5]
    log.rewrite_from(start)
    records = list(read_failures(path))
    assert [(r["_ng_task_index"], r["_ng_rollout_index"], r["kind"]) for r in records] == [(5, 1, "timeout")]
    assert not path.with_name(path.name + ".tmp").exists()


def test_read_failures_skips_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"_ng_task_index": 1}\n{"_ng_task_in')
    assert list(read_failures(path)) == [{"_ng_task_index": 1}]
    assert list(read_failures(tmp_path / "absent.jsonl")) == []


def test_an_open_circuit_is_upstream_unavailable_with_its_duration_and_not_retried() -> None:
    from ng_cli.errors import UpstreamDownError, UpstreamUnavailableError

    failure = classify(UpstreamDownError("down", down_for_s=42.0), attempt=1, task_index=0, rollout_index=0)
    assert (failure.kind, failure.upstream_down_s, failure.is_retryable) == (
        FailureKind.UPSTREAM_UNAVAILABLE,
        42.0,
        False,
    )
    refused = classify(UpstreamUnavailableError("refused"), attempt=1, task_index=0, rollout_index=0)
    assert (refused.kind, refused.upstream_down_s, refused.is_retryable) == (
        FailureKind.UPSTREAM_UNAVAILABLE,
        None,
        True,
    )
    assert failure.to_record(agent="a", input_line=1)["upstream_down_s"] == 42.0


def test_the_failure_log_redacts_secret_values(tmp_path: Path) -> None:
    from ng_cli.config.secrets import Redactor

    log = FailureLog(tmp_path / "f.jsonl", redactor=Redactor(["sk-live-abcdef123"]))
    error = RuntimeError("upstream said: Authorization: Bearer sk-live-abcdef123")
    log.append(classify(error, attempt=1, task_index=0, rollout_index=0), agent="a", input_line=1)
    log.close()
    text = (tmp_path / "f.jsonl").read_text()
    assert "sk-live-abcdef123" not in text
    assert "Bearer ***" in text
