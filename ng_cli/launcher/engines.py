"""Engines as children of ng_run: spawned first, waited for, checked, restarted, reported.

    EngineFleet(plans).start()   spawn every engine (`engines.plan.EngineSpec.argv`, env with the key);
                                 engines on the same GPU start one after another (see below)
    wait_ready(should_stop)      each engine answers /health and lists its model on /v1/models,
                                 with a progress line every 10 s (GPU starts take minutes); then the
                                 start-up check: effective TP and EP sizes equal the planned ones
    poll(now)                    from ng_run's watch loop: a dead engine is restarted (backoff,
                                 up to max_restarts; the ranks of one data-parallel group together)
                                 while the model server's pool routes its sessions elsewhere; past
                                 the limit a LaunchError names it with its last lines

An engine is one more kind of child (`process.spawn_child`: output relayed with its
`[instance/engine-i]` prefix, last lines kept). Each leads its own process group, so a restart
can end exactly what that engine spawned (EngineCore, workers); `pgids` lists every group for
the stack's stop, which signals them all. On Ray the same fleet runs with another `start`
(`RayBackend.start_engine`: an actor on the engine's placement-group bundle owns the process and
reports the address it serves at), so readiness, checks and restarts are this module's either way.

Engines that share a GPU (`replicas_per_device`, or two instances given the same device) never
start at the same time: vLLM sizes its KV cache from the device's free memory during its own
start-up, so memory a neighbour allocates meanwhile is counted as its own, and it fails with "No
available memory for the cache blocks" (seen on an H100 with two replicas at 0.3 each). The later
one is spawned once the earlier one serves; a restart waits the same way for a neighbour that is
itself starting.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from ng_cli.engines.engine_log import EngineFacts, parallelism_problems
from ng_cli.engines.plan import EngineSpec, InstanceEngines
from ng_cli.errors import LaunchError, PlacementError
from ng_cli.launcher.process import Child, Handle, LineSink, spawn_child, tail_text
from ng_cli.outputs import write_bytes_atomically
from ng_cli.servers.readiness import poll_until, serves_model

__all__ = ["PROGRESS_EVERY_S", "EngineFleet", "EngineStarter", "NotPlacedYet"]

EngineStarter = Callable[[EngineSpec, InstanceEngines, LineSink], tuple[Handle, EngineSpec]]
"""Starts one engine; returns its handle and the spec it really runs (a Ray node's address and ports)."""


class NotPlacedYet(Exception):
    """A starter's answer for an engine that has no place to run yet (its node was lost and the
    others have no room so far): the fleet tries again shortly, without counting a restart."""


PROGRESS_EVERY_S = 10.0
_REPROBE_S = 1.0
_ROUND_S = 0.25
"""How often start-up probes every engine that is not ready yet."""
_MAX_BACKOFF_S = 30.0
_NOT_PLACED_RETRY_S = 1.0
FAILED_START_GRACE_S = 15.0
"""How long an engine that logged "EngineCore failed to start" gets to exit by itself before ng_run
stops it and says why (vLLM's API server normally exits within a second or two)."""
_LAUNCHER = "ng_run"


@dataclass(eq=False)
class _Engine:
    spec: EngineSpec
    plan: InstanceEngines
    child: Handle | None = None
    facts: EngineFacts = field(default_factory=EngineFacts)
    started_at: float = 0.0
    ready_s: float | None = None
    restart_at: float | None = None
    probed_at: float = 0.0
    start_failed_at: float | None = None
    """When ng_run first saw that vLLM had given up starting while the process stayed up."""

    @property
    def key(self) -> tuple[str, int]:
        """Its data-parallel group: the unit that restarts together."""
        return (self.spec.instance, self.spec.group)


class EngineFleet:
    """Every engine of a stack: one `_Engine` per planned `EngineSpec`."""

    def __init__(
        self,
        plans: tuple[InstanceEngines, ...],
        *,
        sink: LineSink,
        base_env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        starter: EngineStarter | None = None,
        redact: Callable[[str], str] | None = None,
        before_spawn: Callable[[EngineSpec], None] = lambda _spec: None,
    ) -> None:
        self.plans = plans
        self.redact = redact
        """Hides the stack's secrets in engine output before it is shown or kept for a death report."""
        self.engines = [_Engine(spec, plan) for plan in plans for spec in plan.engines]
        self.starter = starter or self._start_local
        self.before_spawn = before_spawn
        """Runs right before an engine is spawned (ng_run releases the ports it held for it)."""
        self._same_host = starter is None
        """Local engines' device ids are this machine's; on Ray only one instance's replicas share bundles."""
        self.sink = sink
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.clock = clock
        self.pgids: set[int] = set()
        """Every process group an engine ever led; the stack's stop signals them all."""
        self.restarts: dict[tuple[str, int], int] = {}
        self._stopping = False

    def __bool__(self) -> bool:
        return bool(self.engines)

    @property
    def children(self) -> list[Handle]:
        return [engine.child for engine in self.engines if engine.child is not None]

    def placed_plans(self) -> tuple[InstanceEngines, ...]:
        """The plans with each engine's spec as it runs (on Ray: its node's address and ports)."""
        return tuple(
            replace(plan, engines=tuple(e.spec for e in self.engines if e.plan is plan))
            for plan in self.plans
        )

    def start(self) -> None:
        self._start_deferred()
        for engine in self.engines:
            neighbour = self._starting_neighbour(engine) if engine.child is None else None
            if neighbour is not None:
                self._say(
                    f"{engine.spec.name} starts once {neighbour.spec.name} is ready: they share GPU "
                    f"{','.join(sorted(set(engine.spec.devices) & set(neighbour.spec.devices)))}, and vLLM "
                    "sizes its KV cache from the memory left free while it starts"
                )

    def wait_ready(self, *, should_stop: Callable[[], bool] = lambda: False) -> dict[str, float]:
        """Seconds to ready per engine; LaunchError for a death, a timeout or a parallelism mismatch."""
        next_progress = self.clock() + PROGRESS_EVERY_S

        def all_ready() -> bool:
            """One round: probe each started engine, start deferred ones, say who is still awaited."""
            nonlocal next_progress
            if should_stop():
                raise LaunchError("start-up interrupted while the engines were starting")
            waiting = [engine for engine in self.engines if engine.ready_s is None]
            for engine in waiting:
                if engine.child is None:  # deferred: not spawned yet
                    continue
                self._check_alive_before_ready(engine)
                self._probe(engine, force=True)  # LaunchError past the engine's own deadline
            self._start_deferred()
            waiting = [engine for engine in waiting if engine.ready_s is None]
            now = self.clock()
            if waiting and now >= next_progress:
                for engine in waiting:
                    self._say(f"waiting for {engine.spec.name}: {self._waiting_text(engine, now)}")
                next_progress = now + PROGRESS_EVERY_S
            return not waiting

        poll_until(all_ready, timeout_s=math.inf, first_retry_s=_ROUND_S, max_retry_s=_ROUND_S)
        self._check_parallelism(self.engines)
        return {engine.spec.name: engine.ready_s or 0.0 for engine in self.engines}

    def poll(self) -> None:
        """Restart what died (within its budget), bring back what restarted; LaunchError past the limit."""
        if self._stopping:
            return
        now = self.clock()
        for engine in self.engines:
            if (
                engine.restart_at is None
                and engine.child is not None
                and engine.child.exit_code() is not None
            ):
                self._schedule_restart(engine, now)
        for engine in self.engines:
            if engine.restart_at is not None and now >= engine.restart_at:
                if self._starting_neighbour(engine) is None:  # else: again on the next poll
                    engine.restart_at = None
                    self._respawn(engine, now)
            elif (
                engine.restart_at is None
                and engine.child is not None
                and engine.ready_s is None
                and now - engine.probed_at >= _REPROBE_S
            ):
                self._check_alive_before_ready(engine)
                if self._probe(engine):
                    self._say(
                        f"{engine.spec.name} is serving again ({engine.ready_s:.1f} s after its restart)"
                    )
                    self._check_parallelism([engine])

    def stop_restarting(self) -> None:
        """From here on a death is final (the stack is stopping)."""
        self._stopping = True

    def rows(self) -> list[dict[str, object]]:
        """One printable row per engine: plan, pid, readiness and what it reported."""
        return [
            {
                **engine.spec.describe(),
                "url": engine.spec.base_url,
                "pid": engine.child.pid if engine.child is not None else None,
                **(engine.child.location() if engine.child is not None else {}),
                "ready_s": engine.ready_s,
                "reported": engine.facts.summary(),
                "restarts": self.restarts.get(engine.key, 0),
            }
            for engine in self.engines
        ]

    # -- internals ---------------------------------------------------------------------------

    def _shares_gpu(self, one: _Engine, other: _Engine) -> bool:
        if not set(one.spec.devices) & set(other.spec.devices):
            return False
        return self._same_host or one.plan is other.plan

    def _starting_neighbour(self, engine: _Engine) -> _Engine | None:
        """An engine on the same GPU that is spawned and not serving yet (a restart pending is not)."""
        for other in self.engines:
            if (
                other is not engine
                and other.child is not None
                and other.restart_at is None
                and other.ready_s is None
                and self._shares_gpu(engine, other)
            ):
                return other
        return None

    def _start_deferred(self) -> None:
        """Spawn the engines never spawned whose neighbours on the GPU serve, one per GPU at a time."""
        for engine in self.engines:
            if engine.child is None and self._starting_neighbour(engine) is None:
                self._spawn(engine)

    def _spawn(self, engine: _Engine) -> None:
        if engine.child is not None:  # a restart: the old one is gone (killed with its group)
            engine.child.wait(5.0)
        self.before_spawn(engine.spec)
        engine.facts = EngineFacts()
        engine.ready_s = None
        engine.start_failed_at = None
        engine.started_at = self.clock()
        facts = engine.facts

        def observe(name: str, line: str) -> None:
            facts.feed(line)
            self.sink(name, line)

        engine.child, engine.spec = self.starter(engine.spec, engine.plan, observe)
        if isinstance(engine.child, Child):
            self.pgids.add(engine.child.pgid)
        self._publish(engine.plan)

    def _respawn(self, engine: _Engine, now: float) -> None:
        """A restart: not placed yet is tried again soon (uncounted); a start that fails (its node
        was lost meanwhile, say) counts as that restart, and the next one follows its backoff."""
        try:
            self._spawn(engine)
        except NotPlacedYet:
            engine.restart_at = now + _NOT_PLACED_RETRY_S
        except LaunchError as error:
            if isinstance(error, PlacementError):
                raise  # no room for it within ray.capacity_wait_s: the reason to stop
            done = self.restarts.get(engine.key, 0)
            if done >= engine.plan.max_restarts:
                raise LaunchError(
                    f"engine '{engine.spec.name}' could not be restarted after {done} restart(s) "
                    f"(max_restarts {engine.plan.max_restarts}): {error.message}",
                    hint=error.hint,
                ) from None
            self.restarts[engine.key] = done + 1
            delay = min(_MAX_BACKOFF_S, 2.0**done)
            engine.restart_at = now + delay
            self._say(
                f"{engine.spec.name}: restart {done} failed ({error.message}); trying again in {delay:.0f} s "
                f"(restart {done + 1} of {engine.plan.max_restarts})"
            )

    def _publish(self, plan: InstanceEngines) -> None:
        """Rewrite the instance's endpoint file (if it has one) with its engines' URLs as they are
        now: the model server follows a re-placed engine's new address (`upstream.endpoint_file`)."""
        if plan.endpoint_file is None:
            return
        started = (engine for engine in self.engines if engine.plan is plan and engine.child is not None)
        urls = "".join(f"{engine.spec.base_url}\n" for engine in started)
        path = Path(plan.endpoint_file)
        if path.is_file() and path.read_text() == urls:
            return
        write_bytes_atomically(path, urls.encode())
        self._say(f"{plan.instance}: engines now at {' '.join(urls.split())}")

    def _start_local(
        self, spec: EngineSpec, plan: InstanceEngines, sink: LineSink
    ) -> tuple[Handle, EngineSpec]:
        """A child of ng_run leading its own process group."""
        child = spawn_child(
            spec.name,
            spec.argv(),
            pgid=None,
            sink=sink,
            env=plan.env_of(spec, self.base_env),
            redact=self.redact,
        )
        return child, spec

    def _probe(self, engine: _Engine, *, force: bool = False) -> bool:
        now = self.clock()
        if not force and now - engine.probed_at < _REPROBE_S:
            return False
        engine.probed_at = now
        if serves_model(
            engine.spec.root_url, api_key=engine.plan.api_key, model=engine.spec.served_model_name
        ):
            engine.ready_s = self.clock() - engine.started_at
            self._say(f"{engine.spec.name} ready in {engine.ready_s:.1f} s at {engine.spec.base_url} "
                      f"({engine.facts.summary()})")  # fmt: skip
            return True
        if now - engine.started_at > engine.plan.ready_timeout_s:
            raise LaunchError(
                f"engine '{engine.spec.name}' did not serve {engine.spec.served_model_name!r} at "
                f"{engine.spec.base_url} within {engine.plan.ready_timeout_s:.0f} s"
                f"{tail_text(engine.spec.name, engine.child)}",
                hint=f"raise {engine.spec.instance}.engine_ready_timeout_s if it is only slow to start",
            )
        return False

    def _check_alive_before_ready(self, engine: _Engine) -> None:
        if engine.child is None:
            return
        code = engine.child.exit_code()
        if code is not None:
            raise self._death_error(engine, code, when="before it was ready")
        if engine.facts.start_failed:
            now = self.clock()
            if engine.start_failed_at is None:
                engine.start_failed_at = now
            elif now - engine.start_failed_at >= FAILED_START_GRACE_S:
                engine.child.kill()
                engine.child.wait(5.0)
                raise LaunchError(
                    f"engine '{engine.spec.name}' (pid {engine.child.pid}) logged 'EngineCore failed to start' "
                    f"({engine.facts.start_failure or 'its cause is in the lines below'}) and had not exited "
                    f"{FAILED_START_GRACE_S:.0f} s later: ng_run stopped it{tail_text(engine.spec.name, engine.child)}",
                    hint="the lines above are its last output; fix the cause, then rerun ng_run",
                )

    def _schedule_restart(self, engine: _Engine, now: float) -> None:
        assert engine.child is not None
        code = engine.child.exit_code()
        assert code is not None
        done = self.restarts.get(engine.key, 0)
        if done >= engine.plan.max_restarts:
            raise self._death_error(
                engine,
                code,
                when=f"while the stack was running, after {done} restart(s) (max_restarts {engine.plan.max_restarts})",
            )
        self.restarts[engine.key] = done + 1
        delay = min(_MAX_BACKOFF_S, 2.0**done)
        group = [other for other in self.engines if other.key == engine.key]
        for member in group:  # ranks of one group share collectives: they restart together
            if member.child is not None:
                member.child.kill()
            member.restart_at = now + delay
            member.ready_s = None
        others = f" with {len(group) - 1} other rank(s) of its group" if len(group) > 1 else ""
        self._say(
            f"{engine.spec.name} exited ({engine.child.describe_end(code)}); restarting it{others} in {delay:.0f} s "
            f"(restart {done + 1} of {engine.plan.max_restarts}); its sessions go to the other engines"
        )

    def _check_parallelism(self, engines: list[_Engine]) -> None:
        problems: list[str] = []

        def consistent() -> bool:
            problems[:] = [
                problem for engine in engines for problem in parallelism_problems(engine.spec, engine.facts)
            ]
            return not problems

        # The relay thread may be a few lines behind the engine's log.
        if not poll_until(consistent, timeout_s=2.0, first_retry_s=0.1, max_retry_s=0.1):
            raise LaunchError(
                "the engines do not run the planned parallel layout (read from their own start-up logs):\n  "
                + "\n  ".join(problems),
                hint="vLLM derives EP = DP x TP within one data-parallel group; check vllm_serve_kwargs, "
                "expert_parallel_size and data_parallel_mode (ng_run +dry_run=true shows the plan)",
            )

    def _death_error(self, engine: _Engine, code: int, *, when: str) -> LaunchError:
        if engine.child is not None:
            engine.child.wait(1.0)  # the last lines arrive
        pid = engine.child.pid if engine.child is not None else "?"
        end = engine.child.describe_end(code) if engine.child is not None else f"exit code {code}"
        return LaunchError(
            f"engine '{engine.spec.name}' (pid {pid}) exited {when}: {end}"
            f"{tail_text(engine.spec.name, engine.child)}",
            hint="the lines above are its last output; fix the cause, then rerun ng_run",
        )

    def _waiting_text(self, engine: _Engine, now: float) -> str:
        neighbour = self._starting_neighbour(engine) if engine.child is None else None
        if neighbour is not None:
            return f"not started yet: {neighbour.spec.name} on the same GPU is still starting"
        last = engine.child.last_lines()[-1:] if engine.child is not None else []
        return f"{now - engine.started_at:.0f} s, last line: {last[0][:160] if last else '(none yet)'}"

    def _say(self, line: str) -> None:
        self.sink(_LAUNCHER, line)
