"""`RayChild`: a process that a Ray actor owns, seen by the launcher as one more child (`process.Handle`).

A relay thread polls the actor for new output lines (shown with the `[name]` prefix, the last ones
kept for death reports) and for the process's end. An actor that stops answering reads as an exit
only once Ray has given its verdict (`launcher.ray.verdict`: its node lost, or it died on a live
node), reported with the actor's name and node; until then the process reads as running and no
restart is sent anywhere. `kill()` ends the process, its actor and the actor's GPU leases.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ng_cli.errors import ConfigError
from ng_cli.launcher.process import LOG_TAIL_LINES, LineSink, describe_exit
from ng_cli.launcher.ray.config import RayConfig
from ng_cli.launcher.ray.verdict import NodeWatch, RayCluster, Verdict, await_verdict

__all__ = ["ACTOR_DIED", "RayChild", "import_ray", "node_text"]

_POLL_S = 0.2
_CALL_TIMEOUT_S = 30.0
ACTOR_DIED = -9
"""The exit code a process reads as when its actor died (its death signal is SIGKILL's effect)."""


def import_ray() -> Any:
    """Ray, or a ConfigError saying how to install it (it is an optional extra)."""
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "ray.address is set but Ray is not installed in this environment",
            hint="pip install -e '.[ray]'  (or drop ray.address to run plain local processes)",
        ) from None
    return ray


def node_text(node: dict[str, Any]) -> str:
    """`node <id> (<address>)`: the id tells apart nodes that share an address."""
    return f"node {node.get('node_id') or '?'} ({node.get('ip') or '?'})"


@dataclass(eq=False)
class RayChild:
    """One process owned by an actor, seen from the driver as a child."""

    name: str
    actor: Any = field(repr=False)
    actor_name: str
    node: dict[str, Any]
    pid: int
    sink: LineSink = field(repr=False)
    redact: Callable[[str], str] | None = field(default=None, repr=False)
    leases: list[Any] = field(default_factory=list, repr=False)
    """GPU lease actors holding its other bundles: they end with it (a restart needs those GPUs)."""
    watch: NodeWatch = field(default_factory=NodeWatch, repr=False)
    """The backend's record of nodes no restart may go to (this child's verdicts feed it)."""
    verdict_timeout_s: float = RayConfig.model_fields["node_verdict_timeout_s"].default
    """`ray.node_verdict_timeout_s` (the backend passes the configured value)."""
    say: Callable[[str], None] = field(default=lambda _line: None, repr=False)
    """ng_run's own lines: an actor that stopped answering, and Ray's verdict on it."""
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=LOG_TAIL_LINES))
    relay: threading.Thread | None = None
    actor_died: bool = False
    node_lost: bool = False
    """Its actor died because its node did (the cluster marked the node dead)."""
    verdict: Verdict | None = None
    """Ray's verdict once its actor stopped answering (NONE: none within verdict_timeout_s)."""
    _code: int | None = None
    _stopping: bool = False

    def start_relay(self) -> None:
        self.relay = threading.Thread(target=self._relay, name=f"ray-relay-{self.name}", daemon=True)
        self.relay.start()

    def exit_code(self) -> int | None:
        return self._code

    def last_lines(self) -> list[str]:
        return list(self.tail)

    def describe_end(self, code: int) -> str:
        """How it ended, with the actor's name and node: what a death report shows."""
        where = f"Ray actor {self.actor_name} on {node_text(self.node)}"
        if self.node_lost:
            return f"its {where} died: node lost (the process died with it)"
        if self.verdict is Verdict.NONE:
            return (
                f"its {where} stopped answering, and within {self.verdict_timeout_s:g} s "
                "(ray.node_verdict_timeout_s) Ray neither declared the node dead nor ran work there"
            )
        if self.actor_died:
            return f"its {where} died (the process died with it)"
        return f"{describe_exit(code)}; {where}"

    def location(self) -> dict[str, Any]:
        return {
            "node": self.node.get("ip"),
            "node_id": self.node.get("node_id"),
            "hostname": self.node.get("hostname"),
            "actor": self.actor_name,
            "actor_pid": self.node.get("actor_pid"),
        }

    def expect_end(self) -> None:
        """We are ending it: its actor's death is then no news to report."""
        self._stopping = True

    def kill(self) -> None:
        """End the process and its actor now (a restart follows, or the stack is stopping)."""
        ray = import_ray()
        self._stopping = True
        with contextlib.suppress(Exception):
            ray.get(self.actor.stop.remote(0.0), timeout=5.0)
        for actor in (self.actor, *self.leases):
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
        if self._code is None:
            self._code = ACTOR_DIED

    def wait(self, timeout_s: float) -> None:
        if self.relay is not None:
            self.relay.join(timeout=timeout_s)

    def _relay(self) -> None:
        ray = import_ray()
        cursor = 0
        failing_since: float | None = None
        while self._code is None:
            try:
                lines, cursor, code = ray.get(self.actor.poll.remote(cursor), timeout=_CALL_TIMEOUT_S)
            except ray.exceptions.GetTimeoutError:
                continue
            except ray.exceptions.RayError as error:  # it died (killed, its node lost), or a passing failure
                verdict: Verdict | None = None
                if not self._stopping:  # our own stop ends actors: no news then
                    failing_since = failing_since or time.monotonic()
                    verdict = self._await_verdict(error, failing_since)
                if verdict is Verdict.ANSWERS and not self._stopping:
                    time.sleep(_POLL_S)
                    continue
                if verdict is not None and not self._stopping:
                    self.verdict = verdict
                    self.actor_died = True
                    self.node_lost = verdict is Verdict.LOST
                self._code = ACTOR_DIED
                return
            except Exception:  # Ray already shut down under a stopping stack: nothing left to read
                if not self._stopping:
                    raise
                self._code = ACTOR_DIED
                return
            failing_since = None
            for line in lines:
                shown = self.redact(line) if self.redact is not None else line
                self.tail.append(shown)
                with contextlib.suppress(OSError, ValueError):
                    self.sink(self.name, shown)
            if code is not None:
                self._code = code
                return
            time.sleep(_POLL_S)

    def _await_verdict(self, error: Exception, failing_since: float) -> Verdict:
        """Ray's word on the actor and its node, up to verdict_timeout_s after its calls began to fail."""
        node_id = str(self.node.get("node_id"))
        where = f"its Ray actor {self.actor_name} on {node_text(self.node)}"
        self.say(
            f"{self.name}: {where} stopped answering ({type(error).__name__}); waiting for Ray's verdict "
            f"on it and its node (up to ray.node_verdict_timeout_s {self.verdict_timeout_s:g} s)"
        )
        self.watch.suspect(node_id)
        verdict = Verdict.NONE
        try:
            verdict = await_verdict(
                RayCluster(import_ray()),
                self.actor,
                node_id,
                deadline=failing_since + self.verdict_timeout_s,
                should_stop=lambda: self._stopping,
            )
        finally:
            self.watch.settle(node_id, verdict)
        if not self._stopping:
            self.say(
                f"{self.name}: Ray's verdict on {where}, {time.monotonic() - failing_since:.1f} s after "
                f"its calls began to fail: {verdict.value}"
            )
        return verdict
