"""What one NeMo Gym resources server folder says about its needs, read from its files alone.

Nothing is imported or run: `requirements.txt` (or `pyproject.toml`) lines (NeMo Gym's own
skipped, as the launcher skips them), the top-level modules its `app.py` imports (following its own helper modules, at
any depth, also inside functions), and its `configs/*.yaml` (the agents that drive it, the model
servers and API keys it refers to, the sandbox and container keys it sets).
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ng_cli.packages.requirements import requirement_lines, requirements_file

__all__ = ["ServerFacts", "read_server"]

_OURS = frozenset({"nemo_gym", "resources_servers", "responses_api_agents", "responses_api_models"})
_SANDBOX_EXTRA = re.compile(r"nemo[-_]gym\[[^\]]*sandbox", re.I)


@dataclass
class ServerFacts:
    """The raw facts; `ng_cli.catalog.classify` turns them into a category."""

    name: str
    has_app: bool
    requirements: list[str] = field(default_factory=list)
    """Lines pip would get (comments and NeMo Gym's own lines dropped)."""
    sandbox_extra: bool = False
    """Its requirements ask for NeMo Gym's `sandbox` extra (a code sandbox service)."""
    imports: set[str] = field(default_factory=set)
    """Top-level third-party modules app.py reaches (standard library and its own modules left out)."""
    agents: list[str] = field(default_factory=list)
    """Agent implementations its configs pair it with, in order of first appearance."""
    model_keys: list[str] = field(default_factory=list)
    """Keys of its resources-server blocks that name a model server or a judge endpoint."""
    api_keys: list[str] = field(default_factory=list)
    """Config keys or environment variables for API keys other than a judge's."""
    config_text: str = ""
    source_text: str = ""
    fetched_files: list[str] = field(default_factory=list)
    """URLs of files (requirements, archives, data) named in the code app.py reaches, not in docstrings."""
    unshipped_data: dict[str, str] = field(default_factory=dict)
    """`data/<file>` the reached code reads that the folder does not ship -> its script that downloads it."""


def read_server(folder: Path) -> ServerFacts:
    """The facts of one `resources_servers/<name>` folder."""
    facts = ServerFacts(name=folder.name, has_app=(folder / "app.py").is_file())
    requirements = requirements_file(folder)
    if requirements is not None:
        facts.sandbox_extra = bool(
            _SANDBOX_EXTRA.search(requirements.read_text(encoding="utf-8", errors="replace"))
        )
        facts.requirements = [line for _, line in requirement_lines(requirements)]
    if facts.has_app:
        facts.imports, facts.source_text, trees = _reached_imports(folder)
        facts.fetched_files = sorted({url for tree in trees for url in _file_urls(tree)})
        facts.unshipped_data = _unshipped_data(folder, facts.source_text)
    for config in sorted((folder / "configs").glob("*.yaml")):
        text = config.read_text(encoding="utf-8", errors="replace")
        facts.config_text += text + "\n"
        try:
            tree = yaml.safe_load(text)
        except yaml.YAMLError:
            continue
        _read_config(tree, facts)
    facts.api_keys = sorted(set(facts.api_keys) | _api_key_variables(facts.source_text))
    return facts


def _reached_imports(folder: Path) -> tuple[set[str], str, list[ast.AST]]:
    """Third-party top-level modules imported by app.py and the folder's modules it imports (with
    the text and syntax trees of those modules)."""
    local = {path.stem for path in folder.rglob("*.py")} | {p.name for p in folder.iterdir() if p.is_dir()}
    stdlib = set(sys.stdlib_module_names)
    seen: set[Path] = set()
    todo = [folder / "app.py"]
    found: set[str] = set()
    sources: list[str] = []
    trees: list[ast.AST] = []
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        text = path.read_text(encoding="utf-8", errors="replace")
        sources.append(text)
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        trees.append(tree)
        for module in _imported_modules(tree, folder.name):
            top = module.split(".")[0]
            if module.startswith(f"resources_servers.{folder.name}") or (top in local and top not in stdlib):
                todo.extend(_local_files(folder, module))
            elif top not in stdlib and top not in _OURS and top not in local:
                found.add(top)
    return found, "\n".join(sources), trees


_FILE_URL = re.compile(r"^https?://\S+\.(?:txt|zip|tar\.gz|tgz|gz|json|jsonl|csv|parquet|whl)$")
_DATA_PATH = re.compile(r"""["']data["']\s*/\s*["']([\w.-]+)["']|["']data/([\w.-]+)["']""")
DOWNLOADS = re.compile(
    r"urlretrieve|snapshot_download|hf_hub_download|load_dataset\(|requests\.get\(|urlopen\("
)
"""Calls that fetch from the network: in the code app.py reaches, or in a script that makes its data."""


def _file_urls(tree: ast.AST) -> set[str]:
    """String constants that are URLs of files; docstrings (an expression statement) left out."""
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and _FILE_URL.match(node.value)
    }


def _unshipped_data(folder: Path, source: str) -> dict[str, str]:
    """Data files the code names under `data/` that are missing, when a script beside it downloads."""
    missing = sorted(
        {a or b for a, b in _DATA_PATH.findall(source)} - {p.name for p in (folder / "data").glob("*")}
    )
    maker = next(
        (
            path.name
            for path in sorted(folder.glob("*.py"))
            if missing and DOWNLOADS.search(path.read_text(encoding="utf-8", errors="replace"))
        ),
        None,
    )
    return {f"data/{name}": maker for name in missing} if maker else {}


def _imported_modules(tree: ast.AST, name: str) -> list[str]:
    modules: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: one of its own modules
                base = f"resources_servers.{name}" + (f".{node.module}" if node.module else "")
                modules.append(base)
                modules.extend(f"{base}.{alias.name}" for alias in node.names)
            elif node.module:
                modules.append(node.module)
                if node.module == f"resources_servers.{name}" or node.module.startswith(
                    f"resources_servers.{name}."
                ):
                    modules.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return modules


def _local_files(folder: Path, module: str) -> list[Path]:
    parts = module.split(".")
    if parts[:2] == ["resources_servers", folder.name]:
        parts = parts[2:]
    if not parts:
        return [folder / "__init__.py"]
    base = folder.joinpath(*parts)
    return [base.with_suffix(".py"), base / "__init__.py"]


def _read_config(tree: Any, facts: ServerFacts) -> None:
    if not isinstance(tree, dict):
        return
    for value in tree.values():
        if not isinstance(value, dict):
            continue
        agents = value.get("responses_api_agents")
        if isinstance(agents, dict):
            for implementation, block in agents.items():
                refers = isinstance(block, dict) and _refers_to(block.get("resources_server"), facts, tree)
                if refers and implementation not in facts.agents:
                    facts.agents.append(str(implementation))
        servers = value.get("resources_servers")
        if isinstance(servers, dict) and facts.name in servers and isinstance(servers[facts.name], dict):
            _read_block(servers[facts.name], facts, "")


def _refers_to(ref: Any, facts: ServerFacts, tree: dict[str, Any]) -> bool:
    """Whether an agent's `resources_server` reference names an instance of this server."""
    if not isinstance(ref, dict):
        return False
    target = tree.get(str(ref.get("name")))
    if isinstance(target, dict) and isinstance(target.get("resources_servers"), dict):
        return facts.name in target["resources_servers"]
    return True  # `???` or an instance defined elsewhere: the file is this server's own


def _read_block(block: dict[str, Any], facts: ServerFacts, prefix: str) -> None:
    for key, value in block.items():
        dotted = f"{prefix}{key}"
        lowered = str(key).lower()
        if isinstance(value, dict) and value.get("type") == "responses_api_models":
            facts.model_keys.append(dotted)
        elif lowered.endswith("api_key") and value not in (None, ""):
            if "judge" in lowered:
                facts.model_keys.append(dotted)
            else:
                facts.api_keys.append(dotted)
        elif lowered in ("judge_base_url", "judge_model") and value not in (None, ""):
            facts.model_keys.append(dotted)
        if isinstance(value, dict):
            _read_block(value, facts, f"{dotted}.")


_ENV_KEY = re.compile(r"""(?:environ(?:\.get)?[\[(]|getenv\()\s*["']([A-Z0-9_]*API_KEY)["']""")


def _api_key_variables(source: str) -> set[str]:
    """Environment variables holding an API key that the code reads (a judge's left to configs)."""
    return {f"${name}" for name in _ENV_KEY.findall(source)}
