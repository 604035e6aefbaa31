"""Fail-closed weight updates: one engine fails, every engine goes back, the version stays.

The real model server (local_vllm_model over two engines by `base_url`, `weight_updates: true`)
on loopback, over two stand-in engines: a real vLLM will not fail a reload, hang a phase or
answer different weights on demand, so these do (the real engines' path is
tests/engine/test_weight_updates.py). Each stand-in keeps what it was told: the checkpoint it
holds, its pause state, the calls it got.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ng_cli.config.schema import validate_block
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.testing import serve_in_thread
from tests.fixtures import checkpoints
from tests.fixtures.caps import HANG_CAP_S

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "responses_api_models" / "local_vllm_model" / "app.py"
MODEL = ROOT / "models" / "tiny-weather"
KEY = "engines-key-0123456789"


@dataclass
class StandIn:
    """One engine's admin routes, with a fault to force."""

    holds: str = str(MODEL)
    paused: bool = False
    fail_reload_of: str | None = None
    hang_pause: bool = False
    odd_fingerprint: bool = False
    log: list[str] = field(default_factory=list)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/health", lambda _r: Response(b"")),
                Route("/v1/models", self.models),
                Route("/pause", self.pause, methods=["POST"]),
                Route("/resume", self.resume, methods=["POST"]),
                Route("/collective_rpc", self.rpc, methods=["POST"]),
                Route("/reset_prefix_cache", self.reset, methods=["POST"]),
                Route("/start_weight_update", self.logged("start"), methods=["POST"]),
                Route("/update_weights", self.logged("update_weights"), methods=["POST"]),
                Route("/finish_weight_update", self.logged("finish"), methods=["POST"]),
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
            ]
        )

    def fingerprint(self) -> str:
        return hashlib.sha256((self.holds + ("odd" if self.odd_fingerprint else "")).encode()).hexdigest()

    def logged(self, what: str) -> Any:
        async def route(_request: Request) -> Response:
            self.log.append(what)
            if what == "update_weights":
                self.holds = "pushed"
            return JSONResponse({"message": what})

        return route

    async def models(self, _request: Request) -> Response:
        return JSONResponse({"data": [{"id": "models/tiny-weather", "object": "model"}]})

    async def pause(self, request: Request) -> Response:
        self.log.append(f"pause {request.query_params.get('mode')}")
        if self.hang_pause:
            await asyncio.Event().wait()
        self.paused = True
        return JSONResponse({"status": "paused"})

    async def resume(self, _request: Request) -> Response:
        self.log.append("resume")
        self.paused = False
        return JSONResponse({"status": "resumed"})

    async def reset(self, _request: Request) -> Response:
        self.log.append("reset")
        return JSONResponse({"success": True})

    async def rpc(self, request: Request) -> Response:
        body = json.loads(await request.body())
        if body["method"] == "ng_reload_weights":
            path = body["kwargs"]["weights_path"]
            self.log.append(f"reload {Path(path).name}")
            if path == self.fail_reload_of:
                return JSONResponse({"error": {"message": "Call to collective_rpc method failed: boom"}}, 500)
            self.holds = path
        return JSONResponse({"results": [self.fingerprint()]})

    async def chat(self, request: Request) -> Response:
        body = json.loads(await request.body())
        message = {"role": "assistant", "content": f"held {Path(self.holds).name}"}
        completion = {"id": "c", "object": "chat.completion", "model": body["model"], "created": 0}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        return JSONResponse({**completion, "choices": [choice], "usage": usage})


@pytest.fixture
def engines() -> Iterator[tuple[list[StandIn], list[str], str]]:
    yield from _serve([StandIn(), StandIn()])


@pytest.fixture
def expert_ranks() -> Iterator[tuple[list[StandIn], list[str], str]]:
    """The two endpoints of one expert-parallel group (external LB): rank 1 holds other experts,
    so its fingerprint differs from rank 0's on every checkpoint."""
    yield from _serve(
        [StandIn(), StandIn(odd_fingerprint=True)],
        data_parallel_mode="external_lb",
        expert_parallel_size=2,
    )


def _serve(stand_ins: list[StandIn], **extra: Any) -> Iterator[tuple[list[StandIn], list[str], str]]:
    with ExitStack() as stack:
        urls = [stack.enter_context(serve_in_thread(one.app())) for one in stand_ins]
        server_class = load_server_class(APP)
        block = {
            "base_url": [f"{url}/v1" for url in urls],
            "api_key": KEY,
            "model": "models/tiny-weather",  # the boot checkpoint, as ng_run's engines serve it
            "return_token_id_information": False,
            "uses_reasoning_parser": False,
            "weight_updates": True,
            "weight_update_deadlines": {"pause_s": 1.0, "push_lease_s": 2.0},
            **extra,
        }
        server = server_class(validate_block(server_class.config_class, block=block), name="policy_model")
        url = stack.enter_context(serve_in_thread(server.build_app()))
        yield stand_ins, urls, url


def failed_update(url: str, tmp_path: Path) -> dict[str, Any]:
    """Update to checkpoint B (a good one); it must fail with 409: the error envelope."""
    good = checkpoints.swapped(MODEL, tmp_path / "B", "Ġdegrees", "ĠElacas")
    status, answer = admin(url, "/admin/weights/update", {"path": str(good), "version": 1})
    assert status == 409, answer
    return dict(answer["error"])


def admin(url: str, route: str, body: Any = None, *, key: str = KEY) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        f"{url}{route}",
        data=None if body is None else json.dumps(body).encode(),
        method="GET" if body is None else "POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_one_engine_failing_its_reload_puts_every_engine_back(
    engines: tuple[list[StandIn], list[str], str], tmp_path: Path
) -> None:
    stand_ins, roots, url = engines
    stand_ins[1].fail_reload_of = str(tmp_path / "B")
    error = failed_update(url, tmp_path)
    assert (error["phase"], error["rolled_back"], error["version"]) == ("reload", True, 0)
    assert error["engine"] == roots[1]
    assert "every engine is back on version 0" in error["message"]
    assert all(one.holds == str(MODEL) and not one.paused for one in stand_ins)
    assert stand_ins[0].log == ["pause keep", "reload B", "reload tiny-weather", "reset", "resume"]
    assert admin(url, "/admin/weights")[1]["version"] == 0
    assert admin(url, "/admin/weights")[1]["admitting"] is True


def test_a_phase_past_its_deadline_is_named_and_rolled_back(
    engines: tuple[list[StandIn], list[str], str], tmp_path: Path
) -> None:
    stand_ins, _roots, url = engines
    stand_ins[0].hang_pause = True
    error = failed_update(url, tmp_path)
    assert error["phase"] == "pause"
    assert "no answer within 1 s" in error["message"]
    assert stand_ins[1].log[-1] == "resume"  # the engine that did pause is resumed
    assert admin(url, "/admin/weights")[1]["admitting"] is True


def test_engines_that_disagree_after_the_same_load_are_refused(
    engines: tuple[list[StandIn], list[str], str], tmp_path: Path
) -> None:
    stand_ins, _roots, url = engines
    stand_ins[1].odd_fingerprint = True
    assert failed_update(url, tmp_path)["phase"] == "verify"
    assert all(one.holds == str(MODEL) for one in stand_ins)


def test_expert_parallel_ranks_differ_by_design_and_roll_back_to_their_own(
    expert_ranks: tuple[list[StandIn], list[str], str], tmp_path: Path
) -> None:
    """Seen on two H200s (moe_dp2_ep2, external LB): the cross-engine check refused every update.
    Ranks are compared with themselves: the update passes, and a later failed one rolls each back
    to (and checks it against) its own fingerprint."""
    stand_ins, roots, url = expert_ranks
    good = checkpoints.swapped(MODEL, tmp_path / "B", "Ġdegrees", "ĠElacas")
    status, answer = admin(url, "/admin/weights/update", {"path": str(good), "version": 1})
    assert status == 200, answer
    assert all(one.holds == str(good) for one in stand_ins)
    stand_ins[0].fail_reload_of = str(tmp_path / "C")
    other = checkpoints.swapped(MODEL, tmp_path / "C", "Ġdegrees", "ĠElacas")
    status, answer = admin(url, "/admin/weights/update", {"path": str(other), "version": 2})
    assert status == 409, answer
    error = answer["error"]
    assert (error["phase"], error["rolled_back"], error["version"]) == ("reload", True, 1), error
    assert all(one.holds == str(good) and not one.paused for one in stand_ins)
    assert error["engine"] == roots[0]


def test_a_good_update_stamps_calls_and_a_wrong_key_is_refused(
    engines: tuple[list[StandIn], list[str], str], tmp_path: Path
) -> None:
    stand_ins, roots, url = engines
    good = checkpoints.swapped(MODEL, tmp_path / "B", "Ġdegrees", "ĠElacas")
    assert admin(url, "/admin/weights/update", {"path": str(good), "version": 1}, key="wrong")[0] == 401
    status, answer = admin(url, "/admin/weights/update", {"path": str(good), "version": 2, "mode": "wait"})
    assert status == 200
    assert answer["version"] == 2
    assert set(answer["engines"]) == set(roots)
    assert all(one.holds == str(good) and one.log[0] == "pause wait" for one in stand_ins)
    request = urllib.request.Request(
        f"{url}/v1/chat/completions",
        data=json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        completion = json.loads(reply.read())
    assert completion["weight_version"]["start"] == completion["weight_version"]["end"] == 2
    assert completion["choices"][0]["message"]["content"] == "held B"


def test_a_tensor_push_gets_the_same_pause_version_and_cache_handling(
    engines: tuple[list[StandIn], list[str], str],
) -> None:
    stand_ins, _roots, url = engines
    status, begun = admin(url, "/admin/weights/begin", {"version": 3})
    assert status == 200
    assert begun["version"] == 3
    assert admin(url, "/admin/weights")[1]["admitting"] is False  # calls wait while the trainer pushes
    assert admin(url, "/admin/weights/begin", {"version": 4})[0] == 409  # one update at a time
    status, pushed = admin(url, "/admin/weights/push/update_weights", {"update_info": {"names": ["w"]}})
    assert status == 200
    assert len(pushed["results"]) == 2
    assert admin(url, "/admin/weights/push/collective_rpc", {})[0] == 409  # only the push routes
    status, committed = admin(url, "/admin/weights/commit", {})
    assert status == 200
    assert committed["version"] == 3
    state = admin(url, "/admin/weights")[1]
    assert (state["version"], state["path"], state["admitting"]) == (3, None, True)
    for one in stand_ins:
        assert one.log == ["pause keep", "start", "update_weights", "finish", "reset", "resume"]


def test_an_aborted_push_goes_back_to_the_checkpoint_on_disk(
    engines: tuple[list[StandIn], list[str], str],
) -> None:
    stand_ins, _roots, url = engines
    assert admin(url, "/admin/weights/begin", {"version": 3})[0] == 200
    admin(url, "/admin/weights/push/update_weights", {"update_info": {}})
    status, aborted = admin(url, "/admin/weights/abort", {})
    assert status == 200
    assert (aborted["version"], aborted["rolled_back"]) == (0, True)
    assert all(one.holds == str(MODEL) and not one.paused for one in stand_ins)
    assert admin(url, "/admin/weights")[1]["admitting"] is True


def test_a_push_left_open_is_aborted_when_its_lease_ends(
    engines: tuple[list[StandIn], list[str], str],
) -> None:
    stand_ins, _roots, url = engines
    assert admin(url, "/admin/weights/begin", {"version": 3})[0] == 200
    deadline = time.monotonic() + HANG_CAP_S
    while admin(url, "/admin/weights")[1]["pushing"] and time.monotonic() < deadline:
        time.sleep(0.1)
    state = admin(url, "/admin/weights")[1]
    assert (state["pushing"], state["admitting"], state["version"]) == (False, True, 0)
    assert all(one.log[-1] == "resume" for one in stand_ins)
