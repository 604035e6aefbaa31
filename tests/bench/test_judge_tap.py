"""The judge mode's tap (bench/_judge_engine.py): what it forwards, and when a row counts as judged.

Against a fake model server: the tap must lower only output-token caps above its limit, keep every
other field, record each call's status and text, and treat the model server's empty answer for an
overflowing prompt as no answer; a reward with no judge call, or after a failed one, is not judged.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx2 as httpx
import pytest
from fastapi import Request

from ng_cli.servers.app import JSONResponse, build_app, read_json_object
from ng_cli.servers.testing import serve_in_thread

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, ModuleType]:
    """bench/_judge_engine.py and bench/nemo_gym_servers.py (bench/ on sys.path for this test only)."""
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("_judge_engine"), importlib.import_module("nemo_gym_servers")


def fake_model(seen: list[dict[str, Any]]) -> Any:
    app = build_app("fake_model")

    @app.post("/v1/responses")
    async def responses(request: Request) -> JSONResponse:
        body = await read_json_object(request)
        seen.append(body)
        if body.get("input") == "too long":  # what ng_cli.conversion.overflow answers
            return JSONResponse({"status": "incomplete", "output": [],
                                 "incomplete_details": {"reason": "context_length_exceeded"}})  # fmt: skip
        text = {"type": "output_text", "text": "verdict: [[B]]"}
        return JSONResponse({"status": "completed", "output": [{"type": "message", "content": [text]}]})

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        seen.append(await read_json_object(request))
        return JSONResponse({"error": {"message": "bad request"}}, status_code=400)

    return app


def test_the_tap_forwards_caps_and_records(bench: tuple[ModuleType, ModuleType]) -> None:
    engine, servers = bench
    seen: list[dict[str, Any]] = []
    with serve_in_thread(fake_model(seen)) as model_url:
        tap = engine.JudgeTap(model_url)
        with serve_in_thread(tap.build_app()) as tap_url:
            big = {"input": "judge this", "max_output_tokens": 8192, "temperature": 0.5}
            assert httpx.post(f"{tap_url}/v1/responses", json=big, timeout=30).status_code == 200
            mark = tap.mark()
            small = {"input": "too long", "max_output_tokens": 16}
            assert httpx.post(f"{tap_url}/v1/responses", json=small, timeout=30).status_code == 200
            chat = {"messages": [], "max_tokens": 9000, "max_completion_tokens": 10}
            assert httpx.post(f"{tap_url}/v1/chat/completions", json=chat, timeout=30).status_code == 400
            calls = tap.since(0)
            assert tap.since(mark) == calls[1:]
    assert seen == [
        {"input": "judge this", "max_output_tokens": engine.JUDGE_MAX_TOKENS, "temperature": 0.5},
        small,
        {"messages": [], "max_tokens": engine.JUDGE_MAX_TOKENS, "max_completion_tokens": 10},
    ]
    assert [(c.path, c.status, c.capped, c.answered) for c in calls] == [
        ("/v1/responses", 200, True, True),
        ("/v1/responses", 200, False, False),
        ("/v1/chat/completions", 400, True, False),
    ]
    assert calls[0].text == "verdict: [[B]]"
    assert servers._judge_problem(calls[:1]) is None
    assert "answered 200" in (servers._judge_problem(calls[:2]) or "")
    assert "answered 400: " in (servers._judge_problem(calls[2:]) or "")


def test_a_reward_without_a_judge_call_is_not_judged(bench: tuple[ModuleType, ModuleType]) -> None:
    engine, servers = bench
    assert servers._judge_problem([]) == "reward given without a judge call"
    assert servers._judge_problem([engine.JudgeCall("/v1/responses", 200, "yes")]) is None
