"""NeMo Gym's prompt templates: `{user, system}` YAML applied to raw rows (`ng_materialize_prompts`).

    raw row {"question": "2+2?", ...}  +  prompt.yaml {system: "...", user: "Solve: {question}"}
      -> row + responses_create_params.input = [system, user messages] + prompt_config_used

As NeMo Gym 0.7.0 (`nemo_gym/prompt.py`): placeholders are the row's top-level fields
(`str.format_map`; literal braces doubled), other `responses_create_params` keys are kept, and a
row that already has `responses_create_params.input` is an error (template or input, not both;
every such row is listed before anything is written). Lines are written as NeMo Gym writes them
(`json.dumps`), whole, through the output guard.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
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
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return PromptConfig.model_validate(data)
    except (yaml.YAMLError, ValidationError) as exc:
        raise ConfigError(
            f"{path}: not a prompt config ({str(exc).splitlines()[0]})", hint="user: ... (system: ...)"
        ) from None


def apply_prompt(row: dict[str, Any], prompt: PromptConfig) -> dict[str, Any]:
    """The row with `responses_create_params.input` built from the templates (KeyError names the field)."""
    try:
        messages = []
        if prompt.system is not None:
            messages.append({"role": "system", "content": prompt.system.format_map(row)})
        messages.append({"role": "user", "content": prompt.user.format_map(row)})
    except KeyError as exc:
        raise KeyError(
            f"Prompt template references field {exc} but the data row only has fields: {list(row.keys())}"
        ) from None
    params = row.get("responses_create_params", {})
    params = dict(params) if isinstance(params, dict) else {}
    params["input"] = messages
    return {**row, "responses_create_params": params}


def _rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    if not path.is_file():
        raise DataError(f"input file not found: {path}", hint=_EXAMPLE)
    with path.open(encoding="utf-8") as file:
        for line_no, line in enumerate(file, start=1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{line_no}: not valid JSON ({exc})") from None
            if not isinstance(row, dict):
                raise DataError(f"{path}:{line_no}: expected a JSON object, got {type(row).__name__}")
            yield line_no, row


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
            except (KeyError, ValueError, IndexError) as exc:
                raise DataError(
                    f"{config.input_jsonl_fpath}:{line_no}: {exc.args[0] if exc.args else exc}"
                ) from None
            rendered["prompt_config_used"] = str(prompt_path)
            out.write((json.dumps(rendered) + "\n").encode())
            count += 1
    return MaterializeResult(rows=count, output=config.output_jsonl_fpath)


def _has_input(row: dict[str, Any]) -> bool:
    params = row.get("responses_create_params")
    return isinstance(params, dict) and bool(params.get("input"))
