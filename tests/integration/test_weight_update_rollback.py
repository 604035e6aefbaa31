"""Fail-closed weight updates: one engine fails, every engine goes back, the version stays.

The real model server (local_vllm_model over two engines by `base_url`, `weight_updates: true`)
on loopback, over two stand-in engines (`tests/fixtures/weight_engines.py`): a real vLLM will not
fail a reload, hang a phase or answer different weights on demand, so these do (the real engines'
path is tests/engine/test_weight_updates.py).
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures import checkpoints
from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.weight_engines import MODEL, Served, StandIn, admin, failed_update, serve


@pytest.fixture
def engines() -> Iterator[Served]:
    yield from serve([StandIn(), StandIn()])


@pytest.fixture
def expert_ranks() -> Iterator[Served]:
    """The two endpoints of one expert-parallel group (external LB): rank 1 holds other experts,
    so its fingerprint differs from rank 0's on every checkpoint."""
    yield from serve(
        [StandIn(), StandIn(odd_fingerprint=True)],
        data_parallel_mode="external_lb",
        expert_parallel_size=2,
    )


def test_one_engine_failing_its_reload_puts_every_engine_back(engines: Served, tmp_path: Path) -> None:
    stand_ins, roots, url = engines
    stand_ins[1].fail_reload_of = str(tmp_path / "B")
    error = failed_update(url, tmp_path)
    assert (error["phase"], error["rolled_back"], error["version"]) == ("reload", True, 0)
    assert error["engine"] == roots[1]
    assert "every engine is back on version 0" in error["message"]
    assert all(one.holds == str(MODEL) and not one.paused for one in stand_ins)
    assert stand_ins[0].log == ["pause keep", "reload B", "reload tiny-weather", "reset", "resume"]
    assert admin(url, "/admin/weights")[1]["version"] == 0
    assert admin(url, "/admin/weights")[1]["admitting"] is True


def test_a_phase_past_its_deadline_is_named_and_rolled_back(engines: Served, tmp_path: Path) -> None:
    stand_ins, _roots, url = engines
    stand_ins[0].hang_pause = True
    error = failed_update(url, tmp_path)
    assert error["phase"] == "pause"
    assert "no answer within 1 s" in error["message"]
    assert stand_ins[1].log[-1] == "resume"  # the engine that did pause is resumed
    assert admin(url, "/admin/weights")[1]["admitting"] is True


def test_engines_that_disagree_after_the_same_load_are_refused(engines: Served, tmp_path: Path) -> None:
    stand_ins, _roots, url = engines
    stand_ins[1].odd_fingerprint = True
    assert failed_update(url, tmp_path)["phase"] == "verify"
    assert all(one.holds == str(MODEL) for one in stand_ins)


def test_expert_parallel_ranks_differ_by_design_and_roll_back_to_their_own(
    expert_ranks: Served, tmp_path: Path
) -> None:
    """Seen on two H200s (moe_dp2_ep2, external LB): the cross-engine check refused every update.
    Ranks are compared with themselves: the update passes, and a later failed one rolls each back
    to (and checks it against) its own fingerprint."""
    stand_ins, roots, url = expert_ranks
    good = checkpoints.swapped(MODEL, tmp_path / "B", "Ġdegrees", "ĠElacas")
    status, answer = admin(url, "/admin/weights/update", {"path": str(good), "version": 1})
    assert status == 200, answer
    assert all(one.holds == str(good) for one in stand_ins)
    stand_ins[0].fail_reload_of = str(tmp_path / "C")
    other = checkpoints.swapped(MODEL, tmp_path / "C", "Ġdegrees", "ĠElacas")
    status, answer = admin(url, "/admin/weights/update", {"path": str(other), "version": 2})
    assert status == 409, answer
    error = answer["error"]
    assert (error["phase"], error["rolled_back"], error["version"]) == ("reload", True, 1), error
    assert all(one.holds == str(good) and not one.paused for one in stand_ins)
    assert error["engine"] == roots[0]


def test_a_good_update_stamps_calls_and_a_wrong_key_is_refused(engines: Served, tmp_path: Path) -> None:
    stand_ins, roots, url = engines
    good = checkpoints.swapped(MODEL, tmp_path / "B", "Ġdegrees", "ĠElacas")
    assert admin(url, "/admin/weights/update", {"path": str(good), "version": 1}, key="wrong")[0] == 401
    status, answer = admin(url, "/admin/weights/update", {"path": str(good), "version": 2, "mode": "wait"})
    assert status == 200
    assert answer["version"] == 2
    assert set(answer["engines"]) == set(roots)
    assert all(one.holds == str(good) and one.log[0] == "pause wait" for one in stand_ins)
    request = urllib.request.Request(
        f"{url}/v1/chat/completions",
        data=json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        completion = json.loads(reply.read())
    assert completion["weight_version"]["start"] == completion["weight_version"]["end"] == 2
    assert completion["choices"][0]["message"]["content"] == "held B"


def test_a_tensor_push_gets_the_same_pause_version_and_cache_handling(
    engines: Served,
) -> None:
    stand_ins, _roots, url = engines
    status, begun = admin(url, "/admin/weights/begin", {"version": 3})
    assert status == 200
    assert begun["version"] == 3
    assert admin(url, "/admin/weights")[1]["admitting"] is False  # calls wait while the trainer pushes
    assert admin(url, "/admin/weights/begin", {"version": 4})[0] == 409  # one update at a time
    status, pushed = admin(url, "/admin/weights/push/update_weights", {"update_info": {"names": ["w"]}})
    assert status == 200
    assert len(pushed["results"]) == 2
    assert admin(url, "/admin/weights/push/collective_rpc", {})[0] == 409  # only the push routes
    status, committed = admin(url, "/admin/weights/commit", {})
    assert status == 200
    assert committed["version"] == 3
    state = admin(url, "/admin/weights")[1]
    assert (state["version"], state["path"], state["admitting"]) == (3, None, True)
    for one in stand_ins:
        assert one.log == ["pause keep", "start", "update_weights", "finish", "reset", "clear_kv", "resume"]


def test_an_aborted_push_goes_back_to_the_checkpoint_on_disk(
    engines: Served,
) -> None:
    stand_ins, _roots, url = engines
    assert admin(url, "/admin/weights/begin", {"version": 3})[0] == 200
    admin(url, "/admin/weights/push/update_weights", {"update_info": {}})
    status, aborted = admin(url, "/admin/weights/abort", {})
    assert status == 200
    assert (aborted["version"], aborted["rolled_back"]) == (0, True)
    assert all(one.holds == str(MODEL) and not one.paused for one in stand_ins)
    assert admin(url, "/admin/weights")[1]["admitting"] is True


def test_a_push_left_open_is_aborted_when_its_lease_ends(
    engines: Served,
) -> None:
    stand_ins, _roots, url = engines
    assert admin(url, "/admin/weights/begin", {"version": 3})[0] == 200
    deadline = time.monotonic() + HANG_CAP_S
    while admin(url, "/admin/weights")[1]["pushing"] and time.monotonic() < deadline:
        time.sleep(0.1)
    state = admin(url, "/admin/weights")[1]
    assert (state["pushing"], state["admitting"], state["version"]) == (False, True, 0)
    assert all(one.log[-1] == "resume" for one in stand_ins)


def test_expert_parallel_ranks_must_agree_on_their_non_expert_weights(tmp_path: Path) -> None:
    """Each rank's fingerprint also digests its weights but the experts' (replicated on every rank):
    ranks that disagree there after the same load are refused, and go back."""
    for stand_ins, roots, url in serve(
        [StandIn(), StandIn(odd_fingerprint=True)], data_parallel_mode="external_lb", expert_parallel_size=2
    ):
        good = checkpoints.swapped(MODEL, tmp_path / "B", "Ġdegrees", "ĠElacas")
        status, answer = admin(url, "/admin/weights/update", {"path": str(good), "version": 1})
        assert status == 200, answer  # other experts, same rest: fine
        other = checkpoints.swapped(MODEL, tmp_path / "C", "It", "ĠCassul")
        stand_ins[1].odd_shared_for = str(other)
        status, answer = admin(url, "/admin/weights/update", {"path": str(other), "version": 2})
        assert status == 409, answer
        assert answer["error"]["phase"] == "verify"
        assert answer["error"]["engine"] == roots[1]
        assert "other than the experts'" in answer["error"]["message"]
        assert all(one.holds == str(good) and not one.paused for one in stand_ins)


def test_an_expert_parallel_rank_whose_experts_differ_from_the_files_fails_and_goes_back(
    tmp_path: Path,
) -> None:
    """Each rank's experts are compared with what the files hold for it after the load (its
    fingerprint vouches only for itself): a rank that differs fails verify, named with the layer and
    expert its worker reported, and every rank goes back; the update that passes lists each rank's
    check."""
    for stand_ins, roots, url in serve(
        [StandIn(), StandIn(odd_fingerprint=True)], data_parallel_mode="external_lb", expert_parallel_size=2
    ):
        good = checkpoints.swapped(MODEL, tmp_path / "B", "Ġdegrees", "ĠElacas")
        status, answer = admin(url, "/admin/weights/update", {"path": str(good), "version": 1})
        assert status == 200, answer
        assert answer["experts"] == {root: [{"checked": 8, "exact": 8, "unchecked": None}] for root in roots}
        other = checkpoints.swapped(MODEL, tmp_path / "C", "It", "ĠCassul")
        stand_ins[1].odd_experts_for = str(other)
        status, answer = admin(url, "/admin/weights/update", {"path": str(other), "version": 2})
        assert status == 409, answer
        assert (answer["error"]["phase"], answer["error"]["engine"]) == ("verify", roots[1])
        assert "EP rank 1 of 2" in answer["error"]["message"]
        assert "model.layers.0.mlp.experts expert 9 (w13)" in answer["error"]["message"]
        assert answer["error"]["rolled_back"] is True
        assert all(one.holds == str(good) and not one.paused for one in stand_ins)
        assert admin(url, "/admin/weights")[1]["version"] == 1
