"""simple_agent over real sockets: the loop, tool failures, limits, token ids and model failures.

A probe environment defined here (echo / refuse / crash tools, per-session call counts) and a
scripted model stand on either side of the agent, all served by uvicorn on loopback.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from ng_cli.errors import BadRequestError, NgError, UpstreamHTTPError, UpstreamTimeoutError
from ng_cli.servers import HttpClient, ResourcesServer, ToolError, VerifyRequest, tool
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.testing import assistant_message, function_call, serve_rollout_stack, tool_outputs

pytestmark = pytest.mark.integration

Agent = load_server_class(Path(__file__).resolve().parents[1] / "app.py")

TOOLS = [
    {"type": "function", "name": name, "parameters": {"type": "object"}}
    for name in ("echo", "refuse", "crash", "missing")
]
ROW = {"responses_create_params": {"input": "go", "tools": TOOLS}, "expected_calls": 1}


class EchoArgs(BaseModel):
    text: str


class NoArgs(BaseModel):
    pass


class Probe(ResourcesServer):
    """Counts echo calls per session; verify rewards the expected count and a final 'done'."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: dict[str, int] = {}

    async def seed_session(self, session_id: str, _row: Mapping[str, Any]) -> None:
        self.calls[session_id] = 0

    @tool
    async def echo(self, session_id: str, args: EchoArgs) -> dict[str, Any]:
        self.calls[session_id] = self.calls.get(session_id, 0) + 1
        return {"echo": args.text}

    @tool
    async def refuse(self, _session_id: str, _args: NoArgs) -> dict[str, Any]:
        raise ToolError("refused on purpose")

    @tool
    async def crash(self, _session_id: str, _args: NoArgs) -> dict[str, Any]:
        raise RuntimeError("tool bug")

    async def verify(self, session_id: str, request: VerifyRequest) -> Mapping[str, Any]:
        calls = self.calls.pop(session_id, -1)
        last = request.response["output"][-1]
        said_done = last.get("type") == "message" and last["content"][0]["text"] == "done"
        return {"reward": float(said_done and calls == request.extra("expected_calls")), "calls": calls}


def echo_then_done(request: dict[str, Any]) -> list[dict[str, Any]]:
    if not tool_outputs(request):
        return [function_call("echo", {"text": "hello"})]
    return [assistant_message("done")]


async def respond_in_process(served: Any) -> dict[str, Any]:
    """`respond` on a twin of the served agent: its own HTTP client lives in this test's loop."""
    twin = Agent(served.config, name="twin", servers=served.servers)
    try:
        return await twin.respond(ROW["responses_create_params"], cookies={})
    finally:
        await twin.http.close()


async def test_run_returns_the_whole_trajectory_with_summed_usage(client: HttpClient) -> None:
    with serve_rollout_stack(Probe, Agent, echo_then_done) as stack:
        result = await client.post_json(f"{stack.agent_url}/run", ROW)
        requests, responses = stack.model.requests, stack.model.responses
    assert result["reward"] == 1.0
    assert result["calls"] == 1  # seed, tool and verify saw the same session
    output = result["response"]["output"]
    assert [item["type"] for item in output] == ["function_call", "function_call_output", "message"]
    assert output[0] == responses[0]["output"][0]
    assert output[1] == {
        "type": "function_call_output",
        "call_id": output[0]["call_id"],
        "output": '{"echo":"hello"}',
    }
    assert requests[0]["input"] == [{"type": "message", "role": "user", "content": "go"}]
    assert requests[1]["input"] == requests[0]["input"] + output[:2]
    assert requests[1]["tools"] == TOOLS
    for key in ("input_tokens", "output_tokens", "total_tokens"):
        assert result["response"]["usage"][key] == sum(r["usage"][key] for r in responses)
    assert result["response"]["id"] == responses[-1]["id"]


async def test_agent_responses_endpoint_runs_the_loop_without_seed_or_verify(client: HttpClient) -> None:
    with serve_rollout_stack(Probe, Agent, echo_then_done) as stack:
        response = await client.post_json(f"{stack.agent_url}/v1/responses", ROW["responses_create_params"])
    assert response["status"] == "completed"
    assert [item["type"] for item in response["output"]] == [
        "function_call",
        "function_call_output",
        "message",
    ]


async def test_every_kind_of_tool_failure_reaches_the_model_as_a_tool_output(client: HttpClient) -> None:
    bad_calls = [
        function_call("refuse", {}),
        function_call("crash", {}),
        function_call("missing", {}),
        function_call("undeclared", {}),
        function_call("verify", {"response": {}}),
        function_call("echo", '{"text": "unterminated'),
        function_call("echo", "[1]"),
        function_call("echo", {"txt": "typo"}),
    ]

    def policy(request: dict[str, Any]) -> list[dict[str, Any]]:
        return bad_calls if not tool_outputs(request) else [assistant_message("done")]

    with serve_rollout_stack(Probe, Agent, policy) as stack:
        result = await client.post_json(f"{stack.agent_url}/run", {**ROW, "expected_calls": 0})
        errors = [output["error"] for output in tool_outputs(stack.model.requests[1])]
    assert result["reward"] == 1.0
    assert len(errors) == len(bad_calls)
    assert errors[0] == "refused on purpose"
    assert "internal error: RuntimeError: tool bug" in errors[1]
    assert "no route POST /missing" in errors[2]  # the resources server's 404, in its envelope
    assert "no tool named 'undeclared'" in errors[3]
    assert "no tool named 'verify'" in errors[4]
    assert "not valid JSON" in errors[5]
    assert "must be a JSON object" in errors[6]
    assert "invalid arguments for tool 'echo'" in errors[7]
    outputs = [item for item in result["response"]["output"] if item["type"] == "function_call_output"]
    assert [item["call_id"] for item in outputs] == [call["call_id"] for call in bad_calls]


async def test_max_steps_stops_a_model_that_never_stops_calling_tools(client: HttpClient) -> None:
    def policy(_request: dict[str, Any]) -> list[dict[str, Any]]:
        return [function_call("echo", {"text": "again"})]

    with serve_rollout_stack(Probe, Agent, policy, agent_config={"max_steps": 3}) as stack:
        result = await client.post_json(f"{stack.agent_url}/run", ROW)
        model_calls = len(stack.model.requests)
    assert model_calls == 3
    assert result["calls"] == 3
    assert result["reward"] == 0.0
    assert [item["type"] for item in result["response"]["output"]] == [
        "function_call",
        "function_call_output",
    ] * 3
    assert result["response"]["status"] == "incomplete"
    assert result["response"]["incomplete_details"] == {"reason": "max_steps"}


async def test_token_id_fields_come_back_unchanged_in_the_next_request(client: HttpClient) -> None:
    token_fields = {
        "prompt_token_ids": [151644, 872, 198, 0, 2**31 - 1],
        "generation_token_ids": [40, 1079, 264, 151645],
        "generation_log_probs": [-0.0, -1.2345678901234567, -1e-300, -17.25],
    }
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}]}

    def policy(request: dict[str, Any]) -> list[dict[str, Any]]:
        if not tool_outputs(request):
            return [reasoning, function_call("echo", {"text": "hi"}, **token_fields)]
        return [assistant_message("done", **token_fields)]

    with serve_rollout_stack(Probe, Agent, policy) as stack:
        result = await client.post_json(f"{stack.agent_url}/run", ROW)
        first_output = stack.model.responses[0]["output"]
        second_input = stack.model.requests[1]["input"]
    assert second_input[1:3] == first_output
    for key, value in token_fields.items():
        assert second_input[2][key] == value
        assert [type(x) for x in second_input[2][key]] == [type(x) for x in value]
    assert result["response"]["output"][-1]["generation_log_probs"] == token_fields["generation_log_probs"]


async def test_an_incomplete_response_ends_the_loop_as_is(client: HttpClient) -> None:
    def policy(_request: dict[str, Any]) -> dict[str, Any]:
        return {
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "output": [function_call("echo", '{"text": "trunc')],
        }

    with serve_rollout_stack(Probe, Agent, policy) as stack:
        result = await client.post_json(f"{stack.agent_url}/run", ROW)
        model_calls = len(stack.model.requests)
    assert model_calls == 1
    assert result["calls"] == 0
    assert result["response"]["status"] == "incomplete"
    assert result["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert [item["type"] for item in result["response"]["output"]] == ["function_call"]


async def test_model_5xx_is_retried_then_raised_as_an_upstream_error(client: HttpClient) -> None:
    def policy(_request: dict[str, Any]) -> list[dict[str, Any]]:
        raise NgError("engine died")  # answered 500 (an unexpected exception would also close the connection)

    hop = {"model_call": {"max_attempts": 2, "backoff_s": 0.0}}
    with serve_rollout_stack(Probe, Agent, policy, agent_config=hop) as stack:
        with pytest.raises(UpstreamHTTPError) as over_http:
            await client.post_json(f"{stack.agent_url}/run", ROW)
        assert len(stack.model.requests) == 2
        with pytest.raises(UpstreamHTTPError) as in_process:
            await respond_in_process(stack.agent)
    assert over_http.value.status == 502
    assert '"type":"UpstreamHTTPError"' in over_http.value.body
    assert in_process.value.status == 500


async def test_model_4xx_is_not_retried_and_keeps_its_status(client: HttpClient) -> None:
    def policy(_request: dict[str, Any]) -> list[dict[str, Any]]:
        raise BadRequestError("temperature must be <= 2")

    with serve_rollout_stack(Probe, Agent, policy) as stack:
        with pytest.raises(UpstreamHTTPError) as caught:
            await client.post_json(f"{stack.agent_url}/run", ROW)
        assert len(stack.model.requests) == 1
    assert caught.value.status == 400
    assert "temperature must be <= 2" in caught.value.body


async def test_a_model_that_does_not_answer_in_time_is_a_504(client: HttpClient) -> None:
    def policy(_request: dict[str, Any]) -> list[dict[str, Any]]:
        time.sleep(0.6)
        return [assistant_message("late")]

    hop = {"model_call": {"read_s": 0.2, "max_attempts": 1}}
    with serve_rollout_stack(Probe, Agent, policy, agent_config=hop) as stack:
        with pytest.raises(UpstreamHTTPError) as over_http:
            await client.post_json(f"{stack.agent_url}/run", ROW)
        with pytest.raises(UpstreamTimeoutError):
            await respond_in_process(stack.agent)
    assert over_http.value.status == 504


async def test_a_model_answer_without_output_is_a_502(client: HttpClient) -> None:
    with (
        serve_rollout_stack(Probe, Agent, lambda _request: {"output": "nope"}) as stack,
        pytest.raises(UpstreamHTTPError) as caught,
    ):
        await client.post_json(f"{stack.agent_url}/run", ROW)
    assert caught.value.status == 502
    assert "without an 'output' list" in caught.value.body


class TextProbe(Probe):
    """Also a tool that answers in plain text, not JSON (NeMo Gym's litmus environments do)."""

    def build_app(self) -> Any:
        from fastapi.responses import PlainTextResponse

        app = super().build_app()

        @app.post("/motd")
        async def motd() -> PlainTextResponse:
            return PlainTextResponse("sunny, 22 degrees")

        return app


async def test_a_tools_plain_text_answer_reaches_the_model_as_it_came(client: HttpClient) -> None:
    """NeMo Gym's simple_agent hands the tool's body on as text; ours refused it as 'not JSON'."""
    tools = [{"type": "function", "name": "motd", "parameters": {"type": "object"}}]

    def outputs(request: dict[str, Any]) -> list[Any]:
        return [item for item in request["input"] if item.get("type") == "function_call_output"]

    def policy(request: dict[str, Any]) -> list[dict[str, Any]]:
        return [function_call("motd", {})] if not outputs(request) else [assistant_message("done")]

    with serve_rollout_stack(TextProbe, Agent, policy) as stack:
        result = await client.post_json(
            f"{stack.agent_url}/run",
            {"responses_create_params": {"input": "go", "tools": tools}, "expected_calls": 0},
        )
        sent = outputs(stack.model.requests[1])
    output = [item for item in result["response"]["output"] if item["type"] == "function_call_output"]
    assert [item["output"] for item in output] == ["sunny, 22 degrees"]
    assert sent == [
        {"type": "function_call_output", "call_id": output[0]["call_id"], "output": "sunny, 22 degrees"}
    ]
