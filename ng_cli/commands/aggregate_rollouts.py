"""`ng_aggregate_rollouts`: merge rollout shards and write their NeMo Gym aggregate metrics."""

from __future__ import annotations

from typing import Annotated

from ng_cli.commands._app import (
    ConfigFiles,
    Verbose,
    composed_config,
    make_app,
    make_console,
    overrides_argument,
)
from ng_cli.config.command_options import options_help
from ng_cli.rollouts.aggregate import AggregateConfig, aggregate_config_from, aggregate_rollouts

__all__ = ["OPTIONS", "aggregate", "app", "main"]

OPTIONS = AggregateConfig

_EPILOG = options_help(
    AggregateConfig,
    docs="docs/aggregate_rollouts.md",
    notes="""The metrics are NeMo Gym's default /aggregate_metrics, computed here without a stack: an
environment's own metric hooks are not run and no perf_summary is written (docs/aggregate_rollouts.md).
Exit codes: 0 written, 2 no shard matched / a bad row / an output over an input.
Example:
  ng_aggregate_rollouts +input_glob='results/rollouts-*.jsonl' +output_jsonl_fpath=results/rollouts.jsonl""",
)

app = make_app(help=__doc__)


@app.command(epilog=_EPILOG)
def aggregate(
    overrides: Annotated[
        list[str] | None,
        overrides_argument("+input_glob='results/r-*.jsonl' +output_jsonl_fpath=results/r.jsonl"),
    ] = None,
    config: ConfigFiles = None,
    verbose: Verbose = False,
) -> None:
    """Merge the shards (sorted), then write <output stem>_aggregate_metrics.json."""
    with composed_config(overrides, config, verbose=verbose) as composed:
        result = aggregate_rollouts(aggregate_config_from(composed))
    lines = [f"{len(result.shards)} shard(s), {result.rollouts} rollouts"]
    lines += [f"  {shard}" for shard in result.shards]
    lines.append(f"Merged rollouts: {result.output or '<not merged>'}")
    lines.append(f"Aggregate metrics: {result.metrics}")
    make_console().print("\n".join(lines), highlight=False, markup=False)


def main() -> None:
    """Console-script entry point (`ng_aggregate_rollouts`)."""
    app()


if __name__ == "__main__":
    main()
