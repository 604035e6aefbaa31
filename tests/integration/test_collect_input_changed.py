"""An input file that changes during a collection ends the run with an error, not with "done".

The real `ng_collect_rollouts` runs 2,000 rows against a stub agent on loopback. The agent's
first `POST /run` truncates the input file in place to 300 lines, as a script rewriting the
file would: the collector has checked all 2,000 lines and is reading the rest lazily.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from ng_cli.servers.testing import serve_in_thread
from tests.fixtures.rollouts.stub_agent import StubAgent

pytestmark = pytest.mark.integration

COLLECT = Path(sys.executable).with_name("ng_collect_rollouts")
ROWS = 2000
KEPT = 300


class TruncateOnFirstRun:
    """ASGI wrapper: the first `POST /run` cuts the input file to its first `keep` lines, in place."""

    def __init__(self, app: ASGIApp, path: Path, keep: int) -> None:
        self.app = app
        self.path = path
        self.keep = keep
        self.is_done = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/run" and not self.is_done:
            self.is_done = True
            kept = self.path.read_bytes().splitlines(keepends=True)[: self.keep]
            os.truncate(self.path, len(b"".join(kept)))
        await self.app(scope, receive, send)


@pytest.fixture
def input_file(tmp_path: Path) -> Path:
    path = tmp_path / "in.jsonl"
    rows = ({"id": i, "responses_create_params": {"input": f"q{i}"}} for i in range(ROWS))
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


@pytest.fixture
def agent_url(input_file: Path) -> Iterator[str]:
    with serve_in_thread(TruncateOnFirstRun(StubAgent().build_app(), input_file, KEPT)) as url:
        yield url


def test_an_input_file_truncated_mid_collection_fails_the_run_naming_it(
    tmp_path: Path, input_file: Path, agent_url: str
) -> None:
    (tmp_path / "env.yaml").write_text("{}\n")
    done = subprocess.run(
        [
            str(COLLECT),
            "+agent_name=stub",
            f"+agent_urls.stub={agent_url}",
            f"+input_jsonl_fpath={input_file}",
            "+output_jsonl_fpath=out.jsonl",
            "+num_samples_in_parallel=4",
        ],
        cwd=tmp_path,
        env={**os.environ, "NG_ENV_YAML": str(tmp_path / "env.yaml"), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = done.stdout + done.stderr

    assert done.returncode == 2, output
    assert "done: all" not in output
    assert str(input_file) in output
    assert f"had {ROWS} rows to run" in output
    assert f"now has {KEPT} rows" in output
    assert len((tmp_path / "out.jsonl").read_bytes().splitlines()) < KEPT
