"""NeMo Gym's prompt templates: `{user, system}` YAML applied to raw rows (`ng_materialize_prompts`).

    raw row {"question": "2+2?", ...}  +  prompt.yaml {system: "...", user: "Solve: {question}"}
      -> row + responses_create_params.input = [system, user messages] + prompt_config_used

As NeMo Gym 0.7.0 (`nemo_gym/prompt.py`): placeholders are the row's top-level fields
(`str.format_map`; literal braces doubled), other `responses_create_params` keys are kept, and a
row that already has `responses_create_params.input` is an error (template or input, not both;
every such row is listed before anything is written). Lines are written as NeMo Gym writes them
(`json.dumps`), whole, through the output guard.

Unlike NeMo Gym, a bad template or row is a clear error, never a traceback, and nothing is written:
a template that cannot be parsed (unbalanced braces, a positional `{0}`, an unknown `!x`) is a
ConfigError naming the prompt file and the template; a row that cannot fill it (a missing field,
`{q.x}` on a string, `{n:d}` on a string) names the input file, the line and the template; so do
a line that is not UTF-8 and a row holding NaN or Infinity (Python's json reads and writes them,
but they are not JSON, and the collector refuses such a line) or a lone surrogate.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from string import Formatter
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from ng_cli.config.command_options import command_options
from ng_cli.config.compose import ComposedConfig
from ng_cli.config.paths import resolve_config_path
from ng_cli.errors import ConfigError, DataError
from ng_cli.outputs import check_outputs, reads, write_atomically, writes

__all__ = [
    "MaterializeConfig",
    "PromptConfig",
    "apply_prompt",
    "materialize_config_from",
    "materialize_prompts",
]

_EXAMPLE = (
    "ng_materialize_prompts +input_jsonl_fpath=raw.jsonl +prompt_config=prompt.yaml "
    "+output_jsonl_fpath=rows.jsonl"
)


class PromptConfig(BaseModel):
    """A prompt YAML file: `user` (required) and `system` templates."""

    model_config = ConfigDict(extra="forbid")

    user: str
    system: str | None = None


class MaterializeConfig(BaseModel):
    """NeMo Gym's `MaterializePromptsConfig`."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    input_jsonl_fpath: Path
    """Raw rows (without responses_create_params.input)."""
    prompt_config: str
    """The prompt YAML (relative to the current directory, else the repo root)."""
    output_jsonl_fpath: Path
    """The rows with their prompts."""


@dataclass(frozen=True)
class MaterializeResult:
    rows: int
    output: Path


def materialize_config_from(composed: ComposedConfig) -> MaterializeConfig:
    asks = {
        key: (f"missing: {what}", _EXAMPLE)
        for key, what in (
            ("input_jsonl_fpath", "the raw rows"),
            ("prompt_config", "the prompt YAML"),
            ("output_jsonl_fpath", "where the rows go"),
        )
    }
    return command_options(composed, MaterializeConfig, command="ng_materialize_prompts", asks=asks)


def load_prompt(path: Path) -> PromptConfig:
    """The prompt file, its templates checked (ConfigError naming the file and the template)."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        line, where = _bad_byte(exc)
        raise ConfigError(
            f"{path}:{line}: not UTF-8 text ({where})", hint="save the prompt file as UTF-8"
        ) from None
    try:
        prompt = PromptConfig.model_validate(yaml.safe_load(text))
    except (yaml.YAMLError, ValidationError) as exc:
        raise ConfigError(
            f"{path}: not a prompt config ({str(exc).splitlines()[0]})", hint="user: ... (system: ...)"
        ) from None
    for name, template in _templates(prompt):
        try:
            list(_fields(template))
        except ValueError as exc:
            raise ConfigError(
                f"{path}: the {name} template is not a valid template: {exc}",
                hint="templates name the row's top-level fields, as {question}; write a literal brace as {{ or }}",
            ) from None
    return prompt


def _templates(prompt: PromptConfig) -> list[tuple[str, str]]:
    """(role, template) in message order: the system one when there is one, then the user one."""
    system = [] if prompt.system is None else [("system", prompt.system)]
    return [*system, ("user", prompt.user)]


_CONVERSIONS = (None, "r", "s", "a")


def _fields(template: str) -> Iterator[str]:
    """The top-level row fields a template names (ValueError for what `str.format_map` would refuse
    whatever the row: unbalanced braces, positional fields, unknown conversions)."""
    for _, field, spec, conversion in Formatter().parse(template):
        if field is None:
            continue
        if conversion not in _CONVERSIONS:
            raise ValueError(
                f"unknown conversion '!{conversion}' in {{{field}!{conversion}}} (use !r, !s or !a)"
            )
        head = re.split(r"[.\[]", field, maxsplit=1)[0]
        if not head or head.isdigit():
            raise ValueError(
                f"{{{field}}} is a positional field; a template names a row's field, as {{question}}"
            )
        yield head
        if spec:
            yield from _fields(spec)


def apply_prompt(row: dict[str, Any], prompt: PromptConfig) -> dict[str, Any]:
    """The row with `responses_create_params.input` built from the templates (ValueError names the
    template and what the row lacks)."""
    messages = []
    for name, template in _templates(prompt):
        missing = [field for field in dict.fromkeys(_fields(template)) if field not in row]
        if missing:
            raise ValueError(
                f"the {name} template references field {missing[0]!r} "
                f"but the data row only has fields: {list(row.keys())}"
            )
        try:
            content = template.format_map(row)
        except (KeyError, IndexError, AttributeError, TypeError, ValueError, OverflowError) as exc:
            raise ValueError(
                f"the {name} template cannot be filled from this row ({type(exc).__name__}: {exc})"
            ) from None
        messages.append({"role": name, "content": content})
    params = row.get("responses_create_params", {})
    params = dict(params) if isinstance(params, dict) else {}
    params["input"] = messages
    return {**row, "responses_create_params": params}


def _rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, row) of the input; a line that is not UTF-8, not a JSON object, or holds what
    JSON cannot carry (NaN, Infinity, a lone surrogate) is a DataError naming it."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise DataError(f"input file not found: {path}", hint=_EXAMPLE) from None
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    if not stat.S_ISREG(mode):  # checked before opening: a FIFO would wait for a writer
        raise DataError(f"input_jsonl_fpath: {path} is not a regular file (a directory, pipe or device)")
    with path.open("rb") as file:
        for line_no, raw in enumerate(file, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(f"{path}:{line_no}: not UTF-8 text ({_bad_byte(exc)[1]})") from None
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{line_no}: not valid JSON ({exc})") from None
            if not isinstance(row, dict):
                raise DataError(f"{path}:{line_no}: expected a JSON object, got {type(row).__name__}")
            problem = _not_json(row, "")
            if problem is not None:
                raise DataError(
                    f"{path}:{line_no}: {problem}; the collector would refuse this row, so nothing was written",
                    hint="fix that value in the input: JSON has no NaN or Infinity (write null or a number), "
                    "and its text is UTF-8",
                )
            yield line_no, row


def _bad_byte(exc: UnicodeDecodeError) -> tuple[int, str]:
    """(line, "byte 0x.. at column C") of the first byte that is not UTF-8."""
    data, start = exc.object, exc.start
    line_start = data.rfind(b"\n", 0, start) + 1
    return data.count(b"\n", 0, start) + 1, f"byte 0x{data[start]:02x} at column {start - line_start + 1}"


def _not_json(value: Any, where: str) -> str | None:
    """What in a parsed row JSON cannot carry (Python's json reads NaN, Infinity and 1e999 as
    floats, and a lone `\\ud800` as a str), named by its dotted key; None when all is JSON."""
    if isinstance(value, float) and math.isnan(value):
        return f"{where} is NaN, which is not JSON"
    if isinstance(value, float) and math.isinf(value):
        sign = "" if value > 0 else "-"
        return f"{where} is {sign}Infinity, which is not JSON (a number beyond a double's range, as 1e999, reads as one)"
    if isinstance(value, str) and not _is_utf8(value):
        return f"{where} holds a lone surrogate (\\ud800-\\udfff), which is not UTF-8"
    if isinstance(value, dict):
        for key, child in value.items():
            name = f"{where}.{key}" if where else str(key)
            if not _is_utf8(key):
                return f"the key {name!r} holds a lone surrogate (\\ud800-\\udfff), which is not UTF-8"
            problem = _not_json(child, name)
            if problem is not None:
                return problem
    if isinstance(value, list):
        for index, child in enumerate(value):
            problem = _not_json(child, f"{where}[{index}]")
            if problem is not None:
                return problem
    return None


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def materialize_prompts(config: MaterializeConfig) -> MaterializeResult:
    """Check, validate every row, then write every row with its prompt."""
    prompt_path = resolve_config_path(config.prompt_config, cwd=Path.cwd(), listed_in="prompt_config")
    check_outputs(
        writes("output_jsonl_fpath", config.output_jsonl_fpath, config.output_jsonl_fpath),
        reads("input_jsonl_fpath", config.input_jsonl_fpath) + reads("prompt_config", prompt_path),
    )
    prompt = load_prompt(prompt_path)
    conflicting = [index for index, (_, row) in enumerate(_rows(config.input_jsonl_fpath)) if _has_input(row)]
    if conflicting:
        raise DataError(
            "Some rows have responses_create_params.input but prompt_config is also specified. "
            f"These are mutually exclusive. Use one or the other. Violating rows: {conflicting}"
        )
    count = 0
    with write_atomically(config.output_jsonl_fpath) as (out,):
        for line_no, row in _rows(config.input_jsonl_fpath):
            try:
                rendered = apply_prompt(row, prompt)
            except ValueError as exc:
                raise DataError(f"{config.input_jsonl_fpath}:{line_no}: {exc}; nothing was written") from None
            rendered["prompt_config_used"] = str(prompt_path)
            out.write((json.dumps(rendered, allow_nan=False) + "\n").encode())
            count += 1
    return MaterializeResult(rows=count, output=config.output_jsonl_fpath)


def _has_input(row: dict[str, Any]) -> bool:
    params = row.get("responses_create_params")
    return isinstance(params, dict) and bool(params.get("input"))
