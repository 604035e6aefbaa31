"""The error tree: what we expect to go wrong, and how each failure is shown to people.

    NgError                      expected, explainable; the CLI prints it without a traceback
    ├── ConfigError              the composed config is invalid (exit code 2)
    │   └── IncompleteConfigError    well-formed, but a value is still to be filled (a placeholder)
    ├── LaunchError              a server of the stack failed to start or died
    │   └── PlacementError           the Ray cluster cannot hold a placement group (names what is missing)
    ├── UpstreamError            a model/resources server answered with an error, or not in time
    │   ├── UpstreamTimeoutError     no answer within the deadline
    │   ├── UpstreamUnavailableError connection refused/reset, or no healthy endpoint left (503)
    │   │   └── UpstreamDownError        every endpoint down past the grace: open circuit (503 at once)
    │   ├── UpstreamHTTPError        an HTTP error status (carries .status and .body)
    │   └── ContextOverflowError     the prompt exceeded the model's context (vLLM's 400)
    ├── InvalidOutputError       a server answered 2xx with a body we cannot use
    ├── BadRequestError          a caller sent a request we cannot serve (HTTP 400)
    │   └── RequestTooLargeError     the body is over the server's max_request_bytes (HTTP 413)
    ├── ServerBusyError          the bodies in flight fill max_request_bytes_in_flight (HTTP 503)
    └── DataError                an input file (JSONL) is malformed; names the line

Bugs are not NgErrors: they keep their tracebacks.
"""

from __future__ import annotations

__all__ = [
    "UPSTREAM_DOWN_TYPE",
    "BadRequestError",
    "ConfigError",
    "ContextOverflowError",
    "DataError",
    "IncompleteConfigError",
    "InvalidOutputError",
    "LaunchError",
    "NgError",
    "NotFoundError",
    "PlacementError",
    "RequestTooLargeError",
    "ServerBusyError",
    "UpstreamDownError",
    "UpstreamError",
    "UpstreamHTTPError",
    "UpstreamTimeoutError",
    "UpstreamUnavailableError",
]

UPSTREAM_DOWN_TYPE = "upstream_unavailable"
"""The envelope `type` of an open circuit's 503, which every hop passes on as it is."""


class NgError(Exception):
    """A failure we expect and can explain; the CLI prints it without a traceback."""

    exit_code: int = 1
    http_status: int = 500
    """The status a server answers with when this error escapes a request handler."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message

    @property
    def error_type(self) -> str:
        """The `type` of the error envelope a server answers with."""
        return type(self).__name__

    def envelope_fields(self) -> dict[str, object]:
        """Extra fields of the error envelope (machine-readable details)."""
        return {}


class ConfigError(NgError):
    """The composed config is invalid; the message starts with "file:line  dotted.key" when known."""

    exit_code = 2


class IncompleteConfigError(ConfigError):
    """The config is well-formed but leaves something to fill in before a server that reads it
    can start: a placeholder (`http://<host_url>:<port>/v1`), a null (`${oc.env:KEY,null}` with
    KEY unset), model weights not on this machine. Every command that starts servers refuses it;
    `ng_validate` reports it as "will not start as-is" (an error with `+strict=true`), as NeMo
    Gym's validate passes a config that only its started servers would refuse."""


class LaunchError(NgError):
    """A server of the stack failed to start, or died while the stack was running."""

    exit_code = 1


class PlacementError(LaunchError):
    """The Ray cluster cannot hold a placement group (or a server actor): `group` names it and
    `missing` says what is short, e.g. "2 GPUs on one node"; Ray itself would wait forever."""

    def __init__(self, message: str, *, group: str, missing: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.group = group
        self.missing = missing


class DataError(NgError):
    """An input data file is malformed; the message names file and line."""

    exit_code = 2


class UpstreamError(NgError):
    """A model or resources server answered with an error status, or not at all in time."""

    def __init__(self, message: str, *, endpoint: str | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.endpoint = endpoint


class UpstreamTimeoutError(UpstreamError):
    """No (complete) answer within the configured deadline."""


class UpstreamUnavailableError(UpstreamError):
    """Could not connect, the connection broke, or no healthy endpoint is left."""


class UpstreamDownError(UpstreamUnavailableError):
    """Every upstream endpoint has been unreachable for longer than `upstream_down_grace_s`.

    The model server answers it at once (503, type `upstream_unavailable`, `upstream_down_s`)
    instead of making each request wait; agents pass it on unretried, and the collector shows
    how long the upstream has been down and records the rollout for a resume.
    """

    def __init__(
        self,
        message: str,
        *,
        down_for_s: float,
        body: str = "",
        endpoint: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, endpoint=endpoint, hint=hint)
        self.down_for_s = down_for_s
        self.body = body

    @property
    def error_type(self) -> str:
        return UPSTREAM_DOWN_TYPE

    def envelope_fields(self) -> dict[str, object]:
        return {"upstream_down_s": round(self.down_for_s, 1)}


class UpstreamHTTPError(UpstreamError):
    """The upstream answered with an HTTP error status."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        body: str = "",
        endpoint: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, endpoint=endpoint, hint=hint)
        self.status = status
        self.body = body


class ContextOverflowError(UpstreamHTTPError):
    """The prompt exceeded the model's context. vllm_model turns it into the seed's empty response,
    explicitly marked incomplete and counted; the collector reports it, never hides it."""


class InvalidOutputError(NgError):
    """A server answered 2xx with a body that does not satisfy the contract (shape, token ids, ...)."""


class BadRequestError(NgError):
    """A caller sent a request a server cannot serve; servers answer it with HTTP 400."""

    http_status = 400

    def __init__(self, message: str, *, param: str | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.param = param
        """The request field at fault, as OpenAI's error envelope names it."""


class NotFoundError(BadRequestError):
    """A caller named something this server does not have (a model id); HTTP 404."""

    http_status = 404


class RequestTooLargeError(BadRequestError):
    """A request body is over the server's `max_request_bytes`; servers answer it with HTTP 413."""

    http_status = 413


class ServerBusyError(NgError):
    """The request bodies a server is serving fill its `max_request_bytes_in_flight`, and none
    went out within `request_bytes_wait_s` (or the caller's deadline); servers answer HTTP 503."""

    http_status = 503
