"""A new resources server from the template: checked name, every file written, or none.

    parse_entrypoint("resources_servers/my_env")  -> "my_env"   (ConfigError otherwise)
    init_resources_server(...)                    -> the folder, complete

The files are rendered into a hidden sibling folder first and renamed into place in one step,
so a failure part-way (a full disk, a bad template) never leaves a half-written environment.
The example rows are built here rather than templated, so they always parse and always match
the rule the template's verifier applies.
"""

from __future__ import annotations

import json
import keyword
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path, PurePosixPath

from ng_cli.errors import ConfigError

__all__ = [
    "MAX_NAME_LENGTH",
    "RESERVED_NAMES",
    "RESOURCES_SERVERS",
    "NewEnvironment",
    "init_resources_server",
    "parse_entrypoint",
]

RESOURCES_SERVERS = "resources_servers"
_NAME = re.compile(r"[a-z][a-z0-9_]*")
MAX_NAME_LENGTH = 64
"""Longest environment name: it names a folder, a file and instances; file names stop at 255 bytes."""
RESERVED_NAMES = frozenset(
    {
        # the config tree's own keys, and what the shipped configs interpolate from env.yaml
        *("config_paths", "dotenv_path", "entrypoint", "head_server", "head_server_url", "ray"),
        *("policy_model", "policy_base_url", "policy_api_key", "policy_model_name"),
        # the commands' options (tests/unit/scaffold checks that every command's are listed)
        *("dry_run", "ready_file", "ready_timeout_s", "install_requirements", "verbose", "show_sources"),
        "install_requirements_timeout_s",
        *("domain", "licensing", "lifecycle", "modality", "status"),  # ng_list_benchmarks' filters
        "should_validate_data",
        *("input_jsonl_fpath", "output_jsonl_fpath", "output_html_fpath", "output_dirpath"),
        *("rollouts_jsonl_fpath", "tokenizer_path", "agent_name", "agent_urls", "limit", "mode", "split"),
        *("num_repeats", "num_repeats_add_seed", "num_samples_in_parallel", "responses_create_params"),
        *("rollout_timeout_s", "max_attempts", "retry_backoff_s", "retry_max_backoff_s", "overwrite"),
        *("pass_threshold", "progress_interval_s", "report", "keep_pass_rate", "count_failures_as_zero"),
        *("model_server", "path", "version", "timeout_s", "max_staleness", "agent_map"),
        *("input_glob", "merge_shards", "disable_health_check", "prompt_config", "probe_timeout_s", "strict"),
        *("materialized_inputs_jsonl_fpath", "allow_partial_rollouts", "format", "outdated"),
        *("max_output_tokens", "output", "run_dir"),
        *("global_aiohttp_connector_limit", "global_aiohttp_connector_limit_per_host"),
        # NeMo Gym's collector keys that ng_collect_rollouts runs (issue 39)
        *("resume_from_cache", "interleave_repeats", "max_resident_rollout_tasks", "require_complete"),
        *("retain_results_in_memory", "dispatch_budget_s", "drain_margin_s", "data_source"),
        *("count_failure_classes_as_zero", "count_missing_rollouts_as_zero", "route_failures_to_sidecar"),
        *("retry_terminal_timeouts", "fan_out"),
        # NeMo Gym's reserved top-level keys (global_config.py), never server instances there
        *("default_host", "disallowed_ports", "head_server_deps", "python_version", "pip_install_verbose"),
        *(
            "use_absolute_ip",
            "uv_pip_set_python",
            "skip_venv_if_present",
            "hf_token",
            "ray_head_node_address",
        ),
        *("port_range_low", "port_range_high", "uv_cache_dir", "uv_venv_dir", "nemo_gym_log_dir"),
        *("json", "query", "observability_enabled", "model_call_capture_dir", "component_name"),
    }
)
"""Top-level config keys with a meaning of their own: the environment's instance, written under
its name, would merge into that key (`head_server`, `policy_model`) or be read as a command's
option (`limit`)."""
_HINT = "ng_init_resources_server +entrypoint=resources_servers/<name>   (name: lower_snake_case)"
_FILES = {
    "app.py": "app.py.tmpl",
    "configs/{name}.yaml": "config.yaml.tmpl",
    "tests/test_app.py": "test_app.py.tmpl",
    "README.md": "README.md.tmpl",
}
_EXAMPLE_SUMS = ((17, 25), (123, 456), (-8, 15), (1000, 2024), (7, 0))
_TOOL = {
    "type": "function",
    "name": "add",
    "description": "Add two integers and return their sum.",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
    "strict": True,
}


@dataclass(frozen=True)
class NewEnvironment:
    """What `init_resources_server` wrote."""

    name: str
    folder: Path
    files: tuple[Path, ...]


def parse_entrypoint(entrypoint: object, *, root: Path) -> str:
    """The environment name of `resources_servers/<name>`; ConfigError for anything else."""
    if not isinstance(entrypoint, str) or not entrypoint.strip():
        raise ConfigError(f"entrypoint: expected resources_servers/<name>, got {entrypoint!r}", hint=_HINT)
    raw = entrypoint.strip().rstrip("/")
    path = Path(raw)
    if path.is_absolute():
        try:
            path = path.resolve().relative_to(root.resolve())
        except ValueError:
            raise ConfigError(
                f"entrypoint: {raw!r} is outside {root / RESOURCES_SERVERS}", hint=_HINT
            ) from None
    parts = PurePosixPath(path.as_posix()).parts
    if len(parts) != 2 or parts[0] != RESOURCES_SERVERS:
        raise ConfigError(
            f"entrypoint: {raw!r} is not a folder directly under {RESOURCES_SERVERS}/", hint=_HINT
        )
    name = parts[1]
    if len(name) > MAX_NAME_LENGTH:
        raise ConfigError(
            f"entrypoint: the environment name is {len(name)} characters long; at most {MAX_NAME_LENGTH} "
            "(it names a folder, a config file and the config's instances); nothing was written",
            hint=_HINT,
        )
    if not _NAME.fullmatch(name) or keyword.iskeyword(name):
        raise ConfigError(
            f"entrypoint: {name!r} is not a valid environment name: it must be a lower_snake_case "
            "Python identifier (it names the config's instances and the server's module)",
            hint=_HINT,
        )
    if name in RESERVED_NAMES:
        raise ConfigError(
            f"entrypoint: {name!r} is a reserved top-level config key: the environment's instance, "
            "written under its name, would collide with it; nothing was written",
            hint=f"choose another name, e.g. {name}_env",
        )
    return name


def init_resources_server(entrypoint: object, *, root: Path) -> NewEnvironment:
    """Write `<root>/resources_servers/<name>/` from the template; refuse if it exists.

    The command passes the working directory as `root`, as NeMo Gym does."""
    name = parse_entrypoint(entrypoint, root=root)
    parent = root / RESOURCES_SERVERS
    folder = parent / name
    if folder.exists() or folder.is_symlink():
        raise ConfigError(
            f"entrypoint: {RESOURCES_SERVERS}/{name} already exists; nothing was written",
            hint="choose another name, or remove the folder first",
        )
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=parent))
    try:
        written = _render(staging, name)
        staging.chmod(0o755)
        os.rename(staging, folder)  # atomic; fails if the folder appeared meanwhile
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return NewEnvironment(name=name, folder=folder, files=tuple(folder / path for path in written))


def _render(target: Path, name: str) -> list[Path]:
    """Write every file of the environment under `target`; returns their relative paths."""
    templates = resources.files("ng_cli.scaffold") / "templates"
    class_name = "".join(part.capitalize() for part in name.split("_") if part)
    written: list[Path] = []
    for relative, template in _FILES.items():
        text = (templates / template).read_text(encoding="utf-8")
        text = text.replace("__NAME__", name).replace("__CLASS__", class_name)
        written.append(_write(target, Path(relative.format(name=name)), text))
    written.append(_write(target, Path("data/example.jsonl"), example_rows()))
    return written


def _write(target: Path, relative: Path, text: str) -> Path:
    path = target / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return relative


def example_rows() -> str:
    """Five addition tasks the template's rule can score (JSONL)."""
    lines = []
    for a, b in _EXAMPLE_SUMS:
        row = {
            "responses_create_params": {
                "input": [
                    {
                        "role": "system",
                        "content": "Use the add tool to add the two numbers, then answer with the sum.",
                    },
                    {"role": "user", "content": f"What is {a} + {b}?"},
                ],
                "tools": [_TOOL],
            },
            "expected_answer": a + b,
        }
        lines.append(json.dumps(row) + "\n")
    return "".join(lines)
