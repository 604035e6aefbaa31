"""`ng_materialize_prompts`: apply a NeMo Gym prompt template to raw rows (their responses_create_params.input)."""

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
from ng_cli.datasets.prompts import MaterializeConfig, materialize_config_from, materialize_prompts

__all__ = ["OPTIONS", "app", "main", "materialize"]

OPTIONS = MaterializeConfig

_EPILOG = options_help(
    MaterializeConfig,
    docs="docs/materialize_prompts.md",
    notes="""A template that cannot be parsed names the prompt file; a row that cannot fill it, is not UTF-8
or holds NaN/Infinity names the input line; nothing is written then.
Exit codes: 0 written, 2 a bad template / a row with an input already / a missing field / a bad row /
bad options.
Example:
  ng_materialize_prompts +input_jsonl_fpath=data/raw.jsonl +prompt_config=prompts/math.yaml \\
      +output_jsonl_fpath=data/rows.jsonl""",
)

app = make_app(help=__doc__)


@app.command(epilog=_EPILOG)
def materialize(
    overrides: Annotated[
        list[str] | None,
        overrides_argument("+input_jsonl_fpath=... +prompt_config=... +output_jsonl_fpath=..."),
    ] = None,
    config: ConfigFiles = None,
    verbose: Verbose = False,
) -> None:
    """Write every row with its prompt built from the template."""
    with composed_config(overrides, config, verbose=verbose) as composed:
        result = materialize_prompts(materialize_config_from(composed))
    make_console().print(f"Materialized {result.rows} rows to {result.output}", highlight=False, markup=False)


def main() -> None:
    """Console-script entry point (`ng_materialize_prompts`)."""
    app()


if __name__ == "__main__":
    main()
