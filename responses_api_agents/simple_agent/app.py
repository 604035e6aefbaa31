"""`simple_agent`: the tool loop between one model server and one resources server.

Each turn sends the running conversation to the model's `POST /v1/responses`, runs every
`function_call` of its output against the resources server (`POST /<name>`, with the rollout's
cookies), and appends the model's items and one `function_call_output` per call. The loop ends
when a turn has no function call (the final answer), when the model's answer is `incomplete`
(context overflow, max tokens), or after `max_steps` turns.

The Response returned has the last turn's fields, `output` = every item of the whole rollout
(model items and tool outputs, in order: the trajectory a trainer needs, as in NeMo Gym) and
`usage` summed over the turns.

Two failure classes, on purpose:
* A tool failure is the model's business: unknown or undeclared tool, arguments that are not a
  JSON object, the resources server's 4xx/5xx answer. It becomes a `function_call_output`
  whose output describes the error, and the model gets to react. A rollout never crashes on it.
* A model failure (5xx, timeout, refused connection after the retries), or a resources server
  that cannot be reached or does not answer in time, raises the `UpstreamError` it is, for the
  collector to classify: the environment failed, not the model.

Items pass through as the decoded JSON dicts the model sent, so the token-id fields of the RL
contract (`prompt_token_ids`, `generation_token_ids`, `generation_log_probs`) reach the next
turn's input exactly as they came.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import orjson
from pydantic import Field

from ng_cli.config.schema import AgentServerConfig
from ng_cli.errors import InvalidOutputError, UpstreamHTTPError
from ng_cli.servers import AgentServer
from ng_cli.servers.agent import HopConfig
from ng_cli.servers.agent_stream import AgentEvents
from ng_cli.servers.trajectory import add_usage, function_call_output, input_items

__all__ = [
    "HopConfig",
    "SimpleAgent",
    "SimpleAgentConfig",
    "add_usage",
    "function_call_output",
    "input_items",
]

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_RESERVED_ROUTES = frozenset({"seed_session", "verify", "health"})
"""Routes of every resources server that a model must never reach by naming them as a tool."""


class SimpleAgentConfig(AgentServerConfig):
    """The simple tool-calling agent."""

    max_steps: int = Field(default=10, ge=1)
    """Most model calls per rollout; the loop stops after this many even if the model calls tools."""
    model_call: HopConfig = HopConfig()
    """Deadlines and retries of `POST /v1/responses` on the model server."""
    tool_call: HopConfig = HopConfig(read_s=120.0, total_s=300.0, max_attempts=2)
    """Deadlines and retries of tool calls. Retried only when the connection fails (refused,
    reset, or a pooled keep-alive connection the server had just closed), never after a timeout
    or an error status: a tool may change state (`increment`) and must not run twice."""


class SimpleAgent(AgentServer[SimpleAgentConfig]):
    """Runs the model/tool loop; `/run` (seed -> respond -> verify) comes from `AgentServer`."""

    config_class: ClassVar[type[SimpleAgentConfig]] = SimpleAgentConfig

    async def respond(
        self, params: dict[str, Any], *, cookies: dict[str, str], events: AgentEvents | None = None
    ) -> dict[str, Any]:
        """The tool loop for one Responses create body; returns the whole trajectory as `output`.
        With `events` (`stream: true`), the model's turns are streamed and every item is relayed."""
        history = input_items(params.get("input"))
        declared = declared_tools(params)
        trajectory: list[dict[str, Any]] = []
        usage: dict[str, Any] | None = None
        response: dict[str, Any] = {}
        params = {key: value for key, value in params.items() if key != "stream"}
        for _ in range(self.config.max_steps):
            body = {**params, "input": history + trajectory}
            if events is None:
                response = await self.call_model(body, cookies, self.config.model_call)
            else:
                response = await self.stream_model(
                    body, cookies, self.config.model_call, events=events, offset=len(trajectory)
                )
            output = response["output"]
            trajectory.extend(output)
            usage = add_usage(usage, response.get("usage"))
            calls = [item for item in output if item.get("type") == "function_call"]
            if response.get("status") == "incomplete" or not calls:
                break
            for call in calls:
                trajectory.append(await self._run_tool(call, declared, cookies))
                if events is not None:
                    events.item(trajectory[-1], output_index=len(trajectory) - 1)
        else:
            # The model still wanted tools when the budget ran out: say so instead of looking done.
            response = {**response, "status": "incomplete", "incomplete_details": {"reason": "max_steps"}}
        return {**response, "output": trajectory, "usage": usage}

    async def _run_tool(
        self, call: dict[str, Any], declared: frozenset[str], cookies: dict[str, str]
    ) -> dict[str, Any]:
        """Run one function call; any failure the model caused is described in its output."""
        call_id = call.get("call_id")
        if not isinstance(call_id, str):
            raise InvalidOutputError(f"the model's function_call has no string 'call_id': {_short(call)}")
        problem, arguments = check_call(call, declared)
        if problem is not None:
            return function_call_output(call_id, {"error": problem})
        try:
            result = await self.post_environment(  # a plain-text answer goes to the model as it came
                f"/{call['name']}", arguments, cookies, self.config.tool_call, text_ok=True
            )
        except UpstreamHTTPError as error:
            return function_call_output(call_id, {"error": tool_error_message(error)})
        return function_call_output(call_id, result)


def declared_tools(params: dict[str, Any]) -> frozenset[str]:
    """Names of the function tools the request offers the model."""
    tools = params.get("tools") or []
    return frozenset(
        tool["name"]
        for tool in tools
        if isinstance(tool, dict)
        and tool.get("type", "function") == "function"
        and isinstance(tool.get("name"), str)
    )


def check_call(call: dict[str, Any], declared: frozenset[str]) -> tuple[str | None, dict[str, Any]]:
    """(problem for the model, or None; the decoded arguments) of one function call."""
    name = call.get("name")
    if not isinstance(name, str) or not _TOOL_NAME.match(name) or name in _RESERVED_ROUTES:
        return f"there is no tool named {name!r}", {}
    if name not in declared:
        offered = ", ".join(sorted(declared)) or "none"
        return f"there is no tool named {name!r}; the tools offered are: {offered}", {}
    raw = call.get("arguments")
    try:
        arguments = orjson.loads(raw) if isinstance(raw, str | bytes) and raw else {}
    except orjson.JSONDecodeError as exc:
        return f"the arguments of {name} are not valid JSON ({exc}); send a JSON object", {}
    if not isinstance(arguments, dict):
        return f"the arguments of {name} must be a JSON object, got {type(arguments).__name__}", {}
    return None, arguments


def tool_error_message(error: UpstreamHTTPError) -> str:
    """The message of the resources server's error envelope, else its status and body."""
    try:
        envelope = orjson.loads(error.body)
        message = envelope["error"]["message"]
        if isinstance(message, str):
            return message
    except (orjson.JSONDecodeError, KeyError, TypeError):
        pass
    return f"the tool failed with HTTP {error.status}: {_short(error.body)}"


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
