"""Each failure class, end to end over HTTP: how often it is tried, where it lands, how it is counted.

A stub agent on loopback fails deterministically per row (`fault`, `fail_first`), so the number
of `/run` calls each row received is exact.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from rich.console import Console

from ng_cli.rollouts import CollectConfig, collect_rollouts, render_summary
from ng_cli.rollouts.progress import NullView
from ng_cli.servers.testing import serve_in_thread
from tests.fixtures.rollouts.stub_agent import StubAgent, StubFaults

pytestmark = pytest.mark.integration

MAX_ATTEMPTS = 3
REPEATS = 2
# row fault -> (calls per rollout, the class its failure is recorded as)
FAULTS: dict[str, tuple[int, str]] = {
    "http_400": (1, "http_4xx"),
    "http_429": (MAX_ATTEMPTS, "http_4xx"),
    "http_500": (MAX_ATTEMPTS, "http_5xx"),
    "context_overflow": (1, "context_overflow"),
    "bad_reward": (MAX_ATTEMPTS, "invalid_output"),
    "no_reward": (MAX_ATTEMPTS, "invalid_output"),
    "hang": (MAX_ATTEMPTS, "timeout"),
}


@pytest.fixture
def stub() -> Iterator[tuple[StubAgent, str]]:
    agent = StubAgent(StubFaults(hang_s=30.0))
    with serve_in_thread(agent.build_app()) as url:
        yield agent, url


def row(i: int, **extra: Any) -> dict[str, Any]:
    return {"id": i, "responses_create_params": {"input": f"q{i}"}, "expected_reward": float(i % 2), **extra}


async def collect(tmp_path: Path, url: str, rows: list[dict[str, Any]], **options: Any) -> Any:
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    config = CollectConfig(
        agent_name="stub",
        agent_urls={"stub": url},
        input_jsonl_fpath=source,
        output_jsonl_fpath=tmp_path / "out.jsonl",
        num_repeats=REPEATS,
        num_samples_in_parallel=8,
        # a hang is 30 s; 3 s leaves a slow but healthy answer on 2 busy cores room not to turn
        # into a timeout (1 s was the whole margin before)
        rollout_timeout_s=3.0,
        max_attempts=MAX_ATTEMPTS,
        retry_backoff_s=0.001,
        **options,
    )
    return await collect_rollouts(config, view=NullView())


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


async def test_each_class_is_retried_per_policy_and_recorded(
    tmp_path: Path, stub: tuple[StubAgent, str]
) -> None:
    agent, url = stub
    rows = [row(i, fault=fault) for i, fault in enumerate(FAULTS)]
    rows.append(row(len(rows), fail_first=1))
    rows.append(row(len(rows), fault="incomplete"))
    rows.append(row(len(rows)))
    result = await collect(tmp_path, url, rows)

    for i, (calls, _) in enumerate(FAULTS.values()):
        assert agent.calls[str(i)] == calls * REPEATS, rows[i]["fault"]
    retried = len(FAULTS)
    assert agent.calls[str(retried)] == REPEATS + 1  # one 500, then both rollouts succeed

    failures = jsonl(tmp_path / "out_failures.jsonl")
    by_task = {(f["_ng_task_index"], f["_ng_rollout_index"]): f for f in failures}
    assert len(by_task) == len(failures) == len(FAULTS) * REPEATS
    for i, (calls, kind) in enumerate(FAULTS.values()):
        for rollout in range(REPEATS):
            failure = by_task[(i, rollout)]
            assert (failure["kind"], failure["attempt"]) == (kind, calls)
    assert by_task[(0, 0)]["status"] == 400
    assert "stub failure 400" in by_task[(0, 0)]["message"]
    assert "prompt is too long" in by_task[(3, 0)]["message"]

    output = jsonl(tmp_path / "out.jsonl")
    assert sorted((r["_ng_task_index"], r["_ng_rollout_index"]) for r in output) == [
        (t, r) for t in range(len(FAULTS), len(rows)) for r in range(REPEATS)
    ]
    assert all(r["verifier_score"] == 0.5 and r["reward"] == r["expected_reward"] for r in output)
    metrics = result.metrics["agents"]["stub"]
    assert metrics["incomplete"] == {"context_length_exceeded": REPEATS}
    assert metrics["failures"] == {
        "http_4xx": 2 * REPEATS,
        "http_5xx": REPEATS,
        "context_overflow": REPEATS,
        "invalid_output": 2 * REPEATS,
        "timeout": REPEATS,
    }
    assert metrics["output_tokens"] == 7 * len(output)
    # every rollout tried more than once counts, failed or not: 5 retried classes x 2 + fail_first
    retried_for_good = sum(1 for calls, _ in FAULTS.values() if calls > 1) * REPEATS
    assert result.metrics["run"]["retried_rollouts"] == retried_for_good + 1
    assert result.metrics["run"]["recovered_rollouts"] == 1
    summary = Console(width=300, record=True, file=io.StringIO())
    summary.print(render_summary(result))
    assert f"{retried_for_good + 1} needed a retry (1 then succeeded)" in summary.export_text()
    assert (result.succeeded, result.failed, result.exit_code) == (len(output), len(failures), 1)


async def test_a_clean_run_exits_0_with_metrics(tmp_path: Path, stub: tuple[StubAgent, str]) -> None:
    _, url = stub
    rows = [row(i) for i in range(10)]
    result = await collect(tmp_path, url, rows, pass_threshold=0.5)
    assert (result.succeeded, result.failed, result.exit_code) == (20, 0, 0)
    metrics = orjson.loads((tmp_path / "out_metrics.json").read_bytes())
    agent = metrics["agents"]["stub"]
    assert agent["mean_reward"] == pytest.approx(0.5)
    assert agent[f"pass@{REPEATS}"] == pytest.approx(0.5)
    assert agent[f"mean@{REPEATS}"] == pytest.approx(0.5)
    assert not (tmp_path / "out_failures.jsonl").exists()


async def test_rows_can_name_their_agent(tmp_path: Path) -> None:
    first, second = StubAgent(), StubAgent()
    with serve_in_thread(first.build_app()) as url_a, serve_in_thread(second.build_app()) as url_b:
        source = tmp_path / "in.jsonl"
        rows = [row(i, agent_ref={"type": "responses_api_agents", "name": "ab"[i % 2]}) for i in range(6)]
        source.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
        config = CollectConfig(
            agent_urls={"a": url_a, "b": url_b},
            input_jsonl_fpath=source,
            output_jsonl_fpath=tmp_path / "out.jsonl",
        )
        result = await collect_rollouts(config, view=NullView())
    assert sum(first.calls.values()) == sum(second.calls.values()) == 3
    assert set(result.metrics["agents"]) == {"a", "b"}
    assert result.metrics["agents"]["a"]["mean_reward"] == 0.0
    assert result.metrics["agents"]["b"]["mean_reward"] == 1.0
