"""`structured_outputs`: reward 1.0 when the final answer is JSON that satisfies the row's schema.

Each row asks for JSON output through `responses_create_params.text.format` (`type:
json_schema`, with the `schema`), which is also the schema verify checks against; a row may
carry its own `json_schema` instead. A final message that is not JSON, or JSON that breaks the
schema, earns 0.0 and a `reason` saying what is wrong (never an error). A schema that is not a
valid JSON Schema is the row's fault: verify answers 400 naming it.

NeMo Gym's rows of the same environment carry `schema_str` (and `schema_type`, `response_mode`)
instead; such a row, without our `json_schema`, is scored by NeMo Gym's rule
(`structured_rows.nemo_gym_verdict`), so its data runs here unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema
import orjson
from jsonschema.exceptions import SchemaError, best_match
from jsonschema.protocols import Validator
from structured_rows import SCHEMA_TYPES, nemo_gym_verdict

from ng_cli.config.schema import ResourcesServerConfig
from ng_cli.errors import BadRequestError
from ng_cli.servers import ResourcesServer, VerifyRequest


class StructuredOutputsConfig(ResourcesServerConfig):
    check_formats: bool = True
    """Also check `format` keywords (date, email, ipv4, ...) that jsonschema can check offline."""


class StructuredOutputs(ResourcesServer[StructuredOutputsConfig]):
    """No tools: the model's final message is the whole answer."""

    config_class = StructuredOutputsConfig

    async def verify(self, _session_id: str, request: VerifyRequest) -> Mapping[str, Any]:
        row = request.model_extra or {}
        if "schema_str" in row and "json_schema" not in row:
            return nemo_gym_verdict(_checked_nemo_gym_row(row), request.response)
        validator = self.validator_for(row_schema(request))
        text = request.final_assistant_text()
        if not text.strip():
            return {"reward": 0.0, "reason": "the response has no final assistant message text"}
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            return {"reward": 0.0, "reason": f"the final message is not valid JSON: {exc}"}
        error = best_match(validator.iter_errors(value))
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path) or "(root)"
            return {
                "reward": 0.0,
                "reason": f"the JSON does not match the schema at {where}: {error.message}",
            }
        return {"reward": 1.0}

    def validator_for(self, schema: dict[str, Any]) -> Validator:
        """A validator of the schema's own draft (2020-12 when it names none)."""
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            cls.check_schema(schema)
        except SchemaError as exc:
            raise BadRequestError(f"the row's JSON schema is invalid: {exc.message}") from exc
        checker = cls.FORMAT_CHECKER if self.config.check_formats else None
        return cls(schema, format_checker=checker)


def row_schema(request: VerifyRequest) -> dict[str, Any]:
    """The row's `json_schema`, else `responses_create_params.text.format.schema`."""
    schema = request.extra("json_schema")
    if schema is None:
        text = request.responses_create_params.get("text")
        fmt = text.get("format") if isinstance(text, Mapping) else None
        schema = fmt.get("schema") if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema" else None
    if not isinstance(schema, dict):
        raise BadRequestError(
            "the row has no JSON schema: add 'json_schema' to the row, or "
            "responses_create_params.text.format = {type: json_schema, name: ..., schema: {...}}"
        )
    return schema


def _checked_nemo_gym_row(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """The row, once its NeMo Gym keys have the types the rule reads (else a 400 naming the key)."""
    if not isinstance(row.get("schema_str"), str):
        raise BadRequestError(
            f"the row's 'schema_str' must be a JSON schema as a string, got {row['schema_str']!r:.100}"
        )
    schema_type = row.get("schema_type", "json")
    if not isinstance(schema_type, str) or schema_type.lower() not in SCHEMA_TYPES:
        raise BadRequestError(
            f"the row's 'schema_type' must be one of {', '.join(SCHEMA_TYPES)}, got {schema_type!r}"
        )
    for key in ("tool_name", "tool_payload_key", "response_mode"):
        if row.get(key) is not None and not isinstance(row[key], str):
            raise BadRequestError(f"the row's {key!r} must be a string, got {row[key]!r}")
    return row
