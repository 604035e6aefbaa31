"""docs/compat.md held true: NeMo Gym 0.7.0's own config files, unchanged, from its root.

The files are copies under tests/fixtures/nemo_gym/ (see its README for origin and licence).
For every row of the table, `ng_dump_config` and `ng_run +dry_run=true` must agree; every row
marked "yes" is started by the real `ng_run` against a stub vLLM (its reply is an echo) and
`ng_collect_rollouts` must get a reward for every row it sends.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from ng_cli.commands.dump_config import app as dump_app
from ng_cli.commands.run import app as run_app
from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.commands import ng
from tests.fixtures.stub_vllm import StubProcess

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
NEMO_GYM_ROOT = REPO / "tests" / "fixtures" / "nemo_gym"
BIN = Path(sys.executable).parent
EXAMPLE_ENVIRONMENT = "resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml"


@dataclass(frozen=True)
class Row:
    files: tuple[str, ...]
    starts: bool
    refused_with: str

    @property
    def override(self) -> str:
        return "+config_paths=[" + ",".join(self.files) + "]"

    @property
    def id(self) -> str:
        return "+".join(Path(name).stem for name in self.files)


def _table() -> list[Row]:
    rows = []
    for line in (REPO / "docs" / "compat.md").read_text().splitlines():
        if not line.startswith("| `"):
            continue
        files, starts, refused = (cell.strip() for cell in line.strip("|").split(" | "))
        rows.append(Row(tuple(re.findall(r"`([^`]+)`", files)), starts == "yes", refused.strip("`").strip()))
    return rows


ROWS = _table()


def test_the_table_covers_every_fixture_file() -> None:
    listed = {name for row in ROWS for name in row.files}
    shipped = {str(path.relative_to(NEMO_GYM_ROOT)) for path in NEMO_GYM_ROOT.rglob("*.yaml")}
    assert listed == shipped


@pytest.fixture
def in_nemo_gym_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    env_yaml = tmp_path / "env.yaml"
    env_yaml.write_text(
        "policy_base_url: http://127.0.0.1:9/v1\npolicy_api_key: stub-key\npolicy_model_name: stub-model\n"
    )
    monkeypatch.setenv("NG_ENV_YAML", str(env_yaml))
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.chdir(NEMO_GYM_ROOT)
    return env_yaml


def _error(result_stderr: str) -> str:
    return "\n".join(line for line in result_stderr.splitlines() if not line.startswith("warning: "))


@pytest.mark.usefixtures("in_nemo_gym_root")
@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_dump_config_and_ng_run_agree(row: Row) -> None:
    dump = CliRunner().invoke(dump_app, [row.override])
    dry_run = CliRunner().invoke(run_app, [row.override, "+dry_run=true"])
    assert dump.exception is None or isinstance(dump.exception, SystemExit), dump.exception
    assert (dump.exit_code, dry_run.exit_code) == ((0, 0) if row.starts else (2, 2)), dump.stderr
    assert _error(dump.stderr) == _error(dry_run.stderr)
    if not row.starts:
        assert row.refused_with in dump.stderr
        assert "Traceback" not in dump.stderr


@pytest.fixture(scope="module")
def engine() -> Iterator[StubProcess]:
    with StubProcess() as stub:
        yield stub


def _our_rows(files: tuple[str, ...]) -> Path:
    """NeMo Gym's own example rows for the environment a row runs, unchanged, when its copy is
    here and routes by our agent (no `agent_ref` naming another); else this repo's rows."""
    env = "example_single_tool_call"
    for name in files:
        match = re.match(r"(?:resources_servers|environments)/([^/]+)/", name)
        if match:
            env = match.group(1)
            break
    theirs = NEMO_GYM_ROOT / "resources_servers" / env / "data" / "example.jsonl"
    if theirs.exists() and b'"agent_ref"' not in theirs.read_bytes():
        return theirs
    return REPO / "resources_servers" / env / "data" / "example.jsonl"


STARTING = [row for row in ROWS if row.starts]


@pytest.mark.parametrize("row", STARTING, ids=[row.id for row in STARTING])
def test_starts_unchanged_and_collects_scored_rollouts(row: Row, engine: StubProcess, tmp_path: Path) -> None:
    files = row.files
    if not any(name.startswith(("resources_servers/", "environments/")) for name in files):
        files = (EXAMPLE_ENVIRONMENT, *files)  # a model alone: run it under NeMo Gym's example environment
    (tmp_path / "env.yaml").write_text(
        f"policy_base_url: {engine.base_url}\npolicy_api_key: stub-key\npolicy_model_name: stub-model\n"
    )
    env = {**os.environ, "NG_ENV_YAML": str(tmp_path / "env.yaml")}
    ready = tmp_path / "ready.json"
    log_path = tmp_path / "ng_run.log"
    with log_path.open("w") as log:
        run = subprocess.Popen(
            [
                str(BIN / "ng_run"),
                "+config_paths=[" + ",".join(files) + "]",
                "++head_server.port=0",
                f"+ready_file={ready}",
            ],
            cwd=NEMO_GYM_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + HANG_CAP_S
            while not ready.exists():
                assert run.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.05)
            stack = json.loads(ready.read_text())
            relays = [s["name"] for s in stack["servers"] if s["server_type"] == "environment_servers"]
            agents = [s["name"] for s in stack["servers"] if s["server_type"] == "responses_api_agents"]
            agent = relays[0] if relays else agents[0]  # NeMo Gym's environment server name when there is one
            collect = ng(
                "ng_collect_rollouts",
                f"+agent_name={agent}",
                f"+head_server_url={stack['head_url']}",
                f"+input_jsonl_fpath={_our_rows(files)}",
                f"+output_jsonl_fpath={tmp_path / 'out.jsonl'}",
                "+limit=2",
                "+responses_create_params.max_output_tokens=200",
                cwd=tmp_path,
                env=env,
                timeout_s=180,
            )
        finally:
            run.send_signal(signal.SIGTERM)
            run.wait(timeout=HANG_CAP_S)
    assert collect.returncode == 0, collect.stderr + log_path.read_text()
    output = [orjson.loads(line) for line in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert len(output) == 2
    assert all(isinstance(line["reward"], float) for line in output)
    assert all(line["response"]["output"] for line in output)
    if "vllm_model_for_training" in row.id:
        last = output[0]["response"]["output"][-1]
        assert last["generation_token_ids"]
        assert len(last["generation_token_ids"]) == len(last["generation_log_probs"])
