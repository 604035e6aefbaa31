"""NeMo Gym commands not offered here: each installed name says why and what to run instead (exit 2)."""

from __future__ import annotations

import sys
from pathlib import Path

from ng_cli.commands._app import print_error
from ng_cli.errors import ConfigError

__all__ = ["NOT_OFFERED", "main", "refusal"]

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
}
"""Command (without `ng_`) -> (why it is not offered, what to do instead)."""


def refusal(command: str) -> ConfigError:
    """The error a not-offered command exits with."""
    why, instead = NOT_OFFERED[command]
    return ConfigError(f"ng_{command} is not offered by ng_cli: {why}", hint=instead)


def main() -> None:
    """Console-script entry point of every name in NOT_OFFERED (the name says which)."""
    name = Path(sys.argv[0]).name.removeprefix("nemo_gym_").removeprefix("ng_")
    error = refusal(name) if name in NOT_OFFERED else ConfigError(f"{sys.argv[0]}: not a command of ng_cli")
    print_error(error)
    sys.exit(error.exit_code)
