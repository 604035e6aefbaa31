"""vLLM's own weight-transfer routes on the model server, as TRL's `VLLMClient` calls them.

TRL (>= 1.16) syncs weights into `vllm serve` through vLLM's development routes: it reads
`/server_info`, sizes its NCCL group from `/get_world_size`, joins it through
`/init_weight_transfer_engine`, then each sync is `/start_weight_update`, `/update_weights` (while
it broadcasts), `/finish_weight_update` and `/reset_prefix_cache`. The model server answers the
same routes over its engines, with the guarantees of `begin / push / commit`:

    GET  /server_info                   {"vllm_config": the first engine's, as JSON}: its
                                        `weight_transfer_config.backend`, `model_config` ...
    GET  /get_world_size                every engine's workers, summed: the trainer's group is
                                        1 + this, the trainer rank 0
    POST /init_weight_transfer_engine   to every engine, each with its own `rank_offset` (the first
                                        engine's is the trainer's, the next follow its workers);
                                        no pause: it touches no weights
    POST /start_weight_update           `begin` at the next version: admission stops, engines pause
    POST /update_weights                `push` to every paused engine
    POST /finish_weight_update          `commit`: verify, caches reset, the version set, resumed
    POST /reset_prefix_cache            nothing left to do: `commit` reset them (200)

The trainer names the model server where it would name vLLM (`vllm_server_base_url`), with the
engines' key as the password of the URL: `http://trl:<key>@host:port` (requests sends it as Basic
auth, so the key never travels in a path or a log line); Bearer works too. A sync that fails rolls
back as a push does, and the version stays.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request

from ng_cli.errors import BadRequestError, NgError
from ng_cli.model_server.admin_routes import authorizer
from ng_cli.servers import JSONResponse
from ng_cli.upstream.weights import WeightUpdater

__all__ = ["install_vllm_weight_routes"]


class _NoTransferError(NgError):
    http_status = 409


def install_vllm_weight_routes(app: FastAPI, weights: WeightUpdater, *, key: str, backend: str) -> None:
    authorize = authorizer(
        key,
        what="vLLM's weight-transfer routes on this model server",
        hint="name the model server as http://trl:<key>@host:port (the key from ng_run's key file, or "
        "NG_WEIGHTS_KEY); docs/training.md, 'With TRL'",
    )

    async def init_info(request: Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except ValueError:
            raise BadRequestError("the request body must be JSON") from None
        info = body.get("init_info") if isinstance(body, dict) else None
        if not isinstance(info, dict) or not isinstance(info.get("rank_offset", 0), int):
            raise BadRequestError("the body must be {'init_info': {..., 'rank_offset': int, ...}}")
        return info

    async def world_sizes() -> list[int]:
        answers = await weights.transfer_setup("get_world_size", lambda _i: None)
        return [int(answer["world_size"]) for answer in answers]

    @app.get("/server_info")
    async def server_info(request: Request) -> JSONResponse:
        authorize(request)
        if weights.push_reason is not None:
            raise _NoTransferError(weights.push_reason)
        # The first engine's own config (TRL reads `model_config.logprobs_mode`, its async trainer
        # `model_config.dtype`); only `vllm_config`: vLLM's answer also lists its environment.
        answer = (await weights.transfer_setup("server_info", lambda _i: None))[0]
        config = answer.get("vllm_config") if isinstance(answer, dict) else None
        config = dict(config) if isinstance(config, dict) else {}
        config["weight_transfer_config"] = {
            **(config.get("weight_transfer_config") or {}),
            "backend": backend,
        }
        model = config.get("model_config")
        if isinstance(model, dict) and isinstance(model.get("hf_token"), str):
            config["model_config"] = {**model, "hf_token": "***"}  # a secret, even to the key's holder
        return JSONResponse({"vllm_config": config})

    @app.get("/get_world_size")
    async def get_world_size(request: Request) -> JSONResponse:
        authorize(request)
        return JSONResponse({"world_size": sum(await world_sizes())})

    @app.post("/init_weight_transfer_engine")
    async def init_weight_transfer_engine(request: Request) -> JSONResponse:
        authorize(request)
        info = await init_info(request)
        sizes = await world_sizes()
        offsets = [int(info.get("rank_offset", 1)) + sum(sizes[:i]) for i in range(len(sizes))]
        await weights.transfer_setup(
            "init_weight_transfer_engine", lambda i: {"init_info": {**info, "rank_offset": offsets[i]}}
        )
        return JSONResponse({"message": "Weight transfer initialized", "rank_offsets": offsets})

    @app.post("/start_weight_update")
    async def start_weight_update(request: Request) -> JSONResponse:
        authorize(request)
        return JSONResponse(await weights.begin(weights.versions.version + 1))

    @app.post("/update_weights")
    async def update_weights(request: Request) -> JSONResponse:
        authorize(request)
        try:
            body = await request.json()
        except ValueError:
            raise BadRequestError("the request body must be JSON") from None
        return JSONResponse({"results": await weights.push("update_weights", body)})

    @app.post("/finish_weight_update")
    async def finish_weight_update(request: Request) -> JSONResponse:
        authorize(request)
        return JSONResponse(await weights.commit())

    @app.post("/reset_prefix_cache")
    async def reset_prefix_cache(request: Request) -> JSONResponse:
        authorize(request)
        return JSONResponse({"success": True, "note": "reset by the last commit"})
