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

Every operation runs to its end whether or not its caller still waits (`operations.Operations`):
a client's timeout or Ctrl-C never leaves the engines paused. Weights that hold NaN or infinite
values are refused at verify (a diverged training step makes them). An engine that cannot be put
back (its rollback or restore failed: the old checkpoint was deleted, say) is held out of the pool,
paused, and named in the status; the next update that succeeds loads it too and brings it back.

Over 600 lines because every operation (update, push, sleep) shares one lock, one admission gate
and one view of the engines, so they are one class; what does not need that state lives beside it:
the per-engine phases in `weight_phases.py`, the checkpoint check in `checkpoint.py`, running each
operation to its end in `operations.py`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ng_cli.servers.http import HttpClient
from ng_cli.upstream.checkpoint import Checkpoint, CheckpointError, CheckpointGate
from ng_cli.upstream.checkpoint_sight import unseen
from ng_cli.upstream.config import WeightUpdateDeadlines
from ng_cli.upstream.delta import Delta, is_delta
from ng_cli.upstream.delta_chain import DeltaChain
from ng_cli.upstream.engine_admin import EngineAdmin, PauseMode, PhaseError, non_finite, shared_part
from ng_cli.upstream.operations import Operations
from ng_cli.upstream.pool import Endpoint, EndpointPool
from ng_cli.upstream.versions import MAX_VERSION, WeightVersions
from ng_cli.upstream.weight_phases import (
    PhaseEngine,
    WeightUpdateError,
    failure,
    live,
    on_all,
    on_all_quietly,
)

__all__ = ["PUSH_ROUTES", "WeightUpdateError", "WeightUpdater"]

logger = logging.getLogger("ng_cli.upstream")

PUSH_ROUTES = {"init_weight_transfer_engine": "POST", "update_weights": "POST", "get_world_size": "GET"}
"""vLLM's tensor-push routes a trainer may reach through `push` (between `begin` and `commit`),
with the HTTP method vLLM serves each with."""

_SETUP_PATHS = {
    "get_world_size": "/get_world_size",
    "init_weight_transfer_engine": "/init_weight_transfer_engine",
    "server_info": "/server_info?config_format=json",
}
"""The set-up calls a trainer makes outside any update, and where vLLM serves each (`server_info`
as JSON: TRL reads its `model_config`)."""


@dataclass
class _Push:
    """One tensor push, from `begin` to `commit` or `abort` (the lease's too)."""

    engines: list[PhaseEngine]
    version: int
    mode: PauseMode
    started: float
    in_flight: list[str]
    state: str = "open"
    """open, then committing or aborting: whichever comes first owns the push."""
    lease: asyncio.TimerHandle | None = None


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
        push_reason: str | None = None,
        ranks_are_shards: bool = False,
        expert_check_bytes: int | None = None,
        engine_headers: Callable[[str], Mapping[str, str]] | None = None,
    ) -> None:
        self.pool = pool
        self.http = http
        self.headers = dict(headers)
        self.engine_headers = engine_headers
        """Root URL -> the headers of its admin calls (an engine on a network address has its own
        admin key: `engines/weight_routes.py`); None: `headers` for every engine."""
        self.versions = versions
        self.deadlines = deadlines
        self.path = boot_path
        """The checkpoint directory every engine holds now (None: pushed tensors or dummy weights)."""
        self.boot_path = boot_path
        self.disk_reason = disk_reason
        """Why updates from disk are refused on these engines (None: they are not)."""
        self.push_reason = push_reason
        """Why tensor pushes are refused on these engines (None: they are not)."""
        self.fingerprint: list[str] | None = None
        self.ranks_are_shards = ranks_are_shards
        """The engines are the ranks of one expert-parallel group (external LB): each holds its own
        experts, so their fingerprints differ by design; each is checked against its own."""
        self.expert_check_bytes = expert_check_bytes
        """Under expert parallelism, each rank's experts are compared with the files after a load from
        disk: all of them up to this many bytes per rank, a sample rotated by version above (None: not
        compared; `engines/expert_check.py`)."""
        self._fingerprints: dict[str, list[str]] = {}
        """Every engine's fingerprint after the last update, by root URL."""
        self.last: dict[str, Any] | None = None
        self.operations = Operations()
        self.held_out: dict[str, str] = {}
        """Root URL -> why that engine is out of the pool with weights nobody can vouch for."""
        self.checkpoints = CheckpointGate(check_s=deadlines.check_s)
        self.chain = DeltaChain(check_s=deadlines.check_s, digest_s=deadlines.reload_s)
        """The weights deltas applied since `path` (rollback and restore re-apply them)."""
        self._lock = asyncio.Lock()
        self._push: _Push | None = None
        self._sleeping: asyncio.TimerHandle | None = None

    # -- status --------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        return {
            "version": self.versions.version,
            "path": self.path,
            "deltas": list(self.chain.deltas),
            "admitting": self.versions.is_admitting,
            "in_flight": len(self.versions.in_flight()),
            "updating": self._lock.locked(),
            "running": self.operations.running,
            "pushing": self._push is not None,
            "sleeping": self._sleeping is not None,
            "engines": [endpoint.root_url for endpoint in self.pool.endpoints],
            "serving": [endpoint.root_url for endpoint in self.pool.endpoints if endpoint.is_healthy],
            "held_out": self._listed_held_out(),
            "engine_versions": {
                e.root_url: self.versions.version
                if e.is_healthy and e.root_url not in self.held_out
                else None
                for e in self.pool.endpoints
            },
            "fingerprint": self.fingerprint,
            "last_update": self.last,
            "last_outcome": self.operations.last,
        }

    def _listed_held_out(self) -> dict[str, str]:
        """Held-out engines the pool still lists (one lost with its node is replaced at a new URL)."""
        listed = {endpoint.root_url for endpoint in self.pool.endpoints}
        return {url: reason for url, reason in self.held_out.items() if url in listed}

    def _admin(self, root_url: str) -> EngineAdmin:
        headers = self.engine_headers(root_url) if self.engine_headers is not None else self.headers
        return EngineAdmin(self.http, root_url, headers=headers)

    # -- from a checkpoint directory -----------------------------------------------------------

    async def update(self, path: str, version: int, mode: PauseMode = "keep") -> dict[str, Any]:
        """Every engine on the checkpoint at `path`, served as `version` from now on."""
        return await self.operations.run("update", self._update(path, version, mode), version=version)

    async def _update(self, path: str, version: int, mode: PauseMode) -> dict[str, Any]:
        self._refuse_if_busy()
        async with self._lock:
            self._check_version(version)
            delta = await self._checked_delta(path) if is_delta(path) else None
            checkpoint = await self._checked_checkpoint(path) if delta is None else delta
            engines = self._engines()
            await self._seen_everywhere(path, engines)
            started = time.perf_counter()
            self.versions.close()
            try:
                in_flight_at_pause = await self._pause(engines, mode)
                resident = self.chain.resident(self.path)
                fingerprints = await self._all(
                    "reload",
                    engines,
                    lambda e: (
                        e.admin.reload(path, deadline_s=self.deadlines.reload_s)
                        if delta is None
                        else e.admin.apply_delta(path, resident, deadline_s=self.deadlines.reload_s)
                    ),
                )
                self._verify(engines, fingerprints)
                experts = await self._experts_match_files(engines, path, version) if delta is None else {}
            except PhaseError as error:
                raise await self._rolled_back(error, version, engines) from None
            result = await self._finish(
                engines, version, mode=mode, started=started, in_flight_at_pause=in_flight_at_pause
            )
            if experts:
                result["experts"] = experts
            if delta is None:
                self.path = str(checkpoint.path)
                self.chain.loaded_full()
            else:
                self.chain.applied(delta)
            self._remember(engines, fingerprints)
            result.update(
                path=str(checkpoint.path), bytes=checkpoint.total_bytes, deltas=list(self.chain.deltas)
            )
            self.last = result
            return result

    async def restore(self, endpoint: Endpoint) -> str | None:
        """Bring an engine that (re)joins to the current checkpoint, resumed; None when it holds it now.

        Waits for an update in progress (else it could load the checkpoint being replaced). An
        engine that cannot be brought there stays held out, paused, until an update loads it."""
        async with self._lock:
            reason = await self._restore(endpoint)
            if reason is None:
                self.held_out.pop(endpoint.root_url, None)
            else:
                self.held_out[endpoint.root_url] = reason
            return reason

    async def _restore(self, endpoint: Endpoint) -> str | None:
        if self.path is None:
            return (
                None
                if self.versions.version == 0
                else "its weights were pushed, not loaded from disk: push again"
            )
        admin = self._admin(endpoint.root_url)
        try:
            if self.path != self.boot_path or self.versions.version != 0:
                await self._still_there(endpoint.root_url, "restore")
                fingerprint = await self.chain.load(admin, self.path, deadline_s=self.deadlines.reload_s)
                expected = self._expected(endpoint.root_url)
                if expected is not None and fingerprint != expected:
                    return f"its weights after loading version {self.versions.version} differ from the other engines'"
                await admin.reset_prefix_cache(deadline_s=self.deadlines.reset_s)
                logger.warning(
                    "engine %s rejoined and loaded version %d (%s) before serving",
                    endpoint.root_url, self.versions.version, self.path,
                )  # fmt: skip
            await admin.resume(deadline_s=self.deadlines.resume_s)  # an engine left paused by a failed resume
        except PhaseError as error:
            return f"could not load the current weights (version {self.versions.version}): {error.reason}"
        return None

    # -- for trainers that push tensors --------------------------------------------------------

    async def begin(self, version: int, mode: PauseMode = "keep") -> dict[str, Any]:
        """Stop admitting, pause every engine and open vLLM's weight update; `commit` or `abort` next."""
        return await self.operations.run("begin", self._begin(version, mode), version=version)

    async def _begin(self, version: int, mode: PauseMode) -> dict[str, Any]:
        if self.push_reason is not None:
            raise WeightUpdateError(self.push_reason, phase="admit", version=self.versions.version)
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
                raise await self._rolled_back(error, version, engines) from None
        except BaseException:
            self._lock.release()
            raise
        push = _Push(engines, version, mode, time.perf_counter(), in_flight)
        push.lease = asyncio.get_running_loop().call_later(
            self.deadlines.push_lease_s, self._lease_expired, push
        )
        self._push = push
        return {
            "version": version,
            "engines": [e.endpoint.root_url for e in live(engines)],
            "in_flight_at_pause": in_flight,
        }

    async def push(self, route: str, body: Any) -> list[Any]:
        """Forward one tensor-push call (`PUSH_ROUTES`) to every paused engine."""
        push = self._open_push()
        method = PUSH_ROUTES.get(route)
        if method is None:
            raise WeightUpdateError(
                f"{route!r} is not a tensor-push route ({', '.join(sorted(PUSH_ROUTES))})", phase="push"
            )
        return await self._all(
            "push",
            push.engines,
            lambda e: e.admin.call(
                f"/{route}", body, phase="push", deadline_s=self.deadlines.reload_s, method=method
            ),
        )

    async def transfer_setup(self, route: str, body_for: Callable[[int], Any]) -> list[Any]:
        """`get_world_size`, `init_weight_transfer_engine` or `server_info` on every engine, engine
        `i` sent `body_for(i)`: they touch no weights, so nothing pauses (TRL's client makes its NCCL
        group once, at start, outside any update). Inside an open push they go to the push's engines."""
        path = _SETUP_PATHS.get(route)
        if path is None:
            raise WeightUpdateError(f"{route!r} is not a tensor-push set-up route", phase="push")
        if self.push_reason is not None:
            raise WeightUpdateError(self.push_reason, phase="admit", version=self.versions.version)
        method = PUSH_ROUTES.get(route, "GET")

        async def call(engines: list[PhaseEngine]) -> list[Any]:
            index = {id(engine): i for i, engine in enumerate(engines)}
            return await self._all(
                "push",
                engines,
                lambda e: e.admin.call(
                    path, body_for(index[id(e)]), phase="push", deadline_s=self.deadlines.reload_s,
                    method=method,
                ),
            )  # fmt: skip

        if self._push is not None:
            return await call(self._open_push().engines)
        self._refuse_if_busy()
        async with self._lock:
            return await call(self._engines())

    async def commit(self) -> dict[str, Any]:
        """Close vLLM's update, verify, reset caches, set the version, resume, admit."""
        push = self._own_push("committing")
        return await self.operations.run("commit", self._commit(push), version=push.version)

    async def _commit(self, push: _Push) -> dict[str, Any]:
        engines = push.engines
        try:
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
                raise await self._rolled_back(error, push.version, engines, gate=False) from None
            result = await self._finish(
                engines, push.version, mode=push.mode, started=push.started, in_flight_at_pause=push.in_flight
            )
            self.path = None
            self.chain.loaded_full()
            self._remember(engines, fingerprints)
            self.last = result
            return result
        finally:
            self._close_push(push)

    async def abort(self) -> dict[str, Any]:
        """Give up a tensor push: the weights from before come back where they can, the version stays."""
        push = self._own_push("aborting")
        return await self.operations.run("abort", self._abort(push), version=push.version)

    async def _abort(self, push: _Push) -> dict[str, Any]:
        try:
            for engine in live(push.engines):
                try:
                    await engine.admin.call(
                        "/finish_weight_update", None, phase="finish", deadline_s=self.deadlines.reload_s
                    )
                except PhaseError as error:
                    logger.warning("abort: %s", error.message)
            problems = await self._roll_back(push.engines)
        finally:
            self._close_push(push)
        return {"version": self.versions.version, "rolled_back": not problems, "problems": problems}

    # -- sleep and wake (a trainer sharing the GPU) --------------------------------------------

    async def sleep(self, level: int) -> dict[str, Any]:
        """Drain, then free the engines' GPU memory (level 1: weights offloaded, 2: discarded)."""
        return await self.operations.run("sleep", self._sleep(level))

    async def _sleep(self, level: int) -> dict[str, Any]:
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
                await on_all_quietly(
                    "resume", engines, lambda e: e.admin.resume(deadline_s=self.deadlines.resume_s)
                )
                self.versions.open()
                raise self._failed(error, self.versions.version, engines, {}) from None
            lease_s = self.deadlines.sleep_lease_s
            self._sleeping = asyncio.get_running_loop().call_later(lease_s, self._sleep_lease_expired)
            result: dict[str, Any] = {
                "level": level,
                "lease_s": lease_s,
                "timings": {e.endpoint.root_url: e.timings for e in engines},
            }
            if not all(sleeping) or any("cpu" in workers for workers in devices):
                result["warning"] = (
                    "vLLM's CPU build treats sleep as a no-op: nothing was freed (calls are held until wake_up)"
                )
            return result

    async def wake_up(self) -> dict[str, Any]:
        """Back from `sleep`: weights reloaded where they were discarded, engines resumed, admitting."""
        return await self.operations.run("wake_up", self._wake_up())

    async def _wake_up(self) -> dict[str, Any]:
        if self._sleeping is None:
            raise WeightUpdateError(
                "the engines are not asleep"
                + (" (an update, push or sleep is in progress)" if self._lock.locked() else ""),
                phase="admit",
                version=self.versions.version,
            )
        async with self._lock:
            if self._sleeping is None:  # another wake_up got there first
                return {"timings": {}}
            self._sleeping.cancel()
            engines = self._engines()
            try:
                await self._all(
                    "wake_up", engines, lambda e: e.admin.wake_up(deadline_s=self.deadlines.reload_s)
                )
                await self._all(
                    "resume", engines, lambda e: e.admin.resume(deadline_s=self.deadlines.resume_s)
                )
            finally:
                self._sleeping = None
                self.versions.open()
            return {"timings": {e.endpoint.root_url: e.timings for e in engines}}

    def _sleep_lease_expired(self) -> None:
        """Asleep past `sleep_lease_s` with no wake_up: wake, so calls do not wait forever."""
        logger.error(
            "the engines slept %g s (sleep_lease_s) with no wake_up: waking them",
            self.deadlines.sleep_lease_s,
        )
        asyncio.get_running_loop().create_task(self.wake_up())

    # -- the phases ----------------------------------------------------------------------------

    def _refuse_if_busy(self) -> None:
        if self._sleeping is not None:
            raise WeightUpdateError(
                "the engines are asleep (POST /admin/sleep): wake them first (POST /admin/wake_up)",
                phase="admit",
            )
        if self._lock.locked():
            running = self.operations.running
            raise WeightUpdateError(
                "another weight update (or sleep, or tensor push) is in progress on this model server"
                + (f": {running['operation']}, in phase {running['phase']}" if running else ""),
                phase="admit",
                hint="wait for it to finish (GET /admin/weights tells); updates are applied one at a time",
            )

    def _check_version(self, version: int) -> None:
        if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= MAX_VERSION:
            raise WeightUpdateError(
                f"version {version!r} is not an integer from 1 to {MAX_VERSION}", phase="admit"
            )
        if version <= self.versions.version:
            raise WeightUpdateError(
                f"version {version} is not newer than the version served now ({self.versions.version})",
                phase="admit",
                version=self.versions.version,
                hint="versions only go up (staleness is counted in versions): use the trainer's step number",
            )

    async def _checked_checkpoint(self, path: str) -> Checkpoint:
        if self.disk_reason is not None:
            raise WeightUpdateError(self.disk_reason, phase="check", version=self.versions.version)
        try:
            return await self.checkpoints.checked(path, self.path or self.boot_path)
        except CheckpointError as error:
            raise WeightUpdateError(
                f"refused before any engine was touched: {error.message}",
                phase="check",
                version=self.versions.version,
            ) from None

    async def _checked_delta(self, path: str) -> Delta:
        """The delta at `path`, if it fits the model and its base is the weights the engines hold."""
        if self.disk_reason is not None:
            raise WeightUpdateError(self.disk_reason, phase="check", version=self.versions.version)
        try:
            return await self.chain.checked(
                path, full=self.path, model=lambda: self.checkpoints.model(self.path or self.boot_path)
            )
        except CheckpointError as error:
            raise WeightUpdateError(
                f"refused before any engine was touched: {error.message}",
                phase="check",
                version=self.versions.version,
            ) from None

    async def _seen_everywhere(self, path: str, engines: list[PhaseEngine]) -> None:
        """Refused before any pause when an engine's node does not see `path` as this server does."""
        differences = await unseen(path, [e.admin for e in engines], deadline_s=self.deadlines.check_s)
        if differences:
            raise WeightUpdateError(
                "refused before any engine was paused: "
                + "; ".join(
                    f"engine {url} does not see {path} as this server does: {why}"
                    for url, why in differences.items()
                ),
                phase="check",
                version=self.versions.version,
                hint="on a cluster, write checkpoints to storage every node mounts at the same path (docs/ray.md)",
            )

    async def _still_there(self, engine: str, phase: str) -> None:
        """The current checkpoint is still on disk (a trainer's rotation may have deleted it)."""
        assert self.path is not None
        try:
            await self.checkpoints.readable(self.path)
            await self.chain.readable()
        except CheckpointError as error:
            raise PhaseError(
                engine, phase, f"the checkpoint of version {self.versions.version} is gone: {error.message}"
            ) from None

    def _engines(self) -> list[PhaseEngine]:
        """The engines an operation covers: those in the pool, and those held out for their weights."""
        engines = [
            PhaseEngine(
                endpoint,
                self._admin(endpoint.root_url),
                held_out=endpoint.root_url in self.held_out and not endpoint.is_healthy,
            )
            for endpoint in self.pool.endpoints
            if endpoint.is_healthy or endpoint.root_url in self.held_out
        ]
        if not engines:
            raise WeightUpdateError(
                f"no engine is up to update: {self.pool.describe_down()}",
                phase="admit",
                version=self.versions.version,
            )
        return engines

    async def _pause(self, engines: list[PhaseEngine], mode: PauseMode) -> list[str]:
        in_flight = self.versions.in_flight()

        async def pause(engine: PhaseEngine) -> None:
            await engine.admin.pause(mode, deadline_s=self.deadlines.pause_s)
            engine.paused = True

        await self._all("pause", engines, pause)
        return in_flight

    async def _finish(
        self,
        engines: list[PhaseEngine],
        version: int,
        *,
        mode: PauseMode,
        started: float,
        in_flight_at_pause: list[str],
    ) -> dict[str, Any]:
        """Reset caches, set the version, resume, admit: from here on the update stands."""
        self.operations.phase("resume")
        serving = live(engines)
        cache_reset = await asyncio.gather(
            *(self._reset(engine, clear_kv=mode != "keep" or not in_flight_at_pause) for engine in serving)
        )
        previous = self.versions.version
        spanning = self.versions.set_version(version)
        problems = await on_all_quietly(
            "resume", serving, lambda e: e.admin.resume(deadline_s=self.deadlines.resume_s)
        )
        for engine in serving:
            if engine.endpoint.root_url in problems:
                self.pool.record_failure(
                    engine.endpoint,
                    f"did not resume after the update to version {version}: {problems[engine.endpoint.root_url]}",
                    now=time.monotonic(),
                )
            elif engine.held_out:  # it holds the new weights, checked: back in the pool
                self.held_out.pop(engine.endpoint.root_url, None)
                self.pool.readmit(engine.endpoint)
                logger.warning(
                    "engine %s is back in the pool on version %d", engine.endpoint.root_url, version
                )
        for engine in engines:
            if engine.dropped:
                problems[engine.endpoint.root_url] = (
                    f"still held out: {self.held_out.get(engine.endpoint.root_url)}"
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
            previous, version, len(serving), window, len(spanning),
        )  # fmt: skip
        return result

    async def _reset(self, engine: PhaseEngine, *, clear_kv: bool) -> bool:
        """Drop the prefix cache's blocks and, with no call kept in flight, zero them: contents computed
        under the old weights (NaN from weights that overflowed) must not reach a later call."""
        try:
            reset = bool(
                await engine.timed(
                    "reset_cache", engine.admin.reset_prefix_cache(deadline_s=self.deadlines.reset_s)
                )
            )
            if clear_kv:
                await engine.timed("clear_kv", engine.admin.clear_kv_cache(deadline_s=self.deadlines.reset_s))
            return reset
        except PhaseError as error:  # calls are salted by version, so an old cache is never hit anyway
            logger.warning("%s", error.message)
            return False

    def _remember(self, engines: list[PhaseEngine], fingerprints: Sequence[list[str]]) -> None:
        serving = live(engines)
        self.fingerprint = fingerprints[0]
        self._fingerprints = {
            engine.endpoint.root_url: fingerprint
            for engine, fingerprint in zip(serving, fingerprints, strict=True)
        }

    def _expected(self, root_url: str) -> list[str] | None:
        """The fingerprint an engine must show on the current weights (None: not known yet)."""
        if self.ranks_are_shards:
            return self._fingerprints.get(root_url)
        return self.fingerprint

    async def _experts_match_files(
        self, engines: list[PhaseEngine], path: str, version: int
    ) -> dict[str, list[dict[str, Any]]]:
        """Each rank's experts against what the files at `path` hold for it (its fingerprint is only
        its own); a rank that differs fails verify, naming the layer and expert. Root URL -> each
        worker's summary."""
        budget = self.expert_check_bytes
        if budget is None:
            return {}
        serving = live(engines)
        checks = await self._all(
            "verify",
            serving,
            lambda e: e.admin.check_experts(
                path, budget_bytes=budget, seed=version, deadline_s=self.deadlines.reload_s
            ),
        )
        return {e.endpoint.root_url: check for e, check in zip(serving, checks, strict=True)}

    def _verify(self, engines: list[PhaseEngine], fingerprints: Sequence[list[str]]) -> None:
        """Every engine's weights finite, and equal across engines (ranks that shard experts: each its own)."""
        serving = live(engines)
        for engine, fingerprint in zip(serving, fingerprints, strict=True):
            problem = non_finite(fingerprint)
            if problem is not None:
                raise PhaseError(engine.endpoint.root_url, "verify", problem)
        if self.ranks_are_shards:  # each rank holds its own experts: compare what they all hold
            self._verify_shared(serving, fingerprints)
            return
        first = fingerprints[0]
        for engine, fingerprint in zip(serving, fingerprints, strict=True):
            if fingerprint != first:
                raise PhaseError(
                    engine.endpoint.root_url,
                    "verify",
                    f"its weights differ from {serving[0].endpoint.root_url}'s after the same load",
                )

    @staticmethod
    def _verify_shared(engines: list[PhaseEngine], fingerprints: Sequence[list[str]]) -> None:
        """The ranks of one expert-parallel group: equal weights but the experts' (attention,
        embeddings, norms are replicated on every rank), each rank's experts its own."""
        first = shared_part(fingerprints[0])
        for engine, fingerprint in zip(engines, fingerprints, strict=True):
            shared = shared_part(fingerprint)
            if first is not None and shared is not None and shared != first:
                raise PhaseError(
                    engine.endpoint.root_url,
                    "verify",
                    f"its weights other than the experts' differ from {engines[0].endpoint.root_url}'s after the "
                    "same load (every rank of an expert-parallel group holds the same non-expert weights)",
                )

    async def _roll_back(self, engines: list[PhaseEngine]) -> dict[str, str]:
        """Every paused engine back on the checkpoint from before, checked, and resumed; engine ->
        why it could not be (it stays paused, held out of the pool, until an update loads it)."""
        self.operations.phase("rollback")
        problems: dict[str, str] = {}

        async def back(engine: PhaseEngine) -> None:
            if not engine.paused:
                return
            if engine.held_out:  # its weights were unknown before: it stays held out, paused
                return
            try:
                if self.path is not None:
                    await self._still_there(engine.endpoint.root_url, "rollback")
                    fingerprint = await self.chain.load(
                        engine.admin, self.path, deadline_s=self.deadlines.reload_s
                    )
                    expected = self._expected(engine.endpoint.root_url)
                    if expected is not None and fingerprint != expected:
                        raise PhaseError(
                            engine.endpoint.root_url, "rollback", "its weights differ from before the update"
                        )
                    await engine.admin.reset_prefix_cache(deadline_s=self.deadlines.reset_s)
                await engine.admin.resume(deadline_s=self.deadlines.resume_s)
            except PhaseError as error:
                problems[engine.endpoint.root_url] = error.reason
                self.held_out[engine.endpoint.root_url] = f"rollback failed: {error.reason}"
                self.pool.record_failure(
                    engine.endpoint, f"rollback failed: {error.reason}", now=time.monotonic()
                )

        await asyncio.gather(*(back(engine) for engine in engines))
        return problems

    async def _rolled_back(
        self, error: PhaseError, version: int, engines: list[PhaseEngine], *, gate: bool = True
    ) -> WeightUpdateError:
        """Roll every engine back, admit again (unless the push's close does), and say how it went."""
        problems = await self._roll_back(engines)
        if gate:
            self.versions.open()
        return self._failed(error, version, engines, problems)

    def _failed(
        self, error: PhaseError, version: int, engines: list[PhaseEngine], problems: Mapping[str, str]
    ) -> WeightUpdateError:
        return failure(
            error,
            version,
            engines,
            problems,
            serving=f"version {self.versions.version}" + (f" ({self.path})" if self.path else ""),
            serving_version=self.versions.version,
            held_out=len(self.held_out),
        )

    async def _all(
        self, phase: str, engines: list[PhaseEngine], call: Callable[[PhaseEngine], Awaitable[Any]]
    ) -> list[Any]:
        """`on_all`, with the phase shown in the status; an engine lost meanwhile is held out."""
        self.operations.phase(phase)
        try:
            return await on_all(phase, engines, call)
        finally:
            for engine in engines:
                if engine.lost is not None and engine.endpoint.root_url not in self.held_out:
                    self.held_out[engine.endpoint.root_url] = (
                        f"{engine.lost}: out of the update; it loads the current weights before it serves again"
                    )
                    self.pool.record_failure(engine.endpoint, engine.lost, now=time.monotonic())

    def _open_push(self) -> _Push:
        if self._push is None:
            raise WeightUpdateError("no tensor push is open: call begin first", phase="push")
        if self._push.state != "open":
            raise WeightUpdateError(
                f"the tensor push to version {self._push.version} is {self._push.state} already", phase="push"
            )
        return self._push

    def _own_push(self, state: str) -> _Push:
        """The open push, now owned by a commit or an abort: its lease can no longer fire."""
        push = self._open_push()
        push.state = state
        if push.lease is not None:
            push.lease.cancel()
        return push

    def _lease_expired(self, push: _Push) -> None:
        """A push neither committed nor aborted in time: abort it, so calls are admitted again."""
        if self._push is push and push.state == "open":
            logger.error(
                "tensor push to version %d neither committed nor aborted within %g s: aborting it",
                push.version, self.deadlines.push_lease_s,
            )  # fmt: skip
            push.state = "aborting"
            asyncio.get_running_loop().create_task(
                self.operations.run("abort", self._abort(push), version=push.version)
            )

    def _close_push(self, push: _Push) -> None:
        """The push is over: admit again and release the lock, once, and only if it is still this push's."""
        if self._push is not push:
            return
        self._push = None
        self.versions.open()
        self._lock.release()
