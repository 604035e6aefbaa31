"""What a node sees at a checkpoint path (issue 42): the model server's `sight` and the engine's
copy agree, and a difference is named."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from ng_cli.engines.engine_worker import checkpoint_sight
from ng_cli.upstream.checkpoint_sight import _difference, is_remote, sight
from tests.fixtures import checkpoints
from tests.fixtures.weight_engines import MODEL


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    return checkpoints.swapped(MODEL, tmp_path / "B", "Ġdegrees", "ĠElacas")


def test_the_engines_copy_sees_what_the_model_server_sees(checkpoint: Path, tmp_path: Path) -> None:
    for path in (checkpoint, checkpoint / "model.safetensors", tmp_path / "missing"):
        assert checkpoint_sight(str(path)) == sight(str(path))
    seen = json.loads(sight(str(checkpoint)))
    size, digest = seen["model.safetensors"]
    assert size == (checkpoint / "model.safetensors").stat().st_size
    assert len(digest) == 64
    assert "" in json.loads(sight(str(tmp_path / "missing")))


def test_a_node_without_the_files_or_with_other_ones_is_named(checkpoint: Path, tmp_path: Path) -> None:
    here = json.loads(sight(str(checkpoint)))
    assert _difference(here, here) is None
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "its node lacks" in str(_difference(here, json.loads(sight(str(empty)))))
    assert "cannot read the directory" in str(_difference(here, json.loads(sight(str(tmp_path / "no")))))
    other = checkpoints.swapped(MODEL, tmp_path / "C", "It", "ĠCassul")
    (other / "model.safetensors").write_bytes((other / "model.safetensors").read_bytes()[:-8])
    assert "bytes" in str(_difference(here, json.loads(sight(str(other)))))


def test_only_engines_off_loopback_are_asked() -> None:
    assert is_remote("http://10.0.0.3:8001")
    assert is_remote("http://[fd00::3]:8001")
    assert is_remote("http://gpu-node-2:8001")
    assert not is_remote("http://127.0.0.1:8001")
    assert not is_remote("http://localhost:8001")
    assert asyncio.run(_no_engine()) == {}


async def _no_engine() -> dict[str, str]:
    from ng_cli.upstream.checkpoint_sight import unseen

    return await unseen("/nowhere", [], deadline_s=1.0)
