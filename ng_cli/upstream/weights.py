"""`WeightUpdater`: one weight update, fanned out to every engine of a model server, fail-closed.

    check the checkpoint (headers vs the model's: names, dtypes, shapes)   refused: nothing touched
    stop admitting calls here (`WeightVersions.close`)
    pause every engine (mode keep | wait | abort)                           }
    reload the checkpoint on every engine (its workers' fingerprints back)  } any failure: roll back
    verify: every engine's fingerprint equal (replicas and ranks agree)     }
    reset each prefix cache (calls are also salted by version: `cache_salt`)
    set the version (the calls still in flight now span two versions)
    resume every engine, admit calls again

Each phase has a deadline per engine (`WeightUpdateDeadlines`), so nothing hangs. Rolling back
reloads the checkpoint the engines held before on every engine that was paused, checks that its
fingerprint is the one from before, and resumes it; the version stays, and the error names the
engine and the phase. An engine that cannot even be rolled back (a reload that failed can take
vLLM's engine core down) is taken out of the pool; ng_run restarts it, and it is brought to the
current checkpoint before it serves again (`restore`, from the health prober's rejoin).

A trainer that pushes tensors itself (NCCL, CUDA IPC) uses `begin` / `push` / `commit` / `abort`:
the same gate, pause, verify, cache and version handling around vLLM's weight-transfer routes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ng_cli.errors import NgError
from ng_cli.servers.http import HttpClient
from ng_cli.upstream.checkpoint import Checkpoint, CheckpointError
from ng_cli.upstream.config import WeightUpdateDeadlines
from ng_cli.upstream.engine_admin import EngineAdmin, PauseMode, PhaseError
from ng_cli.upstream.pool import Endpoint, EndpointPool
from ng_cli.upstream.versions import WeightVersions

__all__ = ["PUSH_ROUTES", "WeightUpdateError", "WeightUpdater"]

logger = logging.getLogger("ng_cli.upstream")

PUSH_ROUTES = frozenset({"init_weight_transfer_engine", "update_weights", "get_world_size"})
"""vLLM's tensor-push routes a trainer may reach through `push` (between `begin` and `commit`)."""


class WeightUpdateError(NgError):
    """An update refused or rolled back: the version did not change and the old weights serve."""

    exit_code = 2
    http_status = 409

    def __init__(
        self,
        message: str,
        *,
        phase: str,
        engine: str | None = None,
        rolled_back: bool = False,
        version: int | None = None,
        hint: str | None = None,
        timings: Mapping[str, Mapping[str, float]] | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.phase = phase
        self.engine = engine
        self.rolled_back = rolled_back
        self.version = version
        self.timings = dict(timings or {})

    def envelope_fields(self) -> dict[str, object]:
        return {
            "phase": self.phase,
            "engine": self.engine,
            "rolled_back": self.rolled_back,
            "version": self.version,
            "timings": self.timings,
        }


@dataclass
class _Engine:
    endpoint: Endpoint
    admin: EngineAdmin
    timings: dict[str, float] = field(default_factory=dict)
    paused: bool = False

    async def timed(self, phase: str, call: Awaitable[Any]) -> Any:
        started = time.perf_counter()
        try:
            return await call
        finally:
            self.timings[phase] = round(time.perf_counter() - started, 4)


class WeightUpdater:
    """The weights every engine of one model server holds, and the one way to change them."""

    def __init__(
        self,
        *,
        pool: EndpointPool,
        http: HttpClient,
        headers: Mapping[str, str],
        versions: WeightVersions,
        deadlines: WeightUpdateDeadlines,
        boot_path: str | None,
        disk_reason: str | None = None,
        ranks_are_shards: bool = False,
    ) -> None:
        self.pool = pool
        self.http = http
        self.headers = dict(headers)
        self.versions = versions
        self.deadlines = deadlines
        self.path = boot_path
        """The checkpoint directory every engine holds now (None: pushed tensors or dummy weights)."""
        self.boot_path = boot_path
        self.disk_reason = disk_reason
        """Why updates from disk are refused on these engines (None: they are not)."""
        self.fingerprint: list[str] | None = None
        self.ranks_are_shards = ranks_are_shards
        """The engines are the ranks of one expert-parallel group (external LB): each holds its own
        experts, so their fingerprints differ by design; each is checked against its own."""
        self._fingerprints: dict[str, list[str]] = {}
        """Every engine's fingerprint after the last update, by root URL."""
        self.last: dict[str, Any] | None = None
        self._reference: Checkpoint | None = None
        self._lock = asyncio.Lock()
        self._pushing: list[_Engine] | None = None
        self._lease: asyncio.TimerHandle | None = None
        self._lease_task: asyncio.Task[dict[str, Any]] | None = None
        self._sleeping = False

    # -- status --------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        return {
            "version": self.versions.version,
            "path": self.path,
            "admitting": self.versions.is_admitting,
            "in_flight": len(self.versions.in_flight()),
            "updating": self._lock.locked(),
            "pushing": self._pushing is not None,
            "sleeping": self._sleeping,
            "engines": [endpoint.root_url for endpoint in self.pool.endpoints],
            "fingerprint": self.fingerprint,
            "last_update": self.last,
        }

    # -- from a checkpoint directory -----------------------------------------------------------

    async def update(self, path: str, version: int, mode: PauseMode = "keep") -> dict[str, Any]:
        """Every engine on the checkpoint at `path`, served as `version` from now on."""
        self._refuse_if_busy()
        async with self._lock:
            self._check_version(version)
            checkpoint = self._checked_checkpoint(path)
            engines = self._engines()
            started = time.perf_counter()
            self.versions.close()
            try:
                in_flight_at_pause = await self._pause(engines, mode)
                fingerprints = await self._all(
                    "reload", engines, lambda e: e.admin.reload(path, deadline_s=self.deadlines.reload_s)
                )
                self._verify(engines, fingerprints)
            except PhaseError as error:
                await self._roll_back(engines)
                self.versions.open()
                raise self._failed(error, version, engines) from None
            result = await self._finish(
                engines, version, mode=mode, started=started, in_flight_at_pause=in_flight_at_pause
            )
            self.path = str(checkpoint.path)
            self._remember(engines, fingerprints)
            result.update(path=self.path, bytes=checkpoint.total_bytes)
            self.last = result
            return result

    async def restore(self, endpoint: Endpoint) -> str | None:
        """Bring an engine that (re)joins to the current checkpoint, resumed; None when it holds it now.

        Waits for an update in progress (else it could load the checkpoint being replaced)."""
        async with self._lock:
            if self.path is None:
                return (
                    None
                    if self.versions.version == 0
                    else "its weights were pushed, not loaded from disk: push again"
                )
            admin = EngineAdmin(self.http, endpoint.root_url, headers=self.headers)
            try:
                if self.path != self.boot_path or self.versions.version != 0:
                    fingerprint = await admin.reload(self.path, deadline_s=self.deadlines.reload_s)
                    expected = self._expected(endpoint.root_url)
                    if expected is not None and fingerprint != expected:
                        return f"its weights after loading version {self.versions.version} differ from the other engines'"
                    await admin.reset_prefix_cache(deadline_s=self.deadlines.reset_s)
                    logger.warning(
                        "engine %s rejoined and loaded version %d (%s) before serving",
                        endpoint.root_url, self.versions.version, self.path,
                    )  # fmt: skip
                await admin.resume(
                    deadline_s=self.deadlines.resume_s
                )  # an engine left paused by a failed resume
            except PhaseError as error:
                return f"could not load the current weights (version {self.versions.version}): {error.reason}"
            return None

    # -- for trainers that push tensors --------------------------------------------------------

    async def begin(self, version: int, mode: PauseMode = "keep") -> dict[str, Any]:
        """Stop admitting, pause every engine and open vLLM's weight update; `commit` or `abort` next."""
        self._refuse_if_busy()
        await self._lock.acquire()
        try:
            self._check_version(version)
            engines = self._engines()
            self.versions.close()
            try:
                in_flight = await self._pause(engines, mode)
                await self._all(
                    "start",
                    engines,
                    lambda e: e.admin.call(
                        "/start_weight_update", None, phase="start", deadline_s=self.deadlines.pause_s
                    ),
                )
            except PhaseError as error:
                await self._roll_back(engines)
                self.versions.open()
                raise self._failed(error, version, engines) from None
        except BaseException:
            self._lock.release()
            raise
        self._pushing = engines
        self._push_version, self._push_mode, self._push_started = version, mode, time.perf_counter()
        self._push_in_flight = in_flight
        self._lease = asyncio.get_running_loop().call_later(
            self.deadlines.push_lease_s, self._lease_expired, engines
        )
        return {
            "version": version,
            "engines": [e.endpoint.root_url for e in engines],
            "in_flight_at_pause": in_flight,
        }

    async def push(self, route: str, body: Any) -> list[Any]:
        """Forward one tensor-push call (`PUSH_ROUTES`) to every paused engine."""
        if self._pushing is None:
            raise WeightUpdateError("no tensor push is open: call begin first", phase="push")
        if route not in PUSH_ROUTES:
            raise WeightUpdateError(
                f"{route!r} is not a tensor-push route ({', '.join(sorted(PUSH_ROUTES))})", phase="push"
            )
        engines = self._pushing
        return await self._all(
            "push",
            engines,
            lambda e: e.admin.call(f"/{route}", body, phase="push", deadline_s=self.deadlines.reload_s),
        )

    async def commit(self) -> dict[str, Any]:
        """Close vLLM's update, verify, reset caches, set the version, resume, admit."""
        engines = self._open_push()
        version = self._push_version
        try:
            await self._all(
                "finish",
                engines,
                lambda e: e.admin.call(
                    "/finish_weight_update", None, phase="finish", deadline_s=self.deadlines.reload_s
                ),
            )
            fingerprints = await self._all(
                "verify", engines, lambda e: e.admin.fingerprint(deadline_s=self.deadlines.verify_s)
            )
            self._verify(engines, fingerprints)
        except PhaseError as error:
            await self._roll_back(engines)
            self._close_push()
            raise self._failed(error, version, engines) from None
        result = await self._finish(
            engines,
            version,
            mode=self._push_mode,
            started=self._push_started,
            in_flight_at_pause=self._push_in_flight,
        )
        self.path = None
        self._remember(engines, fingerprints)
        self.last = result
        self._close_push()
        return result

    async def abort(self) -> dict[str, Any]:
        """Give up a tensor push: the weights from before come back where they can, the version stays."""
        engines = self._open_push()
        for engine in engines:
            try:
                await engine.admin.call(
                    "/finish_weight_update", None, phase="finish", deadline_s=self.deadlines.reload_s
                )
            except PhaseError as error:
                logger.warning("abort: %s", error.message)
        problems = await self._roll_back(engines)
        self._close_push()
        return {"version": self.versions.version, "rolled_back": not problems, "problems": problems}

    # -- sleep and wake (a trainer sharing the GPU) --------------------------------------------

    async def sleep(self, level: int) -> dict[str, Any]:
        """Drain, then free the engines' GPU memory (level 1: weights offloaded, 2: discarded)."""
        self._refuse_if_busy()
        async with self._lock:
            engines = self._engines()
            self.versions.close()
            try:
                await self._pause(engines, "wait")
                await self._all(
                    "sleep", engines, lambda e: e.admin.sleep(level, deadline_s=self.deadlines.reload_s)
                )
                sleeping = await asyncio.gather(
                    *(e.admin.is_sleeping(deadline_s=self.deadlines.verify_s) for e in engines)
                )
                devices = await asyncio.gather(
                    *(e.admin.devices(deadline_s=self.deadlines.verify_s) for e in engines)
                )
            except PhaseError as error:
                await self._all_quietly(
                    "resume", engines, lambda e: e.admin.resume(deadline_s=self.deadlines.resume_s)
                )
                self.versions.open()
                raise self._failed(error, self.versions.version, engines) from None
            self._sleeping = True
            result: dict[str, Any] = {
                "level": level,
                "timings": {e.endpoint.root_url: e.timings for e in engines},
            }
            if not all(sleeping) or any("cpu" in workers for workers in devices):
                result["warning"] = (
                    "vLLM's CPU build treats sleep as a no-op: nothing was freed (calls are held until wake_up)"
                )
            return result

    async def wake_up(self) -> dict[str, Any]:
        engines = self._engines()
        try:
            await self._all("wake_up", engines, lambda e: e.admin.wake_up(deadline_s=self.deadlines.reload_s))
            await self._all("resume", engines, lambda e: e.admin.resume(deadline_s=self.deadlines.resume_s))
        finally:
            self._sleeping = False
            self.versions.open()
        return {"timings": {e.endpoint.root_url: e.timings for e in engines}}

    # -- the phases ----------------------------------------------------------------------------

    def _refuse_if_busy(self) -> None:
        if self._sleeping:
            raise WeightUpdateError(
                "the engines are asleep (POST /admin/sleep): wake them first (POST /admin/wake_up)",
                phase="admit",
            )
        if self._lock.locked():
            raise WeightUpdateError(
                "another weight update (or sleep, or tensor push) is in progress on this model server",
                phase="admit",
                hint="wait for it to finish; updates are applied one at a time",
            )

    def _check_version(self, version: int) -> None:
        if version <= self.versions.version:
            raise WeightUpdateError(
                f"version {version} is not newer than the version served now ({self.versions.version})",
                phase="admit",
                version=self.versions.version,
                hint="versions only go up (staleness is counted in versions): use the trainer's step number",
            )

    def _checked_checkpoint(self, path: str) -> Checkpoint:
        if self.disk_reason is not None:
            raise WeightUpdateError(self.disk_reason, phase="check", version=self.versions.version)
        try:
            checkpoint = Checkpoint.read(path)
            problems = checkpoint.differences(self._reference_checkpoint())
        except CheckpointError as error:
            raise WeightUpdateError(
                f"refused before any engine was touched: {error.message}",
                phase="check",
                version=self.versions.version,
            ) from None
        if problems:
            raise WeightUpdateError(
                f"refused before any engine was touched: {path} does not fit the model the engines serve:\n  "
                + "\n  ".join(problems),
                phase="check",
                version=self.versions.version,
            )
        return checkpoint

    def _reference_checkpoint(self) -> Checkpoint:
        if self._reference is None:
            reference = self.path or self.boot_path
            if reference is None:
                raise CheckpointError(
                    "no checkpoint on disk to compare with (the engines' weights were pushed)"
                )
            self._reference = Checkpoint.read(reference)
        return self._reference

    def _engines(self) -> list[_Engine]:
        engines = [
            _Engine(endpoint, EngineAdmin(self.http, endpoint.root_url, headers=self.headers))
            for endpoint in self.pool.endpoints
            if endpoint.is_healthy
        ]
        if not engines:
            raise WeightUpdateError(
                f"no engine is up to update: {self.pool.describe_down()}",
                phase="admit",
                version=self.versions.version,
            )
        return engines

    async def _pause(self, engines: list[_Engine], mode: PauseMode) -> list[str]:
        in_flight = self.versions.in_flight()

        async def pause(engine: _Engine) -> None:
            await engine.admin.pause(mode, deadline_s=self.deadlines.pause_s)
            engine.paused = True

        await self._all("pause", engines, pause)
        return in_flight

    async def _finish(
        self,
        engines: list[_Engine],
        version: int,
        *,
        mode: PauseMode,
        started: float,
        in_flight_at_pause: list[str],
    ) -> dict[str, Any]:
        """Reset caches, set the version, resume, admit: from here on the update stands."""
        cache_reset = await asyncio.gather(*(self._reset(engine) for engine in engines))
        previous = self.versions.version
        spanning = self.versions.set_version(version)
        problems = await self._all_quietly(
            "resume", engines, lambda e: e.admin.resume(deadline_s=self.deadlines.resume_s)
        )
        for engine_url, reason in problems.items():
            endpoint = next(e.endpoint for e in engines if e.endpoint.root_url == engine_url)
            self.pool.record_failure(
                endpoint,
                f"did not resume after the update to version {version}: {reason}",
                now=time.monotonic(),
            )
        self.versions.open()
        window = time.perf_counter() - started
        result = {
            "version": version,
            "previous_version": previous,
            "mode": mode,
            "window_s": round(window, 4),
            "in_flight_at_pause": in_flight_at_pause,
            "spanning_calls": spanning,
            "prefix_cache_reset": all(cache_reset),
            "engines": {e.endpoint.root_url: e.timings for e in engines},
            "problems": problems,
        }
        logger.warning(
            "weights: version %d -> %d on %d engine(s) in %.3f s (%d call(s) span the update)",
            previous, version, len(engines), window, len(spanning),
        )  # fmt: skip
        return result

    async def _reset(self, engine: _Engine) -> bool:
        try:
            return bool(
                await engine.timed(
                    "reset_cache", engine.admin.reset_prefix_cache(deadline_s=self.deadlines.reset_s)
                )
            )
        except PhaseError as error:  # calls are salted by version, so an old cache is never hit anyway
            logger.warning("%s", error.message)
            return False

    def _remember(self, engines: list[_Engine], fingerprints: Sequence[list[str]]) -> None:
        self.fingerprint = fingerprints[0]
        self._fingerprints = {
            engine.endpoint.root_url: fingerprint
            for engine, fingerprint in zip(engines, fingerprints, strict=True)
        }

    def _expected(self, root_url: str) -> list[str] | None:
        """The fingerprint an engine must show on the current weights (None: not known yet)."""
        if self.ranks_are_shards:
            return self._fingerprints.get(root_url)
        return self.fingerprint

    def _verify(self, engines: list[_Engine], fingerprints: Sequence[list[str]]) -> None:
        if self.ranks_are_shards:  # each rank loaded its own experts: nothing to compare across them
            return
        first = fingerprints[0]
        for engine, fingerprint in zip(engines, fingerprints, strict=True):
            if fingerprint != first:
                raise PhaseError(
                    engine.endpoint.root_url,
                    "verify",
                    f"its weights differ from {engines[0].endpoint.root_url}'s after the same load",
                )

    async def _roll_back(self, engines: list[_Engine]) -> dict[str, str]:
        """Every paused engine back on the checkpoint from before, checked, and resumed."""
        problems: dict[str, str] = {}

        async def back(engine: _Engine) -> None:
            if not engine.paused:
                return
            try:
                if self.path is not None:
                    fingerprint = await engine.admin.reload(self.path, deadline_s=self.deadlines.reload_s)
                    expected = self._expected(engine.endpoint.root_url)
                    if expected is not None and fingerprint != expected:
                        raise PhaseError(
                            engine.endpoint.root_url, "rollback", "its weights differ from before the update"
                        )
                    await engine.admin.reset_prefix_cache(deadline_s=self.deadlines.reset_s)
                await engine.admin.resume(deadline_s=self.deadlines.resume_s)
            except PhaseError as error:
                problems[engine.endpoint.root_url] = error.reason
                self.pool.record_failure(
                    engine.endpoint, f"rollback failed: {error.reason}", now=time.monotonic()
                )

        await asyncio.gather(*(back(engine) for engine in engines))
        return problems

    def _failed(self, error: PhaseError, version: int, engines: list[_Engine]) -> WeightUpdateError:
        return WeightUpdateError(
            f"update to version {version} failed on engine {error.engine} in phase {error.phase}: {error.reason}; "
            f"every engine is back on version {self.versions.version}"
            + (f" ({self.path})" if self.path else ""),
            phase=error.phase,
            engine=error.engine,
            rolled_back=True,
            version=self.versions.version,
            timings={e.endpoint.root_url: e.timings for e in engines},
        )

    async def _all(
        self, phase: str, engines: list[_Engine], call: Callable[[_Engine], Awaitable[Any]]
    ) -> list[Any]:
        """`call` on every engine at once, timed; the first failure (after all ended) is raised."""
        results = await _gathered(phase, engines, call)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return results

    async def _all_quietly(
        self, phase: str, engines: list[_Engine], call: Callable[[_Engine], Awaitable[Any]]
    ) -> dict[str, str]:
        """`call` on every engine at once, timed; engine -> why it failed (none raised)."""
        results = await _gathered(phase, engines, call)
        return {
            engine.endpoint.root_url: (result.reason if isinstance(result, PhaseError) else repr(result))
            for engine, result in zip(engines, results, strict=True)
            if isinstance(result, BaseException)
        }

    def _open_push(self) -> list[_Engine]:
        if self._pushing is None:
            raise WeightUpdateError("no tensor push is open: call begin first", phase="push")
        return self._pushing

    def _lease_expired(self, engines: list[_Engine]) -> None:
        """A push neither committed nor aborted in time: abort it, so calls are admitted again."""
        if self._pushing is engines:
            logger.error(
                "tensor push to version %d neither committed nor aborted within %g s: aborting it",
                self._push_version, self.deadlines.push_lease_s,
            )  # fmt: skip
            self._lease_task = asyncio.get_running_loop().create_task(self.abort())

    def _close_push(self) -> None:
        if self._lease is not None:
            self._lease.cancel()
        self._pushing = None
        self.versions.open()
        self._lock.release()


async def _gathered(
    phase: str, engines: list[_Engine], call: Callable[[_Engine], Awaitable[Any]]
) -> list[Any]:
    """Each engine's result of `call`, or the exception it raised, in engine order."""
    return await asyncio.gather(
        *(engine.timed(phase, call(engine)) for engine in engines), return_exceptions=True
    )
