"""NeMo Gym's own speed_bench server (tests/fixtures/nemo_gym_servers, unchanged), served by our
child process and driven by our speed_bench_agent, all on loopback.

speed_bench scores nothing (its reward is always 0.0, a placeholder): it reads the engine's
Prometheus `/metrics` (`vllm:spec_decode_*` counters) at the first `/verify` and at each one
after, and stamps the running acceptance figures on the row. The model here is the scripted model
plus a `/metrics` whose counters advance by a fixed amount per model call, so the figures are
known; without `/metrics`, as with an engine without speculative decoding, the rows still score
0.0 and say `spec_decode_unavailable`, as NeMo Gym's code intends. The rows have the shape of
speed_bench's `data/example.jsonl` (not vendored: its dataset licence is not Apache-2.0).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import yaml
from fastapi.responses import PlainTextResponse

from ng_cli.servers.loading import load_server_class
from ng_cli.servers.spec import ServerAddress
from ng_cli.servers.testing import ScriptedModel, assistant_message, serve_in_child, serve_in_thread

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
SPEED_BENCH = REPO / "tests" / "fixtures" / "nemo_gym_servers" / "resources_servers" / "speed_bench"
Agent = load_server_class(Path(__file__).resolve().parents[1] / "app.py")
PER_CALL = {"drafts": 10, "draft_tokens": 30, "accepted": 12, "per_pos": (6, 4, 2)}
"""How far the stand-in engine's spec-decode counters move per model call."""


def row(task: str, *turns: str) -> dict[str, Any]:
    """A row as speed_bench's data/example.jsonl writes one."""
    return {
        "responses_create_params": {"input": [{"role": "user", "content": text} for text in turns]},
        "verifier_metadata": {"src_id": task, "source": "test", "speed_config": "qualitative",
                              "num_turns": len(turns), "sub_category": None},
        "agent_ref": {"type": "responses_api_agents", "name": "speed_bench_simple_agent"},
    }  # fmt: skip


ROWS = [row("single", "Say hi."), row("three", "Name a fish.", "Another one.", "And a third.")]


def metrics_text(calls: int) -> str:
    """vLLM's exposition of the spec-decode counters after `calls` model calls."""
    labels = 'engine="0",model_name="stub"'
    lines = [
        "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.",
        "# TYPE vllm:spec_decode_num_drafts_total counter",
        f"vllm:spec_decode_num_drafts_total{{{labels}}} {PER_CALL['drafts'] * calls}.0",
        f"vllm:spec_decode_num_drafts_created{{{labels}}} 1.7e9",
        f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {PER_CALL['draft_tokens'] * calls}.0",
        f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {PER_CALL['accepted'] * calls}.0",
    ]
    for position, count in enumerate(PER_CALL["per_pos"]):
        lines.append(
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{position}"}} '
            f"{count * calls}.0"
        )
    lines.append('vllm:num_requests_running{engine="0"} 0.0')
    return "\n".join(lines) + "\n"


ENV = "speed_bench_resources_server"


@contextmanager
def speed_bench(tmp_path: Path, *, spec_decode: bool) -> Iterator[tuple[str, str, ScriptedModel]]:
    """Their server, unchanged, reading the engine's metrics at the scripted model's URL (as their
    `vllm_base_url: ${policy_base_url}`), and our agent: (agent URL, their server's URL, model)."""
    model = ScriptedModel(lambda body: [assistant_message(f"answer to {len(body['input'])} items")])
    app = model.build_app()
    if spec_decode:

        @app.get("/metrics")
        async def metrics() -> PlainTextResponse:
            return PlainTextResponse(metrics_text(len(model.requests)))

    config = yaml.safe_load((SPEED_BENCH / "configs" / "speed_bench.yaml").read_text())
    with ExitStack() as stack:
        model_url = stack.enter_context(serve_in_thread(app))
        block = config["speed_bench_resources_server"]["resources_servers"]["speed_bench"]
        block = {**block, "vllm_base_url": f"{model_url}/v1"}
        child = stack.enter_context(
            serve_in_child(SPEED_BENCH / "app.py", block, name=ENV, spec_dir=tmp_path)
        )
        agent_block = config["speed_bench_simple_agent"]["responses_api_agents"]["speed_bench_agent"]
        servers = {
            ENV: ServerAddress(server_type="resources_servers", implementation="speed_bench", url=child.url),
            "policy_model": ServerAddress(
                server_type="responses_api_models", implementation="scripted", url=model_url
            ),
        }
        agent = Agent(
            Agent.validate_config(agent_block, instance="speed_bench_simple_agent"),
            name="speed_bench_simple_agent",
            servers=servers,
            session_secret=child.session_secret,
        )
        agent_url = stack.enter_context(serve_in_thread(agent.build_app()))
        yield agent_url, child.url, model


def run_rows(agent_url: str) -> list[dict[str, Any]]:
    """Every row through our agent, one after the other (speed_bench's figures are running ones)."""
    answers = [httpx.post(f"{agent_url}/run", json=r, timeout=60) for r in ROWS]
    assert [answer.status_code for answer in answers] == [200] * len(ROWS), [a.text for a in answers]
    return [answer.json() for answer in answers]


def test_spec_decode_figures_come_from_the_engines_counters_over_each_turns_call(tmp_path: Path) -> None:
    with speed_bench(tmp_path, spec_decode=True) as (agent_url, env_url, model):
        single, three = run_rows(agent_url)
        aggregate = httpx.post(
            f"{env_url}/aggregate_metrics", json={"verify_responses": [single, three]}, timeout=60
        ).json()
    assert len(model.requests) == 4  # one call for the single turn, three for the three
    assert [r["reward"] for r in (single, three)] == [0.0, 0.0]  # speed_bench's placeholder
    # The first /verify takes the "before" snapshot: nothing has moved since, so no figures yet.
    assert (single["acceptance_length"], single["spec_decode_unavailable"]) == (None, False)
    # The second saw the three calls of its row: 30 drafts, 90 draft tokens, 36 accepted.
    assert (three["num_drafts"], three["draft_tokens"], three["accepted_tokens"]) == (30, 90, 36)
    assert three["acceptance_length"] == pytest.approx(1 + 36 / 30)
    assert three["acceptance_rate"] == pytest.approx(40.0)
    assert three["per_position_acceptance_rates"] == pytest.approx([0.6, 0.4, 0.2])
    # num_generated_tokens is the agent's usage summed over the row's three calls.
    usage = [response["usage"]["output_tokens"] for response in model.responses[1:]]
    assert three["num_generated_tokens"] == sum(usage) == three["response"]["usage"]["output_tokens"]
    assert len(three["response"]["output"]) == 3
    metrics = aggregate["agent_metrics"]
    assert (metrics["num_entries"], metrics["spec_draft_tokens"]) == (2, 90)
    assert metrics["spec_acceptance_length"] == pytest.approx(2.2)


def test_without_spec_decode_counters_rows_still_score_and_say_so(tmp_path: Path) -> None:
    """An engine whose /metrics has no spec-decode lines (here: no /metrics at all, a 404), as the
    stub engines and an engine without speculative decoding: NeMo Gym's code marks every row
    `spec_decode_unavailable` and carries on."""
    with speed_bench(tmp_path, spec_decode=False) as (agent_url, _env_url, model):
        answers = run_rows(agent_url)
    assert len(model.requests) == 4
    assert [a["reward"] for a in answers] == [0.0, 0.0]
    assert [a["spec_decode_unavailable"] for a in answers] == [True, True]
    assert [a["acceptance_length"] for a in answers] == [None, None]
    assert answers[1]["num_generated_tokens"] > 0
