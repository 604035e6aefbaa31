"""`tool_simulation_agent`: one model call, verified; the tools' results are already in the row.

For environments whose rows carry an expert trajectory with every tool result written in
(NeMo Gym's `single_step_tool_use_with_argument_comparison`, `swe_pivot`, `indian_banking`,
`image_tools` pivot rows): the model takes one step, and the environment's `/verify` compares
it (often its tool call and arguments) with the expert's. No tool runs and no session is seeded.

NeMo Gym 0.7.0's agent of the same name (responses_api_agents/tool_simulation_agent/app.py) does
the same: `/run` = the model's Response for the row's request, then `POST /verify` with the row
and that Response, whose answer is the rollout. With `skip_verification: true` the environment
is not asked and the reward is `skip_verification_reward` (`verification_skipped: true` marks
such a row), as there. The model call has `simple_agent`'s deadlines and retries
(`model_call`); `/v1/responses` on this agent is that one call (streamed with `stream: true`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from ng_cli.config.nemo_gym import NemoGymKey
from ng_cli.servers.agent import HopConfig, OneCallAgent, OneCallAgentConfig, create_params

__all__ = ["ToolSimulationAgent", "ToolSimulationAgentConfig"]


class ToolSimulationAgentConfig(OneCallAgentConfig):
    """One model call per rollout, verified (NeMo Gym's config block unchanged)."""

    verify_call: HopConfig = HopConfig(read_s=300.0, total_s=600.0, max_attempts=2)
    """Deadlines of `POST /verify`; retried only when the connection failed."""
    skip_verification: bool = False
    """Do not ask the environment: every rollout gets `skip_verification_reward` (NeMo Gym's key)."""
    skip_verification_reward: float = Field(default=0.0, allow_inf_nan=False)
    """The reward of a rollout when `skip_verification` is on."""

    nemo_gym_keys: ClassVar[dict[str, NemoGymKey]] = {
        # swe_pivot.yaml and image_tools_pivot.yaml set it; NeMo Gym's agent ignores it.
        "max_steps": NemoGymKey(1, "the agent makes one model call per rollout"),
    }


class ToolSimulationAgent(OneCallAgent[ToolSimulationAgentConfig]):
    """`/run` = one model call (`OneCallAgent.respond`), then `/verify` (no `/seed_session`, as in
    NeMo Gym)."""

    config_class: ClassVar[type[ToolSimulationAgentConfig]] = ToolSimulationAgentConfig

    async def run(self, row: dict[str, Any], *, cookies: dict[str, str]) -> dict[str, Any]:
        params = create_params(row)
        response = await self.respond(params, cookies=cookies)
        if self.config.skip_verification:
            reward = self.config.skip_verification_reward
            return {**row, "response": response, "reward": reward, "verification_skipped": True}
        verified = await self.post_environment(
            "/verify", {**row, "response": response}, cookies, self.config.verify_call
        )
        return dict(verified)
