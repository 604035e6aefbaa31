"""`ng_check_tokens`: does every turn's prompt start with the exact ids seen before (no drift)?"""

from __future__ import annotations

from typing import Annotated

import typer

from ng_cli.commands._app import (
    ConfigFiles,
    Verbose,
    composed_config,
    make_app,
    make_console,
    overrides_argument,
)
from ng_cli.config.command_options import options_help
from ng_cli.tokens.chat_template import ChatTokenizer
from ng_cli.tokens.check_config import CheckTokensConfig, check_tokens_config_from
from ng_cli.tokens.drift import check_file

__all__ = ["OPTIONS", "app", "check_tokens", "main"]

OPTIONS = CheckTokensConfig

_EPILOG = options_help(
    CheckTokensConfig,
    docs="docs/conversion.md",
    notes="""A rollout drifts when a turn's prompt_token_ids do not start with the previous turn's
prompt_token_ids + generation_token_ids; the first divergence is shown (turn, position, tokens).
A row whose token ids are not integers from 0 to 2^31-1 is listed as INVALID (item, position).
Exit codes: 0 no drift, 1 some rollout drifted, 2 unreadable input (a line that is not JSON,
a row with invalid token ids) or bad options.
Example:
  ng_check_tokens +input_jsonl_fpath=results/out.jsonl""",
)

app = make_app(help=__doc__)


@app.command(epilog=_EPILOG)
def check_tokens(
    overrides: Annotated[list[str] | None, overrides_argument("+input_jsonl_fpath=results/out.jsonl")] = None,
    config: ConfigFiles = None,
    verbose: Verbose = False,
) -> None:
    """Print one line per rollout and the drift count; exit 1 when any rollout drifted, 2 on invalid ids."""
    with composed_config(overrides, config, verbose=verbose) as composed:
        settings = check_tokens_config_from(composed)
        tokenizer = ChatTokenizer.load(settings.tokenizer_path) if settings.tokenizer_path else None
        report = check_file(
            settings.input_jsonl_fpath, token_text=tokenizer.token_text if tokenizer else None
        )
    console = make_console()
    console.print("\n".join([*report.lines, report.summary()]), highlight=False, markup=False)
    raise typer.Exit(report.exit_code)


def main() -> None:
    """Console-script entry point (`ng_check_tokens`)."""
    app()
