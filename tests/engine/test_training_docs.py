"""docs/training.md's CPU stack and its worked loop, run as written (paste-able means tested).

The `ng_run` command under "Turn it on" starts the stack (with a free head port and a ready file
added, so tests never collide); the Python block under "A worked on-policy loop" runs from the
repository root with its `HEAD` pointed at that stack. Before, the block stopped at
`input file not found: data/train.jsonl`, trained on 0 tokens, and `version=step` failed after
any earlier update.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.engine_stack import ROOT, engine_stack

DOC = ROOT / "docs" / "training.md"

pytestmark = pytest.mark.engine


def section(title: str) -> str:
    text = DOC.read_text()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.DOTALL)


def test_the_worked_loop_runs_as_written(tmp_path: Path) -> None:
    (command,) = [block for block in blocks(section("Turn it on"), "bash") if block.startswith("ng_run")]
    args = shlex.split(command.replace("\\\n", " "))
    assert args[0] == "ng_run"
    config_paths = args[1].removeprefix("+config_paths=[").removesuffix("]").split(",")
    (loop,) = blocks(section("A worked on-policy loop"), "python")
    with engine_stack(tmp_path / "stack", config_paths, args[2:]) as stack:
        code = loop.replace('HEAD = "http://127.0.0.1:11000"', f'HEAD = "{stack.process.head_url}"')
        assert code != loop
        env = {**stack.env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        before = set((ROOT / "results").glob("loop-*")) if (ROOT / "results").is_dir() else set()
        try:
            done = subprocess.run(
                [sys.executable, "-c", code],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=HANG_CAP_S * 2,
            )
        finally:
            for made in set((ROOT / "results").glob("loop-*")) - before:
                shutil.rmtree(made)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    steps = re.findall(
        r"step (\d): (\d+) rows, mean reward ([0-9.]+), (\d+) sampled tokens -> version (\d+)", done.stdout
    )
    assert [step for step, *_ in steps] == ["1", "2", "3"], done.stdout
    assert all(int(rows) == 10 and int(tokens) > 0 for _, rows, _, tokens, _ in steps), steps
    versions = [int(version) for *_, version in steps]
    assert versions == [versions[0], versions[0] + 1, versions[0] + 2]
