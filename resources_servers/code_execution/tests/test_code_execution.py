"""code_execution's tool and verify, against the real sandbox (no HTTP)."""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from ng_cli.sandbox import SandboxUnavailableError
from ng_cli.servers import ToolError, VerifyRequest
from ng_cli.servers.loading import load_server_class

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        sys.platform != "linux" or os.geteuid() != 0,
        reason="the sandbox needs Linux and root (namespaces, mounts, setuid)",
    ),
]

ENV_DIR = Path(__file__).resolve().parents[1]
Server = load_server_class(ENV_DIR / "app.py")
app_module = sys.modules[Server.__module__]
ROWS = [orjson.loads(line) for line in (ENV_DIR / "data" / "example.jsonl").read_text().splitlines()]
SUM_ROW = ROWS[0]  # a + b
SUM = "a, b = map(int, input().split())\nprint(a + b)\n"


def make_server(**block: Any) -> Any:
    sandbox = {"uid_base": 100_000 + secrets.randbelow(100_000) * 8, "cpu_time_s": 2, "wall_time_s": 20.0}
    config = Server.config_class.model_validate({"sandbox": sandbox, **block})
    return Server(config, name="code_execution")


def answer(text: str, *calls: dict[str, Any]) -> dict[str, Any]:
    items = [
        *calls,
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]},
    ]
    return {"output": items}


def fenced(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}```"


async def verify(server: Any, response: dict[str, Any], row: dict[str, Any] = SUM_ROW) -> dict[str, Any]:
    request = VerifyRequest.model_validate({**row, "response": response})
    return dict(await server.verify("s1", request))


async def test_a_correct_program_passes_every_hidden_test() -> None:
    verdict = await verify(make_server(), answer(fenced(SUM)))
    assert verdict == {"reward": 1.0, "tests_total": 3, "tests_passed": 3, "code_source": "final_message"}


async def test_a_wrong_program_earns_nothing_and_the_expected_output_stays_hidden() -> None:
    verdict = await verify(make_server(), answer(fenced("a, b = map(int, input().split())\nprint(a - b)\n")))
    assert verdict["reward"] == 0.0
    assert (verdict["failed_test"], verdict["failure_outcome"]) == (0, "wrong_answer")
    assert verdict["tests_passed"] == 0  # stops at the first failure
    assert "3" not in verdict["error"]


async def test_a_crashing_program_earns_nothing_with_the_error_recorded() -> None:
    verdict = await verify(
        make_server(), answer(fenced("a, b = map(int, input().split())\nprint(a // (b - b))\n"))
    )
    assert verdict["reward"] == 0.0
    assert verdict["failure_outcome"] == "runtime_error"
    assert verdict["error"] == "ZeroDivisionError: integer division or modulo by zero"


async def test_an_endless_program_earns_nothing_at_the_cpu_limit() -> None:
    verdict = await verify(make_server(), answer(fenced("while True:\n    pass\n")))
    assert (verdict["reward"], verdict["failure_outcome"]) == (0.0, "cpu_limit")
    assert verdict["error"] == "the CPU-time limit was reached"


async def test_partial_credit_rewards_the_fraction_passed() -> None:
    almost = "a, b = map(int, input().split())\nprint(a + b if a + b != 0 else 1)\n"
    verdict = await verify(make_server(partial_credit=True), answer(fenced(almost)))
    assert verdict["reward"] == pytest.approx(2 / 3)
    assert (verdict["tests_passed"], verdict["failed_test"]) == (2, 1)


async def test_the_last_run_code_call_is_graded_when_the_answer_has_no_block() -> None:
    call = {
        "type": "function_call",
        "call_id": "c1",
        "name": "run_code",
        "arguments": orjson.dumps({"code": SUM}).decode(),
    }
    verdict = await verify(make_server(), answer("It works, see above.", call))
    assert (verdict["reward"], verdict["code_source"]) == (1.0, "run_code")


async def test_no_program_earns_nothing_and_says_why() -> None:
    verdict = await verify(make_server(), answer("The answer is to add them."))
    assert verdict["reward"] == 0.0
    assert verdict["code_source"] is None
    assert "no Python program" in verdict["error"]


async def test_a_program_over_the_size_limit_is_not_run() -> None:
    verdict = await verify(make_server(max_code_chars=20), answer(fenced(SUM)))
    assert verdict["reward"] == 0.0
    assert "limit is 20" in verdict["error"]


async def test_a_row_without_hidden_tests_is_a_data_error() -> None:
    row = {"responses_create_params": SUM_ROW["responses_create_params"]}
    with pytest.raises(ToolError, match="no 'tests' list"):
        await verify(make_server(), answer(fenced(SUM)), row)


async def test_a_sandbox_that_cannot_isolate_fails_the_request_instead_of_scoring(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = make_server()

    async def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise SandboxUnavailableError("isolation failed")

    monkeypatch.setattr(server.sandbox, "run", refuse)
    with pytest.raises(SandboxUnavailableError):
        await verify(server, answer(fenced(SUM)))


async def test_run_code_shows_the_model_what_happened() -> None:
    server = make_server()
    ok = await server.run_code("s1", app_module.RunCodeArgs(code=SUM, stdin="2 40\n"))
    assert ok == {"outcome": "ok", "exit_code": 0, "stdout": "42\n", "stderr": ""}
    crash = await server.run_code("s1", app_module.RunCodeArgs(code="raise ValueError('nope')"))
    assert (crash["outcome"], crash["exit_code"]) == ("runtime_error", 1)
    assert crash["stderr"].strip().endswith("ValueError: nope")


async def test_run_code_trims_long_output_for_the_model() -> None:
    server = make_server(tool_output_chars=100)
    result = await server.run_code("s1", app_module.RunCodeArgs(code="print('x' * 5000)"))
    assert result["stdout"].startswith("x" * 100)
    assert "4901 more characters cut" in result["stdout"]


async def test_run_code_refuses_a_program_over_the_size_limit() -> None:
    with pytest.raises(ToolError, match="limit is 5"):
        await make_server(max_code_chars=5).run_code("s1", app_module.RunCodeArgs(code=SUM))


async def test_every_example_row_is_solvable() -> None:
    solutions = [
        SUM,
        "print(input()[::-1])\n",
        "print(sum(ch in 'aeiouAEIOU' for ch in input()))\n",
        "n = int(input())\na, b = 0, 1\nfor _ in range(n):\n    a, b = b, a + b\nprint(a)\n",
        "input()\nprint(*sorted(map(int, input().split())))\n",
    ]
    server = make_server()
    verdicts = [
        await verify(server, answer(fenced(code)), row) for code, row in zip(solutions, ROWS, strict=True)
    ]
    assert [verdict["reward"] for verdict in verdicts] == [1.0] * 5
