"""The report in a real browser, made from rollouts a real stack produced.

    ng_collect_rollouts +report=true (a subprocess) -> simple_agent -> example_single_tool_call
                                                                \\-> scripted model (this test's policy)

The agent and the environment are the shipped ones, served on loopback; the model is scripted:
it reasons, calls get_weather with the asked city, then answers (wrongly for Tokyo), with token
ids on every turn. Oslo's prompt is "too long": the model answers as vllm_model does on a context
overflow (an empty response marked incomplete, `context_length_exceeded`); Sydney's requests are
refused (400), so its rollouts fail and there is a failure class to plot. Headless Chromium from the OS packages then opens the report with the network cut off,
checks every plot drew marks, opens rollouts from the task table and reads their tool call,
tool output and reward against the JSONL. The screenshot goes to test-artifacts/ (or
$NG_TEST_ARTIFACTS_DIR).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ng_cli.errors import BadRequestError
from ng_cli.report import write_report
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.testing import (
    RolloutStack,
    assistant_message,
    function_call,
    serve_rollout_stack,
    tool_outputs,
)
from tests.fixtures.browser import chromium_page, require_browser
from tests.fixtures.rollouts.rollout_rows import rollout_row, write_jsonl

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ENV_DIR = REPO / "resources_servers" / "example_single_tool_call"
Environment = load_server_class(ENV_DIR / "app.py")
Agent = load_server_class(REPO / "responses_api_agents" / "simple_agent" / "app.py")
REPEATS = 3
PLOTS = ("reward", "passk", "length", "turns", "failures")


def with_token_ids(items: list[dict[str, Any]], request: dict[str, Any]) -> list[dict[str, Any]]:
    """Token ids on the turn's last item, as vllm_model puts them: the prompt grows every turn."""
    prompt = list(range(20 + 10 * len(request["input"])))
    generated = list(range(5 + len(items)))
    items[-1] = {
        **items[-1],
        "prompt_token_ids": prompt,
        "generation_token_ids": generated,
        "generation_log_probs": [-0.5] * len(generated),
    }
    return items


def policy(request: dict[str, Any]) -> list[dict[str, Any]] | dict[str, Any]:
    user = next(item["content"] for item in request["input"] if item.get("role") == "user")
    city = re.search(r"weather in (.+?) right now", user)
    assert city, user
    if city.group(1) == "Sydney":
        raise BadRequestError("this model refuses Sydney")
    if city.group(1) == "Oslo":
        return {
            "status": "incomplete",
            "incomplete_details": {"reason": "context_length_exceeded"},
            "output": [],
        }
    outputs = tool_outputs(request)
    if not outputs:
        thinking = {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": f"Look up {city.group(1)}."}],
        }
        return with_token_ids([thinking, function_call("get_weather", {"city": city.group(1)})], request)
    weather = outputs[-1]
    temperature = weather["temperature"] + (7 if weather["city"] == "Tokyo" else 0)
    answer = f"In {weather['city']} it is {weather['condition']}, {temperature} degrees."
    return with_token_ids([assistant_message(answer)], request)


@pytest.fixture
def stack() -> Iterator[RolloutStack]:
    with serve_rollout_stack(Environment, Agent, policy, resources_name="example_single_tool_call") as served:
        yield served


@pytest.fixture
def artifacts() -> Path:
    directory = Path(os.environ.get("NG_TEST_ARTIFACTS_DIR") or REPO / "test-artifacts")
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def collect_with_report(tmp_path: Path, agent_url: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "env.yaml").write_text("{}\n")
    return subprocess.run(
        [
            str(BIN / "ng_collect_rollouts"),
            "+agent_name=agent",
            f"+agent_urls.agent={agent_url}",
            f"+input_jsonl_fpath={ENV_DIR / 'data' / 'example.jsonl'}",
            "+output_jsonl_fpath=out.jsonl",
            f"+num_repeats={REPEATS}",
            "+max_attempts=1",
            "+report=true",
        ],
        cwd=tmp_path,
        env={**os.environ, "NG_ENV_YAML": str(tmp_path / "env.yaml")},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_report_of_collected_rollouts_in_chromium(
    tmp_path: Path, stack: RolloutStack, artifacts: Path
) -> None:
    chromium = require_browser()
    collected = collect_with_report(tmp_path, stack.agent_url)
    assert collected.returncode == 1, collected.stderr  # Sydney's rollouts failed
    report = tmp_path / "out_report.html"
    assert "report: out_report.html  (12 rollouts, 3 failed" in collected.stderr
    rows = {
        (row["_ng_task_index"], row["_ng_rollout_index"]): row
        for row in map(orjson.loads, (tmp_path / "out.jsonl").read_bytes().splitlines())
    }
    assert len(rows) == 4 * REPEATS
    html = report.read_text()
    assert "<script src" not in html
    assert "<link" not in html
    assert "http://" not in html.split("<script id=")[0]

    with chromium_page(chromium) as page:
        requests: list[str] = []
        page.on("request", lambda request: requests.append(request.url))
        page.route(re.compile(r"^https?://"), lambda route: route.abort())
        page.set_viewport_size({"width": 1280, "height": 900})
        page.goto(report.as_uri())
        page.wait_for_selector("body[data-ready=true]", timeout=30_000)

        for plot in PLOTS:
            marks = page.locator(f"#plot-{plot} svg.plot .mark").count()
            assert marks > 0, f"plot {plot!r} drew nothing"
        assert page.locator("#plot-failures svg title", has_text="http_4xx").count() > 0
        cards = page.locator("#metrics .card").all_inner_texts()
        assert any(card.startswith("3\n") and "context overflows" in card for card in cards), cards
        assert page.locator("#tasks tbody tr").count() == 5

        # Tokyo (task 2): the tool ran, the answer was wrong, so every repeat scored 0.
        page.locator("#tasks tbody tr[data-task='2']").click()
        page.locator("#repeats button[data-repeat='1']").click()
        conversation = page.locator("#conversation")
        assert "get_weather" in conversation.locator(".tool-call").inner_text().lower()
        assert '"city": "Tokyo"' in conversation.locator(".tool-call pre").inner_text()
        expected_output = orjson.loads(rows[(2, 1)]["response"]["output"][2]["output"])
        assert (
            f'"condition": "{expected_output["condition"]}"'
            in conversation.locator(".tool-result").inner_text()
        )
        assert (
            conversation.locator(".reward").inner_text() == f"reward {rows[(2, 1)]['reward']:g}" == "reward 0"
        )
        assert "prompt tokens" in conversation.locator(".turn").first.inner_text()
        conversation.locator("details.reasoning summary").click()
        assert "Look up Tokyo." in conversation.locator("details.reasoning").inner_text()

        # Paris (task 0) scored 1.0; sorting by mean reward puts a solved task first.
        page.locator("#tasks th[data-key=mean]").click()
        page.locator("#tasks th[data-key=mean]").click()
        assert page.locator("#tasks tbody tr").first.locator("td").nth(4).inner_text() == "1"
        page.locator("#tasks tbody tr[data-task='0']").click()
        assert (
            conversation.locator(".reward").inner_text() == f"reward {rows[(0, 0)]['reward']:g}" == "reward 1"
        )
        assert "In Paris it is" in conversation.locator(".role-assistant").inner_text()

        # Sydney (task 4): every repeat failed; the browser says so instead of showing a reward.
        page.select_option("#mode", "failed")
        assert page.locator("#tasks tbody tr").count() == 1
        assert "input line 5" in page.locator("#tasks tbody tr").first.inner_text()
        page.locator("#tasks tbody tr").first.click()
        assert page.locator("#repeats button.failed").count() == REPEATS
        assert "failed: http_4xx" in page.locator("#repeats").inner_text()

        page.select_option("#mode", "all")
        page.fill("#filter", "tokyo")
        assert page.locator("#tasks tbody tr").count() == 1
        page.locator("#tasks tbody tr[data-task='2']").click()
        page.screenshot(path=str(artifacts / "report_browser.png"), full_page=True)
    assert all(url.startswith("file://") for url in requests), requests
    assert (artifacts / "report_browser.png").stat().st_size > 10_000


@pytest.mark.parametrize("text", ["<!--<script", "<!--<script>x</script>-->", "</script><b>bold</b>"])
def test_text_that_reads_as_script_markup_is_shown_verbatim_in_chromium(tmp_path: Path, text: str) -> None:
    """`<!--<script` in the data used to turn the rest of the page into script text: empty tables."""
    chromium = require_browser()
    rows = [rollout_row(task, 0, 1.0, city=f"{text} {task}", agent=f"agent {text}") for task in range(3)]
    report = write_report(write_jsonl(tmp_path / "out.jsonl", rows)).path

    with chromium_page(chromium) as page:
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.route(re.compile(r"^https?://"), lambda route: route.abort())
        page.goto(report.as_uri())
        page.wait_for_selector("body[data-ready=true]", timeout=30_000)
        assert errors == []
        assert page.locator("#tasks tbody tr").count() == 3
        assert f"Weather in {text} 1?" in page.locator("#tasks tbody tr[data-task='1']").inner_text()
        page.locator("#tasks tbody tr[data-task='1']").click()
        assert f"{text} 1: sunny" in page.locator("#conversation .role-assistant").inner_text()
        assert page.locator("b", has_text="bold").count() == 0  # never markup
