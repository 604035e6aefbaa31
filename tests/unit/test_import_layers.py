"""The import graph of `ng_cli/`: no cycle, and no import from a lower layer to a higher one.

The layers are read from `docs/architecture.md` (the indented line that starts with `commands ->`),
so the map and the code cannot drift apart: a new package must be placed there before this passes.
Every `import` counts, wherever it stands (a function's lazy import and a `TYPE_CHECKING` one too):
a lazy import hides a cycle from Python, not from the design.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ng_cli"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
TOP = "ng_cli"
APP_FOLDERS = ("resources_servers", "responses_api_models", "responses_api_agents", "tests", "bench")


@dataclass(frozen=True)
class Edge:
    """One import: `source` (module) imports `target` (module), at `where` (file:line)."""

    source: str
    target: str
    where: str


def module_name(path: Path) -> str:
    """`ng_cli/launcher/ray/backend.py` -> `ng_cli.launcher.ray.backend` (a package: its folder's name)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def unit_of(module: str) -> str:
    """The layered unit a module belongs to: `ng_cli.launcher.ray.backend` -> `launcher`,
    `ng_cli.head` -> `head`, `ng_cli` itself -> `ng_cli`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else TOP


def imported(node: ast.Import | ast.ImportFrom, package: str, modules: set[str]) -> list[str]:
    """The modules an import statement loads: `from X import a` is `X.a` where that is a module
    and `X` for every name that is not; a relative import is resolved against `package`."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*anchor, base] if base else anchor)
    submodules = [f"{base}.{alias.name}" for alias in node.names]
    found = [name for name in submodules if name in modules]
    return found + ([base] if len(found) < len(submodules) else [])


def import_edges() -> list[Edge]:
    modules = all_modules()
    edges: list[Edge] = []
    for source, path in modules.items():
        package = source if path.name == "__init__.py" else source.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                targets = imported(node, package, set(modules))
                edges.extend(Edge(source, target, where) for target in targets if target != source)
    return edges


def layers_from_docs() -> list[set[str]]:
    """`commands -> e2e / quickstart -> ... -> errors` in docs/architecture.md, highest first."""
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        if line.startswith("    commands ->"):
            return [{name.strip() for name in layer.split("/")} for layer in line.split("->")]
    raise AssertionError(f"{ARCHITECTURE}: no indented line starting with 'commands ->' (the layer order)")


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as a path [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_every_package_has_a_layer() -> None:
    layers = layers_from_docs()
    named = [name for layer in layers for name in layer]
    units = {unit_of(module) for module in all_modules()}
    assert len(named) == len(set(named)), f"a unit is named twice in the layer line: {sorted(named)}"
    assert units - set(named) == set(), "place these in docs/architecture.md's layer line"
    assert set(named) - units == set(), "the layer line names packages that do not exist"


def test_no_import_from_a_lower_layer_to_a_higher_one() -> None:
    rank = {name: index for index, layer in enumerate(layers_from_docs()) for name in layer}
    upward = [
        f"{edge.where}: {edge.source} ({unit_of(edge.source)}) imports {edge.target} ({unit_of(edge.target)})"
        for edge in import_edges()
        if edge.target.startswith(f"{TOP}.") and rank[unit_of(edge.target)] < rank[unit_of(edge.source)]
    ]
    assert upward == []


def test_no_cycle_between_packages() -> None:
    graph: dict[str, set[str]] = {}
    for edge in import_edges():
        source, target = unit_of(edge.source), unit_of(edge.target)
        if edge.target.startswith(f"{TOP}.") and source != target:
            graph.setdefault(source, set()).add(target)
    assert find_cycle(graph) is None


def test_no_cycle_between_modules() -> None:
    modules = all_modules()
    graph: dict[str, set[str]] = {}
    for edge in import_edges():
        if edge.target in modules:
            graph.setdefault(edge.source, set()).add(edge.target)
    assert find_cycle(graph) is None


def test_ng_cli_imports_no_server_implementation_test_or_bench() -> None:
    """Implementations are loaded by path in their own process (`servers.loading`), never imported."""
    stray = [
        f"{edge.where}: {edge.target}" for edge in import_edges() if edge.target.split(".")[0] in APP_FOLDERS
    ]
    assert stray == []


ENGINE_SIDE = frozenset(
    {
        "ng_cli.engines.delta_apply",
        "ng_cli.engines.engine_main",
        "ng_cli.engines.engine_worker",
        "ng_cli.engines.expert_check",
        "ng_cli.toolchain.tiny_model",
        "ng_cli.toolchain.train_weather_model",
    }
)
HEAVY = {
    "ray": "ng_cli.launcher.ray.",  # the optional `ray` extra: its own package, imported on demand
    "torch": ENGINE_SIDE,  # these run under the engine venv, never the project's
    "transformers": ENGINE_SIDE,
    "vllm": ENGINE_SIDE,
    "playwright": frozenset(),  # the report's browser test only
    "openai": frozenset(),  # a test client only
}


def test_heavy_dependencies_are_imported_only_where_they_are_optional() -> None:
    def allowed(source: str, home: str | frozenset[str]) -> bool:
        return source.startswith(home) if isinstance(home, str) else source in home

    stray = [
        f"{edge.where}: {edge.target}"
        for edge in import_edges()
        if edge.target.split(".")[0] in HEAVY and not allowed(edge.source, HEAVY[edge.target.split(".")[0]])
    ]
    assert stray == []


@pytest.mark.parametrize(
    ("graph", "cycle"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
        ({"a": {"a"}}, ["a", "a"]),
    ],
)
def test_the_cycle_finder_finds_cycles(graph: dict[str, set[str]], cycle: list[str] | None) -> None:
    assert find_cycle(graph) == cycle
