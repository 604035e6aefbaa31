"""NeMo Gym's catalog of environments and benchmarks, named and found as its `gym list` finds them.

NeMo Gym 0.7.0's `gym list benchmarks` is its `gym list environments` for one kind
(`nemo_gym/registry.py` `discover_environment_catalog`, `nemo_gym/benchmarks.py` for the names).
Under each root of `discovery.search_roots`, in order:

* `environments/`: each `manifest.yaml` below it (named by its folder's path, passed over with a
  `.nemo_gym_tombstone` in its top folder), then each `<name>/config.yaml` without a tombstone;
* `benchmarks/`: each manifest, then every `**/*.yaml` (dot-names skipped, `manifest.yaml` too)
  whose own text has exactly one `type: benchmark` mapping (or that does not parse: kept, so the
  error shows where it is used), named by its path under `benchmarks/` without `.yaml`, and
  `<name>/config.yaml` named `<name>`: `aime24`, `aime24/config_with_system`,
  `livecodebench/v5_2408_2502/config`. A file a manifest points at is listed under the manifest;
* `resources_servers/*/configs/*.yaml` declaring a resources server and an agent with datasets:
  `resources_servers/<server>[/<flavor>]`, a benchmark if one dataset is, passed over when a
  workload of that kind named `<flavor>` (or `<server>`) is already listed.

A name already listed is kept (an earlier root wins). A manifest is used only when valid
(`manifest.load_manifest`); one whose kind, name or config contradicts its place is an error, as
in NeMo Gym. Domain and description come from the manifest, else from the config
(`discovery.config_metadata`).
"""

from __future__ import annotations

import glob
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from ng_cli.datasets.discovery import config_metadata, fuzzy_matches, read_yaml, server_configs
from ng_cli.datasets.manifest import load_manifest
from ng_cli.errors import ConfigError

__all__ = [
    "FILTERS",
    "BenchmarkData",
    "Kind",
    "Workload",
    "benchmark_data",
    "discover_workloads",
    "select",
    "workload_details",
]

Kind = Literal["environment", "benchmark"]
MANIFEST = "manifest.yaml"
TOMBSTONE = ".nemo_gym_tombstone"
_TREES: tuple[tuple[Kind, str], ...] = (("environment", "environments"), ("benchmark", "benchmarks"))


@dataclass(frozen=True)
class Workload:
    """One catalog entry: NeMo Gym's `EnvironmentCatalogEntry`."""

    name: str
    kind: Kind
    config: Path
    root: Path
    description: str | None = None
    domain: str | None = None
    status: str | None = "no-manifest"
    manifest: Path | None = None
    version: str | None = None
    integration_profile: str | None = None
    modality: str | None = None
    licensing: str | None = None
    lifecycle: str | None = None
    resources_server_selector: str | None = None

    def payload(self) -> dict[str, Any]:
        """`gym list environments --json`'s object for this entry (`status` left out when None)."""
        payload: dict[str, Any] = {"name": self.name, "kind": self.kind, "status": self.status}
        if self.status is None:
            del payload["status"]
        return payload | {
            "domain": self.domain,
            "description": self.description,
            "version": self.version,
            "integration_profile": self.integration_profile,
            "modality": self.modality,
            "licensing": self.licensing,
            "lifecycle": self.lifecycle,
        }


def discover_workloads(roots: list[Path]) -> list[Workload]:
    """Every environment and benchmark under the roots, sorted by name as NeMo Gym sorts them."""
    entries: dict[tuple[Kind, str], Workload] = {}
    for root in roots:
        for kind, folder in _TREES:
            entries |= _tree(root, folder, kind, claimed=frozenset(entries), roots=roots)
        entries |= _resource_workloads(root, claimed=frozenset(entries))
    return sorted(entries.values(), key=lambda entry: (entry.name.casefold(), entry.name, entry.kind))


def _tree(
    root: Path, folder: str, kind: Kind, *, claimed: frozenset[tuple[Kind, str]], roots: list[Path]
) -> dict[tuple[Kind, str], Workload]:
    tree = root / folder
    if not tree.is_dir():
        return {}
    entries: dict[tuple[Kind, str], Workload] = {}
    listed_configs: set[Path] = set()
    for manifest_path in sorted(tree.rglob(MANIFEST)):
        relative = manifest_path.relative_to(tree)
        if kind == "environment" and (tree / relative.parts[0] / TOMBSTONE).is_file():
            continue
        name = _folder_name(tree, manifest_path)
        if (kind, name) in claimed:
            continue
        entry = _manifest_entry(root, manifest_path, name, kind)
        if entry is not None:
            entries[(kind, name)] = entry
            listed_configs.add(entry.config.resolve())
    for name, config in _config_files(tree, kind):
        key = (kind, name)
        if key in claimed or key in entries or config.resolve() in listed_configs:
            continue
        domain, description = config_metadata(config, roots)
        entries[key] = Workload(name, kind, config, root, description=description, domain=domain)
    return entries


def _folder_name(tree: Path, manifest_path: Path) -> str:
    relative = manifest_path.parent.relative_to(tree)
    if relative == Path("."):
        raise ConfigError(
            f"{manifest_path}: a manifest must be inside a named catalog folder",
            hint=f"move it into {tree}/<name>/ (NeMo Gym refuses it too)",
        )
    return relative.as_posix()


def _manifest_entry(root: Path, path: Path, name: str, kind: Kind) -> Workload | None:
    manifest = load_manifest(path)
    if manifest is None:
        return None
    if manifest.kind != kind:
        raise ConfigError(
            f"{path}: declares kind '{manifest.kind}', but its catalog folder requires '{kind}'"
        )
    if manifest.name != name:
        raise ConfigError(f"{path}: declares name '{manifest.name}', but its folder requires '{name}'")
    config_path = Path(manifest.config_path)
    catalog = next((parent for parent in path.absolute().parents if parent.name in _FOLDERS), path.parent)
    config = (path.parent / config_path).resolve()
    if config_path.is_absolute() or not config.is_relative_to(catalog.resolve()):
        return None  # NeMo Gym: a ManifestError, so the manifest is passed over
    if not config.is_file():
        raise ConfigError(
            f"{path}: requires {manifest.config_path} (resolved to '{config}'), which is not a file"
        )
    return Workload(
        name,
        kind,
        config,
        root,
        description=manifest.description,
        domain=manifest.domain,
        status="experimental" if manifest.experimental else None,
        manifest=path,
        version=manifest.version,
        integration_profile=manifest.integration_profile,
        modality=manifest.modality,
        licensing=manifest.licensing,
        lifecycle=manifest.lifecycle,
    )


_FOLDERS = frozenset(folder for _kind, folder in _TREES)


def _config_files(tree: Path, kind: Kind) -> Iterator[tuple[str, Path]]:
    if kind == "environment":
        for child in sorted(tree.iterdir()):
            config = child / "config.yaml"
            if child.is_dir() and config.is_file() and not (child / TOMBSTONE).is_file():
                yield child.name, config
        return
    found = [tree / path for path in glob.glob("**/*.yaml", root_dir=tree, recursive=True)]
    for config in sorted(found):
        if config.is_file() and config.name != MANIFEST and _one_benchmark(config):
            yield _benchmark_name(config.relative_to(tree)), config


def _benchmark_name(relative: Path) -> str:
    parts = relative.with_suffix("").parts
    return parts[0] if len(parts) == 2 and parts[1] == "config" else "/".join(parts)


def _one_benchmark(config: Path) -> bool:
    """Exactly one `type: benchmark` mapping in the file's own text (no includes followed); a file
    that does not parse counts as one (NeMo Gym keeps it)."""

    def count(node: Any) -> int:
        if isinstance(node, dict):
            return (node.get("type") == "benchmark") + sum(count(value) for value in node.values())
        if isinstance(node, list):
            return sum(count(value) for value in node)
        return 0

    try:
        return count(yaml.safe_load(config.read_text(errors="ignore"))) == 1
    except yaml.YAMLError:
        return True


def _resource_workloads(
    root: Path, *, claimed: frozenset[tuple[Kind, str]]
) -> dict[tuple[Kind, str], Workload]:
    folder = root / "resources_servers"
    if not folder.is_dir():
        return {}
    entries: dict[tuple[Kind, str], Workload] = {}
    for config in sorted(folder.glob("*/configs/*.yaml")):
        runnable = _runnable(config)
        if runnable is None:
            continue
        kind, domain, description = runnable
        server, flavor = config.relative_to(folder).parts[0], config.stem
        selector = server if flavor == server else f"{server}/{flavor}"
        key = (kind, f"resources_servers/{selector}")
        if (kind, flavor) in claimed or key in claimed or key in entries:
            continue
        entries[key] = Workload(
            key[1],
            kind,
            config,
            root,
            description=description,
            domain=domain,
            resources_server_selector=selector,
        )
    return entries


def _runnable(config: Path) -> tuple[Kind, str | None, str | None] | None:
    """(kind, domain, description) of a server config that carries its own workload, else None."""
    servers = list(server_configs(read_yaml(config)))
    if not any(group == "resources_servers" for group, _name, _block in servers):
        return None
    datasets = [
        dataset
        for group, _name, block in servers
        if group == "responses_api_agents"
        for dataset in (block.get("datasets") or [])
        if isinstance(dataset, Mapping)
    ]
    if not datasets:
        return None
    kind: Kind = (
        "benchmark" if any(dataset.get("type") == "benchmark" for dataset in datasets) else "environment"
    )
    domain = next((str(block["domain"]) for _g, _n, block in servers if block.get("domain")), None)
    description = next(
        (str(block["description"]) for _g, _n, block in servers if block.get("description")), None
    )
    return kind, domain, description


@dataclass(frozen=True)
class BenchmarkData:
    """A benchmark's dataset, as its config (else its manifest) declares it, and whether it is here."""

    agent: str | None
    num_repeats: int | None
    jsonl_fpath: str | None
    has_data: bool
    prepare_script: str | None


def benchmark_data(workload: Workload, roots: list[Path]) -> BenchmarkData:
    """The benchmark dataset of the config's own text (the agent instance declaring it), else the
    manifest's first benchmark dataset; its data file is looked for under every root."""
    found = next(_benchmark_datasets(read_yaml(workload.config)), None)
    if found is None and workload.manifest is not None:
        manifest = load_manifest(workload.manifest)
        datasets = [d.model_dump() for d in manifest.datasets if d.type == "benchmark"] if manifest else []
        found = (None, datasets[0]) if datasets else None
    agent, dataset = found if found is not None else (None, {})
    data = dataset.get("jsonl_fpath")
    repeats = dataset.get("num_repeats")
    return BenchmarkData(
        agent=agent,
        num_repeats=repeats if isinstance(repeats, int) and not isinstance(repeats, bool) else None,
        jsonl_fpath=str(data) if data else None,
        has_data=bool(data) and any((root / str(data)).is_file() for root in (*roots, workload.root)),
        prepare_script=str(dataset["prepare_script"]) if dataset.get("prepare_script") else None,
    )


def _benchmark_datasets(tree: Any) -> Iterator[tuple[str | None, Mapping[str, Any]]]:
    if not isinstance(tree, Mapping):
        return
    for instance, block in tree.items():
        single = {instance: block}
        for group, _implementation, body in server_configs(single):
            datasets = (
                body.get("datasets") if group in ("responses_api_agents", "resources_servers") else None
            )
            for dataset in datasets if isinstance(datasets, list) else ():
                if isinstance(dataset, Mapping) and dataset.get("type") == "benchmark":
                    yield str(instance), dataset


FILTERS = ("domain", "catalog_kind", "modality", "licensing", "status", "lifecycle")
"""The keys `gym list environments` filters on, in its order (`catalog_kind` is an entry's kind)."""


def select(
    entries: list[Workload], *, query: str | None, filters: Mapping[str, str | None]
) -> tuple[list[Workload], list[str]]:
    """The entries matching `query` (name, domain, description) and every filter set, and NeMo
    Gym's warning for each filter some entries could not be matched on (no such metadata)."""
    if query:
        entries = [e for e in entries if fuzzy_matches(query, e.name, e.domain or "", e.description or "")]
    warnings: list[str] = []
    for key in FILTERS:
        expected = filters.get(key)
        if expected is None:
            continue
        attribute = "kind" if key == "catalog_kind" else key
        missing = sum(getattr(entry, attribute) is None for entry in entries)
        if missing and key != "status":
            noun, verb = ("entry", "has") if missing == 1 else ("entries", "have")
            warnings.append(
                f"Warning: {missing} catalog {noun} {verb} no {attribute} metadata and could not be matched."
            )
        entries = [entry for entry in entries if getattr(entry, attribute) == expected]
    return entries, warnings


def workload_details(workload: Workload, roots: list[Path]) -> tuple[str | None, str | None, dict[str, str]]:
    """(domain, description, details) of `gym list environments NAME`: the entry's, completed
    from its config file (its resources servers, first agent, dataset names, `value`)."""
    domain, description = config_metadata(workload.config, roots)
    servers: list[str] = []
    agent: str | None = None
    datasets: list[str] = []
    value: str | None = None
    for group, implementation, block in server_configs(read_yaml(workload.config)):
        if group == "resources_servers":
            servers.append(implementation)
            value = value or (str(block["value"]) if block.get("value") else None)
        elif group == "responses_api_agents":
            agent = agent or implementation
            names = (d.get("name") for d in block.get("datasets") or [] if isinstance(d, Mapping))
            datasets.extend(str(name) for name in names if name)
    details = {"config": str(workload.config.resolve())}
    details |= {"status": workload.status} if workload.status is not None else {}
    details |= {"manifest": str(workload.manifest.resolve())} if workload.manifest is not None else {}
    for label, field in (
        ("version", workload.version),
        ("profile", workload.integration_profile),
        ("modality", workload.modality),
        ("licensing", workload.licensing),
        ("lifecycle", workload.lifecycle),
    ):
        details |= {label: field} if field else {}
    details |= {"resources servers": ", ".join(servers)} if servers else {}
    details |= {"agent": agent} if agent else {}
    details |= {"datasets": ", ".join(datasets)} if datasets else {}
    description = workload.description or description
    if value:
        description = f"{description}\nValue: {value}" if description else f"Value: {value}"
    return workload.domain or domain, description, details
