"""Reading YAML config fragments: values, the line each key sits on, and `config_paths` includes.

YAML is parsed with PyYAML's composer so every key keeps its line (for error messages and
`ng_dump_config --sources`), then constructed with the same scalar rules OmegaConf's own loader
uses (`1e-6` is a float, dates stay strings, duplicate keys are an error), so files behave as
they do in NeMo Gym. A fragment may list further fragments in `config_paths`; they are read
depth-first, an included file before the file that includes it, each file once.

Before anything is built, one pass over the parser's events (a state machine, not recursion)
refuses hostile shapes with file:line: nesting deeper than `MAX_DEPTH` (PyYAML's composer and
every later walk are recursive) and aliases that expand past `MAX_EXPANDED_NODES` values (a
"billion laughs" bomb is a few lines that expand to 10^9 nodes) or `MAX_EXPANDED_BYTES` of text
(a thousand aliases of one 100 KB string are few values, but every later step -- interpolation,
masking secrets by value, dumping -- goes through 100 MB).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from ng_cli.config.paths import display_path, resolve_config_path
from ng_cli.config.sources import join_key
from ng_cli.errors import ConfigError

__all__ = [
    "CONFIG_PATHS_KEY",
    "Fragment",
    "Include",
    "collect_fragments",
    "load_fragment",
    "parse_config_paths",
]

CONFIG_PATHS_KEY = "config_paths"
"""The reserved top-level key listing further YAML files to merge."""

_MERGE_KEY = "<<"

MAX_DEPTH = 100
"""Deepest nesting of mappings and lists a config file may have; real configs stay under 15."""
MAX_EXPANDED_NODES = 200_000
"""Most values a file may expand to with its aliases resolved; real configs have a few thousand."""
MAX_EXPANDED_BYTES = 4 * 2**20
"""Most text (scalars, in characters) a file may expand to with its aliases resolved; real configs
have tens of KB, and dumping 4 MiB already takes PyYAML's emitter seconds."""


class Include(NamedTuple):
    """One `config_paths` entry as written, and where it was written ("file:line")."""

    raw: str
    origin: str | None


@dataclass(frozen=True)
class Fragment:
    """One parsed YAML file."""

    path: Path
    data: dict[str, Any]
    sources: dict[str, str]
    """Dotted key -> "file:line" for every key and list item in the file."""
    includes: tuple[Include, ...]

    @property
    def name(self) -> str:
        """The file's display name (relative to the repo root when inside it)."""
        return display_path(self.path)


class _Loader(yaml.SafeLoader):
    """SafeLoader with OmegaConf's scalar rules."""


# Same float rule as OmegaConf's loader: YAML 1.1 would read `1e-6` as a string.
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?[0-9]+(?:_[0-9]+)*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?[0-9]+(?:_[0-9]+)*(?:[eE][-+]?[0-9]+)
        |\.[0-9]+(?:_[0-9]+)*(?:[eE][-+][0-9]+)?
        |[-+]?[0-9]+(?:_[0-9]+)*(?::[0-5]?[0-9])+\.[0-9_]*
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)
# OmegaConf has no date type: keep `2024-01-01` a string.
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _Loader.yaml_implicit_resolvers.items()
}


def load_fragment(path: Path) -> Fragment:
    """Parse one YAML file into values, key lines and includes."""
    name = display_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{name}: cannot read config file: {exc}") from exc
    node, data = _parse(text, name)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{name}:1  the top level of a config file must be a mapping of keys, got {type(data).__name__}"
        )
    sources: dict[str, str] = {}
    if node is not None:
        _record_lines(node, "", name, sources, ())
    includes = tuple(
        Include(raw, sources.get(join_key(CONFIG_PATHS_KEY, index), sources.get(CONFIG_PATHS_KEY)))
        for index, raw in enumerate(
            parse_config_paths(data.get(CONFIG_PATHS_KEY), origin=sources.get(CONFIG_PATHS_KEY))
        )
    )
    return Fragment(path=path, data=data, sources=sources, includes=includes)


def collect_fragments(entries: Sequence[Include], *, cwd: Path) -> list[Fragment]:
    """Read the listed files and everything they include, in merge order, each file once."""
    ordered: list[Fragment] = []
    seen: set[Path] = set()

    def visit(entry: Include) -> None:
        path = resolve_config_path(entry.raw, cwd=cwd, listed_in=entry.origin)
        if path in seen:  # de-duplication, and what makes include cycles harmless
            return
        seen.add(path)
        fragment = load_fragment(path)
        for include in fragment.includes:
            visit(include)
        ordered.append(fragment)

    for entry in entries:
        visit(entry)
    return ordered


def parse_config_paths(value: object, *, origin: str | None) -> list[str]:
    """Accept a list of paths or one comma-separated string (as NeMo Gym users write it)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return [item for item in value if item.strip()]
    where = f"{origin}  " if origin else ""
    raise ConfigError(
        f"{where}{CONFIG_PATHS_KEY}: expected a list of YAML file paths, got {value!r}",
        hint='write it as "+config_paths=[a.yaml,b.yaml]" or as a YAML list',
    )


def _parse(text: str, name: str) -> tuple[yaml.Node | None, Any]:
    _check_shape(text, name)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_duplicate_keys(node, name, ())
        return node, (loader.construct_document(node) if node is not None else None)
    except yaml.MarkedYAMLError as exc:
        raise ConfigError(
            _describe_yaml_error(exc, name), hint="fix the YAML syntax at that position"
        ) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{name}: invalid YAML: {exc}") from exc
    finally:
        loader.dispose()


def _check_shape(text: str, name: str) -> None:
    """ConfigError (file:line) for nesting deeper than MAX_DEPTH or aliases expanding too far.

    Sizes (values and characters) are summed as the events stream by: a closed anchored node's
    expanded size is kept, and each alias adds it, so the check is linear in the text even for an
    alias bomb.
    """
    open_nodes: list[_Expanded] = [_Expanded(None)]
    anchored: dict[str, tuple[int, int]] = {}
    try:
        for event in yaml.parse(text, Loader=_Loader):
            line = event.start_mark.line + 1 if event.start_mark else 1
            if isinstance(event, yaml.CollectionStartEvent):
                if len(open_nodes) > MAX_DEPTH:
                    raise ConfigError(
                        f"{name}:{line}  nesting deeper than {MAX_DEPTH} levels",
                        hint="a config this deep is not hand-written; check how the file was generated",
                    )
                open_nodes.append(_Expanded(event.anchor))
                continue
            if isinstance(event, yaml.CollectionEndEvent):
                closed = open_nodes.pop()
                size, anchor = (closed.values, closed.chars), closed.anchor
            elif isinstance(event, yaml.AliasEvent):
                size, anchor = anchored.get(event.anchor or "", (1, 0)), None
            elif isinstance(event, yaml.ScalarEvent):
                size, anchor = (1, len(event.value)), event.anchor
            else:
                continue
            if anchor:
                anchored[anchor] = size
            open_nodes[-1].add(*size, name=name, line=line)
    except yaml.YAMLError:
        return  # the composer reports syntax errors with their position


class _Expanded:
    """The expanded size of one open collection: values and characters, aliases resolved."""

    def __init__(self, anchor: str | None) -> None:
        self.anchor = anchor
        self.values = 1
        self.chars = 0

    def add(self, values: int, chars: int, *, name: str, line: int) -> None:
        """Count a closed child; ConfigError at `name:line` once past either bound."""
        self.values += values
        self.chars += chars
        hint = "an alias of an alias of ... (a YAML bomb) is refused; write the values out"
        if self.values > MAX_EXPANDED_NODES:
            raise ConfigError(
                f"{name}:{line}  YAML aliases expand to more than {MAX_EXPANDED_NODES} values", hint=hint
            )
        if self.chars > MAX_EXPANDED_BYTES:
            raise ConfigError(
                f"{name}:{line}  YAML expands to more than {MAX_EXPANDED_BYTES // 2**20} MiB of text "
                "(aliases resolved)",
                hint=hint,
            )


def _describe_yaml_error(exc: yaml.MarkedYAMLError, name: str) -> str:
    mark = exc.problem_mark or exc.context_mark
    position = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
    problem = exc.problem or "invalid YAML"
    context = f" ({exc.context}" + (f" at line {exc.context_mark.line + 1})" if exc.context_mark else ")")
    return f"{position}  YAML syntax error: {problem}" + (context if exc.context else "")


def _children(node: yaml.Node) -> Iterator[tuple[str, yaml.Node, yaml.Node]]:
    """(key text, node marking the key's line, value node) for mappings and sequences."""
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value != _MERGE_KEY:
                yield key_node.value, key_node, value_node
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield str(index), item, item


def _record_lines(
    node: yaml.Node, prefix: str, name: str, out: dict[str, str], stack: tuple[int, ...]
) -> None:
    if id(node) in stack:  # a recursive YAML alias; OmegaConf rejects it later
        return
    for key, key_node, value_node in _children(node):
        dotted = join_key(prefix, key)
        out[dotted] = f"{name}:{key_node.start_mark.line + 1}"
        _record_lines(value_node, dotted, name, out, (*stack, id(node)))


def _check_duplicate_keys(node: yaml.Node, name: str, stack: tuple[int, ...]) -> None:
    if id(node) in stack:
        return
    first_line: dict[str, int] = {}
    for key, key_node, value_node in _children(node):
        line = key_node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode) and key in first_line:
            raise ConfigError(
                f"{name}:{line}:{key_node.start_mark.column + 1}  duplicate key '{key}' "
                f"(first defined at line {first_line[key]})",
                hint="keep one of the two; YAML would silently drop the first",
            )
        first_line[key] = line
        _check_duplicate_keys(value_node, name, (*stack, id(node)))
