"""token_exact with the embedded model (models/tiny-weather, its own tokenizer) on the CPU vLLM.

The trained model calls get_weather and then answers, unforced, at vLLM's default temperature:
200 rollouts each way. With `token_exact: true` no rollout drifts and every prompt is the
previous prompt + generation + the tail of vLLM's own rendering. Without it the count is only
reported: a trained model mostly generates the ids its tokenizer would pick, so the
re-rendered history may or may not drift. Set NG_TOKEN_EXACT_ROLLOUTS to run fewer.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from ng_cli.tokens.chat_template import ChatTokenizer
from tests.fixtures.tokens.engine_checks import generated_texts, parser_mismatches, tail_mismatches
from tests.fixtures.tokens.rollouts import Run, collect_both_ways
from tests.fixtures.vllm_engine import VllmServer

ROOT = Path(__file__).resolve().parents[2]
MODEL_DIR = ROOT / "models" / "tiny-weather"
ROLLOUTS = int(os.environ.get("NG_TOKEN_EXACT_ROLLOUTS", "200"))


@pytest.fixture(scope="module")
def collected(
    weather_engine: VllmServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[VllmServer, dict[bool, Run]]:
    """On the session's embedded-model engine, shared with test_e2e_collect_seeded.py."""
    tmp = tmp_path_factory.mktemp("token-exact-embedded")
    runs = collect_both_ways(
        weather_engine, MODEL_DIR, tmp, ROLLOUTS, max_turns=lambda _index: 3, extras=lambda _i, _t: {}
    )
    return weather_engine, runs


def test_embedded_model_with_token_exact_never_drifts(
    collected: tuple[VllmServer, dict[bool, Run]],
) -> None:
    engine, runs = collected
    print("token_exact false:", runs[False].report.summary())
    print("token_exact true:", runs[True].report.summary())
    rows, report = runs[True].rows, runs[True].report
    assert report.with_token_ids == ROLLOUTS
    assert report.drifted == 0
    turns = [len([i for i in row["response"]["output"] if "prompt_token_ids" in i]) for row in rows]
    assert sum(turns) > ROLLOUTS  # the model called the tool, so rollouts have more than one turn
    tokenizer = ChatTokenizer.load(MODEL_DIR)
    assert asyncio.run(tail_mismatches(engine, rows, tokenizer.end_of_turn_id)) == []
    with_calls, mismatches = parser_mismatches(generated_texts(rows, tokenizer), MODEL_DIR)
    assert with_calls > 0
    assert mismatches == []
