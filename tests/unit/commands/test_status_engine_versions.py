"""ng_status's line per engine under a model server's weights line: its node and its version (issue 42)."""

from __future__ import annotations

from ng_cli.commands.status import _engine_versions


def test_each_engine_shows_its_node_and_version_and_one_out_of_the_pool_says_so() -> None:
    status = {
        "version": 3,
        "engine_versions": {
            "http://10.0.0.2:40117": 3,
            "http://10.0.0.3:41231": None,
            "http://10.0.0.9:1": 3,
        },
    }
    engines = [
        {
            "name": "policy_model/engine-0",
            "url": "http://10.0.0.2:40117",
            "node": "10.0.0.2",
            "node_id": "5c1e...e7",
        },
        {
            "name": "policy_model/engine-1",
            "url": "http://10.0.0.3:41231/",
            "node": "10.0.0.3",
            "node_id": "9a0b...12",
        },
    ]
    lines = _engine_versions(status, engines).splitlines()
    assert lines == [
        "",
        "  policy_model/engine-0 http://10.0.0.2:40117 on node 5c1e...e7 (10.0.0.2): version 3",
        "  policy_model/engine-1 http://10.0.0.3:41231 on node 9a0b...12 (10.0.0.3): not serving (version 3 when back)",
        "  engine http://10.0.0.9:1: version 3",  # not listed by the head: its URL only
    ]


def test_a_model_server_from_before_lists_no_engine_versions() -> None:
    assert _engine_versions({"version": 1}, []) == ""
