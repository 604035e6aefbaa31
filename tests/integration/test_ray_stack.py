"""ng_run on an existing Ray cluster (`ray.address: host:port`), as a user who shares one would run it.

The test starts its own single-node cluster (`ray start --head --block`, in its own session, so
teardown ends exactly it and never another user's `ray stop` victims), puts "someone else's"
detached actor and placement group on it, then runs the fixture stack with two servers as actors:
they serve, on loopback only (the default; `ray.servers_listen_on: node` opens them on the node's
address), ng_status shows their node and actor, no secret is in any process's argv or the
cluster's logs, and after Ctrl-C our actors and processes are gone while the other user's remain.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.ray_required import require_ray
from tests.fixtures.stack.harness import MARKER_VAR, SECRET, Launcher, marked_pids, run_script

pytestmark = [pytest.mark.integration, pytest.mark.ray]

require_ray()

_CLUSTER_STATE = """
import json, sys, ray
from ray.util.placement_group import placement_group_table
ray.init(address=sys.argv[1], namespace="someone_else", log_to_driver=False)
groups = [{"name": g["name"], "state": g["state"]} for g in placement_group_table().values()]
print(json.dumps({"actors": ray.util.list_named_actors(all_namespaces=True), "groups": groups}))
"""
_SOMEONE_ELSE = """
import sys, ray
from ray.util.placement_group import placement_group
ray.init(address=sys.argv[1], namespace="someone_else", log_to_driver=False)
@ray.remote(num_cpus=0)
class Other:
    def ping(self):
        return "pong"
actor = Other.options(name="someone-elses-actor", lifetime="detached").remote()
ray.get(actor.ping.remote())
ray.get(placement_group([{"CPU": 0.5}], name="someone-elses-group", lifetime="detached").ready())
"""


def _python(script: str, address: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script, address], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _state(address: str) -> dict[str, Any]:
    return dict(json.loads(_python(_CLUSTER_STATE, address).strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[str, Path]]:
    """A one-node Ray cluster of this test's own: (address, its temp dir)."""
    temp_dir = Path(f"/tmp/ngr-{uuid.uuid4().hex[:8]}")  # short: Ray's socket paths have a length limit
    marker = uuid.uuid4().hex
    # No token: Ray 2.5x's token auth would need the token handed to every driver (ng_run's too).
    auth_mode = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray_cli = Path(sys.executable).with_name("ray")
    process = subprocess.Popen(
        [str(ray_cli), "start", "--head", "--port=0", "--num-cpus=4", "--object-store-memory=100000000",
         "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp_dir}", "--block"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, MARKER_VAR: marker},
    )  # fmt: skip
    try:
        address = None
        assert process.stdout is not None
        for line in process.stdout:
            found = re.search(r"ray start --address='([^']+)'", line)
            if found:
                address = found[1]
            if ("--block" in line or "Ray runtime started" in line) and address:
                break
        assert address, "ray start did not print the cluster's address"
        _python(_SOMEONE_ELSE, address)
        yield address, temp_dir
    finally:
        for signum in (signal.SIGTERM, signal.SIGKILL):
            if process.poll() is None:
                os.killpg(process.pid, signum)
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    continue
        for pid in marked_pids(marker):  # a Ray process that left the group
            os.kill(pid, signal.SIGKILL)
        if auth_mode is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = auth_mode


def test_servers_as_actors_on_an_existing_cluster_ctrl_c_removes_only_ours(
    tmp_path: Path, cluster: tuple[str, Path]
) -> None:
    address, temp_dir = cluster
    launcher = Launcher(tmp_path)
    try:
        run = launcher.start(f"++ray.address={address}", "++ray.servers={tools_a: 1, policy_model: 0.5}")
        stack = run.wait_ready()
        run_id = stack["ray"]["run_id"]
        servers = {server["name"]: server for server in stack["servers"]}
        assert servers["tools_a"]["actor"] == f"ng-{run_id}-server-tools_a"
        assert servers["policy_model"]["actor"] == f"ng-{run_id}-server-policy_model"
        assert servers["tools_b"]["actor"] is None  # not listed: a plain child of ng_run
        # Server actors listen on loopback, as ng_run's own children do: not on the network.
        node_ip = servers["tools_a"]["node"]
        assert node_ip not in ("127.0.0.1", None)
        for name in ("tools_a", "policy_model"):
            assert servers[name]["url"].startswith("http://127.0.0.1:"), servers[name]
            port = int(servers[name]["url"].rsplit(":", 1)[1])
            assert _accepts(("127.0.0.1", port))
            assert not _accepts((node_ip, port)), f"{name} answers on {node_ip}:{port}"

        ours = {f"ng-{run_id}-server-tools_a", f"ng-{run_id}-server-policy_model"}
        live = {entry["name"] for entry in _state(address)["actors"] if entry["namespace"] == "ng_cli"}
        assert ours <= live
        status = run_script("ng_status", f"+head_server_url={stack['head_url']}")
        assert status.returncode == 0, status.stdout + status.stderr
        assert f"ng-{run_id}-server-policy_model" in status.stdout.replace("\n", "")

        # The model server's key reached it through the object store: no argv and no Ray log has it.
        pids = [server["pid"] for server in stack["servers"]] + [server["actor_pid"] for server in
                                                                  stack["servers"] if server["actor"]]  # fmt: skip
        for pid in pids:
            assert SECRET.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
        for log in temp_dir.rglob("*"):
            if log.is_file() and log.stat().st_size < 50_000_000:
                assert SECRET.encode() not in log.read_bytes(), log

        run.process.send_signal(signal.SIGINT)
        assert run.wait_exit(timeout_s=HANG_CAP_S) == 130
        assert f"removed 2 actors and 0 placement groups of run {run_id}" in run.output
        state = _state(address)
        names = {entry["name"] for entry in state["actors"]}
        assert not names & ours
        assert "someone-elses-actor" in names
        groups = {group["name"]: group["state"] for group in state["groups"]}
        assert groups["someone-elses-group"] == "CREATED"
        # A killed actor's worker is reaped by its raylet, asynchronously: wait for that event
        # (10 s was a race on 2 busy cores).
        deadline = time.monotonic() + HANG_CAP_S
        while any(_is_running(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [pid for pid in pids if _is_running(pid)] == []
    finally:
        launcher.cleanup()


def _accepts(address: tuple[str, int]) -> bool:
    try:
        socket.create_connection(address, timeout=3).close()
    except OSError:
        return False
    return True


def test_servers_listen_on_the_node_address_only_when_the_config_says_so(
    tmp_path: Path, cluster: tuple[str, Path]
) -> None:
    address, _ = cluster
    launcher = Launcher(tmp_path)
    try:
        run = launcher.start(
            f"++ray.address={address}", "++ray.servers=[tools_a]", "++ray.servers_listen_on=node"
        )
        stack = run.wait_ready()
        tools_a = next(server for server in stack["servers"] if server["name"] == "tools_a")
        assert tools_a["url"] == f"http://{tools_a['node']}:{tools_a['url'].rsplit(':', 1)[1]}"
        assert _accepts((tools_a["node"], int(tools_a["url"].rsplit(":", 1)[1])))
        run.process.send_signal(signal.SIGINT)
        assert run.wait_exit(timeout_s=HANG_CAP_S) == 130
    finally:
        launcher.cleanup()


def _is_running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_dead_server_actor_is_reported_by_name_with_its_last_lines(
    tmp_path: Path, cluster: tuple[str, Path]
) -> None:
    address, _ = cluster
    launcher = Launcher(tmp_path)
    try:
        run = launcher.start(f"++ray.address={address}", "++ray.servers=[tools_a]")
        stack = run.wait_ready()
        run_id = stack["ray"]["run_id"]
        tools_a = next(server for server in stack["servers"] if server["name"] == "tools_a")
        os.kill(int(tools_a["actor_pid"]), signal.SIGKILL)  # what an OOM kill or a lost node does

        assert run.wait_exit(timeout_s=HANG_CAP_S) == 1
        assert (
            f"server 'tools_a' (pid {tools_a['pid']}) exited while the stack was running: its Ray actor "
            f"ng-{run_id}-server-tools_a on node {tools_a['node_id']} ({tools_a['node']}) died (the process "
            "died with it)" in run.output  # its node lives: no "node lost", and the stack stops
        )
        report = run.output.split("exited while the stack was running", 1)[1]
        assert re.search(r"last \d+ lines of 'tools_a':\n  \[tools_a\] tools_a: hello from tools_a", report)
        names = {entry["name"] for entry in _state(address)["actors"]}
        assert not any(name.startswith(f"ng-{run_id}-") for name in names)
    finally:
        launcher.cleanup()
