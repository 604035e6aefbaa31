"""The model server's admin routes over its `WeightUpdater` (`weight_updates: true`).

    GET  /admin/weights                   version, checkpoint, admission, last update
    POST /admin/weights/update            {"path", "version", "mode"}: reload from a checkpoint directory
    POST /admin/weights/begin             {"version", "mode"}: open a tensor push
    POST /admin/weights/push/{route}      forwarded to every engine (vLLM's tensor-push routes)
    POST /admin/weights/commit            close the push: verify, reset caches, set the version, resume
    POST /admin/weights/abort             give the push up: the version stays
    POST /admin/sleep                     {"level": 1|2}: drain, then free the engines' GPU memory
    POST /admin/wake_up                   back, and admitting again

Every route needs `Authorization: Bearer <the engines' key>` (the instance's `api_key`, random
per run unless configured; ng_run leaves it for `ng_update_weights` in a 0600 file, see
`launcher/admin_keys.py`). Failures answer the error envelope with `phase`, `engine`,
`rolled_back` and `version`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from ng_cli.errors import BadRequestError, NgError
from ng_cli.model_server.admin_paths import ADMIN_ROUTES
from ng_cli.servers import JSONResponse
from ng_cli.upstream.versions import MAX_VERSION
from ng_cli.upstream.weights import WeightUpdater

__all__ = ["ADMIN_ROUTES", "UnauthorizedError", "authorizer", "install_admin_routes", "key_of"]


class UnauthorizedError(NgError):
    http_status = 401


Version = Annotated[StrictInt, Field(ge=1, le=MAX_VERSION)]
"""A JSON integer from 1 to 2**63-1: `true`, `"1"`, `2.0` and `1e30` are refused, not coerced."""


class _Update(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    path: str = Field(min_length=1)
    version: Version
    mode: Literal["keep", "wait", "abort"] = "keep"


class _Begin(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    version: Version
    mode: Literal["keep", "wait", "abort"] = "keep"


class _Sleep(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    level: Annotated[StrictInt, Field(ge=1, le=2)] = 1


def key_of(authorization: str) -> str:
    """The key an `Authorization` header carries: Bearer's token, or Basic's password (TRL names the
    model server as `http://trl:<key>@host:port`, which requests sends as Basic)."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer":
        return token
    if scheme.lower() == "basic":
        try:
            return base64.b64decode(token, validate=True).decode().partition(":")[2]
        except (binascii.Error, UnicodeDecodeError):
            return ""
    return ""


def authorizer(key: str, *, what: str, hint: str) -> Callable[[Request], None]:
    """A check that a request carries `key` (compared in constant time); 401 naming `what` if not."""
    digest = hashlib.sha256(key.encode()).digest() if key else None

    def authorize(request: Request) -> None:
        if digest is None:
            raise UnauthorizedError(f"this model server has no key, so {what} are closed")
        given = key_of(request.headers.get("authorization", ""))
        if not hmac.compare_digest(hashlib.sha256(given.encode()).digest(), digest):
            raise UnauthorizedError(f"{what} need the engines' key", hint=hint)

    return authorize


def install_admin_routes(app: FastAPI, weights: WeightUpdater, *, key: str) -> None:
    authorize = authorizer(
        key,
        what="the admin routes",
        hint="send Authorization: Bearer <the engines' key>; ng_update_weights finds it in the key file "
        "ng_run writes; a remote trainer sets NG_WEIGHTS_KEY",
    )

    async def json_of(request: Request) -> Any:
        try:
            return await request.json()
        except ValueError:
            raise BadRequestError("the admin request body must be JSON") from None

    async def body_of(request: Request, model: type[BaseModel]) -> Any:
        try:
            return model.model_validate(await json_of(request))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()
            )
            raise BadRequestError(f"invalid admin request: {problems}") from None

    @app.get(ADMIN_ROUTES["weights"])
    async def weights_status(request: Request) -> JSONResponse:
        authorize(request)
        return JSONResponse(weights.status())

    @app.post(ADMIN_ROUTES["update"])
    async def update(request: Request) -> JSONResponse:
        authorize(request)
        body = await body_of(request, _Update)
        return JSONResponse(await weights.update(body.path, body.version, body.mode))

    @app.post(ADMIN_ROUTES["begin"])
    async def begin(request: Request) -> JSONResponse:
        authorize(request)
        body = await body_of(request, _Begin)
        return JSONResponse(await weights.begin(body.version, body.mode))

    @app.post(ADMIN_ROUTES["push"])
    async def push(route: str, request: Request) -> JSONResponse:
        authorize(request)
        body = await json_of(request) if await request.body() else None
        return JSONResponse({"results": await weights.push(route, body)})

    @app.post(ADMIN_ROUTES["commit"])
    async def commit(request: Request) -> JSONResponse:
        authorize(request)
        return JSONResponse(await weights.commit())

    @app.post(ADMIN_ROUTES["abort"])
    async def abort(request: Request) -> JSONResponse:
        authorize(request)
        return JSONResponse(await weights.abort())

    @app.post(ADMIN_ROUTES["sleep"])
    async def sleep(request: Request) -> JSONResponse:
        authorize(request)
        body = await body_of(request, _Sleep)
        return JSONResponse(await weights.sleep(body.level))

    @app.post(ADMIN_ROUTES["wake_up"])
    async def wake_up(request: Request) -> JSONResponse:
        authorize(request)
        return JSONResponse(await weights.wake_up())
