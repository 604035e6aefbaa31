"""token_exact against the real CPU vLLM: 200 multi-turn tool-calling rollouts each way.

The tiny random-weight Qwen2 (ng_cli/toolchain/tiny_model.py) is driven through vllm_model like
simple_agent drives it; `structured_outputs` regexes make it call get_weather (then answer), so
every rollout has 2 or 3 turns. A guided random model picks any ids that spell the allowed text
(`P`+`aris` as readily as `Paris`), and the tokenizer re-encodes such text to other ids (shown in
tests/unit/tokens/test_splice.py): with `token_exact: false` the re-rendered history drifts; with
`token_exact: true` no rollout drifts, and every prompt is the previous prompt + generation + the
tail of vLLM's own rendering. Our hermes parser is compared with vLLM's on every generation.
Set NG_TOKEN_EXACT_ROLLOUTS to run fewer (default 200).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from typer.testing import CliRunner

from ng_cli.commands.check_tokens import app as check_tokens_app
from ng_cli.tokens.chat_template import ChatTokenizer
from ng_cli.toolchain.local_vllm import build_tiny_model
from tests.fixtures.model_server import serve_model
from tests.fixtures.tokens.engine_checks import generated_texts, parser_mismatches, tail_mismatches
from tests.fixtures.tokens.rollouts import SYSTEM, WEATHER_TOOL, Run, collect_both_ways
from tests.fixtures.vllm_engine import VllmServer

ROLLOUTS = int(os.environ.get("NG_TOKEN_EXACT_ROLLOUTS", "200"))
CITY = "(Paris|London|Tokyo|Berlin)"
TOOL_CALL = rf'<tool_call>\n\{{"name": "get_weather", "arguments": \{{"city": "{CITY}"\}}\}}\n</tool_call>'
ANSWER = rf"It is (sunny|cloudy|rainy) in {CITY}, [0-9]{{1,2}} degrees\."


@dataclass(frozen=True)
class Collected:
    engine: VllmServer
    model_dir: Path
    tokenizer: ChatTokenizer
    runs: dict[bool, Run]
    """token_exact -> the rollouts collected with it."""


def turn_extras(index: int, turn: int) -> dict[str, Any]:
    """Tool calls until the last turn, then an answer; 2 or 3 turns per rollout."""
    last = 1 + index % 2
    return {"structured_outputs": {"regex": ANSWER if turn == last else TOOL_CALL}}


@pytest.fixture(scope="module")
def collected(vllm_engine: VllmServer, tmp_path_factory: pytest.TempPathFactory) -> Collected:
    """On the session's tiny-Qwen2 engine (one engine start less than an engine of its own)."""
    tmp = tmp_path_factory.mktemp("token-exact")
    model_dir = build_tiny_model(Path.home() / ".cache" / "ng_cli" / "tiny-model")
    runs = collect_both_ways(
        vllm_engine, model_dir, tmp, ROLLOUTS, max_turns=lambda index: 2 + index % 2, extras=turn_extras
    )
    return Collected(vllm_engine, model_dir, ChatTokenizer.load(model_dir), runs)


def test_without_token_exact_the_re_rendered_history_drifts(collected: Collected) -> None:
    report = collected.runs[False].report
    print(report.summary())
    assert report.with_token_ids == ROLLOUTS
    assert report.drifted > 0


def test_with_token_exact_no_rollout_drifts(collected: Collected) -> None:
    report = collected.runs[True].report
    print(report.summary())
    assert report.with_token_ids == ROLLOUTS
    assert report.drifted == 0
    turns = [
        len([i for i in row["response"]["output"] if "prompt_token_ids" in i])
        for row in collected.runs[True].rows
    ]
    assert min(turns) >= 2


def test_ng_check_tokens_exits_by_drift(collected: Collected) -> None:
    runner = CliRunner()
    clean = runner.invoke(check_tokens_app, [f"+input_jsonl_fpath={collected.runs[True].path}"])
    assert clean.exit_code == 0, clean.output
    drifted = runner.invoke(
        check_tokens_app,
        [f"+input_jsonl_fpath={collected.runs[False].path}", f"+tokenizer_path={collected.model_dir}"],
    )
    assert drifted.exit_code == 1, drifted.output
    assert "DRIFT turn 2's prompt diverges at position" in drifted.output


def test_every_prompt_is_previous_prompt_generation_and_vllms_template_tail(collected: Collected) -> None:
    problems = asyncio.run(
        tail_mismatches(collected.engine, collected.runs[True].rows, collected.tokenizer.end_of_turn_id)
    )
    assert problems == []


def test_our_hermes_parser_matches_vllms_on_every_generation(collected: Collected) -> None:
    rows = collected.runs[True].rows
    texts = generated_texts(rows, collected.tokenizer)
    with_calls, mismatches = parser_mismatches(texts, collected.model_dir)
    print(f"{len(texts)} generations, {with_calls} with tool calls, {len(mismatches)} parsed differently")
    assert with_calls > ROLLOUTS // 2
    assert mismatches == []
    calls = [item for row in rows for item in row["response"]["output"] if item["type"] == "function_call"]
    assert len(calls) == with_calls  # each parsed call became one function_call item


async def post_responses(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{url}/v1/responses", data=orjson.dumps(body)) as answer,
    ):
        return answer.status, orjson.loads(await answer.read())


def test_refusals_are_400s_that_say_which(collected: Collected) -> None:
    row = next(row for row in collected.runs[True].rows if len(row["_inputs"]) >= 2)
    second_turn = [dict(item) for item in row["_inputs"][1]]
    second_turn[0] = {"role": "user", "content": "What is the weather in Quito right now?"}
    request = {"instructions": SYSTEM, "input": second_turn, "tools": [WEATHER_TOOL], "max_output_tokens": 8}
    forced = {**request, "input": row["_inputs"][0], "tool_choice": "required"}
    with serve_model(
        collected.engine,
        return_token_id_information=True,
        token_exact=True,
        tokenizer_path=str(collected.model_dir),
    ) as url:
        rewritten_status, rewritten = asyncio.run(post_responses(url, request))
        forced_status, forced_answer = asyncio.run(post_responses(url, forced))
        stream_status, stream_answer = asyncio.run(post_responses(url, {**request, "stream": True}))
    assert rewritten_status == 400, rewritten
    assert "messages[1] (user) is not in the previous turn's prompt ids" in rewritten["error"]["message"]
    assert forced_status == 400, forced_answer
    assert "tool_choice 'required' is not supported with token_exact" in forced_answer["error"]["message"]
    assert stream_status == 400, stream_answer
    assert stream_answer["error"]["param"] == "stream"
    assert "not served with token_exact on" in stream_answer["error"]["message"]
