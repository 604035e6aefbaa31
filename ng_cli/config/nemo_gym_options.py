"""NeMo Gym options we do not implement: each refused by name, with the reason and what to do instead.

A command line written for NeMo Gym 0.7.0 must not run here with an option quietly doing nothing
(`+fan_out`, `+resume_from_cache`, `+should_download`, ...). `GLOBAL` holds NeMo Gym's top-level
settings every NeMo Gym command reads (`nemo_gym/global_config.py` NEMO_GYM_RESERVED_TOP_LEVEL_KEYS);
each command's options model lists its own command's in a `not_offered` class variable
(`ng_cli.config.command_options` reads both). A key that is one of the command's options is never
refused by these tables.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GLOBAL", "NotOffered", "not_offered_table"]


@dataclass(frozen=True)
class NotOffered:
    """Why NeMo Gym's option is not offered here, and what to do instead."""

    why: str
    instead: str


def not_offered_table(entries: dict[str, tuple[str, str]]) -> dict[str, NotOffered]:
    """`{key: (why, instead)}` as `NotOffered` values (the tables read better as tuples)."""
    return {key: NotOffered(why, instead) for key, (why, instead) in entries.items()}


_ONE_ENV = (
    "builds a uv virtual environment per server; here every server runs in this one Python environment",
    "install once with pip install -e '.[dev]' (ng_pip_list shows the environment)",
)
_PORTS = (
    "picks ports from a range; here a server without a port gets a free one from the OS, bound before it starts",
    "set port: in a server block (or ++<instance>.<type>.<impl>.port=N) to fix one",
)
_READY = (
    "bounds server start-up; here ng_run waits ready_timeout_s for every server's /health",
    "ng_run +ready_timeout_s=<seconds>",
)
_TELEMETRY = (
    "is NeMo Gym's telemetry and capture layer, not part of this project",
    "token ids come from the model block's return_token_id_information; timings from the collector's _metrics.json",
)
_AIOHTTP = (
    "tunes NeMo Gym's aiohttp client; here every HTTP call has its own deadlines and typed failures, "
    "and only the connection limits are read",
    "global_aiohttp_connector_limit / global_aiohttp_connector_limit_per_host size the connection pools",
)
_ROUTING = (
    "routes rows to NeMo Gym environment servers; here each agent relays its environment_servers entry",
    "name the agent with +agent_name (or the row's agent_ref)",
)

GLOBAL: dict[str, NotOffered] = not_offered_table(
    {
        "default_host": (
            "sets every server's host; here each server block has its own host (default 127.0.0.1)",
            "set host: in the server blocks",
        ),
        "disallowed_ports": _PORTS,
        "port_range_low": _PORTS,
        "port_range_high": _PORTS,
        "head_server_deps": _ONE_ENV,
        "python_version": _ONE_ENV,
        "pip_install_verbose": _ONE_ENV,
        "uv_pip_set_python": _ONE_ENV,
        "skip_venv_if_present": _ONE_ENV,
        "uv_cache_dir": _ONE_ENV,
        "uv_lock_timeout_seconds": _ONE_ENV,
        "uv_venv_dir": _ONE_ENV,
        "use_absolute_ip": (
            "advertises servers by this machine's IP address; here by each block's host",
            "set host: in the server blocks to the address other machines reach",
        ),
        "hf_token": (
            "downloads from the Hugging Face Hub; nothing is downloaded here (no network beyond the package registries)",
            "put the data and the model on disk and name their paths",
        ),
        "ray_head_node_address": (
            "joins a Ray cluster; here the `ray` block does (docs/ray.md)",
            "++ray.address=<host:port>",
        ),
        "server_spinup_timeout_seconds": _READY,
        "model_endpoint_readiness_timeout_seconds": _READY,
        "allow_openai_version_skew": (
            "checks the openai package version of every server; no server here uses that package",
            "leave it out",
        ),
        "results_dir": (
            "is where NeMo Gym writes by default; here every command writes where its *_fpath option says",
            "give the output path: +output_jsonl_fpath=results/...",
        ),
        "cache_dir": (
            "is NeMo Gym's download and venv cache; nothing is downloaded or built per server here",
            "leave it out",
        ),
        "nemo_gym_log_dir": (
            "sets where server logs go; here ng_run prints each server's lines with its name "
            "(ng_e2e_collect_rollouts: <output stem>_servers.log)",
            "redirect ng_run's output",
        ),
        "query": ("filters NeMo Gym's `gym env status` listing", "ng_status lists every server"),
        "observability_enabled": _TELEMETRY,
        "model_call_capture_dir": _TELEMETRY,
        "token_id_capture": _TELEMETRY,
        "telemetry": _TELEMETRY,
        "component_name": _TELEMETRY,
        "skip_verification": (
            "skips the verifier; here every rollout is scored by its environment's verifier",
            "leave it out",
        ),
        "skip_verification_reward": (
            "is the reward given when verification is skipped; verification is never skipped here",
            "leave it out",
        ),
        "global_aiohttp_intended_concurrency": _AIOHTTP,
        "global_aiohttp_intended_concurrency_per_host": _AIOHTTP,
        "global_aiohttp_client_request_debug": _AIOHTTP,
        "global_aiohttp_tcp_keepalive_idle_seconds": _AIOHTTP,
        "global_aiohttp_tcp_keepalive_interval_seconds": _AIOHTTP,
        "global_aiohttp_tcp_keepalive_probes": _AIOHTTP,
        "allow_unsupported_pairing": _ROUTING,
        "environment_server_name": _ROUTING,
        "environment_server_routes": _ROUTING,
        "environment_routing_mode": _ROUTING,
        "error_on_agent_without_environment_server": _ROUTING,
    }
)
"""NeMo Gym's global settings not offered by any command here."""
