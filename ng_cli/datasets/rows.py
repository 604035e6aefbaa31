"""One dataset row: is it a run request for its agent (and its environment's row model)?

`check_row` returns the parsed row, or the reason it is not one; it never raises for bad data,
so the caller can list every bad row of a file instead of stopping at the first.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from ng_cli.protocol.responses import ResponsesRequest

__all__ = ["AGENT_REF_TYPE", "check_row", "with_agent_ref"]

AGENT_REF_TYPE = "responses_api_agents"


def check_row(raw: bytes, *, agent: str, row_model: type[BaseModel] | None) -> dict[str, Any] | str:
    """The row as a dict, or one line saying everything that is wrong with it."""
    try:
        row = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return f"not valid JSON ({exc})"
    if not isinstance(row, dict):
        return f"expected a JSON object, got {type(row).__name__}"
    problems = _params_problems(row) + _agent_ref_problems(row.get("agent_ref"), agent)
    if row_model is not None:
        problems += _model_problems(row, row_model)
    return "; ".join(problems) if problems else row


def with_agent_ref(row: dict[str, Any], agent: str) -> dict[str, Any]:
    """The row with `agent_ref` naming its agent (what the collector routes by)."""
    return {**row, "agent_ref": {"type": AGENT_REF_TYPE, "name": agent}}


def _params_problems(row: dict[str, Any]) -> list[str]:
    params = row.get("responses_create_params")
    if not isinstance(params, dict):
        found = "missing" if params is None else f"a {type(params).__name__}"
        return [f"'responses_create_params' must be an object, it is {found}"]
    try:
        ResponsesRequest.model_validate(params)
    except ValidationError as exc:
        return [f"responses_create_params.{_describe(error)}" for error in exc.errors()[:5]]
    return []


def _agent_ref_problems(ref: Any, agent: str) -> list[str]:
    if ref is None:
        return []
    name = ref.get("name") if isinstance(ref, dict) else ref
    if not isinstance(name, str):
        return [f"agent_ref must be {{type: {AGENT_REF_TYPE}, name: <agent>}} or a name, got {ref!r}"]
    if name != agent:
        return [f"agent_ref names {name!r}, but the row is in a dataset of {agent!r}"]
    return []


def _model_problems(row: dict[str, Any], model: type[BaseModel]) -> list[str]:
    try:
        model.model_validate(row)
    except ValidationError as exc:
        return [f"{_describe(error)} ({model.__name__})" for error in exc.errors()[:5]]
    return []


def _describe(error: Any) -> str:
    loc = ".".join(str(part) for part in error["loc"]) or "<row>"
    if error["type"] == "missing":
        return f"{loc}: missing"
    shown = repr(error.get("input"))
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"{loc}: {error['msg']}, got {shown}"
