"""The real `ng_collect_rollouts` never writes over its input and names an output it cannot write.

Each case runs the console script as a user would; nothing listens at the agent URL, so a
refusal must come before any request, and the input must be byte-for-byte what it was.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.commands import ng

pytestmark = pytest.mark.integration

ROWS = b"".join(b'{"responses_create_params": {"input": "weather in %d?"}}\n' % index for index in range(3))


def collect(cwd: Path, output: str, *extra: str) -> subprocess.CompletedProcess[str]:
    (cwd / "env.yaml").write_text("{}\n")
    env = {**os.environ, "NG_ENV_YAML": str(cwd / "env.yaml"), "COLUMNS": "200"}
    return ng(
        "ng_collect_rollouts",
        "+agent_name=a",
        "+agent_urls.a=http://127.0.0.1:9",
        "+input_jsonl_fpath=in.jsonl",
        f"+output_jsonl_fpath={output}",
        *extra,
        cwd=cwd,
        env=env,
        timeout_s=HANG_CAP_S,
    )


def _same(_tmp: Path) -> str:
    return "in.jsonl"


def _symlink(tmp: Path) -> str:
    (tmp / "link.jsonl").symlink_to(tmp / "in.jsonl")
    return "link.jsonl"


def _hard_link(tmp: Path) -> str:
    os.link(tmp / "in.jsonl", tmp / "hard.jsonl")
    return "hard.jsonl"


def _absolute_with_dots(tmp: Path) -> str:
    (tmp / "sub").mkdir()
    return str(tmp / "sub" / ".." / "in.jsonl")


def _input_sibling(_tmp: Path) -> str:
    return "in_failures.jsonl"


def _output_sibling_is_input(tmp: Path) -> str:
    os.replace(tmp / "in.jsonl", tmp / "out_metrics.json")
    (tmp / "in.jsonl").symlink_to(tmp / "out_metrics.json")
    return "out.jsonl"


@pytest.mark.parametrize("overwrite", [True, False])
@pytest.mark.parametrize(
    "make_output",
    [_same, _symlink, _hard_link, _absolute_with_dots, _input_sibling, _output_sibling_is_input],
)
def test_an_output_that_is_the_input_is_refused_and_the_input_kept(
    tmp_path: Path, make_output: Callable[[Path], str], overwrite: bool
) -> None:
    (tmp_path / "in.jsonl").write_bytes(ROWS)
    output = make_output(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())

    result = collect(tmp_path, output, f"+overwrite={str(overwrite).lower()}")

    assert result.returncode == 2, result.stdout + result.stderr
    assert "over" in result.stderr
    assert "nothing was written" in result.stderr
    assert "Traceback" not in result.stderr
    assert (tmp_path / "in.jsonl").read_bytes() == ROWS
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "env.yaml") == [
        name for name in before if name != "env.yaml"
    ]


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ("results", "is a directory"),
        ("results/", "is a directory"),
        ("blocker/out.jsonl", "is a file, not a directory"),
        ("blocker/deeper/out.jsonl", "is a file, not a directory"),
        ("/proc/ng-cli-out.jsonl", "cannot write /proc/ng-cli-out.jsonl"),
    ],
)
def test_an_unwritable_output_names_the_path_and_why_with_exit_2(
    tmp_path: Path, output: str, reason: str
) -> None:
    (tmp_path / "in.jsonl").write_bytes(ROWS)
    (tmp_path / "results").mkdir()
    (tmp_path / "blocker").write_text("a file")

    result = collect(tmp_path, output)

    assert result.returncode == 2, result.stdout + result.stderr
    assert reason in result.stderr
    assert output.rstrip("/") in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert len(result.stderr.splitlines()) <= 3
    assert list((tmp_path / "results").iterdir()) == []


def test_a_report_that_would_land_on_the_input_is_refused(tmp_path: Path) -> None:
    """`+report=true` writes `out_report.html`: here that is the input (in.jsonl links to it)."""
    (tmp_path / "out_report.html").write_bytes(ROWS)
    (tmp_path / "in.jsonl").symlink_to(tmp_path / "out_report.html")

    result = collect(tmp_path, "out.jsonl", "+report=true", "+overwrite=true")

    assert result.returncode == 2, result.stdout + result.stderr
    assert (
        "output_jsonl_fpath: out.jsonl would write out_report.html, which is the same file as"
        in result.stderr
    )
    assert "nothing was written" in result.stderr
    assert (tmp_path / "out_report.html").read_bytes() == ROWS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env.yaml", "in.jsonl", "out_report.html"]
