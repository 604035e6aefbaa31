"""The model's answer: find it in the text, and grade it against the expected one, by two rules.

NeMo Gym's rule (`answer_rule: nemo_gym`, the default; NeMo Gym 0.7.0's
resources_servers/math_with_judge/app.py): the text is every message's output text; without a
closed, non-blank last `\\boxed{...}` (`last_closed_box`) there is no answer (0.0); else
math-verify's `math_metric` reads the whole text and compares it with the boxed expected answer
(`nemo_gym_grade`).

The lenient rule (`answer_rule: lenient`): the answer is the last `\\boxed{...}` of the final
message (a balanced-brace scan that also takes `\\fbox{...}` and `\\boxed 5`); without one,
math-verify reads the whole final text and takes the last expression it can parse, after answer
cues such as "the answer is" (it reads `$\\frac{3}{4}$` as 3/4 where a last-number regex would
read 4).

Grading is math-verify's (sympy: fractions, LaTeX, sets, intervals, equivalent forms) and runs
in a `WorkerPool` process: sympy can hang in C on hostile input, and math-verify's own timeouts
use `signal.alarm`, which works only in a main thread, as a worker's is.
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Any

__all__ = ["extract_boxed", "grade", "last_closed_box", "nemo_gym_grade", "warm_up"]

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*")


def extract_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` (or `\\fbox{...}`, or `\\boxed 5`), braces balanced."""
    for match in reversed(list(_BOXED.finditer(text))):
        start = match.end()
        if start < len(text) and text[start] == "{":
            content = _balanced(text, start)
        else:
            content = re.match(r"[^\s$]+", text[start:])
            content = content.group(0) if content else None
        if content is not None and content.strip():
            return content.strip()
    return None


def _balanced(text: str, open_at: int) -> str | None:
    """The text inside the braces opening at `open_at`; escaped braces (`\\{`) do not count."""
    depth, index = 0, open_at
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : index]
        index += 1
    return None


def grade(
    expected: str, candidate: str, is_extracted: bool, op_timeout_s: int = 5
) -> tuple[bool, str | None]:
    """(is `candidate` equivalent to `expected`, the answer math-verify read from it).

    Runs in a worker process. `is_extracted`: `candidate` is an extracted answer (parsed as one
    expression); otherwise it is the whole final text, and math-verify finds the answer in it.
    """
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    targets = [LatexExtractionConfig(), ExprExtractionConfig()]
    expected = expected.strip().strip("$").strip()
    gold = parse(_as_boxed(expected), targets, parsing_timeout=op_timeout_s) or parse(
        expected, targets, parsing_timeout=op_timeout_s
    )
    text = _as_boxed(candidate) if is_extracted else candidate
    predicted = parse(text, targets, parsing_timeout=op_timeout_s)
    read = str(predicted[-1]) if predicted else None
    if _squeezed(expected) and _squeezed(expected) == _squeezed(read or candidate):
        return True, read
    if not gold or not predicted:
        return False, read
    return bool(verify(gold, predicted, timeout_seconds=op_timeout_s)), read


def _as_boxed(answer: str) -> str:
    return f"\\boxed{{{answer.strip().strip('$').strip()}}}"


def _squeezed(answer: str) -> str:
    return "".join(answer.split()).strip("$")


def last_closed_box(text: str) -> str | None:
    """The exact content of the last `\\boxed{`, or None when that box never closes.

    NeMo Gym's `_extract_last_boxed_answer`: only the last `\\boxed{` counts (an earlier closed
    one does not stand in for an unclosed last one), braces are counted without escapes, and
    `\\fbox` or `\\boxed 5` are no box.
    """
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth = 1
    content_start = start + len("\\boxed{")
    for index in range(content_start, len(text)):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            depth -= 1
            if depth == 0:
                return text[content_start:index]
    return None


def nemo_gym_grade(expected: str, text: str) -> tuple[float, str | None]:
    """(library reward, the answer math-verify read) of a whole response, as NeMo Gym grades it.

    Runs in a worker process. NeMo Gym's `_run_math_verify`: math-verify's `math_metric` (gold read
    as LaTeX, the prediction as an expression or LaTeX) on the expected answer, delimiters
    stripped and boxed, against the whole text; the answer reported is the first prediction equal
    to a gold one, else the first. math-verify's failures (unreadable gold, its timeouts) are 0.0.
    """
    from math_verify import grader
    from math_verify.errors import TimeoutException

    try:
        score, extracted = _nemo_gym_metric()(["\\boxed{" + _strip_math_delimiters(expected) + "}"], [text])
        if extracted is None:
            return float(score), None
        golds, predictions = extracted
        for prediction in predictions:
            if any(grader.verify(gold, prediction) for gold in golds):
                return float(score), str(prediction)
        return float(score), str(predictions[0]) if predictions else None
    except (Exception, TimeoutException):  # TimeoutException is a BaseException
        return 0.0, None


@functools.cache
def _nemo_gym_metric() -> Any:
    from math_verify.metric import math_metric
    from math_verify.parser import ExprExtractionConfig, LatexExtractionConfig

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)  # it warns on every answerless text
    return math_metric(
        gold_extraction_target=(LatexExtractionConfig(),),
        pred_extraction_target=(ExprExtractionConfig(), LatexExtractionConfig()),
    )


def _strip_math_delimiters(answer: str) -> str:
    """NeMo Gym's `_strip_math_delimiters`: one outer `\\(...\\)`, then one outer `$...$`."""
    answer = answer.strip()
    if answer.startswith("\\(") and answer.endswith("\\)"):
        answer = answer[2:-2].strip()
    if answer.startswith("$") and answer.endswith("$") and len(answer) > 1:
        answer = answer[1:-1].strip()
    return answer


def warm_up() -> None:
    """Import math-verify (sympy, the LaTeX parser) before the first call needs it."""
    grade("\\frac{1}{2}", "0.5", True)
    nemo_gym_grade("\\frac{1}{2}", "\\boxed{0.5}")
