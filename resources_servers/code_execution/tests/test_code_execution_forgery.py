"""Model-written code cannot answer for its environment: nothing of the server reaches the sandbox.

The environment runs the way ng_run starts it (`serve_in_child`: its own process, uvicorn under
uvloop, serving on a listening socket inherited from the launcher). Issue 24: uvloop's
`create_subprocess_exec` ignores `close_fds`, so every sandboxed program inherited that socket;
a program accepting on it answered the host's own `/verify` calls with reward 1.0 (4 forged
rewards in a real 40-rollout collection). These tests drive the attack through the real agent
and collector and count what it forged.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import secrets
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from ng_cli.rollouts import CollectConfig, collect_rollouts
from ng_cli.rollouts.progress import NullView
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.testing import assistant_message, serve_agent, serve_in_child

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        sys.platform != "linux" or os.geteuid() != 0,
        reason="the sandbox needs Linux and root (namespaces, mounts, setuid)",
    ),
]

ENV_DIR = Path(__file__).resolve().parents[1]
REPO = ENV_DIR.parents[1]
Agent = load_server_class(REPO / "responses_api_agents" / "simple_agent" / "app.py")
ROWS = (ENV_DIR / "data" / "example.jsonl").read_text().splitlines()
REPEATS = 8
"""5 rows x 8 repeats: the 40 rollouts of the collection that first showed the leak."""

PROBE_FDS = """
import json, os, stat
found = []
for fd in range(3, 65537):
    try:
        found.append([fd, stat.S_IFMT(os.fstat(fd).st_mode)])
    except OSError:
        pass
print(json.dumps(found))
"""
"""Every descriptor the program holds beyond stdin, stdout and stderr."""

ATTACKER = r"""
import json, os, select, socket, stat

listeners = []
for fd in range(3, 65537):
    try:
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            sock = socket.socket(fileno=fd)
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                listeners.append(sock)
    except OSError:
        pass
print("listeners", len(listeners), flush=True)


def forge(conn):
    conn.settimeout(2)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    try:
        answer = json.loads(body or b"{}")
    except ValueError:
        answer = {}
    answer = answer if isinstance(answer, dict) else {}
    answer.update(reward=1.0, tests_passed=3, tests_total=3)
    payload = json.dumps(answer).encode()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
    conn.sendall(head + b"Content-Length: %d\r\n\r\n" % len(payload) + payload)


while listeners:
    for listener in select.select(listeners, [], [])[0]:
        try:
            conn, _ = listener.accept()
            with conn:
                forge(conn)
        except OSError:
            pass
"""
"""Serve on every inherited listening socket, answering any request with reward 1.0, until killed."""


def env_config(**sandbox: Any) -> dict[str, Any]:
    limits = {"cpu_time_s": 2, "wall_time_s": 3.0, "max_concurrency": 4, **sandbox}
    return {
        "entrypoint": "app.py",
        "domain": "coding",
        "sandbox": {"uid_base": 100_000 + secrets.randbelow(100_000) * 8, **limits},
    }


def test_code_run_by_the_environment_holds_no_descriptor_of_its_server(tmp_path: Path) -> None:
    with serve_in_child(ENV_DIR / "app.py", env_config(), name="code_execution", spec_dir=tmp_path) as server:
        seen = server.post("/run_code", {"code": PROBE_FDS})
    assert seen["outcome"] == "ok", seen["stderr"]
    assert json.loads(seen["stdout"]) == []


MODEL_LATENCY_S = (4.2, 8.0)
"""Longer than the agent's keep-alive (4 s), as a real model's turn is: each rollout's /verify then
opens a fresh connection to the environment, which the kernel queues on the listening socket.
Spread out, so that verifications arrive while other rollouts' programs run."""
_latency = random.Random(24)


async def attacker_policy(_request: dict[str, Any]) -> list[dict[str, Any]]:
    """Every answer is the attacker program, so every reward it earns honestly is 0."""
    await asyncio.sleep(_latency.uniform(*MODEL_LATENCY_S))
    return [assistant_message(f"My solution:\n```python\n{ATTACKER}```")]


@pytest.mark.slow
async def test_programs_serving_on_inherited_sockets_forge_no_reward(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(ROWS) + "\n")
    output = tmp_path / "rollouts.jsonl"
    with (
        serve_in_child(ENV_DIR / "app.py", env_config(), name="code_execution", spec_dir=tmp_path) as env,
        serve_agent(
            Agent,
            attacker_policy,
            resources_url=env.url,
            resources_server_type="resources_servers",
            resources_name="code_execution",
            session_secret=env.session_secret,
        ) as served,
    ):
        config = CollectConfig(
            input_jsonl_fpath=rows,
            output_jsonl_fpath=output,
            agent_name="agent",
            agent_urls={"agent": served.agent_url},
            num_repeats=REPEATS,
            num_samples_in_parallel=20,
            max_attempts=1,
            rollout_timeout_s=120,
        )
        await collect_rollouts(config, view=NullView())
    rollouts = [orjson.loads(line) for line in output.read_text().splitlines()]
    forged = [rollout for rollout in rollouts if rollout["reward"] != 0.0]
    assert len(forged) == 0, f"{len(forged)} of {len(rollouts)} rollouts got a forged reward"
    assert len(rollouts) == len(ROWS) * REPEATS
    # Every attacker ran, found nothing to serve on, and printed a wrong answer.
    assert {rollout["failure_outcome"] for rollout in rollouts} == {"wrong_answer"}
