"""A dead upstream ends a run quickly, and a resume after it returns completes it.

The real chain (ng_run: vllm_model + simple_agent + weather; ng_collect_rollouts) over a stub
vLLM in its own process, killed with SIGKILL before the run. With `upstream_down_grace_s: 5`,
the model server answers 503 `upstream_unavailable` at once after 5 s; the agent passes it on
without retrying and the collector records the rollouts as `upstream_unavailable`. The issue's
run took 543 s for one rollout; here 200 must end in well under a minute, and all 200 must be
scored by a resume once the stub is back on the same port.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.real_chain import collect, stack_yaml, start_stack, wait_for_model, write_rows
from tests.fixtures.stack.harness import NgRun
from tests.fixtures.stub_vllm import StubProcess

pytestmark = pytest.mark.integration

KEY = "stub-key"
ROLLOUTS = 200
GRACE_S = 5


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[NgRun, StubProcess]]:
    stub = StubProcess(api_key=KEY)
    model = {"upstream_down_grace_s": GRACE_S, "health_probe_interval_s": 1}
    run = start_stack(tmp_path, stack_yaml(stub.base_url, model=model), api_key=KEY)
    try:
        yield run, stub
    finally:
        run.kill_everything()
        stub.kill()


def test_a_dead_upstream_ends_the_run_fast_and_a_resume_completes_it(
    stack: tuple[NgRun, StubProcess], tmp_path: Path
) -> None:
    run, stub = stack
    write_rows(tmp_path / "in.jsonl", ROLLOUTS)
    stub.kill()

    dead = collect(run, tmp_path, "+progress_interval_s=1", "+rollout_timeout_s=900")

    # How long this takes is bench/upstream_outage.py's subject; here, that budgets do not multiply:
    # once the circuit is open a rollout ends on its first attempt, whatever the 900 s deadline.
    assert dead.returncode == 1, dead.stderr
    failures = [json.loads(line) for line in (tmp_path / "out_failures.jsonl").read_text().splitlines()]
    assert len(failures) == ROLLOUTS
    assert Counter(f["kind"] for f in failures) == {"upstream_unavailable": ROLLOUTS}
    assert all(f["upstream_down_s"] >= GRACE_S - 1 for f in failures if f["upstream_down_s"] is not None)
    assert sum(f["upstream_down_s"] is not None for f in failures) > ROLLOUTS // 2
    assert all(f["attempt"] == 1 for f in failures if f["upstream_down_s"] is not None)
    assert "upstream down for" in dead.stderr  # the live view said why nothing moved
    assert not (tmp_path / "out.jsonl").read_text()  # nothing made up

    back = StubProcess(api_key=KEY, port=stub.port)  # the engine restarts on its port
    try:
        wait_for_model(run)
        resumed = collect(run, tmp_path)
    finally:
        back.kill()

    assert resumed.returncode == 0, resumed.stderr
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(rows) == ROLLOUTS
    assert {row["_ng_task_index"] for row in rows} == set(range(ROLLOUTS))
    assert all(isinstance(row["reward"], float) for row in rows)
    assert not (tmp_path / "out_failures.jsonl").exists()
    assert f"{ROLLOUTS} earlier failures run again" in resumed.stdout + resumed.stderr
