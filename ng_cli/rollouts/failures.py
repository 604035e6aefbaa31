"""Typed rollout failures: what went wrong with one attempt, whether to retry, and the failures file.

A failed rollout is data, not a crash (verifiers' `boundary()` idea): every exception raised while
running one rollout is classified here into a `Failure` record. The collector retries the
retryable kinds with bounded attempts, and writes the last `Failure` of a rollout that still
fails to `<output stem>_failures.jsonl`. No reward is ever made up for it.

    kind                  retried   raised by
    timeout               yes       the per-rollout deadline, an HTTP read/connect timeout, or a 504
    upstream_unavailable  yes       connection refused/reset, the agent died mid-request
                          no        a model server's open circuit (its upstream is down): a
                                    resume, once it is back, retries the rollout
    http_5xx              yes       the agent (or something behind it) answered 5xx
    http_4xx              408/429   the agent refused the row (4xx); other 4xx will not change
    context_overflow      no        the prompt exceeded the model's context (the agent's 400)
    invalid_output        yes       2xx, but no numeric `reward` or not a JSON object
    internal              no        a bug in the collector: kept with its type, logged once
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from ng_cli.config.secrets import Redactor
from ng_cli.errors import (
    ContextOverflowError,
    InvalidOutputError,
    UpstreamDownError,
    UpstreamHTTPError,
    UpstreamTimeoutError,
    UpstreamUnavailableError,
)
from ng_cli.outputs import write_atomically
from ng_cli.rollouts.results import cannot_write
from ng_cli.servers.http import error_envelope

__all__ = ["Failure", "FailureKind", "FailureLog", "classify", "read_failures"]

_RETRYABLE_4XX = frozenset({408, 429})
_MESSAGE_LIMIT = 2000


class FailureKind(enum.StrEnum):
    """The class of a failed attempt; the value is what the failures file and metrics show."""

    TIMEOUT = "timeout"
    UPSTREAM_UNAVAILABLE = "upstream_unavailable"
    HTTP_4XX = "http_4xx"
    HTTP_5XX = "http_5xx"
    CONTEXT_OVERFLOW = "context_overflow"
    INVALID_OUTPUT = "invalid_output"
    INTERNAL = "internal"


@dataclass(frozen=True)
class Failure:
    """One failed attempt of one rollout (the last one is what the failures file keeps)."""

    kind: FailureKind
    message: str
    attempt: int
    """1-based attempt number; in the failures file, how many attempts were made."""
    task_index: int
    rollout_index: int
    status: int | None = None
    """The HTTP status, when the failure was an HTTP answer."""
    endpoint: str | None = None
    upstream_down_s: float | None = None
    """How long the model's upstream had been down, when a model server's circuit was open."""

    @property
    def is_retryable(self) -> bool:
        """Whether another attempt may succeed (see the table in the module docstring)."""
        if self.kind is FailureKind.HTTP_4XX:
            return self.status in _RETRYABLE_4XX
        if self.upstream_down_s is not None:  # an open circuit: only the upstream's return fixes it
            return False
        return self.kind not in (FailureKind.CONTEXT_OVERFLOW, FailureKind.INTERNAL)

    def to_record(self, *, agent: str, input_line: int) -> dict[str, Any]:
        """The failures-file line: the stable rollout keys first, then what went wrong."""
        record = asdict(self)
        return {
            "_ng_task_index": record.pop("task_index"),
            "_ng_rollout_index": record.pop("rollout_index"),
            "agent": agent,
            "input_line": input_line,
            **{key: str(value) if key == "kind" else value for key, value in record.items()},
        }


def classify(error: BaseException, *, attempt: int, task_index: int, rollout_index: int) -> Failure:
    """Turn what one attempt raised into a `Failure`; never raises."""
    kind, status, endpoint = _kind_of(error)
    return Failure(
        kind=kind,
        message=_message_of(error, kind),
        attempt=attempt,
        task_index=task_index,
        rollout_index=rollout_index,
        status=status,
        endpoint=endpoint,
        upstream_down_s=error.down_for_s if isinstance(error, UpstreamDownError) else None,
    )


def _kind_of(error: BaseException) -> tuple[FailureKind, int | None, str | None]:
    endpoint = getattr(error, "endpoint", None)
    if isinstance(error, ContextOverflowError):
        return FailureKind.CONTEXT_OVERFLOW, error.status, endpoint
    if isinstance(error, UpstreamHTTPError):
        if error_envelope(error.body).get("type") == ContextOverflowError.__name__:
            return FailureKind.CONTEXT_OVERFLOW, error.status, endpoint
        if error.status == 504:  # a hop below ran out of time (often the rollout's own deadline)
            return FailureKind.TIMEOUT, error.status, endpoint
        kind = FailureKind.HTTP_5XX if error.status >= 500 else FailureKind.HTTP_4XX
        return kind, error.status, endpoint
    if isinstance(error, UpstreamTimeoutError | TimeoutError):
        return FailureKind.TIMEOUT, None, endpoint
    if isinstance(error, UpstreamUnavailableError | ConnectionError):
        return FailureKind.UPSTREAM_UNAVAILABLE, None, endpoint
    if isinstance(error, InvalidOutputError):
        return FailureKind.INVALID_OUTPUT, None, endpoint
    return FailureKind.INTERNAL, None, endpoint


def _message_of(error: BaseException, kind: FailureKind) -> str:
    """A one-line human message; for HTTP errors, the server's own words from the error envelope."""
    if isinstance(error, UpstreamHTTPError):
        envelope = error_envelope(error.body)
        if envelope.get("message"):
            where = f" from {envelope['server']}" if envelope.get("server") else ""
            return _short(
                f"HTTP {error.status}{where} ({envelope.get('type', 'error')}): {envelope['message']}"
            )
    if kind is FailureKind.INTERNAL or not str(error):
        return _short(f"{type(error).__name__}: {error}")
    return _short(str(error))


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_LIMIT else text[:_MESSAGE_LIMIT] + "..."


class FailureLog:
    """`<output stem>_failures.jsonl`: one complete line per rollout that failed for good.

    Lines are appended with one `os.write` on an O_APPEND descriptor, like results, so a crash
    never tears one. Lines from earlier runs stay until `rewrite_from(start_offset)` at the end
    of a run keeps only this run's lines (every pair missing from the output was retried, so
    this run's failures are exactly what still fails).
    """

    def __init__(self, path: Path, *, redactor: Redactor | None = None) -> None:
        self.path = path
        self.redactor = redactor or Redactor(())
        """The config's secrets, cut out of every line (an agent may pass on an upstream's echo)."""
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.start_offset = os.fstat(self._fd).st_size
        self.count = 0

    def append(self, failure: Failure, *, agent: str, input_line: int) -> None:
        line = self.redactor.bytes(
            orjson.dumps(
                failure.to_record(agent=agent, input_line=input_line), option=orjson.OPT_APPEND_NEWLINE
            )
        )
        try:
            os.write(self._fd, line)
        except OSError as exc:
            raise cannot_write(self.path, exc) from exc
        self.count += 1

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rewrite_from(self, start_offset: int) -> None:
        """Keep only the bytes from `start_offset` on (this run's failures); atomic replace."""
        self.close()
        with self.path.open("rb") as source, write_atomically(self.path) as (target,):
            source.seek(start_offset)
            while chunk := source.read(1 << 20):
                target.write(chunk)


def read_failures(path: Path) -> Iterator[dict[str, Any]]:
    """The records of a failures file (skipping a torn last line, which a crash cannot make)."""
    if not path.exists():
        return
    with path.open("rb") as file:
        for line in file:
            if line.endswith(b"\n") and line.strip():
                yield orjson.loads(line)
