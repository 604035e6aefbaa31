"""Issue 42: weight updates reach CPU vLLM engines on every node of a real multi-node Ray cluster.

The cluster is made on this machine from separate raylets (`tests/fixtures/ray_cluster.py`, Ray's
default health checks): a head with no CPUs (ng_run, its model server, environment and agent run
there as plain processes) and two worker nodes of 1 CPU, so the two engines (`data_parallel_size:
2`) land one on each. The workers run in a mount namespace of their own where one directory shows
empty (a tmpfs over it): a checkpoint written there is "only on the head". One stack serves every
test here, in order:

1. `ng_update_weights` to B, then C, during a collection: 0 lost, every probe generated wholly
   under a version answers as that version's checkpoint, both engines then serve C; ng_status
   shows each engine's node and version.
2. A checkpoint only on the head is refused before any engine is paused, naming both engines.
3. No port of the stack or the cluster on a non-loopback address answers vLLM's admin routes
   without the engine's own admin key (not even with the engines' key, which the trainer holds);
   no key appears in any process's argv or in any log of ng_run or the cluster.
4. A worker node dies during an update (frozen, the update started, SIGKILLed while the update
   waits on its pause): the update ends, its engine named as lost, the other commits; Ray
   re-places the engine on a node the test adds, and it loads the current version before it
   serves (fingerprints equal, probes answer as C).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ng_cli.launcher.admin_keys import admin_key
from ng_cli.training import WeightsClient
from ng_cli.upstream.weights import WeightUpdateError
from tests.engine.test_weight_updates import (
    MODEL,
    answer_text,
    calls_of,
    collect,
    finished,
    probe,
    still_running,
    whole_probe_under,
)
from tests.fixtures import checkpoints
from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.engine_env import require_vllm_env
from tests.fixtures.engine_stack import (
    ENGINE_KEY,
    EXAMPLE_ENV_CONFIG,
    ROOT,
    EngineStack,
    engine_stack,
    wait_for,
)
from tests.fixtures.ray_cluster import Cluster
from tests.fixtures.ray_required import require_ray
from tests.fixtures.stack.harness import marked_pids
from tests.fixtures.stack_process import console_script

pytestmark = [pytest.mark.integration, pytest.mark.engine, pytest.mark.slow]

CPU_CONFIG = "responses_api_models/local_vllm_model/configs/tiny_weather_cpu.yaml"
ANSWERS = {"A": "21 degrees celsius", "B": "21 Elacas celsius", "C": "Cassul is sunny"}
"""What each checkpoint's probe answer holds (tests/fixtures/checkpoints.py)."""
ADMIN_ROUTES = ("/pause?mode=keep", "/collective_rpc", "/sleep?level=1", "/reset_prefix_cache")
_HIDING = """#!/bin/sh
exec unshare --mount --propagation private /bin/sh -c 'mount -t tmpfs -o size=1m ng-hidden "$0" && exec "$@"' \\
  {hidden} {ray} "$@"
"""


def _can_hide() -> bool:
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", "mount -t tmpfs none /mnt"],
        capture_output=True, check=False,
    )  # fmt: skip
    return done.returncode == 0


@pytest.fixture(scope="module")
def hidden(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """A directory the worker nodes see empty (None where mount namespaces are not allowed)."""
    return tmp_path_factory.mktemp("head_only") if _can_hide() else None


@pytest.fixture(scope="module")
def cluster(hidden: Path | None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    require_vllm_env()
    require_ray()
    made = Cluster()
    try:
        made.start_head()  # Ray's default health checks
        if hidden is not None:  # every worker node (the one added later too) in its own mount namespace
            wrapper = tmp_path_factory.mktemp("bin") / "ray"
            wrapper.write_text(_HIDING.format(hidden=hidden, ray=made.ray))
            wrapper.chmod(0o755)
            made.ray = wrapper
        made.add_node()
        made.add_node()
        yield made
    finally:
        made.stop()


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory: pytest.TempPathFactory, hidden: Path | None) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("checkpoints")
    made = {
        "B": checkpoints.swapped(MODEL, base / "B", "Ġdegrees", "ĠElacas"),
        "C": checkpoints.swapped(MODEL, base / "C", "It", "ĠCassul"),
    }
    if hidden is not None:
        made["head_only"] = checkpoints.swapped(MODEL, hidden / "B", "Ġdegrees", "ĠElacas")
    return made


@pytest.fixture(scope="module")
def stack(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineStack]:
    overrides = [
        f"++{ENGINE_KEY}.weight_updates=true",
        f"++{ENGINE_KEY}.vllm_serve_kwargs.data_parallel_size=2",
        f"++{ENGINE_KEY}.health_probe_interval_s=1",
        f"++{ENGINE_KEY}.engine_ready_timeout_s=900",  # a loaded 2-core machine
        f"++{ENGINE_KEY}.weight_update_deadlines.check_s=10",
        f"++ray.address={cluster.address}",
        "++ray.capacity_wait_s=900",
    ]
    with engine_stack(
        tmp_path_factory.mktemp("stack"), [EXAMPLE_ENV_CONFIG, CPU_CONFIG], overrides
    ) as running:
        yield running


@pytest.fixture(scope="module")
def client(stack: EngineStack) -> WeightsClient:
    return WeightsClient.connect(stack.process.head_url, timeout_s=HANG_CAP_S)


def roots(stack: EngineStack) -> list[str]:
    return [str(engine["url"]).removesuffix("/v1") for engine in _get(f"{stack.process.head_url}/engines")]


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


def update_cli(stack: EngineStack, path: Path, version: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(console_script("ng_update_weights")), f"+path={path}", f"+version={version}",
         f"+head_server_url={stack.process.head_url}"],
        cwd=ROOT, env=stack.env, capture_output=True, text=True, timeout=HANG_CAP_S,
    )  # fmt: skip


def status_of(url: str, *, key: str | None, data: bytes | None = b"{}") -> int | str:
    """The HTTP status `url` answers (with `Bearer key`), or why there was none (not HTTP, refused)."""
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {key}"} if key else {})
    request = urllib.request.Request(
        url, data=data, headers=headers, method="POST" if data is not None else "GET"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except (OSError, ValueError, http.client.HTTPException) as error:  # a gRPC port: no HTTP answer
        return type(error).__name__


def admin_key_of(engine_pid: int) -> str:
    """An engine's own admin key, read where only this machine's root can: its environment."""
    environ = Path(f"/proc/{engine_pid}/environ").read_bytes().split(b"\0")
    return next(
        entry.split(b"=", 1)[1].decode() for entry in environ if entry.startswith(b"NG_ENGINE_ADMIN_KEY=")
    )


def fingerprint(root: str, key: str) -> list[str]:
    body = json.dumps({"method": "ng_weights_fingerprint"}).encode()
    request = urllib.request.Request(
        f"{root}/collective_rpc",
        data=body,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as answer:
        return list(json.loads(answer.read())["results"])


def probes_on_both(stack: EngineStack, count: int = 8) -> set[str]:
    """`count` probes at once (so the pool spreads them over the engines); their answers."""
    with ThreadPoolExecutor(max_workers=count) as pool:
        return {text for text, _ in pool.map(lambda _: probe(stack), range(count))}


def test_updates_to_b_then_c_during_a_collection_reach_both_nodes(
    stack: EngineStack, cluster: Cluster, client: WeightsClient, ckpts: dict[str, Path]
) -> None:
    engines = stack.engines
    nodes = {engine["node_id"] for engine in engines}
    assert len(nodes) == 2  # one engine on each worker node
    assert {cluster.node_of(int(engine["actor_pid"])) for engine in engines} == set(cluster.live_workers())
    assert all(not root.startswith("http://127.") for root in roots(stack))  # on the nodes' address
    assert ANSWERS["A"] in probe(stack)[0]
    copies = 20  # 6 rows x 20: 100 tool rollouts and 20 probes
    collector = collect(stack, "bc", copies=copies, parallel=8)
    for version, name in ((1, "B"), (2, "C")):

        def ready(current: int = version - 1) -> bool:
            rows = stack.rows("bc")
            return still_running(collector) and any(whole_probe_under(row, current) for row in rows)

        wait_for(ready, HANG_CAP_S, f"a probe answered under version {version - 1}")
        done = update_cli(stack, ckpts[name], version)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "warning" not in done.stdout, done.stdout  # no engine left out
    rows = finished(collector, stack, "bc", 6 * copies)
    assert {call["end"] for call in calls_of(rows)} <= {0, 1, 2}
    whole = [
        (row["weight_version"]["calls"][-1]["start"], answer_text(row["response"]["output"]))
        for row in rows
        if row.get("probe") and whole_probe_under(row, row["weight_version"]["calls"][-1]["start"])
    ]
    for version, text in whole:
        assert ANSWERS["ABC"[version]] in text, (version, text)
    assert {version for version, _ in whole} >= {0, 1, 2}
    before = stack.ok_requests()
    answers = probes_on_both(stack)
    assert len(answers) == 1
    assert ANSWERS["C"] in answers.pop()
    after = stack.ok_requests()
    assert all(after[url] > before.get(url, 0) for url in (str(engine["url"]) for engine in engines)), after
    status = client.status()
    assert status["version"] == 2
    assert set(status["engine_versions"].values()) == {2}
    listed = _get(f"{stack.process.head_url}/engines")
    assert [(row["node_id"], row["weight_version"]) for row in listed] == [(e["node_id"], 2) for e in engines]
    shown = subprocess.run(
        [str(console_script("ng_status")), f"+head_server_url={stack.process.head_url}"],
        cwd=ROOT, env=stack.env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stdout + shown.stderr
    for engine in engines:
        assert re.search(
            rf"{engine['name']} \S+ on node {engine['node_id']} \({re.escape(str(engine['node']))}\): version 2",
            shown.stdout,
        ), shown.stdout


def test_a_checkpoint_only_on_the_head_is_refused_before_any_pause(
    stack: EngineStack, client: WeightsClient, ckpts: dict[str, Path]
) -> None:
    if "head_only" not in ckpts:
        pytest.skip("mount namespaces are not allowed here: no directory can be hidden from the worker nodes")
    with pytest.raises(WeightUpdateError) as refused:
        client.update(str(ckpts["head_only"]), version=3)
    assert refused.value.phase == "check"
    message = refused.value.message
    assert "refused before any engine was paused" in message
    for root in roots(stack):
        assert f"engine {root} does not see {ckpts['head_only']}" in message
    assert "its node cannot read the directory: FileNotFoundError" in message  # empty there: no B
    done = update_cli(stack, ckpts["head_only"], 3)
    assert done.returncode == 2, done.stdout + done.stderr
    status = client.status()
    assert (status["version"], status["admitting"], status["updating"]) == (2, True, False)
    assert (status["last_outcome"]["version"], status["last_outcome"]["outcome"]) == (
        2,
        "done",
    )  # nothing touched
    assert ANSWERS["C"] in probe(stack)[0]


def test_admin_routes_answer_no_one_without_the_engines_own_key(stack: EngineStack, cluster: Cluster) -> None:
    engines_key = admin_key(stack.process.head_url, "policy_model")
    assert engines_key is not None
    keys = [engines_key]
    for engine, root in zip(stack.engines, roots(stack), strict=True):
        own = admin_key_of(int(engine["pid"]))
        keys.append(own)
        for route in ADMIN_ROUTES:
            assert status_of(root + route, key=None) == 401
            assert status_of(root + route, key=engines_key) == 401, route  # the trainer's key opens none
        assert status_of(f"{root}/v1/models", key=engines_key, data=None) == 200
        assert len(fingerprint(root, own)) == 1  # its own key opens them
    assert keys[1] != keys[2]
    ours = {pid for marker in [stack.marker, *cluster.nodes] for pid in marked_pids(marker)}
    listening = _listening_off_loopback(ours)
    engine_ports = {int(root.rsplit(":", 1)[1]) for root in roots(stack)}
    assert engine_ports <= {port for _, port in listening}
    asks = [(f"http://{host}:{port}{route}", key) for host, port in listening for route in ADMIN_ROUTES
            for key in (None, engines_key)]  # fmt: skip
    with ThreadPoolExecutor(max_workers=16) as pool:  # Ray's gRPC ports answer no HTTP: each may wait
        answers = list(pool.map(lambda ask: status_of(ask[0], key=ask[1]), asks))
    for (url, key), answered in zip(asks, answers, strict=True):
        assert not (isinstance(answered, int) and answered < 300), (url, key is not None, answered)
    for pid in Path("/proc").iterdir():
        if pid.name.isdigit():
            try:
                argv = (pid / "cmdline").read_bytes()
            except OSError:
                continue
            assert not any(key.encode() in argv for key in keys), pid.name
    logs = [path for path in [*cluster.temp_dir.rglob("*"), *stack.tmp.rglob("*.log")] if path.is_file()]
    assert logs
    for path in logs:
        text = path.read_bytes()
        assert not any(key.encode() in text for key in keys), path


def test_a_node_lost_during_an_update_leaves_its_engine_out_and_it_rejoins_on_the_current_version(
    stack: EngineStack, cluster: Cluster, client: WeightsClient, ckpts: dict[str, Path]
) -> None:
    before = stack.engines
    lost = next(
        engine for engine in before if cluster.node_of(int(engine["actor_pid"])) == cluster.live_workers()[-1]
    )
    kept = next(engine for engine in before if engine is not lost)
    lost_root = str(lost["url"]).removesuffix("/v1")
    marker = cluster.node_of(int(lost["actor_pid"]))
    for pid in marked_pids(marker):  # the node freezes: its engine stops answering mid-update
        os.kill(pid, signal.SIGSTOP)
    outcome: dict[str, Any] = {}

    def update() -> None:
        try:
            outcome["result"] = client.update(str(ckpts["C"]), version=3)
        except WeightUpdateError as error:
            outcome["error"] = error

    started = time.monotonic()
    updating = threading.Thread(target=update)
    updating.start()
    wait_for(
        lambda: (client.status().get("running") or {}).get("phase") == "pause",
        HANG_CAP_S,
        "the update's pause",
    )
    cluster.lose(marker)  # then dies: every process of the node SIGKILLed
    updating.join(HANG_CAP_S)
    assert not updating.is_alive()
    ended_s = time.monotonic() - started
    assert "error" not in outcome, outcome
    result = outcome["result"]
    assert result["version"] == 3
    assert list(result["problems"]) == [lost_root]
    assert "lost in phase pause" in result["problems"][lost_root]
    assert set(result["engines"]) == {lost_root, str(kept["url"]).removesuffix("/v1")}
    assert ANSWERS["C"] in probe(stack)[0]  # the engine that stayed serves version 3 meanwhile
    status = client.status()
    assert status["engine_versions"][lost_root] is None
    assert "lost in phase pause" in status["held_out"][lost_root]

    wait_for(lambda: f"{lost['name']}: Ray's verdict" in stack.log(), HANG_CAP_S, "Ray's verdict")
    wait_for(lambda: "waiting for capacity: placement group" in stack.log(), HANG_CAP_S, "the capacity wait")
    cluster.add_node()
    wait_for(lambda: f"{lost['name']} is serving again" in stack.log(), 900, "the engine on the new node")
    replaced = next(
        engine for engine in _get(f"{stack.process.head_url}/engines") if engine["name"] == lost["name"]
    )
    new_root = str(replaced["url"]).removesuffix("/v1")
    assert replaced["node_id"] != lost["node_id"]
    wait_for(
        lambda: client.status()["engine_versions"].get(new_root) == 3,
        HANG_CAP_S,
        "the new engine in the pool",
    )
    assert re.search(rf"engine {re.escape(new_root)} rejoined and loaded version 3", stack.log()), (
        stack.log()[-3000:]
    )
    status = client.status()
    assert set(status["engine_versions"].values()) == {3}
    assert status["held_out"] == {}
    assert fingerprint(new_root, admin_key_of(int(replaced["pid"]))) == status["fingerprint"]
    answers = probes_on_both(stack)
    assert len(answers) == 1
    assert ANSWERS["C"] in answers.pop()
    print(
        json.dumps({"update_with_lost_node_s": round(ended_s, 1), "lost": lost_root, "replaced_by": new_root})
    )


def _listening_off_loopback(pids: set[int]) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket these processes listen on outside loopback (0.0.0.0 as
    this machine's address)."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found: set[tuple[str, int]] = set()
    here = socket.gethostbyname(socket.gethostname())
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            raw, port = fields[1].split(":")
            packed = bytes.fromhex(raw)
            words = b"".join(packed[i : i + 4][::-1] for i in range(0, len(packed), 4))
            address = socket.inet_ntop(family, words)
            if address.startswith("127.") or address in ("::1", "::ffff:127.0.0.1"):
                continue
            found.add((here if address in ("0.0.0.0", "::") else address, int(port, 16)))
    return found
