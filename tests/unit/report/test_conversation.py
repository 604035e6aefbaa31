"""A row as the browser shows it: messages, folded reasoning, calls with outputs, tokens per turn."""

from __future__ import annotations

from ng_cli.report.conversation import MAX_TEXT_CHARS, compact, first_user_text, model_turns
from tests.fixtures.rollouts.rollout_rows import rollout_row


def test_compact_keeps_the_chat_and_counts_tokens_per_model_turn() -> None:
    row = rollout_row(3, 1, 1.0, city="Oslo", expected_city="Oslo", judge={"score": 0.9})
    view = compact(row, line=7)
    assert view["in"] == [
        {"k": "msg", "role": "system", "text": "Be brief."},
        {"k": "msg", "role": "user", "text": "Weather in Oslo?"},
    ]
    assert [item["k"] for item in view["out"]] == ["reason", "call", "result", "msg"]
    reason, call, result, answer = view["out"]
    assert reason == {"k": "reason", "text": "look it up", "turn": 0}
    assert call["name"] == "get_weather"
    assert call["args"] == '{\n  "city": "Oslo"\n}'
    assert call["turn"] == 0
    assert "turn" not in result
    assert '"t": 24' in result["text"]
    assert answer == {"k": "msg", "role": "assistant", "text": "Oslo: sunny", "turn": 1}
    assert view["tok"] == [[30, 7], [50, 4]]
    assert view["fields"] == {"reward": 1.0, "expected_city": "Oslo", "judge": '{"score":0.9}'}
    assert (view["status"], view["why"], view["line"]) == ("completed", None, 7)
    assert "prompt_token_ids" not in str(view)


def test_without_token_ids_there_are_no_counts_and_incomplete_says_why() -> None:
    view = compact(rollout_row(0, 0, 0.0, tokens=False, status="incomplete"), line=1)
    assert view["tok"] == []
    assert (view["status"], view["why"]) == ("incomplete", "context_length_exceeded")


def test_odd_shapes_are_shown_not_dropped() -> None:
    row = {
        "responses_create_params": {"input": "just a string"},
        "response": {
            "output": [
                {"type": "web_search_call", "id": "w1"},
                "junk",
                {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
            ]
        },
        "reward": 0.0,
        "long": "x" * 1000,
    }
    view = compact(row, line=2)
    assert view["in"] == [{"k": "msg", "role": "user", "text": "just a string"}]
    assert view["out"][0]["k"] == "other"
    assert view["out"][0]["type"] == "web_search_call"
    assert view["out"][1]["text"] == "no"
    assert len(view["fields"]["long"]) == 301
    assert view["status"] == "unknown"


def test_very_long_texts_are_capped_and_say_so() -> None:
    row = rollout_row(0, 0, 1.0)
    row["response"]["output"][-1]["content"][0]["text"] = "y" * (MAX_TEXT_CHARS + 5)
    text = compact(row, line=1)["out"][-1]["text"]
    assert text.endswith("(5 more characters in the JSONL row)")


def test_first_user_text_and_model_turns() -> None:
    row = rollout_row(0, 0, 1.0, city="Lima")
    assert first_user_text(row) == "Weather in Lima?"
    assert model_turns(row["response"]["output"]) == 2
    assert model_turns([]) == 0
    assert model_turns(None) == 0
