"""`speed_bench_agent`: a row's trailing user turns replayed one model call at a time.

NeMo Gym 0.7.0's agent of the same name (responses_api_agents/speed_bench_agent/app.py), for its
`speed_bench` environment (SPEED-Bench: speculative-decoding acceptance read from the engine's
`/metrics`). A row whose input is `[system, user_1, user_2, user_3]` is played as a chat would
be, so the engine sees each turn's own prompt (what its spec-decode counters are about):

    call 1: [system, user_1]                                   -> assistant_1
    call 2: [system, user_1, assistant_1, user_2]              -> assistant_2
    call 3: [system, user_1, assistant_1, user_2, assistant_2, user_3]

As there:
* only the *trailing* user messages (after the last item that is not a user message) are turns;
  everything before the first of them is kept as the preamble (system/developer messages, an
  earlier exchange with its assistant messages, as written);
* an input whose last item is not a user message is sent whole, once; a string input is one user
  message;
* the reply carried into the next turn is `{"role": "assistant", "content": <text>}`, its text
  every `output_text` of the call's messages;
* the answer is the last call's Response with `output` = every call's items in order and `usage`
  summed over the calls;
* `/run` is seed_session -> this -> verify (`AgentServer.run`), one set of rollout cookies
  throughout: a cookie the model server sets on one turn goes back to it on the next, and to
  `/verify` with the environment's own.

Each call has `simple_agent`'s deadlines and retries (`model_call`); with `stream: true` every
call's events are relayed in turn. An empty input is refused (NeMo Gym's agent fails on it).
"""

from __future__ import annotations

from typing import Any, ClassVar

from ng_cli.config.schema import AgentServerConfig
from ng_cli.errors import BadRequestError
from ng_cli.protocol.responses import all_output_text
from ng_cli.servers.agent import AgentServer, HopConfig
from ng_cli.servers.agent_stream import AgentEvents
from ng_cli.servers.session import RolloutCookies
from ng_cli.servers.trajectory import add_usage, input_items

__all__ = ["SpeedBenchAgent", "SpeedBenchAgentConfig", "turn_split"]


class SpeedBenchAgentConfig(AgentServerConfig):
    """One model call per trailing user turn (NeMo Gym's config block unchanged)."""

    model_call: HopConfig = HopConfig()
    """Deadlines and retries of each `POST /v1/responses` on the model server."""


def turn_split(items: list[Any]) -> tuple[list[Any], list[Any]]:
    """(the first call's input, the user messages each later call adds), as NeMo Gym's agent
    splits a row's input: the trailing user messages are the turns; with none, one call."""
    if not items:
        raise BadRequestError("responses_create_params.input is empty: there is no turn to send")
    first = len(items)
    while first > 0 and _role(items[first - 1]) == "user":
        first -= 1
    if first == len(items):  # the last item is not a user message: the input whole, once
        return list(items), []
    return list(items[: first + 1]), list(items[first + 1 :])


def _role(item: Any) -> Any:
    return item.get("role") if isinstance(item, dict) else None


class SpeedBenchAgent(AgentServer[SpeedBenchAgentConfig]):
    """`/v1/responses` = one model call per trailing user turn; `/run` (seed -> it -> verify)
    comes from `AgentServer`."""

    config_class: ClassVar[type[SpeedBenchAgentConfig]] = SpeedBenchAgentConfig

    async def respond(
        self, params: dict[str, Any], *, cookies: dict[str, str], events: AgentEvents | None = None
    ) -> dict[str, Any]:
        """Every turn's call in order; the last Response with every call's output and the usage
        summed."""
        running, turns = turn_split(input_items(params.get("input")))
        body = {key: value for key, value in params.items() if key != "stream"}
        if not isinstance(cookies, RolloutCookies):  # /v1/responses: keep the model's cookies too
            cookies = RolloutCookies(cookies)
        response = await self._call({**body, "input": list(running)}, cookies, events, offset=0)
        outputs = list(response["output"])
        usage = add_usage(None, response.get("usage"))
        for user in turns:
            running += [{"role": "assistant", "content": all_output_text(response["output"])}, user]
            response = await self._call(
                {**body, "input": list(running)}, cookies, events, offset=len(outputs)
            )
            outputs.extend(response["output"])
            usage = add_usage(usage, response.get("usage"))
        return {**response, "output": outputs, "usage": usage}

    async def _call(
        self, body: dict[str, Any], cookies: dict[str, str], events: AgentEvents | None, *, offset: int
    ) -> dict[str, Any]:
        hop = self.config.model_call
        if events is None:
            return await self.call_model(body, cookies, hop)
        return await self.stream_model(body, cookies, hop, events=events, offset=offset)
