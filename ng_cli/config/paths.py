"""Where things live on disk: the repo root, env.yaml, server implementations, config files.

Tests point `NG_REPO_ROOT` at a temporary tree (with fake `resources_servers/<impl>/` folders)
and `NG_ENV_YAML` at a temporary env.yaml, so nothing here is cached.
"""

from __future__ import annotations

import os
from pathlib import Path

from ng_cli.errors import ConfigError

__all__ = [
    "available_implementations",
    "display_path",
    "env_yaml_path",
    "implementation_dir",
    "repo_root",
    "resolve_config_path",
]

REPO_ROOT_ENV = "NG_REPO_ROOT"
ENV_YAML_ENV = "NG_ENV_YAML"


def repo_root() -> Path:
    """The directory holding `pyproject.toml` and `ng_cli/` (or `$NG_REPO_ROOT`)."""
    override = os.environ.get(REPO_ROOT_ENV)
    if override:
        return Path(override).resolve()
    return Path(__file__).resolve().parents[2]


def env_yaml_path(cwd: Path | None = None) -> tuple[Path, bool]:
    """The env.yaml to merge, and whether it was named explicitly (then it must exist).

    `$NG_ENV_YAML` if set; else `env.yaml` in the working directory, then at the repo root, the
    first that exists (NeMo Gym's order: a project run from its own root reads its own env.yaml).
    When neither exists, the working directory's is returned, so messages point where to put one.
    """
    override = os.environ.get(ENV_YAML_ENV)
    if override:
        return Path(override).expanduser().resolve(), True
    here = (cwd or Path.cwd()).resolve() / "env.yaml"
    for candidate in (here, repo_root() / "env.yaml"):
        if candidate.is_file():
            return candidate, False
    return here, False


def implementation_dir(server_type: str, implementation: str) -> Path:
    """The folder of one server implementation, e.g. `<root>/responses_api_models/vllm_model`.

    The repo root's first, then the working directory's: an environment that
    `ng_init_resources_server` wrote into another project is found when run from that project's
    root. The repo's own implementations are never shadowed (NeMo Gym's root holds folders of the
    same names whose apps are NeMo Gym's)."""
    ours = repo_root() / server_type / implementation
    if ours.is_dir():
        return ours
    here = Path.cwd() / server_type / implementation
    return here.resolve() if here.is_dir() else ours


def available_implementations(server_type: str) -> list[str]:
    """Names of the implementation folders under `<root>/<server_type>/`, sorted."""
    type_dir = repo_root() / server_type
    if not type_dir.is_dir():
        return []
    return sorted(
        child.name for child in type_dir.iterdir() if child.is_dir() and not child.name.startswith((".", "_"))
    )


def resolve_config_path(raw: str, *, cwd: Path, listed_in: str | None = None) -> Path:
    """Find a config file: absolute as given, else relative to the cwd first, then the repo root."""
    path = Path(raw).expanduser()
    candidates = [path] if path.is_absolute() else [cwd / path, repo_root() / path]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    tried = "\n".join(f"  {candidate}" for candidate in dict.fromkeys(candidates))
    where = f" (listed in {listed_in})" if listed_in else ""
    raise ConfigError(
        f"config file not found: {raw}{where}; tried:\n{tried}",
        hint=f"paths in config_paths are relative to the current directory or the repo root ({repo_root()})",
    )


def display_path(path: Path) -> str:
    """A short, stable name for a file in messages: relative to the repo root when inside it."""
    try:
        return path.resolve().relative_to(repo_root()).as_posix()
    except ValueError:
        return str(path)
