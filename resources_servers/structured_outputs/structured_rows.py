"""NeMo Gym's structured_outputs rule, for its rows (`schema_str`, `schema_type`, `response_mode`).

NeMo Gym's environment of the same name scores rows that carry the schema as a JSON string in
`schema_str` and the answer's format in `schema_type` (json, yaml, xml, toml, csv); with
`response_mode: tool_call` the answer is the arguments of one function call (optionally under
`tool_payload_key`). Its schema is made strict first (every property required, no others), and
the answer must validate. A verdict is `reward` plus NeMo Gym's `error_type` / `error_message`.

As NeMo Gym does, JSON (the answer, a call's arguments, `schema_str`) is read by Python's `json`,
which takes `NaN` and `Infinity`; the schema is checked before the answer, and any failure of
the check (a schema that is not valid, an unknown `type`) is the answer's 0.0
(`validation_error`), never a server error. `tests/compat/test_structured_outputs.py` holds the
rule to NeMo Gym's own verify.

Deliberate differences, each because the original's behaviour is not what a user wants:
* XML is read with the standard library into xmltodict's shape (NeMo Gym imports xmltodict,
  which this project does not depend on); attributes, repeated tags and empty tags map the same.
* The schema is checked with jsonschema's 2020-12 validator (NeMo Gym: openapi-schema-validator's
  OAS 3.1 validator, which is that draft plus OpenAPI keywords that only annotate); the rewards
  agree, and `error_message` can word a schema's fault differently.
"""

from __future__ import annotations

import csv
import io
import json
import tomllib
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from typing import Any

import jsonschema
import yaml
from jsonschema.exceptions import best_match

__all__ = ["SCHEMA_TYPES", "nemo_gym_verdict"]

SCHEMA_TYPES = ("json", "yaml", "xml", "toml", "csv")


def nemo_gym_verdict(row: Mapping[str, Any], response: Mapping[str, Any]) -> dict[str, Any]:
    """The reward of a NeMo Gym row's response, with `error_type` / `error_message` as it gives them."""
    schema_type = str(row.get("schema_type") or "json").lower()
    if row.get("response_mode") == "tool_call":
        payload, error_type, message = _tool_call_payload(row, response)
        if error_type is not None:
            return _verdict(0.0, error_type, message)
        schema, error = _schema(row["schema_str"])
        return _verdict(*(error or _check(schema, payload)))
    text = "".join(
        part.get("text", "")
        for item in _output(response)
        if item.get("type") == "message"
        for part in item.get("content") or []
        if isinstance(part, Mapping) and part.get("type") == "output_text"
    )
    if not text.strip():
        return _verdict(0.0, "empty_response", "No assistant response text")
    schema, error = _schema(row["schema_str"])
    if error is not None:
        return _verdict(*error)
    try:
        value = _parse(schema_type, text)
    except Exception as exc:  # every parser's own error class: the answer is not of that format
        return _verdict(0.0, "parse_error", f"{type(exc).__name__}: {str(exc)[:200]}")
    return _verdict(*_check(schema, value, schema_type=schema_type))


def _verdict(reward: float, error_type: str | None, message: str | None) -> dict[str, Any]:
    return {"reward": reward, "error_type": error_type, "error_message": message}


def _output(response: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    output = response.get("output")
    return [item for item in output if isinstance(item, Mapping)] if isinstance(output, list) else []


def _tool_call_payload(
    row: Mapping[str, Any], response: Mapping[str, Any]
) -> tuple[Any, str | None, str | None]:
    if response.get("error") is not None:
        return None, "api_error", str(response["error"])[:200]
    calls = [item for item in _output(response) if item.get("type") == "function_call"]
    if not calls:
        return None, "missing_tool_call", "No function_call item found in assistant response"
    names = ", ".join(str(call.get("name")) for call in calls)
    if len(calls) > 1:
        return None, "multiple_tool_calls", f"Expected exactly one function_call, got: {names}"
    tool_name = row.get("tool_name")
    if tool_name and calls[0].get("name") != tool_name:
        return None, "wrong_tool_name", f"Expected tool '{tool_name}', got: {names}"
    arguments = calls[0].get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            return None, "tool_arguments_parse_error", f"JSONDecodeError: {str(exc)[:200]}"
    elif not isinstance(arguments, dict):
        return None, "tool_arguments_parse_error", f"Unsupported arguments type: {type(arguments).__name__}"
    key = row.get("tool_payload_key")
    if key:
        if not isinstance(arguments, dict) or key not in arguments:
            return None, "missing_tool_payload_key", f"Missing tool payload key: {key}"
        return arguments[key], None, None
    return arguments, None, None


Verdict = tuple[float, str | None, str | None]


def _schema(schema_str: str) -> tuple[Any, Verdict | None]:
    """The row's schema made strict, or the verdict that it is not JSON."""
    try:
        schema = json.loads(schema_str)
    except json.JSONDecodeError as exc:
        return None, (0.0, "schema_error", str(exc)[:200])
    _strictify(schema)
    return schema, None


def _check(schema: Any, value: Any, *, schema_type: str = "json") -> Verdict:
    try:
        if schema_type == "xml":
            value = _coerce_xml(value, schema)
        elif schema_type == "csv":
            value = _coerce_csv(value, schema)
        jsonschema.Draft202012Validator.check_schema(schema)
        error = best_match(jsonschema.Draft202012Validator(schema).iter_errors(value))
    except Exception as exc:  # as NeMo Gym: a schema it cannot check with is the answer's 0.0
        return 0.0, "validation_error", f"{type(exc).__name__}: {str(exc)[:200]}"
    if error is not None:
        return 0.0, "validation_error", f"ValidationError: {str(error)[:200]}"
    return 1.0, None, None


def _strictify(schema: Any) -> None:
    """NeMo Gym's strict form: an object schema requires every property and allows no others."""
    if isinstance(schema, dict):
        if "properties" in schema:
            schema["required"] = list(schema["properties"])
            schema["additionalProperties"] = False
        for value in schema.values():
            _strictify(value)
    elif isinstance(schema, list):
        for value in schema:
            _strictify(value)


def _parse(schema_type: str, text: str) -> Any:
    if schema_type == "json":
        return json.loads(text)
    if schema_type == "yaml":
        return yaml.safe_load(text)
    if schema_type == "xml":
        return _xml_to_dict(ElementTree.fromstring(text))
    if schema_type == "toml":
        return tomllib.loads(text)
    if schema_type == "csv":
        return list(csv.DictReader(io.StringIO(text)))
    raise ValueError(f"schema_type must be one of {', '.join(SCHEMA_TYPES)}, got {schema_type!r}")


def _xml_to_dict(root: ElementTree.Element) -> dict[str, Any]:
    """`xmltodict.parse`'s shape: {tag: value}, repeated children as lists, `@attr`, `#text`."""
    return {root.tag: _xml_value(root)}


def _xml_value(element: ElementTree.Element) -> Any:
    children: dict[str, Any] = {f"@{key}": value for key, value in element.attrib.items()}
    for child in element:
        value = _xml_value(child)
        if child.tag in children:
            previous = children[child.tag]
            children[child.tag] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            children[child.tag] = value
    text = (element.text or "").strip() or None
    if not children:
        return text
    if text is not None:
        children["#text"] = text
    return children


def _coerce_xml(data: Any, schema: Any) -> Any:
    """NeMo Gym's `coerce_xml_types`: XML leaves are strings; convert them where the schema says."""
    if not isinstance(schema, dict) or "type" not in schema:
        return data
    kind = schema["type"]
    if kind == "object" and isinstance(data, dict):
        properties = schema.get("properties", {})
        return {
            key: _coerce_xml(value, properties[key]) if key in properties else value
            for key, value in data.items()
        }
    if kind == "array":
        if isinstance(data, dict) and len(data) == 1:
            data = next(iter(data.values()))  # <items><string>a</string>...</items>
        if not isinstance(data, list):
            data = [data] if data is not None else []
        return [_coerce_xml(item, schema.get("items", {})) for item in data]
    if data is None and kind == "string":
        return ""
    return _scalar(data, kind) if isinstance(data, str) else data


def _coerce_csv(rows: Any, schema: dict[str, Any]) -> Any:
    """NeMo Gym's `coerce_csv_types`: CSV cells are strings; convert them by the items' schema."""
    items = schema.get("items", schema)
    properties = items.get("properties", {}) if isinstance(items, dict) else {}
    return [
        {key: _csv_cell(value, properties.get(key, {}).get("type", "string")) for key, value in row.items()}
        for row in rows
    ]


def _csv_cell(value: Any, kind: Any) -> Any:
    if isinstance(kind, list):
        if value in (None, "") and "null" in kind:
            return None
        for each in kind:
            if each == "null":
                continue
            result = _csv_cell(value, each)
            if not isinstance(result, str) or each == "string":
                return result
        return value
    if value in (None, ""):
        return value
    return _scalar(value, kind)


def _scalar(value: str, kind: Any) -> Any:
    try:
        if kind == "integer":
            return int(value)
        if kind == "number":
            return float(value)
    except ValueError:
        return value
    if kind == "boolean" and value.lower() in ("true", "1", "false", "0"):
        return value.lower() in ("true", "1")
    return value
