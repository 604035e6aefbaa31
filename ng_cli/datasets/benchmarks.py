"""Benchmarks: NeMo Gym's `benchmarks/<name>/config.yaml` files, found and described, never fetched.

A benchmark is a dataset of `type: benchmark` declared in a config under a `benchmarks/` folder of
the current directory or of this repo (NeMo Gym's layout: an agent block's `datasets`, with
`jsonl_fpath`, `num_repeats` and a `prepare_script`). This repo ships none. Its data is present
or not: NeMo Gym's prepare scripts download it from Hugging Face, which is network beyond the
package registries, so `ng_prepare_benchmark` is not offered (`ng_cli/commands/not_offered.py`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from ng_cli.config.paths import repo_root

__all__ = ["Benchmark", "find_benchmarks", "search_roots"]


@dataclass(frozen=True)
class Benchmark:
    name: str
    config: str
    agent: str
    num_repeats: int | None
    jsonl_fpath: str | None
    has_data: bool
    prepare_script: str | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def search_roots(cwd: Path | None = None) -> list[Path]:
    """The current directory, then this repo (de-duplicated), as NeMo Gym searches."""
    roots = [(cwd or Path.cwd()).resolve(), repo_root()]
    return list(dict.fromkeys(roots))


def find_benchmarks(roots: list[Path]) -> list[Benchmark]:
    """Every benchmark dataset of every `benchmarks/**/config.yaml` under the roots, by name."""
    found: dict[str, Benchmark] = {}
    for root in roots:
        folder = root / "benchmarks"
        for config in sorted(folder.rglob("config.yaml")) if folder.is_dir() else ():
            for benchmark in _benchmarks_in(config, root):
                found.setdefault(benchmark.name, benchmark)  # an earlier root wins, as in NeMo Gym
    return sorted(found.values(), key=lambda b: b.name)


def _benchmarks_in(config: Path, root: Path) -> Iterator[Benchmark]:
    try:
        tree = yaml.safe_load(config.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return
    for agent, block in (tree or {}).items() if isinstance(tree, Mapping) else ():
        for dataset in _datasets(block):
            if dataset.get("type") != "benchmark" or not dataset.get("name"):
                continue
            data = dataset.get("jsonl_fpath")
            yield Benchmark(
                name=str(dataset["name"]),
                config=config.relative_to(root).as_posix(),
                agent=str(agent),
                num_repeats=dataset.get("num_repeats")
                if isinstance(dataset.get("num_repeats"), int)
                else None,
                jsonl_fpath=str(data) if data else None,
                has_data=bool(data) and any((r / str(data)).is_file() for r in (root, Path.cwd())),
                prepare_script=str(dataset["prepare_script"]) if dataset.get("prepare_script") else None,
            )


def _datasets(block: Any) -> Iterator[Mapping[str, Any]]:
    """The `datasets` entries of an instance block `<server_type>: <implementation>: {...}`."""
    if not isinstance(block, Mapping):
        return
    for implementations in block.values():
        if not isinstance(implementations, Mapping):
            continue
        for body in implementations.values():
            datasets = body.get("datasets") if isinstance(body, Mapping) else None
            for dataset in datasets if isinstance(datasets, list) else ():
                if isinstance(dataset, Mapping):
                    yield dataset
