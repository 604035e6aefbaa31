"""`EngineAdmin`: the admin routes of one vLLM engine, each call under its own deadline.

The routes exist when the engine runs with `VLLM_SERVER_DEV_MODE=1` (`weight_updates: true`) and
answer only with the engines' key (`engines/engine_guard.py`). The reload and the fingerprint go
through `/collective_rpc` to the methods `engines/engine_worker.py` adds to every worker, so they
return one answer per worker (TP/PP rank).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Mapping
from typing import Any, Literal, TypeVar

from ng_cli.errors import NgError, UpstreamTimeoutError, UpstreamUnavailableError
from ng_cli.servers.http import HttpClient, Timeouts

__all__ = [
    "EXPERT_CHECK_BYTES",
    "NON_FINITE",
    "SHARED",
    "EngineAdmin",
    "PauseMode",
    "PhaseError",
    "expert_summary",
    "non_finite",
    "shared_part",
]

PauseMode = Literal["keep", "wait", "abort"]
T = TypeVar("T")

NON_FINITE = "non-finite:"
"""How a worker's fingerprint starts when its weights hold NaN or infinite values, followed by the
count and the first names (`engines/engine_worker.py` writes it: the engine imports nothing of ours)."""


EXPERT_CHECK_BYTES = 1 << 30
"""How many bytes of its experts each expert-parallel rank reads back from the files after an update
from disk, to compare with what it holds: every expert of a small MoE, a sample rotated by version
of a large one (a full check would read most of the checkpoint a second time)."""


SHARED = "shared="
"""Where a worker's fingerprint gives the digest of its parameters but the experts' (the part every
rank of an expert-parallel group must agree on)."""


def shared_part(fingerprints: list[str]) -> list[str] | None:
    """Each worker's digest of its non-expert parameters; None from an engine that gives none."""
    parts = [fingerprint.partition(f" {SHARED}")[2] for fingerprint in fingerprints]
    return parts if all(parts) else None


def non_finite(fingerprints: list[str]) -> str | None:
    """Why these workers' weights cannot serve (NaN or inf in them), or None when they are finite."""
    for fingerprint in fingerprints:
        if fingerprint.startswith(NON_FINITE):
            count, _, names = fingerprint[len(NON_FINITE) :].partition(":")
            return (
                f"its weights hold NaN or infinite values after loading ({count} tensor(s), e.g. {names}): "
                "a diverged training step? refused"
            )
    return None


def expert_summary(engine: str, text: str) -> dict[str, Any]:
    """One worker's `ng_check_experts` answer (JSON: counts, its EP rank, why it was not checked)."""
    try:
        summary = json.loads(text)
    except ValueError:
        summary = None
    if not isinstance(summary, dict):
        raise PhaseError(engine, "verify", f"its expert check answered {text[:200]!r}, not a JSON object")
    return summary


class PhaseError(NgError):
    """One engine failed one phase (or ran past its deadline); names both."""

    def __init__(self, engine: str, phase: str, reason: str) -> None:
        super().__init__(f"engine {engine}: {phase} failed: {reason}")
        self.engine = engine
        self.phase = phase
        self.reason = reason


class EngineAdmin:
    """Admin calls to the engine at `root_url` (its server root, not `/v1`)."""

    def __init__(self, http: HttpClient, root_url: str, *, headers: Mapping[str, str]) -> None:
        self.http = http
        self.root_url = root_url.rstrip("/")
        self.headers = dict(headers)

    async def pause(self, mode: PauseMode, *, deadline_s: float) -> None:
        await self._phase("pause", self._post(f"/pause?mode={mode}", None, deadline_s), deadline_s)

    async def resume(self, *, deadline_s: float) -> None:
        await self._phase("resume", self._post("/resume", None, deadline_s), deadline_s)

    async def reload(self, path: str, *, deadline_s: float) -> list[str]:
        """Load the checkpoint at `path`; the fingerprint of every worker after it."""
        body = {"method": "ng_reload_weights", "kwargs": {"weights_path": path}, "timeout": deadline_s}
        answer = await self._phase("reload", self._post("/collective_rpc", body, deadline_s), deadline_s)
        return _per_worker(self.root_url, "reload", answer)

    async def apply_delta(self, path: str, resident: list[str], *, deadline_s: float) -> list[str]:
        """Apply the weights delta at `path` onto `resident` (the full checkpoint the engine holds, then
        the deltas since); the fingerprint of every worker after it."""
        body = {
            "method": "ng_apply_delta",
            "kwargs": {"path": path, "resident": resident},
            "timeout": deadline_s,
        }
        answer = await self._phase("reload", self._post("/collective_rpc", body, deadline_s), deadline_s)
        return _per_worker(self.root_url, "reload", answer)

    async def fingerprint(self, *, deadline_s: float) -> list[str]:
        body = {"method": "ng_weights_fingerprint", "timeout": deadline_s}
        answer = await self._phase("verify", self._post("/collective_rpc", body, deadline_s), deadline_s)
        return _per_worker(self.root_url, "verify", answer)

    async def check_experts(
        self, path: str, *, budget_bytes: int, seed: int, deadline_s: float
    ) -> list[dict[str, Any]]:
        """Each worker's experts compared with what the files at `path` hold for its rank
        (`engines/expert_check.py`); a rank that differs fails the phase, naming layer and expert."""
        kwargs = {"weights_path": path, "budget_bytes": budget_bytes, "seed": seed}
        body = {"method": "ng_check_experts", "kwargs": kwargs, "timeout": deadline_s}
        answer = await self._phase("verify", self._post("/collective_rpc", body, deadline_s), deadline_s)
        return [expert_summary(self.root_url, text) for text in _per_worker(self.root_url, "verify", answer)]

    async def clear_kv_cache(self, *, deadline_s: float) -> None:
        """Zero every KV-cache block of every worker (no state of the old weights survives)."""
        body = {"method": "ng_clear_kv_cache", "timeout": deadline_s}
        await self._phase("clear_kv", self._post("/collective_rpc", body, deadline_s), deadline_s)

    async def devices(self, *, deadline_s: float) -> list[str]:
        """Each worker's device type (`cuda`, `cpu`)."""
        body = {"method": "ng_device", "timeout": deadline_s}
        answer = await self._phase("sleep", self._post("/collective_rpc", body, deadline_s), deadline_s)
        return _per_worker(self.root_url, "sleep", answer)

    async def reset_prefix_cache(self, *, deadline_s: float) -> bool:
        """True if the engine emptied its prefix cache (False while requests still hold blocks)."""
        answer = await self._phase(
            "reset_cache", self._post("/reset_prefix_cache", None, deadline_s), deadline_s
        )
        return not (isinstance(answer, dict) and answer.get("success") is False) and answer is not False

    async def sleep(self, level: int, *, deadline_s: float) -> None:
        await self._phase("sleep", self._post(f"/sleep?level={level}", None, deadline_s), deadline_s)

    async def wake_up(self, *, deadline_s: float) -> None:
        await self._phase("wake_up", self._post("/wake_up", None, deadline_s), deadline_s)

    async def is_sleeping(self, *, deadline_s: float) -> bool:
        answer = await self._phase("sleep", self._get("/is_sleeping", deadline_s), deadline_s)
        return bool(isinstance(answer, dict) and answer.get("is_sleeping"))

    async def checkpoint_files(self, path: str, *, deadline_s: float) -> list[str]:
        """What each worker's node sees at `path` (`upstream.checkpoint_sight`)."""
        body = {"method": "ng_checkpoint_files", "kwargs": {"weights_path": path}, "timeout": deadline_s}
        answer = await self._phase("check", self._post("/collective_rpc", body, deadline_s), deadline_s)
        return _per_worker(self.root_url, "check", answer)

    async def answers(self, *, deadline_s: float) -> bool:
        """Whether its server answers `/health` at all (False: its node or process is gone)."""
        try:
            await self.http.request_json(
                "GET", self.root_url + "/health", headers=self.headers, timeouts=_timeouts(deadline_s)
            )
        except (UpstreamUnavailableError, UpstreamTimeoutError):
            return False
        except NgError:  # an error status (engine core down, say) is an answer: not a lost node
            return True
        return True

    async def call(
        self, route: str, body: Any, *, phase: str, deadline_s: float, method: str = "POST"
    ) -> Any:
        """Any other admin route (the tensor-push routes), under the same rules."""
        request = self._get(route, deadline_s) if method == "GET" else self._post(route, body, deadline_s)
        return await self._phase(phase, request, deadline_s)

    async def _phase(self, phase: str, call: Awaitable[T], deadline_s: float) -> T:
        try:
            return await asyncio.wait_for(call, deadline_s)
        except TimeoutError:
            raise PhaseError(self.root_url, phase, f"no answer within {deadline_s:g} s") from None
        except UpstreamTimeoutError as error:
            raise PhaseError(
                self.root_url, phase, f"no answer within {deadline_s:g} s ({error.message})"
            ) from None
        except NgError as error:
            raise PhaseError(self.root_url, phase, error.message) from None

    async def _post(self, route: str, body: Any, deadline_s: float) -> Any:
        return await self.http.request_json(
            "POST", self.root_url + route, json=body, headers=self.headers, timeouts=_timeouts(deadline_s)
        )

    async def _get(self, route: str, deadline_s: float) -> Any:
        return await self.http.request_json(
            "GET", self.root_url + route, headers=self.headers, timeouts=_timeouts(deadline_s)
        )


def _timeouts(deadline_s: float) -> Timeouts:
    return Timeouts(connect_s=min(5.0, deadline_s), read_s=deadline_s, total_s=deadline_s)


def _per_worker(engine: str, phase: str, answer: Any) -> list[str]:
    """The string each worker answered (a fingerprint, a device type)."""
    results = answer.get("results") if isinstance(answer, dict) else None
    if not isinstance(results, list) or not results or not all(isinstance(item, str) for item in results):
        raise PhaseError(
            engine,
            phase,
            f"its workers answered {str(answer)[:200]!r}, not one string per worker "
            "(was the engine started with weight_updates: true?)",
        )
    return results
