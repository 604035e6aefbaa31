"""math_with_judge's answer extraction and grading (math-verify), called directly in the main thread."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ng_cli.servers.loading import load_server_class

ENV_DIR = Path(__file__).resolve().parents[1]
load_server_class(ENV_DIR / "app.py")  # puts the environment's modules on sys.path, as the child does
answers = sys.modules["math_answers"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("so the answer is \\boxed{42}.", "42"),
        ("\\boxed{1} at first, but finally \\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("$\\boxed{\\{1, 2\\}}$", "\\{1, 2\\}"),
        ("\\boxed{x^{2}+\\sqrt{y}}", "x^{2}+\\sqrt{y}"),
        ("\\fbox{7}", "7"),
        ("\\boxed 5 is it", "5"),
        ("\\boxed{} then \\boxed{3}", "3"),
        ("\\boxed{3} then an empty \\boxed{}", "3"),
        ("\\boxed{unclosed", None),
        ("no box here", None),
    ],
    ids=[
        "plain",
        "last-wins",
        "escaped-braces",
        "nested-braces",
        "fbox",
        "space-form",
        "empty-skipped",
        "trailing-empty-skipped",
        "unclosed",
        "none",
    ],
)
def test_extract_boxed(text: str, expected: str | None) -> None:
    assert answers.extract_boxed(text) == expected


@pytest.mark.parametrize(
    ("expected", "candidate"),
    [
        ("\\frac{1}{2}", "0.5"),
        ("1/2", "\\dfrac{1}{2}"),
        ("0.75", "\\frac{3}{4}"),
        ("-\\frac{2}{3}", "-2/3"),
        ("x^2 + 2x + 1", "(x+1)^2"),
        ("5\\sqrt{2}", "\\sqrt{50}"),
        ("1,000", "1000"),
        ("3", "3.0"),
        ("\\{1, 2\\}", "\\{2, 1\\}"),
        ("[1, 2)", "[1,2)"),
        ("$720$", "720"),
        ("x = 3", "3"),
        (" 7 ", "7"),
    ],
)
def test_equivalent_forms_are_accepted(expected: str, candidate: str) -> None:
    is_equal, read = answers.grade(expected, candidate, True)
    assert is_equal, read


@pytest.mark.parametrize(
    ("expected", "candidate"),
    [
        ("\\frac{1}{2}", "0.6"),
        ("3", "4"),
        ("x^2 + 2x + 1", "(x-1)^2"),
        ("\\pi", "3.14"),
        ("[1, 2)", "[1,2]"),
        ("\\{1, 2\\}", "\\{1, 3\\}"),
        ("12", "-12"),
    ],
)
def test_different_answers_are_rejected(expected: str, candidate: str) -> None:
    is_equal, _ = answers.grade(expected, candidate, True)
    assert not is_equal


@pytest.mark.parametrize(
    ("expected", "text", "read"),
    [
        ("\\frac{1}{3}", "We get $x = \\frac{1}{3}$ as the solution", "x = \\frac{1}{3}"),
        ("3/4", "It equals $\\frac{3}{4}$", "\\frac{3}{4}"),
        ("42", "The answer is 42. Check: 40+2", "42"),
        ("15", "There are 3 apples and 12 pears, 15 fruits.", "15"),
        ("-2.5", "so x = -2.5", "-2.5"),
    ],
)
def test_without_a_box_math_verify_finds_the_answer_in_the_whole_text(
    expected: str, text: str, read: str
) -> None:
    assert answers.grade(expected, text, False) == (True, read)


def test_a_text_without_any_answer_reads_nothing() -> None:
    assert answers.grade("7", "no idea", False) == (False, None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [  # NeMo Gym 0.7.0's own cases (math_with_judge/tests/test_app.py, test_extract_last_boxed_answer)
        ("No boxed answer", None),
        ("First \\boxed{wrong}, then \\boxed{right}", "right"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("\\boxed{ exact text }", " exact text "),
        ("\\boxed{unclosed", None),
        # where it differs from extract_boxed (the lenient rule)
        ("\\boxed{3} then an unclosed \\boxed{4", None),
        ("\\boxed{3} then an empty \\boxed{}", ""),
        ("\\fbox{7}", None),
        ("\\boxed 5 is it", None),
    ],
)
def test_last_closed_box(text: str, expected: str | None) -> None:
    assert answers.last_closed_box(text) == expected


@pytest.mark.parametrize(
    ("expected", "text", "result"),
    [
        ("\\frac{1}{2}", "so \\boxed{0.5}", (1.0, "1/2")),  # the prediction equal to the gold
        ("$720$", "\\boxed{720}", (1.0, "720")),
        ("\\(5\\)", "\\boxed{5}", (1.0, "5")),
        ("42", "\\boxed{41} ... \\boxed{42}", (0.0, "{41, 42}")),  # math-verify reads both boxes
        ("}{", "\\boxed{1}", (0.0, None)),  # an unreadable expected answer scores 0.0
    ],
)
def test_nemo_gym_grade_reads_the_whole_text(
    expected: str, text: str, result: tuple[float, str | None]
) -> None:
    assert answers.nemo_gym_grade(expected, text) == result
