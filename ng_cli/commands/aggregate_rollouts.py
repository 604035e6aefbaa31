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
from ng_cli.rollouts.aggregate import (
    AggregateConfig,
    AggregateResult,
    aggregate_config_from,
    aggregate_rollouts,
)

__all__ = ["OPTIONS", "aggregate", "app", "main"]

OPTIONS = AggregateConfig

_EPILOG = options_help(
    AggregateConfig,
    docs="docs/aggregate_rollouts.md",
    notes="""The metrics are NeMo Gym's /aggregate_metrics, computed here without a stack: give the stack's
config (-c or +config_paths) and each agent's environment's own metric hooks run (pass@k, majority@k,
its key_metrics); perf_summary comes from the rows' ng_perf (docs/aggregate_rollouts.md).
A match that is not a regular file (a directory, a FIFO) is refused before any file is opened;
a rollout two shards hold with the same contents is counted once (a warning names both shards),
with different contents it is refused.
Exit codes: 0 written, 2 no shard matched / a match not a file / a bad row / a rollout twice with
different contents / an output over an input.
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
        result = aggregate_rollouts(aggregate_config_from(composed), stack=composed.tree)
    _report(result)


def _report(result: AggregateResult) -> None:
    """Warnings on stderr; the shards and the files written on stdout."""
    warn = make_console(stderr=True)
    for warning in result.warnings:
        warn.print(f"warning: {warning}", style="yellow", highlight=False, markup=False, soft_wrap=True)
    dropped = f" ({result.dropped} repeated row(s) counted once)" if result.dropped else ""
    lines = [f"{len(result.shards)} shard(s), {result.rollouts} rollouts{dropped}"]
    lines += [f"  {shard}" for shard in result.shards]
    lines.append(f"Merged rollouts: {result.output or '<not merged>'}")
    lines.append(f"Aggregate metrics: {result.metrics}")
    make_console().print("\n".join(lines), highlight=False, markup=False)


def main() -> None:
    """Console-script entry point (`ng_aggregate_rollouts`)."""
    app()


if __name__ == "__main__":
    main()
