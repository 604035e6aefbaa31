"""The workload catalog where NeMo Gym 0.7.0's `registry.py` refuses or passes over a file (the
cases `tests/compat/test_gym_cli.py` cannot hold: each stops NeMo Gym's whole listing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ng_cli.datasets.workloads import discover_workloads
from ng_cli.errors import ConfigError

BENCHMARK = "a:\n  responses_api_agents:\n    s:\n      datasets:\n      - {name: b, type: benchmark, jsonl_fpath: d.jsonl}\n"


def _manifest(name: str, kind: str = "benchmark", config_path: str = "config.yaml") -> str:
    return json.dumps(
        {
            "name": name,
            "version": "1",
            "kind": kind,
            "integration_profile": "external-agent-loop",
            "domain": "math",
            "description": "d",
            "modality": "text",
            "authors": ["a"],
            "reward": {"range": [0, 1], "higher_is_better": True},
            "config_path": config_path,
            "resources_server": None,
            "agent_server": "s",
            "datasets": [
                {"name": "b", "type": "benchmark", "jsonl_fpath": "d.jsonl", "prepare_script": "p.py"}
            ],
            "canonical_split": "benchmark",
            "prompt_source": "agent",
        }
    )


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"benchmarks/manifest.yaml": _manifest("x")}, "a manifest must be inside a named catalog folder"),
        (
            {
                "benchmarks/x/manifest.yaml": _manifest("x", kind="environment"),
                "benchmarks/x/config.yaml": BENCHMARK,
            },
            "declares kind 'environment', but its catalog folder requires 'benchmark'",
        ),
        (
            {"benchmarks/x/manifest.yaml": _manifest("y"), "benchmarks/x/config.yaml": BENCHMARK},
            "declares name 'y', but its folder requires 'x'",
        ),
        ({"benchmarks/x/manifest.yaml": _manifest("x")}, "requires config.yaml"),
    ],
)
def test_a_manifest_that_contradicts_its_folder_is_an_error(
    tmp_path: Path, files: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        discover_workloads([_write(tmp_path, files)])


def test_what_is_passed_over_and_what_is_kept(tmp_path: Path) -> None:
    root = _write(
        tmp_path,
        {
            # a manifest whose config leaves the catalog: passed over, the config listed by its path
            "benchmarks/escape/v1/manifest.yaml": _manifest(
                "escape/v1", config_path="../../../elsewhere.yaml"
            ),
            "benchmarks/escape/v1/config.yaml": BENCHMARK,
            "elsewhere.yaml": BENCHMARK,
            # dot-names are not found, a folder named like a config is not a config
            "benchmarks/.drafts/config.yaml": BENCHMARK,
            "benchmarks/x/.old.yaml": BENCHMARK,
            "benchmarks/folder.yaml/config.yaml": BENCHMARK,
            # an environment's manifest under a tombstoned folder is passed over
            "environments/gone/.nemo_gym_tombstone": "",
            "environments/gone/nested/manifest.yaml": _manifest("gone/nested", kind="environment"),
            "environments/gone/nested/config.yaml": "{}\n",
        },
    )
    assert [(entry.name, entry.kind) for entry in discover_workloads([root])] == [
        ("escape/v1/config", "benchmark"),
        ("folder.yaml", "benchmark"),  # NeMo Gym stops on the folder (IsADirectoryError); skipped here
    ]
