"""`code_execution`: the model writes a Python program; hidden stdin/stdout tests decide the reward.

* Tool `run_code(code, stdin="")`: runs the program in the sandbox and answers its outcome,
  exit code, stdout and stderr (trimmed), so the model can test and fix its code. It never runs
  or reveals the hidden tests.
* `verify`: the submission is the last ```python block of the final answer, else the code of
  the last `run_code` call (`code_submission`). It runs once per hidden test of the row
  (`tests: [{input, expected_output}]`, see `code_grading`), each a fresh sandboxed process.
  Reward 1.0 when every test passes, else 0.0 (`partial_credit: true`: the fraction passed).
  A crash, a limit or a wrong answer is a 0 for that test with the reason recorded; a sandbox
  that cannot isolate fails the request (503): no program ever runs unprotected.

The sandbox (`ng_cli.sandbox.PythonSandbox`): no network, none of the host's files, limits on
CPU, memory (of the whole run, through a cgroup where the host allows), processes, file size,
output and wall-clock time, an unprivileged uid per slot.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from code_grading import HiddenTest, outputs_match, parse_hidden_tests, short_error
from code_submission import submitted_code
from pydantic import BaseModel, ConfigDict, Field

from ng_cli.config.schema import ResourcesServerConfig
from ng_cli.sandbox import ExecutionResult, PythonSandbox, SandboxConfig
from ng_cli.servers import ResourcesServer, ToolError, VerifyRequest, tool

__all__ = ["CodeExecution", "CodeExecutionConfig", "RunCodeArgs"]


class CodeExecutionConfig(ResourcesServerConfig):
    """Sandbox limits and grading rules of the code_execution environment."""

    sandbox: SandboxConfig = SandboxConfig()
    """Isolation and limits of every run (tool calls and hidden tests alike)."""
    partial_credit: bool = False
    """Reward the fraction of hidden tests passed instead of all-or-nothing."""
    max_code_chars: int = Field(default=100_000, ge=1)
    """Longest program accepted, in characters."""
    tool_output_chars: int = Field(default=4000, ge=100)
    """stdout (head) and stderr (tail) characters `run_code` shows the model."""
    check_sandbox_on_startup: bool = True
    """Run a trivial program at start-up, so a host that cannot isolate fails loudly and early."""


class RunCodeArgs(BaseModel):
    """Arguments of the `run_code` tool."""

    model_config = ConfigDict(extra="forbid")

    code: str = Field(min_length=1)
    stdin: str = Field(default="", max_length=1_000_000)


class CodeExecution(ResourcesServer[CodeExecutionConfig]):
    """Runs model-written Python in the sandbox; rewards passing the row's hidden tests."""

    config_class: ClassVar[type[CodeExecutionConfig]] = CodeExecutionConfig

    def __init__(self, config: CodeExecutionConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.sandbox = PythonSandbox(config.sandbox)

    async def on_startup(self) -> None:
        if self.config.check_sandbox_on_startup:
            await self.sandbox.check()

    @tool
    async def run_code(self, _session_id: str, args: RunCodeArgs) -> dict[str, Any]:
        """Run the model's program on the given stdin and show it what happened."""
        if len(args.code) > self.config.max_code_chars:
            raise ToolError(
                f"the program has {len(args.code)} characters; the limit is {self.config.max_code_chars}"
            )
        result = await self.sandbox.run(args.code, stdin=args.stdin)
        limit = self.config.tool_output_chars
        return {
            "outcome": result.outcome,
            "exit_code": result.exit_code,
            "stdout": _head(result.stdout, limit),
            "stderr": _tail(result.stderr, limit),
        }

    async def verify(self, _session_id: str, request: VerifyRequest) -> Mapping[str, Any]:
        tests = parse_hidden_tests(request.extra("tests"))
        code, source = submitted_code(request.response)
        verdict: dict[str, Any] = {"tests_total": len(tests), "tests_passed": 0, "code_source": source}
        if code is None:
            error = "no Python program: neither a ```python block in the final answer nor a run_code call"
            return {**verdict, "reward": 0.0, "error": error}
        if len(code) > self.config.max_code_chars:
            error = f"the program has {len(code)} characters; the limit is {self.config.max_code_chars}"
            return {**verdict, "reward": 0.0, "error": error}
        passed, failure = await self._run_tests(code, tests)
        return {**verdict, "reward": self._reward(passed, len(tests)), "tests_passed": passed, **failure}

    def _reward(self, passed: int, total: int) -> float:
        if self.config.partial_credit:
            return passed / total
        return 1.0 if passed == total else 0.0

    async def _run_tests(self, code: str, tests: list[HiddenTest]) -> tuple[int, dict[str, Any]]:
        """(tests passed, the first failure's record); stops at the first failure unless partial credit."""
        passed, failure = 0, {}
        for index, test in enumerate(tests):
            result = await self.sandbox.run(code, stdin=test.input)
            if result.ok and outputs_match(result.stdout, test.expected_output):
                passed += 1
                continue
            if not failure:
                failure = _failure(index, result)
            if not self.config.partial_credit:
                break
        return passed, failure


def _failure(index: int, result: ExecutionResult) -> dict[str, Any]:
    """What went wrong on one hidden test (without revealing its expected output)."""
    outcome = "wrong_answer" if result.ok else result.outcome
    messages = {
        "wrong_answer": f"wrong answer on hidden test {index}",
        "timeout": "the wall-clock limit was reached",
        "cpu_limit": "the CPU-time limit was reached",
        "memory_limit": "the memory limit was reached (the program's processes together)",
        "output_limit": "the output limit was exceeded",
    }
    error = short_error(result.stderr) if outcome in ("runtime_error", "killed") else messages[outcome]
    return {
        "failed_test": index,
        "failure_outcome": outcome,
        "error": error or f"{outcome} (exit code {result.exit_code}, signal {result.signal})",
    }


def _head(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}\n... [{len(text) - limit} more characters cut]"


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"[{len(text) - limit} characters cut] ...\n{text[-limit:]}"
