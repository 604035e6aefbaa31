"""math_with_judge's verify: math-verify in a worker, and the judge as a stub model on loopback.

One worker pool serves the whole module (its start-up imports sympy), so the tests share one
event loop.
"""

from __future__ import annotations

import re
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse

from ng_cli.errors import ConfigError, NgError
from ng_cli.sandbox import WorkerPool
from ng_cli.servers import ToolError, VerifyRequest
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.spec import ServerAddress
from ng_cli.servers.testing import Policy, ScriptedModel, assistant_message, serve_in_thread

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

ENV_DIR = Path(__file__).resolve().parents[1]
Server = load_server_class(ENV_DIR / "app.py")
math_answers = sys.modules["math_answers"]
JUDGE_REF = {"type": "responses_api_models", "name": "judge_model"}
QUESTION = "What is 1/2 + 1/4?"


class JudgeScript:
    """What the stub judge answers; each test sets `policy`."""

    def __init__(self) -> None:
        self.policy: Policy = lambda _request: [assistant_message("[[A=B]]")]

    def __call__(self, request: dict[str, Any]) -> Any:
        return self.policy(request)


@pytest.fixture(scope="module")
def judge_stack() -> Iterator[tuple[JudgeScript, ScriptedModel, str]]:
    script = JudgeScript()
    model = ScriptedModel(script, name="judge_model")
    with serve_in_thread(model.build_app()) as url:
        yield script, model, url


@pytest.fixture
def judge(judge_stack: tuple[JudgeScript, ScriptedModel, str]) -> tuple[JudgeScript, ScriptedModel, str]:
    script, model, url = judge_stack
    script.policy = lambda _request: [assistant_message("[[A=B]]")]
    model.requests.clear()
    return script, model, url


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def pool() -> AsyncIterator[WorkerPool]:
    workers = WorkerPool(1, initializer=math_answers.warm_up)
    await workers.start()
    yield workers
    await workers.close()


@pytest_asyncio.fixture(loop_scope="module")
async def make_server(pool: WorkerPool) -> AsyncIterator[Callable[..., Any]]:
    servers: list[Any] = []

    def factory(judge_url: str | None = None, **block: Any) -> Any:
        if judge_url is not None:
            block = {"judge_model_server": JUDGE_REF, "judge_timeout_s": 5.0, **block}
        addresses = (
            {
                "judge_model": ServerAddress(
                    server_type="responses_api_models", implementation="stub", url=judge_url
                )
            }
            if judge_url
            else {}
        )
        server = Server(Server.config_class.model_validate(block), name="math", servers=addresses)
        server.workers = pool
        servers.append(server)
        return server

    yield factory
    for server in servers:
        await server.http.close()


async def verify(server: Any, text: str, expected: Any = "\\frac{3}{4}") -> dict[str, Any]:
    request = VerifyRequest.model_validate(
        {
            "responses_create_params": {"input": [{"role": "user", "content": QUESTION}]},
            "response": {"output": [assistant_message(text)]},
            "expected_answer": expected,
        }
    )
    return dict(await server.verify("s1", request))


async def test_an_equivalent_answer_is_rewarded_without_asking_the_judge(
    make_server: Any, judge: Any
) -> None:
    _, model, url = judge
    verdict = await verify(make_server(url), "Adding gives \\boxed{0.75}.")
    assert verdict == {
        "reward": 1.0,
        "extracted_answer": "0.750000000000000",  # sympy's form, as NeMo Gym reports it
        "library_reward": 1.0,
        "judge_used": False,
    }
    assert model.requests == []


async def test_a_wrong_answer_without_a_judge_earns_nothing(make_server: Any) -> None:
    verdict = await verify(make_server(), "So it is \\boxed{0.7}.")
    assert verdict == {
        "reward": 0.0,
        "extracted_answer": "0.700000000000000",
        "library_reward": 0.0,
        "judge_used": False,
    }
    lenient = await verify(make_server(answer_rule="lenient"), "So it is \\boxed{0.7}.")
    assert lenient == {"reward": 0.0, "extracted_answer": "0.7", "library_reward": 0.0, "judge_used": False}


async def test_a_numeric_expected_answer_is_accepted(make_server: Any) -> None:
    assert (await verify(make_server(), "\\boxed{720}", expected=720))["reward"] == 1.0


async def test_the_judge_settles_what_math_verify_rejects(make_server: Any, judge: Any) -> None:
    script, model, url = judge
    script.policy = lambda _request: [assistant_message("Three quarters is 3/4.\n[[A=B]]")]
    verdict = await verify(make_server(url), "The sum is \\boxed{\\text{three quarters}}")
    assert verdict["reward"] == 1.0
    assert (verdict["library_reward"], verdict["judge_used"], verdict["judge_verdict"]) == (
        0.0,
        True,
        "equal",
    )
    (request,) = model.requests
    prompt = request["input"][1]["content"]
    assert QUESTION in prompt
    assert "\\frac{3}{4}" in prompt
    assert "\\text{three quarters}" in prompt


async def test_a_judge_that_says_different_gives_nothing(make_server: Any, judge: Any) -> None:
    script, _, url = judge
    script.policy = lambda _request: [assistant_message("[[A!=B]]")]
    verdict = await verify(make_server(url), "\\boxed{0.7}")
    assert (verdict["reward"], verdict["judge_verdict"]) == (0.0, "not_equal")
    assert "judge_error" not in verdict


@pytest.mark.parametrize(
    ("judge_text", "error_pattern"),
    [
        ("They are equivalent.", "no verdict"),
        ("[[A=B]] or maybe [[A!=B]]", "no verdict"),
        ("", "no verdict.*no text"),
    ],
    ids=["no-token", "both-tokens", "empty"],
)
async def test_a_judge_without_a_verdict_gives_nothing(
    make_server: Any, judge: Any, judge_text: str, error_pattern: str
) -> None:
    script, _, url = judge
    script.policy = lambda _request: [assistant_message(judge_text)]
    verdict = await verify(make_server(url), "\\boxed{0.7}")
    assert (verdict["reward"], verdict["judge_used"]) == (0.0, True)
    assert pytest.approx(0.0) == verdict["library_reward"]
    assert "judge_verdict" not in verdict
    assert re.search(error_pattern, verdict["judge_error"])


async def test_a_failing_judge_gives_nothing_after_its_retries(make_server: Any, judge: Any) -> None:
    script, model, url = judge

    def broken(_request: dict[str, Any]) -> Any:
        raise NgError("judge exploded")

    script.policy = broken
    verdict = await verify(make_server(url, judge_max_attempts=2), "\\boxed{0.7}")
    assert verdict["reward"] == 0.0
    assert "the judge call failed" in verdict["judge_error"]
    assert "500" in verdict["judge_error"]
    assert len(model.requests) == 2


async def test_a_slow_judge_times_out_into_nothing(make_server: Any, judge: Any) -> None:
    script, _, url = judge

    def slow(_request: dict[str, Any]) -> Any:
        time.sleep(1.5)
        return [assistant_message("[[A=B]]")]

    script.policy = slow
    verdict = await verify(make_server(url, judge_timeout_s=0.3, judge_max_attempts=1), "\\boxed{0.7}")
    assert verdict["reward"] == 0.0
    assert "did not answer in time" in verdict["judge_error"]


async def test_an_unreachable_judge_gives_nothing(make_server: Any) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    verdict = await verify(make_server(f"http://127.0.0.1:{port}", judge_max_attempts=1), "\\boxed{0.7}")
    assert verdict["reward"] == 0.0
    assert "unreachable" in verdict["judge_error"]


async def test_a_judge_answering_garbage_gives_nothing(make_server: Any) -> None:
    app = FastAPI()

    @app.post("/v1/responses")
    async def garbage() -> PlainTextResponse:
        return PlainTextResponse("<html>not json</html>")

    with serve_in_thread(app) as url:
        verdict = await verify(make_server(url, judge_max_attempts=1), "\\boxed{0.7}")
    assert verdict["reward"] == 0.0
    assert "not JSON" in verdict["judge_error"]


async def test_an_empty_answer_is_not_sent_to_the_judge(make_server: Any, judge: Any) -> None:
    _, model, url = judge
    verdict = await verify(make_server(url), "   ")
    assert verdict == {"reward": 0.0, "extracted_answer": None, "library_reward": 0.0, "judge_used": False}
    assert model.requests == []


async def test_a_boxed_answer_beats_later_numbers(make_server: Any) -> None:
    verdict = await verify(make_server(), "\\boxed{7}, checked in 2 steps", expected="7")
    assert (verdict["reward"], verdict["extracted_answer"]) == (1.0, "7")


async def test_without_a_box_nemo_gyms_rule_gives_nothing_and_asks_no_judge(
    make_server: Any, judge: Any
) -> None:
    _, model, url = judge
    for text in ("It equals $\\frac{3}{4}$", "\\fbox{3/4}", "\\boxed{3/4} or \\boxed{3/"):
        verdict = await verify(make_server(url), text, expected="3/4")
        assert verdict == {
            "reward": 0.0,
            "extracted_answer": None,
            "library_reward": 0.0,
            "judge_used": False,
        }
    assert model.requests == []


async def test_lenient_rule_reads_an_answer_without_a_box(make_server: Any) -> None:
    server = make_server(answer_rule="lenient")
    verdict = await verify(server, "It equals $\\frac{3}{4}$", expected="3/4")
    assert (verdict["reward"], verdict["extracted_answer"]) == (1.0, "\\frac{3}{4}")
    none = await verify(server, "I cannot solve this.")
    assert (none["reward"], none["extracted_answer"]) == (0.0, None)


async def test_a_hostile_answer_costs_its_reward_not_the_server(make_server: Any, judge: Any) -> None:
    script, _, url = judge
    script.policy = lambda _request: [assistant_message("[[A!=B]]")]
    server = make_server(url, verify_timeout_s=1.0)
    started = time.monotonic()
    verdict = await verify(server, "\\boxed{9^{9^{9^{9}}}}", expected="1")
    assert time.monotonic() - started < 10
    assert verdict["reward"] == 0.0
    assert "did not finish within 1 s" in verdict["library_error"]
    assert verdict["judge_used"]  # the judge still gets its say
    assert (await verify(server, "\\boxed{1}", expected="1"))["reward"] == 1.0  # a fresh worker took over


@pytest.mark.parametrize("expected", [None, "", "  ", True, ["1"]])
async def test_a_row_without_a_usable_expected_answer_is_a_data_error(
    make_server: Any, expected: Any
) -> None:
    with pytest.raises(ToolError, match="expected_answer"):
        await verify(make_server(), "\\boxed{1}", expected=expected)


async def test_a_judge_switched_off_is_not_asked(make_server: Any, judge: Any) -> None:
    _, model, url = judge
    verdict = await verify(make_server(url, should_use_judge=False), "\\boxed{0.7}")
    assert (verdict["reward"], verdict["judge_used"]) == (0.0, False)
    assert model.requests == []


async def test_a_judge_missing_from_the_stack_fails_at_start_up() -> None:
    config = Server.config_class.model_validate({"judge_model_server": JUDGE_REF})
    server = Server(config, name="math", servers={})
    with pytest.raises(ConfigError, match="judge_model"):
        await server.on_startup()
