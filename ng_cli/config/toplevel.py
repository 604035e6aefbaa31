"""Top-level keys a command does not know: a misspelt option must not be ignored silently.

`ng_run +dry_rn=true` used to start the whole stack. A top-level key is accepted when it is a
server instance (or a NeMo Gym `environment_servers` relay), an option of the command (or of a sibling command that shares config files),
or a value for others (`ComposedConfig.free_keys`: set in env.yaml, or read by a `${...}`
interpolation). Anything else is a ConfigError naming where it was set and the nearest option.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from ng_cli.config.compose import ComposedConfig
from ng_cli.config.sources import COMMAND_LINE
from ng_cli.errors import ConfigError

__all__ = ["check_top_level_keys"]


def check_top_level_keys(
    composed: ComposedConfig, options: Iterable[str], *, command: str, shared: Iterable[str] = ()
) -> None:
    """ConfigError for every top-level key that is neither an instance, an option, nor a free key.

    `options` are the command's own keys (suggested for typos); `shared` are keys other commands
    read from the same files (accepted, never suggested).
    """
    known = list(options)
    accepted = {*known, *shared, *composed.instances, *composed.relays, *composed.free_keys}
    problems = []
    for key in composed.tree:
        if key in accepted:
            continue
        where = composed.sources.lookup(key) or _first_child_origin(composed, key)
        close = difflib.get_close_matches(key, [*known, *composed.instances], n=1, cutoff=0.6)
        suggestion = f" (did you mean '{close[0]}'?)" if close else ""
        problems.append(f"{where}  {key}: unknown top-level key for {command}{suggestion}")
    if problems:
        raise ConfigError(
            "\n".join(problems),
            hint=f"{command} reads {', '.join(sorted(known))} and the server instances; "
            "a value only meant for ${...} interpolation belongs in env.yaml",
        )


def _first_child_origin(composed: ComposedConfig, key: str) -> str:
    children = (origin for dotted, origin in composed.sources.items() if dotted.startswith(key + "."))
    return next(children, COMMAND_LINE)
