"""NeMo Gym commands not offered here: each installed name says why and what to run instead (exit 2)."""

from __future__ import annotations

import sys
from pathlib import Path

from ng_cli.commands._app import print_error
from ng_cli.errors import ConfigError

__all__ = ["GYM_ONLY", "NOT_OFFERED", "main", "refusal"]

_NETWORK = "network beyond the package registries, which this project does not use"
NOT_OFFERED: dict[str, tuple[str, str]] = {
    "dev_test": (
        "NeMo Gym's `gym dev test` runs NeMo Gym's own test suite",
        "bash scripts/test.sh (this project's suite), or ng_test_all (every server's tests)",
    ),
    "reinstall": (
        "NeMo Gym rebuilds its per-server virtual environments; here every server runs in one environment",
        "pip install -e '.[dev]'",
    ),
    "prepare_benchmark": (
        f"NeMo Gym's prepare scripts download benchmark data from Hugging Face: {_NETWORK}; no benchmark ships here",
        "ng_list_benchmarks (what is found here, data present or not); put the data where its config says",
    ),
    "upload_dataset_to_gitlab": (
        f"NeMo Gym's GitLab dataset registry: {_NETWORK}",
        "copy the JSONL files yourself",
    ),
    "download_dataset_from_gitlab": (
        f"NeMo Gym's GitLab dataset registry: {_NETWORK}",
        "copy the JSONL files yourself",
    ),
    "delete_dataset_from_gitlab": (
        f"NeMo Gym's GitLab dataset registry: {_NETWORK}",
        "manage it where it lives",
    ),
    "upload_dataset_to_hf": (f"the Hugging Face Hub: {_NETWORK}", "upload with huggingface_hub yourself"),
    "download_dataset_from_hf": (
        f"the Hugging Face Hub: {_NETWORK}",
        "download with huggingface_hub yourself, then ng_prepare_data",
    ),
    "gitlab_to_hf_dataset": (f"GitLab and the Hugging Face Hub: {_NETWORK}", "move the files yourself"),
    "env_publish": (
        "it checks a manifest-backed workload (its manifest.yaml, verifier fixtures) for NeMo Gym's "
        "environment catalog; ng_cli runs config-backed environments and has no manifest-backed workload to publish",
        "ng_validate and ng_test (the environment's configs and tests); gym list environments NAME shows its manifest",
    ),
    "env_prefetch": (
        "it pre-builds NeMo Gym's per-server virtual environments; here every server runs in the project's "
        "one environment, so there is none to build",
        "ng_run +install_requirements=true installs the servers' own requirements into it",
    ),
    "eval_health_check": (
        "NeMo Gym's rollout health checks over a run folder (nemo_gym/rollout_health.py) are not implemented in ng_cli",
        "ng_report +input_jsonl_fpath=<rollouts.jsonl> (failures by class, context overflows, incomplete "
        "responses); ng_check_tokens for token ids",
    ),
    "eval_export": (
        "exporting rollouts as ATIF trajectories is not implemented in ng_cli; rollouts stay in NeMo Gym's JSONL",
        "read the rollouts JSONL (each row's `response` is the Responses API output)",
    ),
    "eval_reverify": (
        "re-verifying saved rollouts against an updated resources server is not implemented in ng_cli",
        "collect again with the updated server (ng_e2e_collect_rollouts), or post each row to its /verify",
    ),
    "eval_submit": (
        "it submits Slurm jobs through NeMo Gym's orchestration (sbatch on a cluster, over SSH): a job "
        f"scheduler and {_NETWORK}",
        "run ng_e2e_collect_rollouts (or ng_run + ng_collect_rollouts) in your own job script",
    ),
    "eval_compare": (
        "NeMo Gym's comparison report of a baseline run against candidates (nemo_gym/comparison) is not "
        "implemented in ng_cli",
        "ng_report for each run (rewards, pass@k, failures), side by side",
    ),
}
"""Command (without `ng_`) -> (why it is not offered, what to do instead)."""

GYM_ONLY = {
    "env_publish": "gym env publish",
    "env_prefetch": "gym env prefetch",
    "eval_health_check": "gym eval health-check",
    "eval_export": "gym eval export",
    "eval_reverify": "gym eval reverify",
    "eval_submit": "gym eval submit",
    "eval_compare": "gym eval compare",
}
"""Commands NeMo Gym has only as `gym` forms (no `ng_*` name): the refusal names them so."""


def refusal(command: str) -> ConfigError:
    """The error a not-offered command exits with."""
    why, instead = NOT_OFFERED[command]
    name = GYM_ONLY.get(command, f"ng_{command}")
    return ConfigError(f"{name} is not offered by ng_cli: {why}", hint=instead)


def main() -> None:
    """Console-script entry point of every name in NOT_OFFERED (the name says which)."""
    name = Path(sys.argv[0]).name.removeprefix("nemo_gym_").removeprefix("ng_")
    error = refusal(name) if name in NOT_OFFERED else ConfigError(f"{sys.argv[0]}: not a command of ng_cli")
    print_error(error)
    sys.exit(error.exit_code)
