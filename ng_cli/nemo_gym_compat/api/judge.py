"""`nemo_gym.judge`: `call_judge` and the judge-failure wrapper of `/verify`, as NeMo Gym's.

A judge is a model server of the stack named in the environment's config (`judge_model_server:
{type: responses_api_models, name: ...}`); `call_judge` posts to it through `server_client`. A
failed call (transport, timeout, HTTP error, an answer that is not the expected shape) is a
`JudgeError`; `judge_failsafe` turns it into a row with reward 0.0 and `mask_sample: true`
(never a fabricated reward), which the collector records as a failure.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from ng_cli.nemo_gym_compat.api.server_utils import ServerClient, get_response_json, raise_for_status

__all__ = ["JudgeError", "call_judge", "judge_failsafe", "reraise_judge_errors"]

ResponseT = TypeVar("ResponseT", bound=BaseModel)


class JudgeError(Exception):
    """A judge call failed; the row is masked, not scored."""


async def reraise_judge_errors(coro: Awaitable[Any]) -> Any:
    try:
        return await coro
    except JudgeError:
        raise
    except Exception as error:
        raise JudgeError(f"{type(error).__name__}: {error}") from error


async def call_judge(
    server_client: ServerClient,
    *,
    server_name: str,
    url_path: str,
    json: Any,
    response_model: type[ResponseT],
) -> ResponseT:
    """POST to the judge model server and parse its answer; JudgeError on any failure."""

    async def _call() -> ResponseT:
        http_response = await server_client.post(server_name=server_name, url_path=url_path, json=json)
        await raise_for_status(http_response)
        return response_model.model_validate(await get_response_json(http_response))

    result: ResponseT = await reraise_judge_errors(_call())
    return result


def judge_failsafe(verify_fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """`verify` with a JudgeError answered as a masked row (reward 0.0, `failure_kind: judge_failed`)."""

    @functools.wraps(verify_fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await verify_fn(*args, **kwargs)
        except JudgeError as error:
            body = kwargs.get("body") or next(
                (a for a in (*kwargs.values(), *args) if hasattr(a, "model_dump") and hasattr(a, "response")),
                None,
            )
            if body is None:
                raise RuntimeError("judge_failsafe: could not locate the verify request body") from error
            reason = str(error)[:2000]
            data = body.model_dump()
            instance_config = data.get("instance_config")
            data |= {
                "reward": 0.0,
                "mask_sample": True,
                "failure_kind": "judge_failed",
                "failure_reason": reason,
                "instance_config": {
                    **(instance_config if isinstance(instance_config, dict) else {}),
                    "mask_sample": True,
                },
                "_ng_failure_class": "judge_failed",
                "_ng_failure_judge_error": reason,
            }
            return JSONResponse(content=jsonable_encoder(data))

    return wrapper
