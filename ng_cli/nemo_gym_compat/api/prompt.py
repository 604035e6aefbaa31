"""`nemo_gym.prompt`: YAML prompt templates (`user`, optional `system`) filled from a data row."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel

from ng_cli.nemo_gym_compat.api import _resolve_under_cwd_or_install

__all__ = ["PromptConfig", "apply_prompt_to_row", "fill_prompt", "load_prompt_config"]


class PromptConfig(BaseModel):
    user: str
    system: str | None = None


@lru_cache(maxsize=64)
def load_prompt_config(path: str) -> PromptConfig:
    """A prompt file, relative paths under the NeMo Gym root (the working directory)."""
    resolved: Path = _resolve_under_cwd_or_install(path)
    with open(resolved) as handle:
        data = yaml.safe_load(handle)
    return PromptConfig.model_validate(data)


def fill_prompt(prompt_config: PromptConfig, row: dict) -> list[dict[str, str]]:  # type: ignore[type-arg]
    """The messages of the template with `{field}` filled from the row's top-level fields."""
    try:
        messages = []
        if prompt_config.system is not None:
            messages.append({"role": "system", "content": prompt_config.system.format_map(row)})
        messages.append({"role": "user", "content": prompt_config.user.format_map(row)})
        return messages
    except KeyError as error:
        raise KeyError(
            f"Prompt template references field {error} but the data row only has fields: {list(row.keys())}"
        ) from None


def apply_prompt_to_row(row: dict, prompt_config: PromptConfig) -> dict:  # type: ignore[type-arg]
    """A copy of the row whose `responses_create_params.input` is the filled template."""
    messages = fill_prompt(prompt_config, row)
    row = row.copy()
    params = row.get("responses_create_params", {})
    params = params.copy() if isinstance(params, dict) else {}
    params["input"] = messages
    row["responses_create_params"] = params
    return row
