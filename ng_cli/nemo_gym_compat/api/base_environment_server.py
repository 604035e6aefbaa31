"""`nemo_gym.base_environment_server`: NeMo Gym's typed episode servers (`/run` of one episode).

An environment server (NeMo Gym's `legacy_agent`, `single_agent_turn`) runs one episode per
`/run`: admitted under `max_concurrent_episodes` (waiting at most `queue_timeout_seconds`),
bounded by `default_episode_timeout_seconds`, its cleanups run last-in first-out within
`cleanup_timeout_seconds` whatever happened, shielded from cancellation. A failure the server
raises as `HandledEpisodeError`, a timeout, or any other exception becomes the episode's
`failure` (terminal or not), never a bare 500. Under ng_run a `legacy_agent` block is served by
the agent it names (`config.environments`); this module is what their code and tests import.
"""

from __future__ import annotations

import asyncio
import logging
from abc import abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Self, TypeVar

from anyio import CancelScope
from fastapi import Body, FastAPI
from pydantic import ConfigDict, PositiveFloat, PositiveInt, PrivateAttr, model_validator

from ng_cli.nemo_gym_compat.api.config_types import (
    AggregateMetrics,
    AggregateMetricsRequest,
    BaseRunServerInstanceConfig,
)
from ng_cli.nemo_gym_compat.api.episode_types import (
    BaseEpisodeRequest,
    BaseEpisodeResponse,
    EpisodeFailure,
    EpisodeId,
)
from ng_cli.nemo_gym_compat.api.rollout_correlation import rollout_context
from ng_cli.nemo_gym_compat.api.server_utils import SimpleServer

__all__ = [
    "BaseEnvironmentServer",
    "BaseEnvironmentServerConfig",
    "CleanupContext",
    "CleanupHandle",
    "HandledEpisodeError",
]

LOGGER = logging.getLogger(__name__)

EpisodeRequestT = TypeVar("EpisodeRequestT", bound=BaseEpisodeRequest[Any])
EpisodeResponseT = TypeVar("EpisodeResponseT", bound=BaseEpisodeResponse[Any])
CleanupCallback = Callable[[], Awaitable[None]]


class BaseEnvironmentServerConfig(BaseRunServerInstanceConfig):
    """Episode limits shared by every environment server."""

    model_config = ConfigDict(extra="forbid")

    max_concurrent_episodes: PositiveInt | None = None
    queue_timeout_seconds: PositiveFloat | None = None
    default_episode_timeout_seconds: PositiveFloat | None = None
    cleanup_timeout_seconds: PositiveFloat

    @model_validator(mode="after")
    def _queue_timeout_with_limit(self) -> Self:
        if self.max_concurrent_episodes is not None and self.queue_timeout_seconds is None:
            raise ValueError("queue_timeout_seconds is required when max_concurrent_episodes is enabled")
        return self


@dataclass
class _CleanupEntry:
    name: str
    callback: CleanupCallback
    active: bool = True
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def close(self) -> None:
        async with self.lock:
            if self.active:
                await self.callback()
                self.active = False


@dataclass
class CleanupHandle:
    """Closes one registered participant early (once; later closes do nothing)."""

    entry: _CleanupEntry
    timeout_seconds: float

    async def close(self) -> None:
        async with asyncio.timeout(self.timeout_seconds):
            await self.entry.close()


@dataclass
class CleanupContext:
    """One episode's cleanups: run last-in first-out, within one total timeout; a failing one
    is logged and the rest still run."""

    episode_id: EpisodeId
    cleanup_timeout_seconds: float
    _cleanups: list[_CleanupEntry] = field(default_factory=list)

    def register_cleanup(self, name: str, callback: CleanupCallback) -> CleanupHandle:
        entry = _CleanupEntry(name=name, callback=callback)
        self._cleanups.append(entry)
        return CleanupHandle(entry, self.cleanup_timeout_seconds)

    async def aclose(self) -> None:
        try:
            async with asyncio.timeout(self.cleanup_timeout_seconds):
                for entry in reversed(self._cleanups):
                    try:
                        await entry.close()
                    except Exception:
                        LOGGER.exception("episode cleanup failed: %s", entry.name)
        except TimeoutError:
            LOGGER.error("episode cleanup timed out: episode_id=%s", self.episode_id)


class HandledEpisodeError(Exception):
    """A failure that belongs in the episode's answer."""

    def __init__(self, failure: EpisodeFailure) -> None:
        super().__init__(failure.failure_reason)
        self.failure = failure


class BaseEnvironmentServer(SimpleServer, Generic[EpisodeRequestT, EpisodeResponseT]):
    """A typed `/run` of one episode with admission, a deadline and cleanup."""

    config: BaseEnvironmentServerConfig
    request_model: ClassVar[type[Any]]
    response_model: ClassVar[type[Any]]
    _admission: asyncio.Semaphore | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        limit = self.config.max_concurrent_episodes
        self._admission = asyncio.Semaphore(limit) if limit is not None else None

    def setup_webserver(self) -> FastAPI:
        app = self.new_app()

        async def run_endpoint(body: Any) -> Any:
            return await self.run_request(body)

        run_endpoint.__annotations__["body"] = self.request_model
        run_endpoint.__annotations__["return"] = self.response_model
        app.post("/run", response_model=self.response_model)(run_endpoint)

        async def aggregate_metrics_endpoint(body: AggregateMetricsRequest) -> AggregateMetrics:
            return await self.aggregate_metrics(body)

        app.post("/aggregate_metrics", response_model=AggregateMetrics)(aggregate_metrics_endpoint)
        return app

    async def run_request(self, request: EpisodeRequestT) -> EpisodeResponseT:
        """One episode, its failures in its answer; a cancelled call is cancelled after cleanup."""
        if self._admission is not None:
            try:
                await asyncio.wait_for(self._admission.acquire(), timeout=self.config.queue_timeout_seconds)
            except TimeoutError:
                failure = EpisodeFailure(
                    failure_reason="Episode admission timed out", terminal=False, stage="admission"
                )
                return self.failure_response(request, failure)
        cleanup = CleanupContext(request.episode_id, float(self.config.cleanup_timeout_seconds))
        try:
            with rollout_context(request.episode_id.capture_key):
                response = await self._bounded_run(request, cleanup)
        finally:
            try:
                with CancelScope(shield=True):
                    await cleanup.aclose()
            finally:
                if self._admission is not None:
                    self._admission.release()
        response = self.response_model.model_validate(response)
        self.validate_response_identity(request, response)
        return response

    async def _bounded_run(self, request: EpisodeRequestT, cleanup: CleanupContext) -> EpisodeResponseT:
        deadline = asyncio.timeout(self.config.default_episode_timeout_seconds)
        try:
            async with deadline:
                return await self.run(request, cleanup)
        except TimeoutError as error:
            if deadline.expired():
                return self.failure_response(
                    request, EpisodeFailure(failure_reason="Episode timed out", terminal=False)
                )
            return self._unhandled_failure_response(request, error)
        except HandledEpisodeError as error:
            return self.failure_response(request, error.failure)
        except Exception as error:
            return self._unhandled_failure_response(request, error)

    @abstractmethod
    async def run(self, request: EpisodeRequestT, cleanup: CleanupContext) -> EpisodeResponseT:
        """Run one concrete environment protocol."""

    def _unhandled_failure_response(self, request: EpisodeRequestT, error: Exception) -> EpisodeResponseT:
        LOGGER.exception("unhandled environment server error: episode_id=%s", request.episode_id)
        reason = f"Unhandled environment server error: {type(error).__name__}: {error}"
        return self.failure_response(request, EpisodeFailure(failure_reason=reason[:2000], terminal=True))

    def failure_response(self, request: EpisodeRequestT, failure: EpisodeFailure) -> EpisodeResponseT:
        answer: EpisodeResponseT = self.response_model.model_validate(
            {
                "episode_id": request.episode_id,
                "task_id": request.task.task_id,
                "failure": failure.model_dump(mode="json"),
            }
        )
        return answer

    @staticmethod
    def validate_response_identity(request: EpisodeRequestT, response: EpisodeResponseT) -> None:
        if response.episode_id != request.episode_id:
            raise ValueError("response episode_id does not match request")
        if response.task_id != request.task.task_id:
            raise ValueError("response task_id does not match request")

    @abstractmethod
    async def aggregate_metrics(self, body: AggregateMetricsRequest = Body()) -> AggregateMetrics:
        """Per-rollout scores into task-level metrics."""
