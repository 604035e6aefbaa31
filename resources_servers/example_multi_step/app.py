"""`example_multi_step`: three dependent lookups, and a verify that checks the answer and the path.

The question ("what do all of Carol's orders add up to?") needs every tool in turn:
`get_user_id(name)` -> `get_orders(user_id)` -> `get_order_total(order_id)` per order. The
environment remembers, per session, which ids it has handed to the model; a call that uses an
id the model was never given (a guess, or a step skipped) still answers but is recorded as out
of order. Verify gives 1.0 only for the right total reached along a valid path.

NeMo Gym's environment of the same name is a synonym task: `get_synonym_value(synonym)` (the
sum of the word's character codes) and `extract_synonym_values(synonym_values)`, scored 1.0 when
the last extraction equals the row's `expected_synonym_values`. Both tools are here too, and a
row with that key and no `expected_answer` is scored by NeMo Gym's rule (`nemo_gym_verdict`), so
its data runs here unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ng_cli.config.schema import ResourcesServerConfig
from ng_cli.servers import ResourcesServer, ToolError, VerifyRequest, tool

USER_IDS: dict[str, str] = {
    "alice": "u-101",
    "bob": "u-102",
    "carol": "u-103",
    "dave": "u-104",
    "erin": "u-105",
    "frank": "u-106",
}
ORDERS: dict[str, list[str]] = {
    "u-101": ["o-5001", "o-5002"],
    "u-102": ["o-5003"],
    "u-103": ["o-5004", "o-5005", "o-5006"],
    "u-104": ["o-5010"],
    "u-105": ["o-5007", "o-5008"],
    "u-106": ["o-5009"],
}
ORDER_TOTALS: dict[str, Decimal] = {
    "o-5001": Decimal("12.50"),
    "o-5002": Decimal("30.00"),
    "o-5003": Decimal("7.25"),
    "o-5004": Decimal("19.99"),
    "o-5005": Decimal("5.01"),
    "o-5006": Decimal("100.00"),
    "o-5007": Decimal("42.00"),
    "o-5008": Decimal("0.75"),
    "o-5009": Decimal("64.10"),
    "o-5010": Decimal("3.00"),
}
REQUIRED_TOOLS = ("get_user_id", "get_orders", "get_order_total")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GetUserIdArgs(_Args):
    name: str = Field(min_length=1, max_length=100)


class GetOrdersArgs(_Args):
    user_id: str = Field(min_length=1, max_length=100)


class GetOrderTotalArgs(_Args):
    order_id: str = Field(min_length=1, max_length=100)


class GetSynonymValueArgs(BaseModel):
    synonym: str


class ExtractSynonymValuesArgs(BaseModel):
    synonym_values: list[int]


class SynonymRow(BaseModel):
    """The verifier inputs of a NeMo Gym example_multi_step row."""

    expected_synonym_values: list[int] = Field(min_length=1)
    minefield_label: str
    minefield_label_value: int


@dataclass
class Trail:
    """What one rollout has been told so far, and what it did."""

    user_ids: set[str] = field(default_factory=set)
    order_ids: set[str] = field(default_factory=set)
    calls: list[str] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)


class ExampleMultiStep(ResourcesServer[ResourcesServerConfig]):
    """A user/order lookup chain with per-session bookkeeping of the ids handed out."""

    config_class = ResourcesServerConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.trails: dict[str, Trail] = {}

    async def seed_session(self, session_id: str, _row: Mapping[str, Any]) -> None:
        self.trails[session_id] = Trail()

    def trail(self, session_id: str) -> Trail:
        return self.trails.setdefault(session_id, Trail())

    @tool
    async def get_user_id(self, session_id: str, args: GetUserIdArgs) -> dict[str, Any]:
        """The id of a user, by name (case ignored)."""
        trail = self.trail(session_id)
        trail.calls.append("get_user_id")
        user_id = USER_IDS.get(args.name.strip().lower())
        if user_id is None:
            raise ToolError(f"no user named {args.name!r}")
        trail.user_ids.add(user_id)
        return {"name": args.name.strip(), "user_id": user_id}

    @tool
    async def get_orders(self, session_id: str, args: GetOrdersArgs) -> dict[str, Any]:
        """The order ids of a user id (from get_user_id)."""
        trail = self.trail(session_id)
        trail.calls.append("get_orders")
        if args.user_id not in ORDERS:
            raise ToolError(f"no user with id {args.user_id!r}; look the id up with get_user_id")
        if args.user_id not in trail.user_ids:
            trail.out_of_order.append(f"get_orders({args.user_id}) before get_user_id returned it")
        orders = ORDERS[args.user_id]
        trail.order_ids.update(orders)
        return {"user_id": args.user_id, "order_ids": list(orders)}

    @tool
    async def get_order_total(self, session_id: str, args: GetOrderTotalArgs) -> dict[str, Any]:
        """The total of one order id (from get_orders), in US dollars."""
        trail = self.trail(session_id)
        trail.calls.append("get_order_total")
        total = ORDER_TOTALS.get(args.order_id)
        if total is None:
            raise ToolError(f"no order with id {args.order_id!r}; list a user's orders with get_orders")
        if args.order_id not in trail.order_ids:
            trail.out_of_order.append(f"get_order_total({args.order_id}) before get_orders returned it")
        return {"order_id": args.order_id, "total": float(total), "currency": "USD"}

    @tool
    async def get_synonym_value(self, _session_id: str, args: GetSynonymValueArgs) -> dict[str, Any]:
        """NeMo Gym's synonym tool: the value of a word is the sum of its character codes."""
        return {"synonym_value": sum(map(ord, args.synonym))}

    @tool
    async def extract_synonym_values(
        self, _session_id: str, _args: ExtractSynonymValuesArgs
    ) -> dict[str, Any]:
        """NeMo Gym's answer tool: the model hands in its values (verify reads the call)."""
        return {"success": True}

    async def verify(self, session_id: str, request: VerifyRequest) -> Mapping[str, Any]:
        extra = request.model_extra or {}
        if "expected_answer" not in extra and "expected_synonym_values" in extra:
            self.trails.pop(session_id, None)
            return nemo_gym_verdict(request)
        expected = _decimal(request.extra("expected_answer"))
        if expected is None:
            raise ToolError(
                "the row has no numeric 'expected_answer' (e.g. \"125.00\"); add one to each data row"
            )
        trail = self.trails.pop(session_id, Trail())
        answer_correct = expected in numbers_in(request.final_assistant_text())
        valid_order = not trail.out_of_order
        used_all_tools = all(name in trail.calls for name in REQUIRED_TOOLS)
        return {
            "reward": float(answer_correct and valid_order and used_all_tools),
            "answer_correct": float(answer_correct),
            "valid_order": float(valid_order),
            "used_all_tools": float(used_all_tools),
            "tool_calls": len(trail.calls),
        }


def nemo_gym_verdict(request: VerifyRequest) -> dict[str, Any]:
    """NeMo Gym's example_multi_step verify: the last `extract_synonym_values` call's values must
    equal the expected ones, in order. Arguments that are not valid JSON count as no extraction
    (NeMo Gym answers 500 there; a model's bad output is a 0.0 here, not a server error)."""
    try:
        row = SynonymRow.model_validate(request.model_extra or {})
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise ToolError(f"invalid NeMo Gym example_multi_step row: {where}: {error['msg']}") from None
    actual = _last_extraction(request.response.get("output"))
    expected = row.expected_synonym_values
    accuracy = expected == actual
    set_overlap = len(set(actual) & set(expected)) / len(expected)
    return {
        "reward": float(accuracy),
        "parsed_synonym_values": actual,
        "accuracy": accuracy,
        "set_overlap": set_overlap,
        "original_term_minefield_hit": row.minefield_label in actual or row.minefield_label_value in actual,
        "order_instruction_following_failure": not accuracy and set_overlap == 1.0,
    }


def _last_extraction(output: Any) -> list[Any]:
    """`synonym_values` of the last `extract_synonym_values` call in the output, else []."""
    for item in reversed(output if isinstance(output, list) else []):
        if isinstance(item, Mapping) and item.get("type") == "function_call":
            if item.get("name") != "extract_synonym_values":
                continue
            try:
                values = orjson.loads(item.get("arguments") or "").get("synonym_values")
            except (orjson.JSONDecodeError, AttributeError):
                return []
            return values if isinstance(values, list) else []
    return []


def numbers_in(text: str) -> set[Decimal]:
    """Every number written in `text` ("1,234.50" counts as 1234.50)."""
    found = (_decimal(match.replace(",", "")) for match in _NUMBER.findall(text))
    return {number for number in found if number is not None}


def _decimal(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return None
