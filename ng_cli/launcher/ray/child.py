"""`RayChild`: a process that a Ray actor owns, seen by the launcher as one more child (`process.Handle`).

A relay thread polls the actor for new output lines (shown with the `[name]` prefix, the last ones
kept for death reports) and for the process's end; an actor that dies reads as an exit, reported
with the actor's name and node. `kill()` ends the process, its actor and the actor's GPU leases.
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

__all__ = ["ACTOR_DIED", "RayChild", "import_ray", "is_node_alive", "node_text"]

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


def is_node_alive(ray: Any, node_id: str) -> bool:
    """False once the cluster has marked the node dead (its raylet gone: preempted, crashed, removed)."""
    try:
        nodes = ray.nodes()
    except Exception:  # the cluster itself is gone: nothing to tell
        return True
    return any(node.get("NodeID") == node_id and node.get("Alive") for node in nodes)


def _node_was_lost(ray: Any, node_id: str, *, checks: int = 11, every_s: float = 0.5) -> bool:
    """When a node dies at once the cluster marks it dead before the actors it held, so one check
    tells; when its raylet outlives its workers by a moment, it reports them dead first and the
    node follows after its missed health checks: a few more seconds of checks cover that (an
    actor that died on a live node costs its report 5 s)."""
    for check in range(checks):
        if not is_node_alive(ray, node_id):
            return True
        if check < checks - 1:
            time.sleep(every_s)
    return False


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
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=LOG_TAIL_LINES))
    relay: threading.Thread | None = None
    actor_died: bool = False
    node_lost: bool = False
    """Its actor died because its node did (the cluster marked the node dead)."""
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
        while self._code is None:
            try:
                lines, cursor, code = ray.get(self.actor.poll.remote(cursor), timeout=_CALL_TIMEOUT_S)
            except ray.exceptions.GetTimeoutError:
                continue
            except ray.exceptions.RayError:  # the actor died (killed, its node lost): so did the process
                if not self._stopping:
                    self.actor_died = True
                    self.node_lost = _node_was_lost(ray, str(self.node.get("node_id")))
                self._code = ACTOR_DIED
                return
            except Exception:  # Ray already shut down under a stopping stack: nothing left to read
                if not self._stopping:
                    raise
                self._code = ACTOR_DIED
                return
            for line in lines:
                shown = self.redact(line) if self.redact is not None else line
                self.tail.append(shown)
                with contextlib.suppress(OSError, ValueError):
                    self.sink(self.name, shown)
            if code is not None:
                self._code = code
                return
            time.sleep(_POLL_S)
