"""NeMo Gym 0.7.0's collector keys run here with its meaning (`RolloutCollectionConfig`), over HTTP.

`interleave_repeats` starts the repeats round by round; `max_resident_rollout_tasks` caps the
rollouts held at once; `dispatch_budget_s` stops starting rollouts and keeps what finished; `fan_out` runs a row once
per listed agent, numbered as NeMo Gym numbers the copies;
`count_failure_classes_as_zero` / `count_missing_rollouts_as_zero` put rollouts without a reward
into `_aggregate_metrics.json` as zeros; `resume_from_cache: false` starts over (NeMo Gym clears
the output). The keys that ask for what a run here always does are accepted by every command.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from ng_cli.commands.collect import app as collect_app
from ng_cli.commands.e2e_collect import app as e2e_app
from ng_cli.errors import ConfigError
from ng_cli.head import build_head_app
from ng_cli.rollouts import CollectConfig, collect_rollouts
from ng_cli.rollouts.progress import NullView
from ng_cli.servers.app import JSONResponse
from ng_cli.servers.testing import serve_in_thread
from tests.fixtures.rollouts.stub_agent import StubAgent

pytestmark = pytest.mark.integration

ACCEPTED = {
    "resume_from_cache": "true",
    "interleave_repeats": "true",
    "max_resident_rollout_tasks": "4",
    "retain_results_in_memory": "false",
    "dispatch_budget_s": "3600",
    "drain_margin_s": "60",
    "count_failure_classes_as_zero": "[agent_run_error]",
    "count_missing_rollouts_as_zero": "true",
    "require_complete": "true",
    "route_failures_to_sidecar": "true",
    "retry_terminal_timeouts": "true",
    "disable_health_check": "true",
    "fan_out": "{src: [a, b]}",
}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def rows(n: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"id": i, "responses_create_params": {"input": f"q{i}"}, **extra} for i in range(n)]


class CountingAgent(StubAgent):
    """A stub agent that also records the most rollouts it held at once."""

    in_flight = 0
    most_in_flight = 0

    async def _answer(self, kind: str, row: dict[str, Any]) -> JSONResponse:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.01)  # lets other rollouts arrive while this one is held
            return await super()._answer(kind, row)
        finally:
            self.in_flight -= 1


@pytest.mark.usefixtures("empty_workdir")
@pytest.mark.parametrize("command", ["ng_collect_rollouts", "ng_e2e_collect_rollouts"])
def test_every_nemo_gym_key_is_accepted(command: str) -> None:
    keys = [f"+{key}={value}" for key, value in ACCEPTED.items()]
    if command == "ng_collect_rollouts":
        app, args = collect_app, ["+input_jsonl_fpath=missing.jsonl", "+output_jsonl_fpath=o.jsonl", *keys]
    else:
        app, args = e2e_app, ["+split=example", "+output_jsonl_fpath=o.jsonl", "+data_source=gitlab", *keys]
    result = CliRunner().invoke(app, args)
    assert "not offered" not in result.output, result.output
    assert "unknown option" not in result.output, result.output


async def test_interleave_repeats_starts_them_round_by_round(tmp_path: Path) -> None:
    agent = StubAgent()
    source = write_rows(tmp_path / "in.jsonl", rows(3))
    with serve_in_thread(agent.build_app()) as url:
        config = CollectConfig(
            agent_name="stub",
            agent_urls={"stub": url},
            input_jsonl_fpath=source,
            output_jsonl_fpath=tmp_path / "out.jsonl",
            num_repeats=2,
            num_samples_in_parallel=1,
            interleave_repeats=True,
        )
        result = await collect_rollouts(config, view=NullView())
    assert result.exit_code == 0
    abcabc = [(t, k) for k in range(2) for t in range(3)]
    assert [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in agent.received] == abcabc
    materialized = read_jsonl(tmp_path / "out_materialized_inputs.jsonl")
    assert [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in materialized] == abcabc


async def test_max_resident_rollout_tasks_caps_the_rollouts_held(tmp_path: Path) -> None:
    agent = CountingAgent()
    source = write_rows(tmp_path / "in.jsonl", rows(8))
    with serve_in_thread(agent.build_app()) as url:
        config = CollectConfig(
            agent_name="stub",
            agent_urls={"stub": url},
            input_jsonl_fpath=source,
            output_jsonl_fpath=tmp_path / "out.jsonl",
            num_samples_in_parallel=8,
            max_resident_rollout_tasks=2,
        )
        result = await collect_rollouts(config, view=NullView())
    assert (result.succeeded, result.exit_code) == (8, 0)
    assert 1 <= agent.most_in_flight <= 2


async def test_a_spent_dispatch_budget_starts_nothing_and_a_resume_runs_it(tmp_path: Path) -> None:
    agent = StubAgent()
    source = write_rows(tmp_path / "in.jsonl", rows(3, expected_reward=1.0))
    output = tmp_path / "out.jsonl"
    with serve_in_thread(agent.build_app()) as url:
        spent = CollectConfig(
            agent_name="stub",
            agent_urls={"stub": url},
            input_jsonl_fpath=source,
            output_jsonl_fpath=output,
            num_repeats=2,
            dispatch_budget_s=0,
            count_missing_rollouts_as_zero=True,
        )
        result = await collect_rollouts(spent, view=NullView())
        assert agent.received == []
        assert (result.succeeded, result.failed, result.not_started, result.exit_code) == (0, 0, 6, 1)
        assert any("6 rollouts not started: dispatch_budget_s=0" in note for note in result.notes)
        assert not (tmp_path / "out_failures.jsonl").exists()  # not started is not failed
        (entry,) = orjson.loads((tmp_path / "out_aggregate_metrics.json").read_bytes())
        assert entry["agent_metrics"]["mean/reward"] == 0.0  # six missing rollouts counted as zeros
        assert len(entry["group_level_metrics"]) == 3

        resumed = spent.model_copy(update={"dispatch_budget_s": None})
        result = await collect_rollouts(resumed, view=NullView())
    assert (result.succeeded, result.not_started, result.exit_code) == (6, 0, 0)
    (entry,) = orjson.loads((tmp_path / "out_aggregate_metrics.json").read_bytes())
    assert entry["agent_metrics"]["mean/reward"] == 1.0


@pytest.mark.parametrize("counted", [["agent_run_error"], ["http_5xx"], []])
async def test_failures_of_the_classes_asked_for_count_as_zeros(tmp_path: Path, counted: list[str]) -> None:
    agent = StubAgent()
    source = write_rows(
        tmp_path / "in.jsonl",
        [
            *rows(2, expected_reward=1.0),
            {"id": 9, "responses_create_params": {"input": "q"}, "fault": "http_500"},
        ],
    )
    with serve_in_thread(agent.build_app()) as url:
        config = CollectConfig(
            agent_name="stub",
            agent_urls={"stub": url},
            input_jsonl_fpath=source,
            output_jsonl_fpath=tmp_path / "out.jsonl",
            max_attempts=1,
            count_failure_classes_as_zero=counted,
        )
        result = await collect_rollouts(config, view=NullView())
    assert (result.succeeded, result.failed) == (2, 1)
    (entry,) = orjson.loads((tmp_path / "out_aggregate_metrics.json").read_bytes())
    if counted:  # NeMo Gym's class (HTTP 500 from the agent: agent_run_error) or our kind
        assert entry["agent_metrics"]["mean/reward"] == pytest.approx(2 / 3)
        assert [g["_ng_task_index"] for g in entry["group_level_metrics"]] == [0, 1, 2]
    else:
        assert entry["agent_metrics"]["mean/reward"] == 1.0
        assert [g["_ng_task_index"] for g in entry["group_level_metrics"]] == [0, 1]


async def test_resume_from_cache_false_starts_over_and_true_resumes(tmp_path: Path) -> None:
    agent = StubAgent()
    source = write_rows(tmp_path / "in.jsonl", rows(2))
    with serve_in_thread(agent.build_app()) as url:
        config = CollectConfig(
            agent_name="stub",
            agent_urls={"stub": url},
            input_jsonl_fpath=source,
            output_jsonl_fpath=tmp_path / "out.jsonl",
        )
        await collect_rollouts(config, view=NullView())
        await collect_rollouts(config.model_copy(update={"resume_from_cache": True}), view=NullView())
        assert len(agent.received) == 2  # resumed: nothing left to run
        result = await collect_rollouts(
            config.model_copy(update={"resume_from_cache": False}), view=NullView()
        )
    assert len(agent.received) == 4  # started over, as NeMo Gym clears the output
    assert (result.succeeded, len(read_jsonl(tmp_path / "out.jsonl"))) == (2, 2)


async def test_the_collectors_aggregate_metrics_run_the_environments_hooks(tmp_path: Path) -> None:
    """The stack's config comes from the head server (`GET /config`), as NeMo Gym's collector asks
    its environments; math_with_judge's hooks give pass@k and majority@k, not `mean/*` alone."""
    agent = StubAgent()
    config_tree = {
        "math_with_judge": {"resources_servers": {"math_with_judge": {"entrypoint": "app.py"}}},
        "math_agent": {
            "responses_api_agents": {
                "simple_agent": {
                    "entrypoint": "app.py",
                    "resources_server": {"type": "resources_servers", "name": "math_with_judge"},
                    "model_server": {"type": "responses_api_models", "name": "policy_model"},
                }
            }
        },
    }
    source = write_rows(
        tmp_path / "in.jsonl",
        rows(2, expected_reward=1.0, library_reward=1.0, extracted_answer="4", agent_ref="math_agent"),
    )
    with serve_in_thread(agent.build_app()) as agent_url:
        listed = [
            {"name": "math_agent", "server_type": "responses_api_agents", "url": agent_url, "is_ready": True}
        ]
        head = build_head_app(config=config_tree, servers=lambda: listed)
        with serve_in_thread(head) as head_url:
            config = CollectConfig(
                head_server_url=head_url,
                input_jsonl_fpath=source,
                output_jsonl_fpath=tmp_path / "out.jsonl",
                num_repeats=2,
            )
            result = await collect_rollouts(config, view=NullView())
    assert (result.succeeded, result.notes) == (4, [])
    (entry,) = orjson.loads((tmp_path / "out_aggregate_metrics.json").read_bytes())
    assert entry["agent_ref"] == {"name": "math_agent"}
    assert entry["key_metrics"]["pass@2/symbolic_accuracy"] == 100.0
    assert entry["key_metrics"]["majority@2/symbolic_accuracy"] == 100.0
    assert "mean/reward" not in entry["key_metrics"]
    assert "per_sample_aggregate" in entry["agent_metrics"]


def fan_rows() -> list[dict[str, Any]]:
    return [
        {"id": i, "responses_create_params": {"input": f"q{i}"}, "agent_ref": {"name": agent}}
        for i, agent in enumerate(("src", "src", "a"))
    ]


# NeMo Gym 0.7.0's numbering of fan_rows() with fan_out={src: [a, b]}, num_repeats=2, recorded from
# its own `RolloutCollectionHelper._preprocess_raw_rows` (and, with interleave_repeats, the same list
# stably sorted by rollout index, as it printed): a fanned row's copies are more repeats of its
# task, agent by agent in the list's order; a row not in fan_out runs on its own agent.
FANNED = [(0, 0, "a"), (0, 1, "a"), (0, 2, "b"), (0, 3, "b"), (1, 0, "a"), (1, 1, "a"), (1, 2, "b")]
FANNED += [(1, 3, "b"), (2, 0, "a"), (2, 1, "a")]


@pytest.mark.parametrize("interleave", [False, True])
async def test_fan_out_runs_a_row_once_per_listed_agent(tmp_path: Path, interleave: bool) -> None:
    agent_a, agent_b = StubAgent(), StubAgent()
    source = write_rows(tmp_path / "in.jsonl", fan_rows())
    output = tmp_path / "out.jsonl"
    with serve_in_thread(agent_a.build_app()) as url_a, serve_in_thread(agent_b.build_app()) as url_b:
        config = CollectConfig(
            agent_urls={"a": url_a, "b": url_b},
            input_jsonl_fpath=source,
            output_jsonl_fpath=output,
            num_repeats=2,
            num_samples_in_parallel=1,
            fan_out={"src": ["a", "b"]},
            interleave_repeats=interleave,
        )
        result = await collect_rollouts(config, view=NullView())
        assert (result.succeeded, result.total, result.exit_code) == (10, 10, 0)
        again = await collect_rollouts(config, view=NullView())  # resumed: every rollout is done
    assert (again.succeeded, len(agent_a.received) + len(agent_b.received)) == (10, 10)
    expected = sorted(FANNED, key=lambda r: r[1]) if interleave else FANNED  # NeMo Gym: a stable sort
    materialized = read_jsonl(tmp_path / "out_materialized_inputs.jsonl")
    assert [
        (r["_ng_task_index"], r["_ng_rollout_index"], r["agent_ref"]["name"]) for r in materialized
    ] == expected
    sent = [
        (r["_ng_task_index"], r["_ng_rollout_index"], name)
        for name, agent in (("a", agent_a), ("b", agent_b))
        for r in agent.received
    ]
    assert sorted(sent) == sorted(FANNED)
    written = {
        (r["_ng_task_index"], r["_ng_rollout_index"], r["agent_ref"]["name"]) for r in read_jsonl(output)
    }
    assert written == set(FANNED)
    metrics = orjson.loads((tmp_path / "out_metrics.json").read_bytes())
    assert {name: m["rollouts"] for name, m in metrics["agents"].items()} == {"a": 6, "b": 4}


async def test_another_fan_out_is_another_run(tmp_path: Path) -> None:
    agent = StubAgent()
    source = write_rows(tmp_path / "in.jsonl", fan_rows())
    with serve_in_thread(agent.build_app()) as url:
        config = CollectConfig(
            agent_urls={"a": url, "b": url},
            input_jsonl_fpath=source,
            output_jsonl_fpath=tmp_path / "out.jsonl",
            fan_out={"src": ["a", "b"]},
        )
        await collect_rollouts(config, view=NullView())
        with pytest.raises(ConfigError, match="fan_out"):
            await collect_rollouts(
                config.model_copy(update={"fan_out": {"src": ["b", "a"]}}), view=NullView()
            )


def test_fan_out_refuses_an_empty_or_repeating_list() -> None:
    for bad, words in (({"src": []}, "empty list"), ({"src": ["a", "a"]}, "lists a twice")):
        with pytest.raises(ValueError, match=words):
            CollectConfig(input_jsonl_fpath="i.jsonl", output_jsonl_fpath="o.jsonl", fan_out=bad)
