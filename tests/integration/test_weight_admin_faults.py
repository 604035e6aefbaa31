"""What trainers do to the weight-admin routes: give up on a call, let a lease run out during a slow
commit, wake engines mid-update, send odd numbers and bodies (issue 43).

The real model server over stand-in engines (`tests/fixtures/weight_engines.py`); a phase the test
must act in is held on an event, and the test acts once the server has seen what it waits for (the
client's disconnect is logged by `servers/disconnect.py`). The real engines' side of points 1, 3 and
4 is tests/engine/test_weight_update_faults.py.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import os
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ng_cli.servers.testing import serve_in_thread
from tests.fixtures import checkpoints
from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.stack_process import StackProcess, console_script
from tests.fixtures.weight_engines import (
    KEY,
    MODEL,
    ROOT,
    Hold,
    StandIn,
    admin,
    good_checkpoint,
    serve,
    status,
)

served = contextlib.contextmanager(serve)


def wait_until(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + HANG_CAP_S
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def idle(url: str) -> bool:
    return status(url)["running"] is None and not status(url)["updating"]


class GoneClient:
    """An admin call whose client goes away before the answer (a timeout, Ctrl-C)."""

    def __init__(self, url: str, route: str, body: Any) -> None:
        parts = urllib.parse.urlsplit(url)
        self.connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=HANG_CAP_S)
        payload = json.dumps(body).encode()
        headers = {"Authorization": "Bearer engines-key-0123456789", "Content-Type": "application/json"}
        self.connection.request("POST", route, body=payload, headers=headers)
        self.route = route

    def leave(self, caplog: pytest.LogCaptureFixture) -> None:
        """Close the connection, and return once the server has cancelled the call's handler (it
        logs `POST <route> cancelled`: servers/app.py)."""
        self.connection.close()
        wait_until(lambda: f"POST {self.route} cancelled" in caplog.text, "the server to see the client go")


@pytest.fixture
def disconnects(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="ng_cli.servers")
    return caplog


def test_an_update_whose_client_goes_away_runs_to_its_end(
    tmp_path: Path, disconnects: pytest.LogCaptureFixture
) -> None:
    """Point 1: the client left during the reload; the update still applied, engines resumed."""
    good = good_checkpoint(tmp_path)
    hold = Hold()
    with served([StandIn(hold_reload_of={str(good): hold}), StandIn()]) as (stand_ins, _roots, url):
        client = GoneClient(url, "/admin/weights/update", {"path": str(good), "version": 1001})
        assert hold.entered.wait(HANG_CAP_S)
        client.leave(disconnects)
        assert status(url)["running"]["phase"] == "reload"  # the operation lives on, named
        hold.release.set()
        wait_until(lambda: idle(url), "the update to end")
        state = status(url)
        assert (state["version"], state["admitting"], state["path"]) == (1001, True, str(good))
        assert state["last_outcome"]["outcome"] == "done"
        assert all(one.holds == str(good) and not one.paused for one in stand_ins)


def test_a_failing_update_whose_client_goes_away_still_rolls_back(
    tmp_path: Path, disconnects: pytest.LogCaptureFixture
) -> None:
    good = good_checkpoint(tmp_path)
    hold = Hold()
    stand_ins = [StandIn(hold_reload_of={str(good): hold}, fail_reload_of=str(good)), StandIn()]
    with served(stand_ins) as (_, _roots, url):
        client = GoneClient(url, "/admin/weights/update", {"path": str(good), "version": 5})
        assert hold.entered.wait(HANG_CAP_S)
        client.leave(disconnects)
        hold.release.set()
        wait_until(lambda: idle(url), "the rollback to end")
        state = status(url)
        assert (state["version"], state["admitting"]) == (0, True)
        assert state["last_outcome"]["outcome"] == "rolled_back"
        assert "failed on engine" in state["last_outcome"]["error"]
        assert all(one.holds == str(MODEL) and not one.paused for one in stand_ins)


def test_a_begin_whose_client_goes_away_is_aborted_by_its_lease(
    disconnects: pytest.LogCaptureFixture,
) -> None:
    hold = Hold()
    stand_in = StandIn(hold_pause=hold)
    with served([stand_in], deadlines={"pause_s": HANG_CAP_S}) as (_, _roots, url):
        client = GoneClient(url, "/admin/weights/begin", {"version": 3})
        assert hold.entered.wait(HANG_CAP_S)
        client.leave(disconnects)
        hold.release.set()
        wait_until(lambda: not status(url)["pushing"] and idle(url), "the push's lease to abort it")
        state = status(url)
        assert (state["version"], state["admitting"]) == (0, True)
        assert not stand_in.paused


def test_a_commit_owns_the_push_the_lease_cannot_abort_beside_it() -> None:
    """Point 2: the lease ran out during a slow commit. It must not abort beside the commit, release
    the lock of the next update, or let the first commit set the version back."""
    finish = Hold()
    stand_ins = [StandIn(hold_finish=finish), StandIn()]
    with served(stand_ins, deadlines={"push_lease_s": 0.5}) as (_, _roots, url):
        assert admin(url, "/admin/weights/begin", {"version": 21})[0] == 200
        committed: list[tuple[int, Any]] = []
        thread = threading.Thread(target=lambda: committed.append(admin(url, "/admin/weights/commit", {})))
        thread.start()
        assert finish.entered.wait(HANG_CAP_S)
        # the lease (0.5 s) runs out while the commit holds the push; nothing may move meanwhile
        time.sleep(1.0)
        assert status(url)["pushing"] is True
        assert admin(url, "/admin/weights/begin", {"version": 22})[0] == 409
        finish.release.set()
        thread.join(HANG_CAP_S)
        assert committed[0][0] == 200, committed
        assert committed[0][1]["version"] == 21
        assert admin(url, "/admin/weights/begin", {"version": 22})[0] == 200
        assert admin(url, "/admin/weights/commit", {})[0] == 200
        assert status(url)["version"] == 22
        for one in stand_ins:  # one finish per push: no abort ran beside the commit
            assert one.log.count("finish") == 2
            assert one.log.count("resume") == 2


def test_commit_and_abort_after_the_lease_aborted_the_push_are_refused() -> None:
    stand_ins = [StandIn()]
    with served(stand_ins, deadlines={"push_lease_s": 0.2}) as (_, _roots, url):
        assert admin(url, "/admin/weights/begin", {"version": 3})[0] == 200
        wait_until(lambda: not status(url)["pushing"], "the lease to abort the push")
        code, answer = admin(url, "/admin/weights/commit", {})
        assert code == 409
        assert "no tensor push is open" in answer["error"]["message"]
        assert status(url)["version"] == 0
        assert admin(url, "/admin/weights/begin", {"version": 3})[0] == 200  # the lock was released once


def test_wake_up_during_an_update_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    """Point 5: wake_up mid-reload resumed the engines and reopened admission."""
    good = good_checkpoint(tmp_path)
    hold = Hold()
    stand_ins = [StandIn(hold_reload_of={str(good): hold})]
    with served(stand_ins) as (_, _roots, url):
        thread = threading.Thread(
            target=lambda: admin(url, "/admin/weights/update", {"path": str(good), "version": 2})
        )
        thread.start()
        assert hold.entered.wait(HANG_CAP_S)
        code, answer = admin(url, "/admin/wake_up", {})
        assert code == 409
        assert "not asleep" in answer["error"]["message"]
        assert status(url)["admitting"] is False
        assert stand_ins[0].paused
        assert "resume" not in stand_ins[0].log
        hold.release.set()
        thread.join(HANG_CAP_S)
        assert status(url)["version"] == 2


def test_sleep_has_a_lease_and_wakes_itself() -> None:
    """Point 11: with no wake_up, calls waited forever while /health said up."""
    stand_ins = [StandIn()]
    with served(stand_ins, deadlines={"sleep_lease_s": 0.5}) as (_, _roots, url):
        code, slept = admin(url, "/admin/sleep", {"level": 1})
        assert code == 200
        assert slept["lease_s"] == 0.5
        wait_until(lambda: not status(url)["sleeping"], "the sleep lease to wake the engines")
        assert status(url)["admitting"] is True
        assert stand_ins[0].log[-2:] == ["wake_up", "resume"]


@pytest.mark.parametrize(
    "version",
    [True, "1", 2.0, 1e30, 2**63, 0, -1, None],
    ids=["true", "string", "float", "1e30", "2^63", "zero", "negative", "null"],
)
def test_versions_are_json_integers_in_range(version: Any, tmp_path: Path) -> None:
    """Points 7 and 9: 1e30 was applied, then every call answered 500; true, "1" and 2.0 passed."""
    with served([StandIn()]) as (stand_ins, _roots, url):
        for route, body in (
            ("/admin/weights/update", {"path": str(good_checkpoint(tmp_path)), "version": version}),
            ("/admin/weights/begin", {"version": version}),
        ):
            code, answer = admin(url, route, body)
            assert code == 400, answer
            assert "version" in answer["error"]["message"]
        assert stand_ins[0].log == []
        assert status(url)["version"] == 0


def test_sleep_level_is_strict() -> None:
    with served([StandIn()]) as (stand_ins, _roots, url):
        assert admin(url, "/admin/sleep", {"level": True})[0] == 400
        assert stand_ins[0].log == []


def test_a_non_json_push_body_is_a_400_and_get_world_size_is_a_get() -> None:
    """Point 10 and the new user's 405: vLLM serves get_world_size as GET."""
    with served([StandIn()]) as (stand_ins, _roots, url):
        assert admin(url, "/admin/weights/begin", {"version": 3})[0] == 200
        code, answer = admin(url, "/admin/weights/push/update_weights", raw=b"not json{")
        assert code == 400, answer
        code, answer = admin(url, "/admin/weights/push/get_world_size", {})
        assert code == 200, answer
        assert answer["results"] == [{"world_size": 1}]
        assert "get_world_size" in stand_ins[0].log
        assert admin(url, "/admin/weights/abort", {})[0] == 200


def test_a_deeply_nested_checkpoint_header_is_refused_by_name(tmp_path: Path) -> None:
    """Point 10: a header nested 200,000 deep answered 500 internal error."""
    deep = tmp_path / "deep"
    checkpoints.write(deep / "model.safetensors", {"x": 0}, b"")
    header = b"[" * 200_000 + b"]" * 200_000
    (deep / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)
    with served([StandIn()]) as (_, _roots, url):
        code, answer = admin(url, "/admin/weights/update", {"path": str(deep), "version": 1})
        assert code == 409, answer
        assert "not a safetensors file" in answer["error"]["message"]


def test_a_checkpoint_file_that_blocks_is_refused_and_calls_go_on(tmp_path: Path) -> None:
    """Point 6: a FIFO named *.safetensors froze every call and /health for 38 s."""
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "model.safetensors")
    with served([StandIn()]) as (_, _roots, url):
        code, answer = admin(url, "/admin/weights/update", {"path": str(fifo), "version": 1})
        assert code == 409, answer
        assert "not a regular file" in answer["error"]["message"]
        assert status(url)["admitting"] is True


def test_a_failed_rollback_is_named_and_the_next_update_brings_the_engine_back(tmp_path: Path) -> None:
    """Point 3 (the stand-ins' side): D deleted after it was loaded, then a reload that fails."""
    d = good_checkpoint(tmp_path, "D")
    e = checkpoints.swapped(MODEL, tmp_path / "E", "It", "ĠCassul")
    with served([StandIn(fail_reload_of=str(e)), StandIn()]) as (stand_ins, roots, url):
        assert admin(url, "/admin/weights/update", {"path": str(d), "version": 1})[0] == 200
        for file in d.iterdir():
            file.unlink()
        d.rmdir()
        code, answer = admin(url, "/admin/weights/update", {"path": str(e), "version": 2})
        error = answer["error"]
        assert code == 409
        assert error["rolled_back"] is False
        assert set(error["rollback_failed"]) == set(roots)  # neither could reload D
        assert "ROLLBACK FAILED" in error["message"]
        assert "is gone" in error["message"]
        state = status(url)
        assert set(state["held_out"]) == set(roots)
        assert state["serving"] == []
        assert state["last_outcome"]["outcome"] == "rollback_failed"
        assert all(one.paused for one in stand_ins)  # held out, paused: nothing serves unknown weights
        f = good_checkpoint(tmp_path, "F")
        code, answer = admin(url, "/admin/weights/update", {"path": str(f), "version": 3})
        assert code == 200, answer
        state = status(url)
        assert (state["version"], state["held_out"], sorted(state["serving"])) == (3, {}, sorted(roots))
        assert all(one.holds == str(f) and not one.paused for one in stand_ins)


def test_non_finite_weights_are_refused_at_verify(tmp_path: Path) -> None:
    nan = good_checkpoint(tmp_path, "nan")
    with served([StandIn(non_finite_for=str(nan)), StandIn()]) as (stand_ins, _roots, url):
        code, answer = admin(url, "/admin/weights/update", {"path": str(nan), "version": 1})
        assert code == 409
        assert answer["error"]["phase"] == "verify"
        assert "NaN or infinite" in answer["error"]["message"]
        assert all(one.holds == str(MODEL) and not one.paused for one in stand_ins)


def test_a_base_url_stack_with_weight_updates_lists_its_admin_routes(tmp_path: Path) -> None:
    """Point 8: the server took updates, but /servers listed no `admin`, so ng_update_weights said
    "set weight_updates: true"."""
    stand_in = StandIn()
    with serve_in_thread(stand_in.app()) as engine:
        config = tmp_path / "model.yaml"
        config.write_text(
            "policy_model:\n  responses_api_models:\n    local_vllm_model:\n      entrypoint: app.py\n"
            f"      base_url: {engine}/v1\n      api_key: {KEY}\n      model: models/tiny-weather\n"
            "      return_token_id_information: false\n      uses_reasoning_parser: false\n"
            "      weight_updates: true\n"
        )
        (tmp_path / "env.yaml").write_text("{}\n")
        env = {
            **os.environ,
            "NG_ENV_YAML": str(tmp_path / "env.yaml"),
            "NG_STATE_DIR": str(tmp_path / "state"),
        }
        ready, log_path = tmp_path / "ready.json", tmp_path / "ng_run.log"
        stack = StackProcess.start(
            [str(console_script("ng_run")), f"+config_paths=[{config}]", "++head_server.port=0", f"+ready_file={ready}"],
            env=env, cwd=ROOT, ready_file=ready, log_path=log_path, timeout_s=HANG_CAP_S,
        )  # fmt: skip
        try:
            good = good_checkpoint(tmp_path)
            done = subprocess.run(
                [str(console_script("ng_update_weights")), f"+path={good}", "+version=1",
                 f"+head_server_url={stack.head_url}"],
                cwd=ROOT, env=env, capture_output=True, text=True, timeout=HANG_CAP_S,
            )  # fmt: skip
            assert done.returncode == 0, done.stdout + done.stderr
            assert stand_in.holds == str(good)
        finally:
            stack.stop()


def test_begin_without_a_transfer_backend_is_refused_before_any_pause() -> None:
    """The new user's `begin()` on a stack without `weight_transfer`: vLLM's raw 500, then a failed
    rollback. Engines at a base_url say their backend by the same key."""
    with served([StandIn()], weight_transfer="none") as (stand_ins, _roots, url):
        code, answer = admin(url, "/admin/weights/begin", {"version": 1})
        assert code == 409, answer
        assert "takes no tensor push" in answer["error"]["message"]
        assert stand_ins[0].log == []
        assert status(url)["admitting"] is True
