"""`ng` / `gym`: every command behind one name: `ng <command> ...` and NeMo Gym's `gym <group> <command>`.

    ng collect_rollouts +agent_name=a ...         -> ng_collect_rollouts +agent_name=a ...
    gym eval run --no-serve --agent a -i in.jsonl -> ng_collect_rollouts +agent_name=a +input_jsonl_fpath=in.jsonl
    gym env start --config a.yaml                 -> ng_run --config a.yaml

NeMo Gym 0.7.0's forms (`nemo_gym/cli/legacy.py` LEGACY, `cli/main.py` COMMANDS: all 32 of its
`gym` subcommands) map onto our commands; its common `--flag VALUE` options become the
`+key=value` overrides they stand for (`FLAGS`), its `--benchmark/--environment/--resources-server/
--model-type/--agent-type NAME` selectors the config files they name (`+config_paths=[...]`), a
listing's `NAME` `+component_name=NAME`, `--search-dir DIR` a root of `$NEMO_GYM_EXTRA_ROOTS`;
everything else is passed on unchanged. Commands not offered here say why (exit 2).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Sequence

from ng_cli.commands._app import print_error
from ng_cli.commands.not_offered import NOT_OFFERED, refusal
from ng_cli.datasets.discovery import ASSETS, EXTRA_ROOTS_ENV, asset_config, search_roots
from ng_cli.errors import ConfigError

__all__ = ["COMMANDS", "FLAGS", "NEMO_GYM_FORMS", "main", "translate"]

COMMANDS = {
    "run": "run",
    "collect_rollouts": "collect",
    "dump_config": "dump_config",
    "test": "test",
    "test_all": "test_all",
    "status": "status",
    "quickstart": "quickstart",
    "init_resources_server": "init_resources_server",
    "prepare_data": "prepare_data",
    "e2e_collect_rollouts": "e2e_collect",
    "reward_profile": "reward_profile",
    "version": "version",
    "help": "help",
    "report": "report",
    "check_tokens": "check_tokens",
    "update_weights": "update_weights",
    "aggregate_rollouts": "aggregate_rollouts",
    "materialize_prompts": "materialize_prompts",
    "validate": "validate",
    "pip_list": "pip_list",
    "list_benchmarks": "list_benchmarks",
    "list_environments": "list_components",
    "list_agents": "list_components",
    "list_models": "list_components",
    "list_resources_servers": "list_components",
    "search": "list_components",
    "show_schema": "show_schema",
}
"""Our command (without `ng_`) -> its module under ng_cli.commands."""

NEMO_GYM_FORMS: dict[tuple[str, ...], str] = {
    ("env", "start"): "run",
    ("env", "test"): "test",
    ("env", "init"): "init_resources_server",
    ("env", "resolve"): "dump_config",
    ("env", "validate"): "validate",
    ("env", "status"): "status",
    ("env", "packages"): "pip_list",
    ("env", "schema"): "show_schema",
    ("env", "publish"): "env_publish",
    ("env", "prefetch"): "env_prefetch",
    ("list", "benchmarks"): "list_benchmarks",
    ("list", "environments"): "list_environments",
    ("list", "agents"): "list_agents",
    ("list", "models"): "list_models",
    ("list", "resources-servers"): "list_resources_servers",
    ("search",): "search",
    ("eval", "run"): "e2e_collect_rollouts",
    ("eval", "aggregate"): "aggregate_rollouts",
    ("eval", "profile"): "reward_profile",
    ("eval", "prepare"): "prepare_benchmark",
    ("eval", "health-check"): "eval_health_check",
    ("eval", "export"): "eval_export",
    ("eval", "reverify"): "eval_reverify",
    ("eval", "submit"): "eval_submit",
    ("eval", "compare"): "eval_compare",
    ("dataset", "render"): "materialize_prompts",
    ("dataset", "collate"): "prepare_data",
    ("dataset", "upload"): "upload_dataset_to_hf",
    ("dataset", "download"): "download_dataset_from_hf",
    ("dataset", "rm"): "delete_dataset_from_gitlab",
    ("dataset", "migrate"): "gitlab_to_hf_dataset",
    ("dev", "test"): "dev_test",
    ("--help",): "help",
    ("-h",): "help",
    ("--version",): "version",
}
"""NeMo Gym's `gym` tokens -> our command (`--no-serve` and `--all` pick a sibling: see `translate`)."""

FLAGS = {
    "--agent": "agent_name",
    "-a": "agent_name",
    "--input": "input_jsonl_fpath",
    "-i": "input_jsonl_fpath",
    "--output": "output_jsonl_fpath",
    "-o": "output_jsonl_fpath",
    "--limit": "limit",
    "--num-repeats": "num_repeats",
    "--concurrency": "num_samples_in_parallel",
    "--inputs": "materialized_inputs_jsonl_fpath",
    "--rollouts": "rollouts_jsonl_fpath",
    "--prompt-config": "prompt_config",
    "--input-glob": "input_glob",
    "--model": "policy_model_name",
    "-m": "policy_model_name",
    "--model-url": "policy_base_url",
    "--model-api-key": "policy_api_key",
    "--temperature": "responses_create_params.temperature",
    "--top-p": "responses_create_params.top_p",
    "--max-output-tokens": "responses_create_params.max_output_tokens",
    "--split": "split",
    "--mode": "mode",
    "--output-dir": "output_dirpath",
    "--domain": "domain",
    "--kind": "catalog_kind",
    "--modality": "modality",
    "--licensing": "licensing",
    "--status": "status",
    "--lifecycle": "lifecycle",
}
"""NeMo Gym's value flags -> the override each stands for (`--resources-server NAME` -> +entrypoint
where a command takes a server's folder, else a selector)."""
_SWITCHES = {"--json": "+json=true", "--strict": "+strict=true", "--outdated": "+outdated=true"}
_SELECTORS = {f"--{asset}": asset for asset in ASSETS}
_ENTRYPOINT_COMMANDS = ("test", "test_all", "pip_list", "show_schema")
"""Commands whose `--resources-server NAME` is the server's folder (NeMo Gym's RESOURCES_SERVER flag)."""
_LISTINGS = ("list_benchmarks", "list_environments", "list_agents", "list_models", "list_resources_servers")
_SEARCHABLE = ("environments", "benchmarks", "agents", "models", "resources-servers")


def translate(argv: Sequence[str]) -> tuple[str, list[str]]:
    """(our command without `ng_`, its arguments) for `ng`/`gym` arguments; ConfigError if unknown."""
    if not argv:
        return "help", []
    for length in (2, 1):
        form = tuple(argv[:length])
        if form in NEMO_GYM_FORMS:
            command = _sibling(NEMO_GYM_FORMS[form], argv[length:])
            return command, _flags(argv[length:], command)
    first = argv[0].removeprefix("nemo_gym_").removeprefix("ng_").replace("-", "_")
    if first in COMMANDS or first in NOT_OFFERED:
        return first, list(argv[1:])
    raise ConfigError(
        f"{' '.join(argv[:2])}: not a command",
        hint="ng help lists the commands; NeMo Gym's `gym <group> <command>` forms are in docs/umbrella.md",
    )


def _sibling(command: str, rest: Sequence[str]) -> str:
    if command == "e2e_collect_rollouts" and "--no-serve" in rest:
        return "collect_rollouts"
    if command == "test" and "--all" in rest:
        return "test_all"
    if command in ("upload_dataset_to_hf", "download_dataset_from_hf") and _storage(rest) == "gitlab":
        return command.replace("_hf", "_gitlab")
    return command


def _storage(rest: Sequence[str]) -> str | None:
    """`gym dataset upload|download --storage hf|gitlab` (hf by default)."""
    for index, token in enumerate(rest):
        if token.startswith("--storage="):
            return token.partition("=")[2]
        if token == "--storage" and index + 1 < len(rest):
            return rest[index + 1]
    return None


def _flags(rest: Sequence[str], command: str) -> list[str]:
    out: list[str] = []
    configs: list[str] = []
    positionals: list[str] = []
    args = _search_dirs(list(rest))
    while args:
        token = args.pop(0)
        name, _, inline = token.partition("=") if token.startswith("--") else (token, "", "")
        if token in ("--no-serve", "--all", "--resume"):  # chose the command, or our default (we resume)
            continue
        if token == "--json" and command == "pip_list":  # NeMo Gym's `env packages --json`
            out.append("+format=json")
        elif token in _SWITCHES:
            out.append(_SWITCHES[token])
        elif name == "--resources-server" and command in _ENTRYPOINT_COMMANDS and (inline or args):
            out.append(f"+entrypoint=resources_servers/{inline or args.pop(0)}")
        elif name in _SELECTORS and (inline or args):
            configs.append(str(asset_config(_SELECTORS[name], inline or args.pop(0), search_roots())))
        elif name in FLAGS and (inline or args):
            key = (
                "input_glob" if command == "aggregate_rollouts" and name in ("-i", "--input") else FLAGS[name]
            )
            out.append(f"++{key}={inline or args.pop(0)}")
        elif (command in _LISTINGS or command == "search") and _is_positional(token):
            positionals.append(token)
        else:
            out.append(token)
    if configs:
        out.insert(0, "+config_paths=[" + ",".join(configs) + "]")
    return _positionals(command, positionals) + out


def _is_positional(token: str) -> bool:
    return not token.startswith(("-", "+", "~")) and "=" not in token


def _positionals(command: str, tokens: list[str]) -> list[str]:
    """A listing's `NAME`; `gym search [TYPE] QUERY`'s type and query."""
    if command != "search":
        return [f"+component_name={json.dumps(token)}" for token in tokens[:1]] + tokens[1:]
    if len(tokens) >= 2 and tokens[0] not in _SEARCHABLE:
        raise ConfigError(
            f"gym search: {tokens[0]!r} is not a type to search",
            hint=f"one of {', '.join(_SEARCHABLE)}, or a query alone (gym search math)",
        )
    kind = [f"+component_type={tokens[0]}"] if len(tokens) >= 2 else []
    return kind + [f"+query={json.dumps(token)}" for token in tokens[len(kind) : len(kind) + 1]] + tokens[2:]


def _search_dirs(args: list[str]) -> list[str]:
    """NeMo Gym's `--search-dir DIR` (repeatable): roots searched first, in order, before those of
    `$NEMO_GYM_EXTRA_ROOTS` (set for this command and the servers it starts); the other arguments."""
    folders: list[str] = []
    rest: list[str] = []
    while args:
        token = args.pop(0)
        name, equals, inline = token.partition("=")
        if name == "--search-dir" and (equals or args):
            folders.append(os.path.abspath(inline if equals else args.pop(0)))
        else:
            rest.append(token)
    if folders:
        current = os.environ.get(EXTRA_ROOTS_ENV)
        os.environ[EXTRA_ROOTS_ENV] = os.pathsep.join([*folders, *([current] if current else [])])
    return rest


def main() -> None:
    """Console-script entry point (`ng`, `gym`)."""
    try:
        command, args = translate(sys.argv[1:])
        if command in NOT_OFFERED:
            raise refusal(command)
    except ConfigError as error:
        print_error(error)
        sys.exit(error.exit_code)
    sys.argv = [f"ng_{command}", *args]
    importlib.import_module(f"ng_cli.commands.{COMMANDS[command]}").main()


if __name__ == "__main__":
    main()
