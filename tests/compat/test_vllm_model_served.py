"""vllm_model's NeMo Gym 0.7.0 keys act as NeMo Gym's do: for every case of
`cases/vllm_model_served.json`, the body vLLM gets and what the caller gets back agree with what
NeMo Gym's own `VLLMModel.chat_completions` / `.responses` (responses_api_models/vllm_model/app.py)
sent and answered, vLLM stood in by a client that answered the case's `upstream`.

Keys held here (they were refused, or acted otherwise, before): `forward_request_chat_template_kwargs`
(a request's own `chat_template_kwargs` are dropped unless it is true; they were always merged),
`continue_final_assistant_message` (vLLM continues a final assistant message, and what its reasoning
parser took for reasoning is the continuation's text), `propagate_context_overflow_errors` (vLLM's
400 reaches the caller), `forward_session_id_as_conversation_id` (the session as
`conversation_params.conversation_id`). Ours is served over HTTP against a stub vLLM that answers
the same `upstream`.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.requests import Request
from starlette.responses import Response

from ng_cli.config.schema import validate_block
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.testing import serve_in_thread
from tests.compat.case_files import load_cases
from tests.fixtures.stub_vllm import StubVllm

pytestmark = pytest.mark.integration

APP = Path(__file__).resolve().parents[2] / "responses_api_models" / "vllm_model" / "app.py"
CASES = load_cases("vllm_model_served")
PLAIN = {
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}]
}
"""What the oracle's client answered when a case gives no `upstream`."""


@dataclass
class AnsweringStub(StubVllm):
    """The stub vLLM, answering its chat route with `upstream` (a completion or an HTTP error)."""

    upstream: dict[str, Any] | None = None

    async def chat(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.requests.append(body)
        upstream = self.upstream or PLAIN
        if "status" in upstream:
            return Response(orjson.dumps(upstream["body"]), status_code=upstream["status"])
        completion = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": self.model}
        return Response(orjson.dumps({**completion, **upstream}), media_type="application/json")


@pytest.fixture(scope="module")
def stub() -> Iterator[tuple[AnsweringStub, str]]:
    engine = AnsweringStub()
    with serve_in_thread(engine.build_app()) as url:
        yield engine, url


def _served(stub: tuple[AnsweringStub, str], case: dict[str, Any]) -> tuple[dict[str, Any], int, Any]:
    """(the body our vllm_model sent vLLM, the status it answered, its answer) for one case."""
    engine, url = stub
    engine.upstream = case.get("upstream")
    block = {
        "base_url": f"{url}/v1",
        "api_key": engine.api_key,
        "model": engine.model,
        "return_token_id_information": False,
        "uses_reasoning_parser": False,
        **case["config"],
    }
    server_class = load_server_class(APP)
    server = server_class(validate_block(server_class.config_class, block=block), name="policy_model")
    route = "/v1/chat/completions" if case["route"] == "chat" else "/v1/responses"
    with serve_in_thread(server.build_app()) as model_url:
        request = urllib.request.Request(
            f"{model_url}{route}",
            data=orjson.dumps(case["request"]),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                status, payload = answer.status, orjson.loads(answer.read())
        except urllib.error.HTTPError as error:
            status, payload = error.code, orjson.loads(error.read())
    return dict(engine.requests[-1]), status, payload


def _session_named(body: dict[str, Any]) -> dict[str, Any]:
    """The body with the session's id (each side's own: NeMo Gym's cookie, our `ng_session`) named."""
    params = body.get("conversation_params")
    if not isinstance(params, dict):
        return body
    assert isinstance(params.get("conversation_id"), str)
    assert params["conversation_id"]
    return {**body, "conversation_params": {"conversation_id": "<the rollout's session id>"}}


def _said(answer: dict[str, Any], route: str) -> Any:
    """What a caller reads of an answer: the message and finish reason, or the output items' text."""
    if route == "chat":
        choice = answer["choices"][0]
        return choice["finish_reason"], choice["message"].get("content")
    return [
        (item["type"], [part.get("text") for part in item.get("content") or []]) for item in answer["output"]
    ]


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_vllm_model_keys_act_as_nemo_gyms(stub: tuple[AnsweringStub, str], case: dict[str, Any]) -> None:
    theirs = case["nemo_gym"]
    body, status, answer = _served(stub, case)
    assert _session_named(body) == _session_named(theirs["body"])
    assert status == theirs["status"]
    if status != 200:  # vLLM's error: NeMo Gym relays its body, we wrap its message in our envelope
        assert theirs["answer"]["message"] in answer["error"]["message"]
        return
    assert _said(answer, case["route"]) == _said(theirs["answer"], case["route"])
