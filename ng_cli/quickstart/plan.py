"""What the quickstart runs and where it writes: paths, sizes, and the config overrides (pure).

The engine is the product's own path: the shipped `local_vllm_model` config for the CPU engine,
planned and started by the same launcher as `ng_run` (in this process, as
`ng_e2e_collect_rollouts` runs it), which hands the engine's URL and a random per-run key to the
model server, so no key ever leaves the launcher. `NG_ENV_YAML` points at an empty env file of
the run's own, so the user's env.yaml is neither read nor changed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from ng_cli.config.paths import ENV_YAML_ENV, repo_root

__all__ = [
    "EMBEDDED_MODEL",
    "EXAMPLE_AGENT",
    "EXAMPLE_CONFIG_PATHS",
    "EXAMPLE_INPUT",
    "QuickstartPlan",
    "child_env",
    "collect_overrides",
    "ng_run_args",
    "stack_overrides",
    "write_env_file",
]

EXAMPLE_CONFIG_PATHS = (
    "resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml",
    "responses_api_models/local_vllm_model/configs/tiny_weather_cpu.yaml",
)
MODEL_KEY = "policy_model.responses_api_models.local_vllm_model.model"
"""Where the model directory is set (overridden when the quickstart is given another model)."""
EXAMPLE_AGENT = "example_single_tool_call_simple_agent"
EXAMPLE_INPUT = "resources_servers/example_single_tool_call/data/example.jsonl"
EMBEDDED_MODEL = "models/tiny-weather"
"""The committed model trained offline for the example task (its README.md says how)."""


@dataclass(frozen=True)
class QuickstartPlan:
    """The quickstart's settings; every path is absolute."""

    root: Path
    """The repo root: the example configs and data are read from here."""
    output: Path
    """The scored rollouts; `_metrics.json` (and `_failures.jsonl` if any) land beside it."""
    run_dir: Path
    """ng_run's and vLLM's logs, the ready file, and (while running) the env file."""
    model_dir: Path
    """The model vLLM serves: by default the embedded one under the repo root."""
    num_repeats: int = 2
    """Rollouts per example row."""
    num_samples_in_parallel: int = 10
    max_output_tokens: int = 256
    """Per model call. The embedded model's turns are ~40 tokens; the cap bounds a model that does not stop."""

    @classmethod
    def default(cls, root: Path | None = None) -> QuickstartPlan:
        """results/example_rollouts.jsonl and results/quickstart/ under the repo root."""
        root = (root or repo_root()).resolve()
        return cls(
            root=root,
            output=root / "results" / "example_rollouts.jsonl",
            run_dir=root / "results" / "quickstart",
            model_dir=root / EMBEDDED_MODEL,
        )

    def with_changes(self, **changes: object) -> QuickstartPlan:
        """A copy with the given (non-None) settings replaced; paths made absolute."""
        values = {key: value for key, value in changes.items() if value is not None}
        for key in ("output", "run_dir", "model_dir"):
            if key in values:
                values[key] = Path(str(values[key])).expanduser().resolve()
        return replace(self, **values)  # type: ignore[arg-type]

    @property
    def env_file(self) -> Path:
        return self.run_dir / "env.yaml"

    @property
    def ready_file(self) -> Path:
        return self.run_dir / "ready.json"

    @property
    def ng_run_log(self) -> Path:
        """The stack's output: the engine's and every server's lines, prefixed with their names."""
        return self.run_dir / "ng_run.log"


def stack_overrides(plan: QuickstartPlan) -> list[str]:
    """The example stack with its engine, this model, any free head port."""
    return [
        "+config_paths=[" + ",".join(EXAMPLE_CONFIG_PATHS) + "]",
        f"++{MODEL_KEY}={plan.model_dir}",
        "++head_server.port=0",
    ]


def ng_run_args(plan: QuickstartPlan) -> list[str]:
    """The same stack as an `ng_run` command line, with a ready file (what docs/quickstart.md
    shows to run it by hand; the engine tests start it so)."""
    return [*stack_overrides(plan), f"+ready_file={plan.ready_file}"]


def collect_overrides(plan: QuickstartPlan) -> list[str]:
    """The collector's options over the example data, starting over each time."""
    return [
        f"+agent_name={EXAMPLE_AGENT}",
        f"+input_jsonl_fpath={plan.root / EXAMPLE_INPUT}",
        f"+output_jsonl_fpath={plan.output}",
        f"+num_repeats={plan.num_repeats}",
        f"+num_samples_in_parallel={plan.num_samples_in_parallel}",
        f"+responses_create_params.max_output_tokens={plan.max_output_tokens}",
        "+overwrite=true",
    ]


def child_env(
    plan: QuickstartPlan, *, is_logged: bool = False, base: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment of ng_run and the collector: our env file, not the user's env.yaml.

    `is_logged`: the output goes to a log file, not a terminal; give rich's tables room there.
    """
    env = dict(os.environ if base is None else base)
    env[ENV_YAML_ENV] = str(plan.env_file)
    if is_logged:
        env.setdefault("COLUMNS", "120")
    return env


def write_env_file(path: Path, values: dict[str, str] | None = None) -> Path:
    """Write the run's own env.yaml (by default empty), readable by this user only (0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(values or {}, sort_keys=False)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        os.fchmod(handle.fileno(), 0o600)  # an older file may have had wider permissions
        handle.write(text)
    return path
