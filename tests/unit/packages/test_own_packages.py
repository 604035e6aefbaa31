"""ng_cli's own packages in the requirements step: pinned at the installed versions for the
stack's one environment, held to ng_cli's declared ranges in a server's own layered environment."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from ng_cli.errors import ConfigError
from ng_cli.launcher.packages import ensure_requirement_files


def _another_version_of_ours(tmp_path: Path) -> tuple[str, Path]:
    """A requirements.txt asking for any version of one of ng_cli's own packages but the installed one."""
    name = Requirement(next(iter(importlib.metadata.requires("ng_cli") or []))).name
    path = tmp_path / "requirements.txt"
    path.write_text(f"-e nemo-gym[dev] @ ../../\n{name}!={importlib.metadata.version(name)}\n")
    return name, path


def test_the_stacks_own_versions_are_kept_by_default(tmp_path: Path) -> None:
    name, path = _another_version_of_ours(tmp_path)
    with pytest.raises(ConfigError, match=f"version of {name} the stack itself cannot run with"):
        ensure_requirement_files({"env": path}, install=True, dry_run=True, say=lambda _: None)


def test_a_servers_own_environment_may_shadow_them_within_ng_clis_ranges(tmp_path: Path) -> None:
    name, path = _another_version_of_ours(tmp_path)
    said: list[str] = []
    outcome = ensure_requirement_files(
        {"env": path}, install=True, dry_run=True, say=said.append, own_at_installed=False
    )
    assert [item.name for item in outcome.missing] == [name.lower().replace("_", "-")]
    assert said == [f"requirements: would install for env: {path.read_text().splitlines()[1]}"]
