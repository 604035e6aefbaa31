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
from ng_cli.config.command_options import CommandOptions, command_options, options_help
from ng_cli.config.nemo_gym_options import not_offered_table
from ng_cli.config.stand_ins import compose_with_stand_ins
from ng_cli.launcher.check import print_warnings
from ng_cli.launcher.validate import validate_config
from ng_cli.rollouts.config import STACK_FILE_COMMANDS

__all__ = ["OPTIONS", "ValidateOptions", "app", "main", "validate"]

_MANIFEST = (
    "belongs to NeMo Gym's manifest-backed workloads (its environment catalog), which have no counterpart here",
    'validate a config instead: ng_validate "+config_paths=[env.yaml,model.yaml]"',
)


class ValidateOptions(CommandOptions):
    """ng_validate's own key; it also takes every key of the commands that read the same files."""

    strict: bool = False
    """true: unset policy_base_url / policy_api_key / policy_model_name are errors (default: checked
    with stand-ins, with a warning)."""

    not_offered = not_offered_table(
        {
            key: _MANIFEST
            for key in ("onboarding_name", "manifest_path", "catalog_kind", "sync", "update_expected")
        }
    )


OPTIONS = ValidateOptions

_EPILOG = options_help(
    ValidateOptions,
    docs="docs/validate.md",
    notes="""It also takes every key of ng_run, ng_collect_rollouts and ng_e2e_collect_rollouts.
Exit codes: 0 valid, 2 not (every problem listed, with file:line).
Example:
  ng_validate "+config_paths=[resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml,\\
responses_api_models/vllm_model/configs/vllm_model.yaml]" """,
)

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
        stood = compose_with_stand_ins(args, fragments=True)
        options = command_options(
            stood.composed,
            ValidateOptions,
            command="ng_validate",
            shared=STACK_FILE_COMMANDS,
            shared_on_command_line=True,
        )
        if options.strict and stood.error is not None:
            raise stood.error
        result = validate_config(stood, strict=options.strict)
    print_warnings(result.warnings)
    make_console().print(
        f"✓ Config is valid ({len(result.composed.instances)} server instances).", highlight=False
    )


def main() -> None:
    """Console-script entry point (`ng_validate`)."""
    app()


if __name__ == "__main__":
    main()
