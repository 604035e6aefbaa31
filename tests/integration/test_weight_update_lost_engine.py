"""Issue 42: an engine lost during a weight update (its node died) leaves the update; the rest commit.

The real model server over two stand-in engines (`tests/fixtures/weight_engines.py`): the second
holds its pause until the test has stopped its server, as a node that dies mid-update leaves a
connection cut and a port nobody answers. A failure of an engine that still answers `/health`
rolls everything back, as before (tests/integration/test_weight_update_rollback.py).
"""

from __future__ import annotations

import threading
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from ng_cli.config.schema import validate_block
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.testing import serve_in_thread
from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.weight_engines import APP, KEY, MODEL, Hold, StandIn, admin, good_checkpoint, status


def test_an_engine_lost_mid_update_is_left_out_named_and_the_other_commits(tmp_path: Path) -> None:
    kept, lost = StandIn(), StandIn(hold_pause=Hold())
    with ExitStack() as stack:
        kept_url = stack.enter_context(serve_in_thread(kept.app()))
        lost_server = ExitStack()
        lost_url = lost_server.enter_context(serve_in_thread(lost.app()))
        stack.callback(lost_server.close)
        server_class = load_server_class(APP)
        block: dict[str, Any] = {
            "base_url": [f"{kept_url}/v1", f"{lost_url}/v1"],
            "api_key": KEY,
            "model": "models/tiny-weather",
            "return_token_id_information": False,
            "uses_reasoning_parser": False,
            "weight_updates": True,
            "health_probe_interval_s": 3600,  # the update, not a probe, finds the engine gone
            "weight_update_deadlines": {"pause_s": HANG_CAP_S},
        }
        server = server_class(validate_block(server_class.config_class, block=block), name="policy_model")
        url = stack.enter_context(serve_in_thread(server.build_app()))
        checkpoint = good_checkpoint(tmp_path)
        outcome: dict[str, Any] = {}

        def update() -> None:
            outcome["answer"] = admin(url, "/admin/weights/update", {"path": str(checkpoint), "version": 1})

        updating = threading.Thread(target=update)
        updating.start()
        assert lost.hold_pause is not None
        assert lost.hold_pause.entered.wait(HANG_CAP_S)
        lost_server.close()  # its node dies: the held pause's connection is cut, the port closed
        updating.join(HANG_CAP_S)
        assert not updating.is_alive()
        code, answer = outcome["answer"]
        assert code == 200, answer
        assert answer["version"] == 1
        assert list(answer["problems"]) == [lost_url]
        assert "lost in phase pause" in answer["problems"][lost_url]
        assert kept.holds == str(checkpoint)
        assert (
            kept.log
            == ["pause keep", f"reload {checkpoint.name}", "reset", "clear_kv", "resume"][: len(kept.log)]
        )
        assert not kept.paused
        now = status(url)
        assert now["version"] == 1
        assert now["serving"] == [kept_url]
        assert now["engine_versions"] == {kept_url: 1, lost_url: None}
        assert "lost in phase pause" in now["held_out"][lost_url]
        assert str(MODEL) == lost.holds  # it never loaded anything: it rejoins through restore
