"""Every command's `+key` options: one pydantic model per command, read through `command_options`.

    ng_x +key=value ...  -> compose -> command_options(composed, XOptions, command="ng_x") -> XOptions

Checked before the command does any work (contacts a stack, reads an input):

* every top-level key is one of the model's fields, a key every command reads (`CommonOptions`:
  `config_paths`, `verbose`; NeMo Gym's `global_aiohttp_connector_limit*`, checked here, used where
  HTTP clients are made: `http_client_options`), a server instance, or a value for others
  (`ComposedConfig.free_keys`: set in env.yaml or read by a `${...}`); a key another command reads
  from the same files (`shared`) is accepted when a file sets it, refused when typed on this
  command's line;
* anything else is refused (exit 2) with where it was set (file:line) and the nearest option, or,
  for a NeMo Gym option not implemented here (the model's `not_offered`, `nemo_gym_options.GLOBAL`),
  with the reason and what to do instead;
* values are validated by the model: booleans the same way everywhere (`true`, `yes`, `on`, `1`
  and their opposites, any case: pydantic's rule, also used for `+verbose`), numbers finite
  (`inf`, `nan`, `1e999` are refused wherever they sit: Hydra reads them as floats), a missing
  required option asked for with the command's own example (`asks`).

`options_help` writes a command's `--help` key list from the same model's field docstrings, so the
list cannot drift from what is read.
"""

from __future__ import annotations

import difflib
import math
import textwrap
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from ng_cli.config.compose import ComposedConfig
from ng_cli.config.http_client_options import HTTP_CLIENT_KEYS, read_http_client_options
from ng_cli.config.nemo_gym_options import GLOBAL, NotOffered
from ng_cli.config.schema import validate_block
from ng_cli.config.sources import COMMAND_LINE, Sources
from ng_cli.errors import ConfigError

__all__ = [
    "CommandOptions",
    "CommonOptions",
    "command_options",
    "is_true",
    "option_names",
    "options_help",
    "refuse_non_finite",
]

M = TypeVar("M", bound=BaseModel)
_BOOL = TypeAdapter(bool)


class CommonOptions(BaseModel):
    """Keys every command reads (and `--help` lists once, after the command's own)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    config_paths: list[str] | None = None
    """YAML files merged in order, before env.yaml and the command line (same as -c FILE)."""
    verbose: bool = False
    """Show the traceback of an error (same as --verbose)."""


class CommandOptions(BaseModel):
    """Base of a command's options model: unknown keys forbidden, frozen, field docs from docstrings.

    `not_offered` lists the NeMo Gym options of the same command that are refused by name."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    not_offered: ClassVar[Mapping[str, NotOffered]] = {}


def is_true(value: Any) -> bool:
    """Whether a value means true by the rule every option uses (`yes`, `1`, `on`, `true`, any case)."""
    try:
        return _BOOL.validate_python(value)
    except ValidationError:
        return False


def option_names(model: type[BaseModel]) -> tuple[str, ...]:
    """The model's option keys (a field's alias when it has one: `json`), in declaration order."""
    return tuple(field.alias or name for name, field in model.model_fields.items())


def command_options(
    composed: ComposedConfig,
    model: type[M],
    *,
    command: str,
    asks: Mapping[str, tuple[str, str]] | None = None,
    shared: Mapping[str, type[BaseModel]] | None = None,
    shared_on_command_line: bool = False,
) -> M:
    """`model` validated from the tree's top-level keys, after every key was checked (module docstring).

    `asks`: required option -> (the question, the hint with an example) when it is missing.
    `shared`: other command -> its options model, for keys they read from the same config files
    (accepted from the command line too with `shared_on_command_line`: ng_dump_config, ng_validate).
    """
    check_keys(composed, model, command=command, shared=shared or {}, on_command_line=shared_on_command_line)
    fields = option_names(model)
    values = {key: composed.tree[key] for key in fields if composed.tree.get(key) is not None}
    refuse_non_finite(values, composed.sources)
    read_http_client_options(composed.tree, composed.sources)  # every command refuses a bad limit
    for key, (question, hint) in (asks or {}).items():
        if key not in values:
            raise ConfigError(f"{key}: {question}", hint=hint)
    return validate_block(model, values, sources=composed.sources)


def check_keys(
    composed: ComposedConfig,
    model: type[BaseModel],
    *,
    command: str,
    shared: Mapping[str, type[BaseModel]],
    on_command_line: bool,
) -> None:
    """ConfigError listing every top-level key that is not the command's to read (module docstring)."""
    own = [*option_names(model), *option_names(CommonOptions), *HTTP_CLIENT_KEYS]
    refused: Mapping[str, NotOffered] = getattr(model, "not_offered", {})
    accepted = {*own, *composed.instances, *composed.relays, *composed.free_keys}
    problems: list[str] = []
    hints: list[str] = []
    for key in composed.tree:
        if key in accepted:
            continue
        where = origin(composed, key)
        owners = [name for name, other in shared.items() if name != command and key in option_names(other)]
        if owners and key not in refused and (on_command_line or where != COMMAND_LINE):
            continue
        reason, by = refused.get(key) or GLOBAL.get(key), command
        if reason is None:  # a NeMo Gym option that a command reading the same files refuses
            reason, by = _refused_by(key, shared)
        if reason is not None:
            problems.append(f"{where}  {key}: not offered by {by}: NeMo Gym's +{key} {reason.why}")
            hints.append(reason.instead)
        elif owners:
            problems.append(f"{where}  {key}: an option of {' and '.join(owners)}, not of {command}")
        else:
            close = difflib.get_close_matches(key, [*own, *composed.instances], n=1, cutoff=0.6)
            suggestion = f" (did you mean +{close[0]}?)" if close else ""
            problems.append(f"{where}  {key}: unknown option of {command}{suggestion}")
            if not close:
                hints.append(f"{command} reads {', '.join(own)}")
    if problems:
        hints.append(f"{command} --help says what each option does")
        raise ConfigError("\n".join(problems), hint="; ".join(dict.fromkeys(hints)))


def _refused_by(key: str, shared: Mapping[str, type[BaseModel]]) -> tuple[NotOffered | None, str]:
    """The first shared command that refuses `key` by name, with its reason."""
    for name, other in shared.items():
        reason = getattr(other, "not_offered", {}).get(key)
        if reason is not None:
            return reason, name
    return None, ""


def origin(composed: ComposedConfig, key: str) -> str:
    """Where a top-level key (or, for a block, its first child) was set."""
    found = composed.sources.lookup(key)
    if found:
        return found
    children = (where for dotted, where in composed.sources.items() if dotted.startswith(key + "."))
    return next(children, COMMAND_LINE)


def options_help(
    model: type[BaseModel], *, docs: str | None = None, notes: str = "", width: int = 100
) -> str:
    """The `--help` epilog: one line per option (its docstring), the common keys, the refused NeMo
    Gym options, then `notes` (exit codes, an example)."""
    common = option_names(CommonOptions)
    fields = {field.alias or name: field for name, field in model.model_fields.items()}
    names = sorted((name for name in fields if name not in common), key=lambda n: not fields[n].is_required())
    pad = max((len(name) for name in names), default=0) + 2
    lines = [f"Config keys this command reads{f' (see {docs})' if docs else ''}:"]
    for name in names:
        text = " ".join((fields[name].description or "").split()) + _default_note(fields[name])
        wrapped = textwrap.wrap(text, width=max(40, width - pad - 2)) or [""]
        lines.append(f"  {name:<{pad}}{wrapped[0]}")
        lines += [f"  {'':<{pad}}{more}" for more in wrapped[1:]]
    if not names:
        lines.append("  (none of its own)")
    lines.append(
        "Every command also reads config_paths (-c FILE), verbose (--verbose), dotenv_path (another env.yaml),"
        " global_aiohttp_connector_limit and global_aiohttp_connector_limit_per_host (HTTP connections)."
    )
    refused = list(getattr(model, "not_offered", {}))
    if refused:
        listing = textwrap.wrap(
            "NeMo Gym options refused with the reason: " + ", ".join(refused),
            width=width,
            subsequent_indent="    ",
        )
        lines += listing
    return "\b\n" + "\n".join(lines) + (f"\n{notes.strip(chr(10))}" if notes else "")


def _default_note(field: FieldInfo) -> str:
    """` (required)`, ` (default: 60.0)`, or nothing for an empty default (None, false, {}, [])."""
    if field.is_required():
        return " (required)"
    default = field.get_default(call_default_factory=True)
    if default in (None, False, {}, [], ()):
        return ""
    return f" (default: {default})"


def refuse_non_finite(values: Mapping[str, Any], sources: Sources) -> None:
    """ConfigError naming every key (dotted, with file:line) whose value holds `inf` or `nan`."""
    problems = [
        f"{sources.lookup(key) or COMMAND_LINE}  {key}: expected a finite number, got {number!r}"
        for key, number in _non_finite(values, "")
    ]
    if problems:
        raise ConfigError("\n".join(problems), hint="give a finite number (a time limit, a threshold, ...)")


def _non_finite(value: Any, key: str) -> Iterator[tuple[str, float]]:
    if isinstance(value, float) and not math.isfinite(value):
        yield key, value
    elif isinstance(value, Mapping):
        for child_key, child in value.items():
            yield from _non_finite(child, f"{key}.{child_key}" if key else str(child_key))
    elif isinstance(value, list | tuple):
        for index, child in enumerate(value):
            yield from _non_finite(child, f"{key}.{index}")
