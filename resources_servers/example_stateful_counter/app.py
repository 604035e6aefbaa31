"""`example_stateful_counter`: a counter per rollout, to show (and test) per-session state.

`increment(by)` and `get_count()` act on the counter of the calling rollout only, found by the
session id of its `ng_session` cookie; `seed_session` starts it at the row's `initial_count`
(default 0). Verify compares the session's final count with the row's `expected_count`, so the
reward depends on what the model did, not on what it says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ng_cli.config.schema import ResourcesServerConfig
from ng_cli.errors import BadRequestError
from ng_cli.servers import ResourcesServer, ToolError, VerifyRequest, tool


class CounterConfig(ResourcesServerConfig):
    max_increment: int = Field(default=1000, ge=1)
    """Largest `|by|` one `increment` call accepts."""


class IncrementArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    by: int


class GetCountArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ExampleStatefulCounter(ResourcesServer[CounterConfig]):
    """One integer per session; asyncio runs each tool call to completion, so no lock is needed."""

    config_class = CounterConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.counts: dict[str, int] = {}

    async def seed_session(self, session_id: str, row: Mapping[str, Any]) -> Mapping[str, Any]:
        initial = row.get("initial_count", 0)
        if isinstance(initial, bool) or not isinstance(initial, int):
            raise BadRequestError(f"the row's 'initial_count' must be an integer, got {initial!r}")
        self.counts[session_id] = initial
        return {"count": initial}

    @tool
    async def increment(self, session_id: str, args: IncrementArgs) -> dict[str, int]:
        """Add `by` (may be negative) to this rollout's counter; answers the new count."""
        limit = self.config.max_increment
        if abs(args.by) > limit:
            raise ToolError(f"'by' must be between {-limit} and {limit}, got {args.by}")
        count = self.counts.get(session_id, 0) + args.by
        self.counts[session_id] = count
        return {"count": count}

    @tool
    async def get_count(self, session_id: str, _args: GetCountArgs) -> dict[str, int]:
        """This rollout's counter."""
        return {"count": self.counts.get(session_id, 0)}

    async def verify(self, session_id: str, request: VerifyRequest) -> Mapping[str, Any]:
        expected = request.extra("expected_count")
        if isinstance(expected, bool) or not isinstance(expected, int):
            raise ToolError(f"the row's 'expected_count' must be an integer, got {expected!r}")
        count = self.counts.pop(session_id, 0)
        return {"reward": float(count == expected), "final_count": count}
