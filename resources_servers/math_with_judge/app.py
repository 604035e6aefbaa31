"""`math_with_judge`: reward a math answer that is equivalent to the expected one.

verify, for a row with `expected_answer`, by `answer_rule`:
* `nemo_gym` (the default): NeMo Gym 0.7.0's rule, so its rows earn here what they earn there.
  The text is every message's output text; without a closed, non-blank last `\\boxed{...}` the
  reward is 0.0; else math-verify reads the whole text and compares it with the expected answer.
* `lenient`: the answer is the last `\\boxed{...}` (or `\\fbox{...}`, `\\boxed 5`) of the final
  message; without one, math-verify finds it in that message (answer cues, LaTeX, else the last
  expression; see `math_answers`).
math-verify decides (`library_reward`) in a worker process with a deadline (`verify_timeout_s`):
a hang on hostile input costs that rollout its reward, never the server. If it says no and
`judge_model_server` is set, the judge model is asked about the answer (the boxed one, else the
text) (`math_judge`); its strict verdict decides. A judge that fails or gives no verdict yields
0.0 with `judge_error` recorded: never a reward the policy did not earn.

Returns `reward`, `extracted_answer`, `library_reward`, `judge_used`, and when they apply
`library_error`, `judge_verdict` ("equal" / "not_equal"), `judge_error`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from math_answers import extract_boxed, grade, last_closed_box, nemo_gym_grade, warm_up
from math_judge import judge_request, parse_verdict, question_of
from math_metrics import MathMetrics
from pydantic import Field

from ng_cli.config.schema import ResourcesServerConfig, ServerRef
from ng_cli.errors import InvalidOutputError, UpstreamError
from ng_cli.protocol.responses import all_output_text, final_assistant_text
from ng_cli.sandbox import WorkerCrashedError, WorkerPool, WorkerTimeoutError
from ng_cli.servers import ResourcesServer, RetryPolicy, Timeouts, ToolError, VerifyRequest

__all__ = ["MathWithJudge", "MathWithJudgeConfig"]


class MathWithJudgeConfig(ResourcesServerConfig):
    """Answer checking by math-verify, with an optional LLM judge as the second opinion."""

    answer_rule: Literal["nemo_gym", "lenient"] = "nemo_gym"
    """`nemo_gym`: NeMo Gym's rule (no closed `\\boxed{}`, no reward; every message is read);
    `lenient`: also an unboxed answer of the final message (see the module docstring)."""
    judge_model_server: ServerRef | None = None
    """The model server asked when math-verify finds the answers different; null: no judge."""
    should_use_judge: bool = True
    """Ask the judge (when `judge_model_server` is set). NeMo Gym configs keep a judge reference
    with this false; then only math-verify decides."""
    judge_model: str | None = None
    """`model` field of the judge request, for servers that serve several models."""
    judge_responses_create_params: dict[str, Any] = Field(default_factory=dict)
    """More fields of the judge's Responses request (temperature, reasoning, ...), as in NeMo Gym
    configs; its `input` is always ours and is ignored here."""
    judge_timeout_s: float = Field(default=120.0, gt=0)
    """Deadline of one judge call."""
    judge_max_attempts: int = Field(default=2, ge=1)
    """Attempts per judge call (retried on connection errors, timeouts and 5xx only)."""
    judge_max_output_tokens: int = Field(default=1024, ge=16)
    """Tokens the judge may write before its verdict."""
    verify_timeout_s: float = Field(default=30.0, gt=0)
    """Deadline of one math-verify check; past it the worker is killed and the check fails."""
    verify_workers: int = Field(default=2, ge=1, le=64)
    """Worker processes running math-verify (checks at once)."""
    verify_worker_memory_mb: int = Field(default=4096, ge=256)
    """Address-space limit of each math-verify worker."""


class MathWithJudge(ResourcesServer[MathWithJudgeConfig]):
    """Math answers, verified symbolically; a judge model settles what sympy cannot."""

    config_class: ClassVar[type[MathWithJudgeConfig]] = MathWithJudgeConfig
    metric_hooks: ClassVar[MathMetrics] = MathMetrics()
    """pass@k, majority@k and key metrics as NeMo Gym's math_with_judge computes them."""

    def __init__(self, config: MathWithJudgeConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.workers = WorkerPool(
            config.verify_workers, initializer=warm_up, memory_mb=config.verify_worker_memory_mb
        )

    @property
    def judge(self) -> ServerRef | None:
        """The judge to ask, or None when there is none or it is switched off."""
        return self.config.judge_model_server if self.config.should_use_judge else None

    async def on_startup(self) -> None:
        if self.judge is not None:
            self.url_of(self.judge)  # a judge missing from the stack fails now, not at the first verify
        await self.workers.start()

    async def on_shutdown(self) -> None:
        await self.workers.close()

    async def verify(self, _session_id: str, request: VerifyRequest) -> Mapping[str, Any]:
        expected = _expected_answer(request.extra("expected_answer"))
        output = request.response.get("output")
        items = output if isinstance(output, list) else []
        if self.config.answer_rule == "nemo_gym":
            text = all_output_text(items)
            extracted = last_closed_box(text)
            if extracted is None or not extracted.strip():
                return {"reward": 0.0, "extracted_answer": None, "library_reward": 0.0, "judge_used": False}
        else:
            text = final_assistant_text(items)
            extracted = extract_boxed(text)
        verdict: dict[str, Any] = {"extracted_answer": extracted, "judge_used": False}
        is_equal, read, library_error = await self._library_check(expected, extracted, text)
        verdict["library_reward"] = 1.0 if is_equal else 0.0
        if extracted is None or self.config.answer_rule == "nemo_gym":
            verdict["extracted_answer"] = read
        if library_error is not None:
            verdict["library_error"] = library_error
        if is_equal:
            return {**verdict, "reward": 1.0}
        if self.judge is None or not text.strip():
            return {**verdict, "reward": 0.0}
        question = question_of(request.responses_create_params)
        judged, judge_error = await self._ask_judge(question, expected, extracted or text)
        verdict["judge_used"] = True
        if judge_error is not None:
            return {**verdict, "reward": 0.0, "judge_error": judge_error}
        return {
            **verdict,
            "reward": 1.0 if judged else 0.0,
            "judge_verdict": "equal" if judged else "not_equal",
        }

    async def _library_check(
        self, expected: str, extracted: str | None, text: str
    ) -> tuple[bool, str | None, str | None]:
        """(equivalent?, the answer math-verify read, why the check failed if it did)."""
        if not text.strip():
            return False, None, None
        timeout_s = self.config.verify_timeout_s
        try:
            if self.config.answer_rule == "nemo_gym":
                score, read = await self.workers.call(nemo_gym_grade, expected, text, timeout_s=timeout_s)
                return score > 0.5, read, None
            candidate = extracted if extracted is not None else text
            is_equal, read = await self.workers.call(
                grade, expected, candidate, extracted is not None, timeout_s=timeout_s
            )
        except (WorkerTimeoutError, WorkerCrashedError) as exc:
            return False, None, str(exc)
        return is_equal, read, None

    async def _ask_judge(self, question: str, expected: str, answer: str) -> tuple[bool | None, str | None]:
        """(the judge's verdict, or None with the reason it gave none)."""
        assert self.judge is not None
        body = judge_request(
            question=question,
            expected=expected,
            answer=answer,
            max_output_tokens=self.config.judge_max_output_tokens,
            model=self.config.judge_model,
            extra=self.config.judge_responses_create_params,
        )
        deadline = self.config.judge_timeout_s
        try:
            answer_body = await self.post_json_to(  # a judge restarted on another node is followed
                self.judge,
                "/v1/responses",
                body,
                retry=RetryPolicy(max_attempts=self.config.judge_max_attempts),
                timeouts=Timeouts(connect_s=min(5.0, deadline), read_s=deadline, total_s=deadline),
            )
        except (UpstreamError, InvalidOutputError) as exc:
            return None, f"the judge call failed: {exc}"
        output = answer_body.get("output") if isinstance(answer_body, dict) else None
        judge_text = final_assistant_text(output if isinstance(output, list) else [])
        verdict = parse_verdict(judge_text)
        if verdict is None:
            shown = judge_text[-300:] or "(no text)"
            return None, f"the judge gave no verdict ([[A=B]] or [[A!=B]]): {shown!r}"
        return verdict, None


def _expected_answer(value: Any) -> str:
    """The row's expected answer as text; a missing one is the data's fault (HTTP 400)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float) or not str(value).strip():
        raise ToolError(f"the row needs a non-empty 'expected_answer' (text or number), got {value!r}")
    return str(value)
