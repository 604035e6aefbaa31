"""`gymnasium_agent`: the reset/step loop of Gymnasium-style environments; there is no `/verify`.

NeMo Gym 0.7.0's agent of the same name (responses_api_agents/gymnasium_agent/app.py) drives
environments built on its `GymnasiumServer` (blackjack, grl_sokoban, grl_tetris, tales, wordle,
example_multi_turn_gymnasium, ...). One rollout, as there:

    POST <env>/reset   body = the row                  -> {observation, info}
    repeat up to max_steps:
        POST <model>/v1/responses   the row's request, its input + every item so far
        POST <env>/step   body = the row + {"response": the model's Response}
                                                     -> {observation, reward, terminated, truncated, info}
        reward += step.reward; stop when terminated or truncated
        else add info.tool_outputs as function_call_output items and the observation as a
        user message, for the next turn
    POST <env>/close   only when reset's info says supports_explicit_close (also after a failure)

The answer: `responses_create_params` (the row's, with the reset observation appended to its
input), `response` (the last model Response, `output` = the whole trajectory, `usage` summed),
`reward` (the sum of every step's), `terminated`, `truncated` (also true when `max_steps` ran
out), `info` (the last step's; `cleanup_warning` when `/close` failed after a good episode).

The environment's own session cookie (NeMo Gym's servers set one on `/reset`) is kept from every
answer and sent back on the next call, beside the rollout's `ng_session`. `/reset`, `/step` and
`/close` are retried only when the connection failed (never after a timeout or an error status:
a step must not run twice); reset's `supports_step_idempotency` adds a fresh
`_ng_step_request_id` to each step, as NeMo Gym does. `/v1/responses` on this agent is one model
call, the model's Response as it came.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ng_cli.errors import InvalidOutputError
from ng_cli.servers.agent import HopConfig, OneCallAgent, OneCallAgentConfig, create_params
from ng_cli.servers.session import RolloutCookies
from ng_cli.servers.trajectory import add_usage, input_items, user_message

__all__ = ["EnvReset", "EnvStep", "GymnasiumAgent", "GymnasiumAgentConfig"]

logger = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)


class GymnasiumAgentConfig(OneCallAgentConfig):
    """The reset/step agent of Gymnasium-style environments (NeMo Gym's config block unchanged)."""

    max_steps: int = Field(default=10, ge=1)
    """Most model turns (and steps) per episode; an episode still running then is `truncated`."""
    env_call: HopConfig = HopConfig(read_s=120.0, total_s=300.0, max_attempts=2)
    """Deadlines of `/reset`, `/step` and `/close`; retried only when the connection failed."""


class EnvReset(BaseModel):
    """`/reset`'s answer (NeMo Gym's `EnvResetResponse`)."""

    observation: str | None = None
    info: dict[str, Any] = Field(default_factory=dict)


class EnvStep(BaseModel):
    """`/step`'s answer (NeMo Gym's `EnvStepResponse`)."""

    model_config = ConfigDict(allow_inf_nan=False)

    observation: str | None = None
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = Field(default_factory=dict)


class GymnasiumAgent(OneCallAgent[GymnasiumAgentConfig]):
    """`/run` is one episode (reset, then a model turn and a step until it ends); `/v1/responses`
    is one model call (`OneCallAgent`)."""

    config_class: ClassVar[type[GymnasiumAgentConfig]] = GymnasiumAgentConfig

    async def run(self, row: dict[str, Any], *, cookies: dict[str, str]) -> dict[str, Any]:
        params = create_params(row)
        env_cookies = RolloutCookies(cookies)  # keeps the environment's own Set-Cookie
        answer = await self.post_environment("/reset", row, env_cookies, self.config.env_call)
        info = answer.get("info") if isinstance(answer, dict) else None
        closes = isinstance(info, dict) and info.get("supports_explicit_close") is True
        try:
            # A reset that answered owns the environment's slot, even if its answer is bad.
            reset = self._parsed(EnvReset, answer, "/reset")
            result = await self._episode(row, params, reset, cookies, env_cookies)
        except BaseException:
            if closes:
                try:
                    await self._close(env_cookies)
                except Exception:
                    logger.exception("%s: /close failed after a failed episode", self.name)
            raise
        if closes:
            try:
                await self._close(env_cookies)
            except Exception as error:
                logger.exception("%s: the episode ended, but /close failed", self.name)
                warning = {"operation": "close", "error_type": type(error).__name__, "message": str(error)}
                result["info"] = {**result["info"], "cleanup_warning": warning}
        return result

    async def _episode(
        self,
        row: dict[str, Any],
        params: dict[str, Any],
        reset: EnvReset,
        cookies: dict[str, str],
        env_cookies: dict[str, str],
    ) -> dict[str, Any]:
        base = {key: value for key, value in params.items() if key != "stream"}
        base["input"] = input_items(base.get("input"))
        if reset.observation:
            base["input"] = [*base["input"], user_message(reset.observation)]
        idempotent = reset.info.get("supports_step_idempotency") is True
        trajectory: list[dict[str, Any]] = []
        usage: dict[str, Any] | None = None
        total = 0.0
        step = EnvStep(truncated=True)
        response: dict[str, Any] = {}
        finished = False
        for _ in range(self.config.max_steps):
            body = {**base, "input": base["input"] + trajectory}
            response = await self.call_model(body, cookies, self.config.model_call)
            trajectory.extend(response["output"])
            usage = add_usage(usage, response.get("usage"))
            step_body = {**row, "response": response}
            if idempotent:
                step_body["_ng_step_request_id"] = uuid.uuid4().hex
            answer = await self.post_environment("/step", step_body, env_cookies, self.config.env_call)
            step = self._parsed(EnvStep, answer, "/step")
            total += step.reward
            if step.terminated or step.truncated:
                finished = True
                break
            trajectory.extend(self._tool_outputs(step.info))
            if step.observation:
                trajectory.append(user_message(step.observation))
        return {
            "responses_create_params": base,
            "response": {**response, "output": trajectory, "usage": usage},
            "reward": total,
            "terminated": step.terminated,
            "truncated": step.truncated or not finished,
            "info": step.info,
        }

    async def _close(self, env_cookies: dict[str, str]) -> None:
        await self.post_environment("/close", {}, env_cookies, self.config.env_call)

    def _parsed(self, model: type[M], answer: Any, route: str) -> M:
        """The environment's answer as `model`, or an InvalidOutputError naming what is wrong."""
        try:
            return model.model_validate(answer)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()
            )
            raise InvalidOutputError(
                f"{self.resources_url}{route} answered a body that is not a Gymnasium {route[1:]} "
                f"answer ({problems})"
            ) from exc

    def _tool_outputs(self, info: dict[str, Any]) -> list[dict[str, Any]]:
        """`info.tool_outputs` ({call_id, output: str} each) as function_call_output items."""
        outputs = info.get("tool_outputs") or []
        items = []
        for index, entry in enumerate(outputs if isinstance(outputs, list) else [outputs]):
            if not (
                isinstance(entry, dict)
                and isinstance(entry.get("call_id"), str)
                and isinstance(entry.get("output"), str)
            ):
                raise InvalidOutputError(
                    f"{self.resources_url}/step answered info.tool_outputs[{index}] without a string "
                    f"'call_id' and 'output': {entry!r:.300}"
                )
            items.append(
                {"type": "function_call_output", "call_id": entry["call_id"], "output": entry["output"]}
            )
        return items
