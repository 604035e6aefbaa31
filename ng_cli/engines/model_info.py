"""What the planner needs to know about a model: where its files are and what `config.json` says.

Offline by construction: `model` must be a local directory, or a hub id already in the cache
under `hf_home` (`<hf_home>/hub/models--org--name/snapshots/<rev>`). Nothing is downloaded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ng_cli.config.paths import repo_root
from ng_cli.errors import ConfigError, IncompleteConfigError

__all__ = ["ModelInfo", "read_model_info", "resolve_model_dir"]

# config.json keys that carry the number of routed experts, across architectures
# (Mixtral/Qwen-MoE/Qwen3-MoE/DeepSeek/GPT-OSS/Nemotron-H/...); nested text configs are searched too.
_EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")


@dataclass(frozen=True)
class ModelInfo:
    """The facts read from a model directory's `config.json`."""

    path: Path
    model_type: str | None
    num_experts: int
    """Routed experts per MoE layer; 0 for a dense model."""

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1


def resolve_model_dir(model: str, *, hf_home: str | None, where: str) -> Path:
    """The local directory of `model`; a ConfigError that says why when there is none."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve()
    if not path.is_absolute() and (repo_root() / path).is_dir():  # shipped configs name repo folders
        return (repo_root() / path).resolve()
    if hf_home and "/" in model and not model.startswith(("/", ".", "~")):
        snapshots = Path(hf_home).expanduser() / "hub" / f"models--{model.replace('/', '--')}" / "snapshots"
        found = sorted(snapshots.glob("*/config.json"), key=lambda p: p.stat().st_mtime)
        if found:
            return found[-1].parent.resolve()
    looked = f"; looked in {Path(hf_home).expanduser() / 'hub'} too" if hf_home else ""
    # NeMo Gym downloads a hub id at start; here the weights must be on the machine first, so
    # a config naming absent weights is incomplete (ng_validate: "will not start as-is"), not wrong.
    raise IncompleteConfigError(
        f"{where}model: {model!r} is not a local model directory{looked}",
        hint="engines start offline and never download weights: give the directory that holds "
        "config.json (or set hf_home to a cache that already has the model)",
    )


def read_model_info(path: Path, *, where: str) -> ModelInfo:
    """Read `config.json` of a model directory; ConfigError naming the file when unreadable."""
    config_path = path / "config.json"
    try:
        config = json.loads(config_path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{where}model: {path} has no config.json; is it a model directory?") from None
    except (OSError, ValueError) as error:
        raise ConfigError(f"{where}model: cannot read {config_path}: {error}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{where}model: {config_path} is not a JSON object")
    model_type = config.get("model_type")
    return ModelInfo(
        path=path,
        model_type=model_type if isinstance(model_type, str) else None,
        num_experts=_num_experts(config),
    )


def _num_experts(config: dict[str, Any]) -> int:
    for key in _EXPERT_KEYS:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    nested = config.get("text_config")
    return _num_experts(nested) if isinstance(nested, dict) else 0
