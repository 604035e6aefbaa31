"""`ng_validate`: check a config as ng_run would (every server block, the engine plan), starting nothing."""

from __future__ import annotations

from typing import Annotated

from ng_cli.commands._app import (
    ConfigFiles,
    Verbose,
    make_app,
    make_console,
    overrides_argument,
    reported_errors,
    wants_verbose,
    with_config_files,
)
from ng_cli.launcher.check import print_warnings
from ng_cli.launcher.validate import validate_config

__all__ = ["app", "main", "validate"]

_EPILOG = """\b
Config keys this command reads (see docs/validate.md):
  config_paths   YAML files to merge (or -c FILE)
  strict         true: unset policy_base_url / policy_api_key / policy_model_name are errors
                 (default: checked with stand-ins, with a warning)
Exit codes: 0 valid, 2 not (every problem listed, with file:line).
Example:
  ng_validate "+config_paths=[resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml,\\
responses_api_models/vllm_model/configs/vllm_model.yaml]" """

app = make_app(help=__doc__)


@app.command(epilog=_EPILOG)
def validate(
    overrides: Annotated[
        list[str] | None, overrides_argument('"+config_paths=[a.yaml,b.yaml]" +strict=true')
    ] = None,
    config: ConfigFiles = None,
    verbose: Verbose = False,
) -> None:
    """Validate the composed config without starting services."""
    args = with_config_files(overrides, config)
    with reported_errors(verbose=verbose or wants_verbose(args)):
        result = validate_config(args)
    print_warnings(result.warnings)
    make_console().print(
        f"✓ Config is valid ({len(result.composed.instances)} server instances).", highlight=False
    )


def main() -> None:
    """Console-script entry point (`ng_validate`)."""
    app()


if __name__ == "__main__":
    main()
