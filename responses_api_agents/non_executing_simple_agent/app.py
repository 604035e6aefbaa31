"""`non_executing_simple_agent`: one model call, whose answer is the rollout; no tool runs.

For tasks whose answer IS a tool call (NeMo Gym's `structured_outputs` v4 rows,
`response_mode: tool_call`): the request goes to the model's `POST /v1/responses` once, and its
Response, function calls included, is returned (and, in `/run`, verified) as it came. Running the
call, as `simple_agent` would, asks the resources server for a route it does not have and shows
the model an error it was never meant to see.

NeMo Gym 0.7.0's agent of the same name (responses_api_agents/non_executing_simple_agent/app.py)
does the same; its rows and configs (`structured_outputs_v4.yaml`) run here unchanged. The call
has `simple_agent`'s deadlines and retries (`model_call`); with `stream: true` its events are
relayed.
"""

from __future__ import annotations

from typing import ClassVar

from ng_cli.servers.agent import OneCallAgent, OneCallAgentConfig

__all__ = ["NonExecutingSimpleAgent", "NonExecutingSimpleAgentConfig"]


class NonExecutingSimpleAgentConfig(OneCallAgentConfig):
    """One model call per rollout; its tool calls are the answer, never run."""


class NonExecutingSimpleAgent(OneCallAgent[NonExecutingSimpleAgentConfig]):
    """`/v1/responses` is the model's answer (`OneCallAgent`); `/run` (seed -> it -> verify) comes
    from `AgentServer`."""

    config_class: ClassVar[type[NonExecutingSimpleAgentConfig]] = NonExecutingSimpleAgentConfig
