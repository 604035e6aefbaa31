"""`ModelServer`: the base of servers that answer `POST /v1/responses` and `/v1/chat/completions`.

`read_generation_request` is how their routes read a body: a JSON object whose token limits and
sampling values make sense, so a zero `max_output_tokens`, `n: -1` or `temperature: -5` is our
400 naming the field and never reaches an upstream. Only what every OpenAI-compatible upstream
refuses is refused here (vLLM takes a temperature over OpenAI's 2, so we do too).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

from fastapi import Request

from ng_cli.config.schema import ModelServerConfig
from ng_cli.errors import BadRequestError
from ng_cli.servers.app import read_json_object
from ng_cli.servers.base import BaseServer

__all__ = ["ModelServer", "check_sampling_values", "check_token_limits", "read_generation_request"]

MC = TypeVar("MC", bound=ModelServerConfig)

TOKEN_LIMIT_FIELDS = ("max_output_tokens", "max_tokens", "max_completion_tokens")
"""Responses' and Chat Completions' caps on generated tokens."""


class ModelServer(BaseServer[MC]):
    """Model servers differ in everything but their kind; implementations add both routes."""

    server_type: ClassVar[str] = "responses_api_models"
    config_class: ClassVar[type[ModelServerConfig]] = ModelServerConfig


def check_token_limits(body: Mapping[str, Any]) -> None:
    """BadRequestError (400, `param` set) when a token cap is present but not a positive integer."""
    for field in TOKEN_LIMIT_FIELDS:
        value = body.get(field)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BadRequestError(f"{field} must be a positive integer, got {value!r}", param=field)


def check_sampling_values(body: Mapping[str, Any]) -> None:
    """BadRequestError (400, `param` set) for `n` below 1, a negative `temperature`, or a `top_p`
    outside [0, 1]: vLLM refuses each of them too, but only after a round trip, in its words."""
    n = body.get("n")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise BadRequestError(f"n must be a positive integer, got {n!r}", param="n")
    for field, low, high in (("temperature", 0.0, math.inf), ("top_p", 0.0, 1.0)):
        value = body.get(field)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
            limits = f"at least {low:g}" if high == math.inf else f"between {low:g} and {high:g}"
            raise BadRequestError(f"{field} must be a number {limits}, got {value!r}", param=field)


async def read_generation_request(request: Request) -> dict[str, Any]:
    """The body of a `/v1/responses` or `/v1/chat/completions` call, checked before any upstream call."""
    body = await read_json_object(request)
    check_token_limits(body)
    check_sampling_values(body)
    return body
