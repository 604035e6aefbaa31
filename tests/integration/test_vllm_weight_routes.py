"""vLLM's weight-transfer routes on the model server, called as TRL's `VLLMClient` calls them.

The real model server over stand-in engines (`tests/fixtures/weight_engines.py`), two of them, so
that each gets its own NCCL rank offset. The sequence is TRL 1.16's (`init_communicator`, then per
sync `start_weight_update`, `update_weights`, `finish_weight_update`, `reset_prefix_cache`), sent
the way its `requests` session sends it: the key as the password of the URL (Basic auth). NCCL
itself needs GPUs (bench/weight_push.py --transfer nccl ran it on two H200s).
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
import urllib.error
import urllib.request
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.weight_engines import KEY, StandIn, serve, status

served = contextlib.contextmanager(serve)


class TransferStandIn(StandIn):
    """A stand-in that also takes `/init_weight_transfer_engine` and keeps what it was sent."""

    def __init__(self, world_size: int = 1) -> None:
        super().__init__()
        self.world = world_size
        self.inits: list[dict[str, Any]] = []

    def app(self) -> Starlette:
        app = super().app()
        app.router.routes.insert(0, Route("/init_weight_transfer_engine", self.init, methods=["POST"]))
        app.router.routes.insert(0, Route("/get_world_size", self.sized, methods=["GET"]))
        return app

    async def init(self, request: Request) -> Response:
        self.inits.append(json.loads(await request.body()))
        self.log.append("init")
        return JSONResponse({"message": "ok"})

    async def sized(self, _request: Request) -> Response:
        self.log.append("get_world_size")
        return JSONResponse({"world_size": self.world})


def trl(url: str, route: str, body: Any = None, *, password: str = KEY) -> tuple[int, Any]:
    """One call as TRL's client makes it: the key as Basic auth's password (from the URL)."""
    data = None if body is None else json.dumps(body).encode()
    token = base64.b64encode(f"trl:{password}".encode()).decode()
    request = urllib.request.Request(
        f"{url}{route}",
        data=data,
        method="GET" if data is None else "POST",
        headers={"Authorization": f"Basic {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=HANG_CAP_S) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_trl_sync_is_a_push_each_engine_with_its_own_rank() -> None:
    with served([TransferStandIn(world_size=2), TransferStandIn(world_size=1)]) as (stand_ins, _roots, url):
        code, info = trl(url, "/server_info")
        assert code == 200, info
        assert info["vllm_config"]["weight_transfer_config"] == {"backend": "nccl"}
        assert info["vllm_config"]["model_config"]["logprobs_mode"] == "raw_logprobs"  # the engine's own
        assert "vllm_env" not in info
        assert info["vllm_config"]["model_config"]["hf_token"] == "***"
        assert all(one.log == ["server_info"] for one in stand_ins)
        for one in stand_ins:
            one.log.clear()
        code, size = trl(url, "/get_world_size")
        assert (code, size) == (200, {"world_size": 3})
        # TRL: the trainer is rank 0, the workers follow; world = 1 + get_world_size
        init = {"master_address": "10.0.0.1", "master_port": 51216, "rank_offset": 1, "world_size": 4}
        code, answer = trl(url, "/init_weight_transfer_engine", {"init_info": init})
        assert code == 200, answer
        assert [one.inits for one in stand_ins] == [
            [{"init_info": {**init, "rank_offset": 1}}],
            [{"init_info": {**init, "rank_offset": 3}}],
        ]
        assert all(not one.paused for one in stand_ins)  # the group is made without a pause
        assert status(url)["version"] == 0

        for version in (1, 2):
            code, answer = trl(url, "/start_weight_update", {})
            assert code == 200, answer
            assert all(one.paused for one in stand_ins)
            assert status(url)["admitting"] is False
            names = {"names": ["w"], "dtype_names": ["bfloat16"], "shapes": [[2]], "packed": True}
            code, answer = trl(url, "/update_weights", {"update_info": names})
            assert code == 200, answer
            code, answer = trl(url, "/finish_weight_update", {})
            assert code == 200, answer
            assert answer["version"] == version
            assert trl(url, "/reset_prefix_cache", {})[0] == 200
            now = status(url)
            assert (now["version"], now["admitting"]) == (version, True)
            assert all(not one.paused for one in stand_ins)
        for one in stand_ins:
            assert one.log.count("update_weights") == 2
            assert one.log.count("init") == 1


def test_the_routes_need_the_key_and_a_stack_without_transfer_says_how() -> None:
    with served([TransferStandIn()]) as (stand_ins, _roots, url):
        for route, body in (("/get_world_size", None), ("/start_weight_update", {}), ("/server_info", None)):
            code, answer = trl(url, route, body, password="not-the-key")
            assert code == 401, answer
            assert "trl:<key>@host:port" in answer["error"]["hint"]
        assert stand_ins[0].log == []
        assert status(url)["admitting"] is True
    with served([TransferStandIn()], weight_transfer="none") as (stand_ins, _roots, url):
        code, answer = trl(url, "/server_info")
        assert code == 409, answer
        assert "weight_transfer: nccl" in answer["error"]["message"]
        code, answer = trl(url, "/init_weight_transfer_engine", {"init_info": {"rank_offset": 1}})
        assert code == 409, answer
        assert stand_ins[0].log == []


def test_a_sync_that_fails_rolls_back_and_the_version_stays() -> None:
    with served([TransferStandIn()]) as (stand_ins, _roots, url):
        assert trl(url, "/start_weight_update", {})[0] == 200
        code, answer = trl(url, "/init_weight_transfer_engine", {"init_info": "not a dict"})
        assert code == 400, answer
        assert trl(url, "/update_weights", {"update_info": {"names": []}})[0] == 200
        # the trainer dies before finish: the push's lease (2 s here) aborts it, the version stays
        deadline = time.monotonic() + HANG_CAP_S
        while status(url)["pushing"] and time.monotonic() < deadline:
            time.sleep(0.05)
        now = status(url)
        assert (now["pushing"], now["version"], now["admitting"]) == (False, 0, True)
        assert not stand_ins[0].paused
    with served([TransferStandIn()]) as (stand_ins, _roots, url):
        stand_ins[0].non_finite_for = "pushed"  # the pushed weights hold NaN: refused at verify
        assert trl(url, "/start_weight_update", {})[0] == 200
        assert trl(url, "/update_weights", {"update_info": {"names": []}})[0] == 200
        code, answer = trl(url, "/finish_weight_update", {})
        assert code == 409, answer
        assert answer["error"]["version"] == 0
        assert status(url)["version"] == 0
        assert status(url)["admitting"] is True
