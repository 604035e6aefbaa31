"""Weights deltas through the real model server over stand-in engines (`tests/fixtures/weight_engines.py`):
the chain the model server keeps, what a rollback replays, and the refusals that come before any
pause (the real engines' path is tests/engine/test_weight_deltas.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ng_cli.training.delta import make_delta
from tests.fixtures.delta_checkpoints import bump, edited
from tests.fixtures.weight_engines import MODEL, Served, StandIn, admin, serve, status

NORM = "model.norm.weight"


@pytest.fixture
def engines() -> Iterator[Served]:
    yield from serve([StandIn(), StandIn()])


@pytest.fixture
def deltas(tmp_path: Path) -> dict[str, Path]:
    """A (the boot model) -> B -> C, the deltas between, and C whole."""
    b = edited(MODEL, tmp_path / "B", {NORM: bump(range(4), 0.5)})
    c = edited(b, tmp_path / "C", {NORM: bump(range(4, 8), 0.5)})
    make_delta(MODEL, b, tmp_path / "A-B")
    make_delta(b, c, tmp_path / "B-C")
    return {"A->B": tmp_path / "A-B", "B->C": tmp_path / "B-C", "C": c}


def test_a_failed_delta_rolls_back_by_replaying_the_chain(engines: Served, deltas: dict[str, Path]) -> None:
    stand_ins, roots, url = engines
    code, answer = admin(url, "/admin/weights/update", {"path": str(deltas["A->B"]), "version": 1})
    assert code == 200, answer
    assert answer["deltas"] == [str(deltas["A->B"])]
    assert stand_ins[0].log[:2] == ["pause keep", "apply A-B onto tiny-weather"]
    held = [one.holds for one in stand_ins]

    stand_ins[1].fail_reload_of = str(deltas["B->C"])
    for one in stand_ins:
        one.log.clear()
    code, answer = admin(url, "/admin/weights/update", {"path": str(deltas["B->C"]), "version": 2})
    assert code == 409, answer
    assert (answer["error"]["phase"], answer["error"]["rolled_back"], answer["error"]["engine"]) == (
        "reload",
        True,
        roots[1],
    )
    # Back on the full checkpoint, then every delta since, each onto what came before it.
    assert stand_ins[0].log[:4] == [
        "pause keep",
        "apply B-C onto tiny-weather+A-B",
        "reload tiny-weather",
        "apply A-B onto tiny-weather",
    ]
    assert [one.holds for one in stand_ins] == held
    state = status(url)
    assert (state["version"], state["deltas"], state["admitting"]) == (1, [str(deltas["A->B"])], True)


def test_a_delta_of_another_base_is_refused_before_any_pause(
    engines: Served, deltas: dict[str, Path]
) -> None:
    stand_ins, _roots, url = engines
    code, answer = admin(url, "/admin/weights/update", {"path": str(deltas["B->C"]), "version": 1})
    assert code == 409, answer
    assert answer["error"]["phase"] == "check"
    assert "made against other weights than the engines hold" in answer["error"]["message"]
    assert all(one.log == [] for one in stand_ins)
    assert status(url)["version"] == 0


def test_a_full_checkpoint_ends_the_chain(engines: Served, deltas: dict[str, Path]) -> None:
    _stand_ins, _roots, url = engines
    assert admin(url, "/admin/weights/update", {"path": str(deltas["A->B"]), "version": 1})[0] == 200
    assert admin(url, "/admin/weights/update", {"path": str(deltas["B->C"]), "version": 2})[0] == 200
    assert status(url)["deltas"] == [str(deltas["A->B"]), str(deltas["B->C"])]
    code, answer = admin(url, "/admin/weights/update", {"path": str(deltas["C"]), "version": 3})
    assert code == 200, answer
    assert (status(url)["path"], status(url)["deltas"]) == (str(deltas["C"]), [])
    # C's content is what B->C gave, so a delta made from B is refused now only if its base differs:
    code, answer = admin(url, "/admin/weights/update", {"path": str(deltas["B->C"]), "version": 4})
    assert (code, answer["error"]["phase"]) == (409, "check")


def test_a_rollback_whose_delta_was_deleted_is_named(engines: Served, deltas: dict[str, Path]) -> None:
    stand_ins, _roots, url = engines
    assert admin(url, "/admin/weights/update", {"path": str(deltas["A->B"]), "version": 1})[0] == 200
    (deltas["A->B"] / "ng_delta.json").unlink()  # a trainer's rotation took it
    stand_ins[0].fail_reload_of = str(deltas["B->C"])
    code, answer = admin(url, "/admin/weights/update", {"path": str(deltas["B->C"]), "version": 2})
    assert code == 409, answer
    assert answer["error"]["rollback_failed"]
    assert "ROLLBACK FAILED" in answer["error"]["message"]
    assert "ng_delta.json" in answer["error"]["message"]
