"""NeMo Gym's own agents, unchanged (tests/fixtures/nemo_gym_servers), served by our stack.

scicode_agent (NeMo Gym's `SimpleResponsesAPIAgent` subclass: one model call per SciCode
sub-step, each a call to its own `/v1/responses`, then the resources server's `/verify`) starts
from NeMo Gym's root with its config unchanged, and ng_collect_rollouts drives it: the agent's
loop runs through our vllm_model to the engine once per sub-step that is not prefilled, and
the one thing outside reach, SciCode's `test_data.h5` (a download outside the package
registries), is what each row's failure names, typed (502 naming the URL), not a bare 500.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx2 as httpx
import orjson
import pytest

from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.stack_process import StackProcess
from tests.fixtures.stub_vllm import StubProcess

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
NEMO_GYM_ROOT = REPO / "tests" / "fixtures" / "nemo_gym_servers"
BIN = Path(sys.executable).parent
SCICODE_ROWS = NEMO_GYM_ROOT / "resources_servers" / "scicode" / "data" / "example.jsonl"
PREFILLED = {("13", 5), ("62", 0), ("76", 2)}
"""SciCode's prefilled steps (`step_utils.PREFILLED_STEPS_CODE`): never sent to the model."""


def _model_steps(rows: list[dict[str, object]]) -> int:
    return sum(
        1
        for row in rows
        for step in range(len(row["sub_steps"]))  # type: ignore[arg-type]
        if (row["problem_id"], step) not in PREFILLED
    )


def test_scicode_agent_runs_unchanged_from_their_root(tmp_path: Path) -> None:
    rows = [orjson.loads(line) for line in SCICODE_ROWS.read_bytes().splitlines()]
    configs = [
        "resources_servers/scicode/configs/scicode.yaml",
        "responses_api_models/vllm_model/configs/vllm_model.yaml",
    ]
    with StubProcess() as engine:
        (tmp_path / "env.yaml").write_text(
            f"policy_base_url: {engine.base_url}\npolicy_api_key: stub-key\npolicy_model_name: stub-model\n"
        )
        env = {**os.environ, "NG_ENV_YAML": str(tmp_path / "env.yaml")}
        ready, log_path = tmp_path / "ready.json", tmp_path / "ng_run.log"
        stack = StackProcess.start(
            [str(BIN / "ng_run"), "+config_paths=[" + ",".join(configs) + "]", "++head_server.port=0", f"+ready_file={ready}"],
            env=env, cwd=NEMO_GYM_ROOT, ready_file=ready, log_path=log_path, timeout_s=HANG_CAP_S,
        )  # fmt: skip
        try:
            collect = subprocess.run(
                [
                    str(BIN / "ng_collect_rollouts"),
                    "+agent_name=scicode_agent",
                    f"+head_server_url={stack.head_url}",
                    f"+input_jsonl_fpath={SCICODE_ROWS}",
                    f"+output_jsonl_fpath={tmp_path / 'out.jsonl'}",
                ],
                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=HANG_CAP_S, check=False,
            )  # fmt: skip
            chat_calls = httpx.get(f"{engine.root_url}/_stub/stats").json()["calls"]["chat"]
        finally:
            stack.stop()
    assert collect.returncode == 1, collect.stderr + log_path.read_text()
    failures = [orjson.loads(line) for line in (tmp_path / "out_failures.jsonl").read_bytes().splitlines()]
    assert len(failures) == len(rows) == 5
    for failure in failures:
        assert failure["status"] == 502, failure
        assert "/verify answered 500" in failure["message"]
        assert "test_data_fpath is not configured" in failure["message"]
    attempts = failures[0]["attempt"]
    assert all(failure["attempt"] == attempts for failure in failures)
    assert chat_calls == _model_steps(rows) * attempts


def test_the_compat_harness_drives_their_own_agent(tmp_path: Path) -> None:
    """bench/nemo_gym_servers.py runs a server that pairs with one of NeMo Gym's agents we do not
    have (scicode: scicode_agent) through that agent, served from their root: each row reaches
    the server's own /verify, which names what is outside reach (SciCode's test_data.h5)."""
    out = tmp_path / "servers.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "nemo_gym_servers.py"), "--root", str(NEMO_GYM_ROOT),
         "--only", "scicode", "--rows", "2", "--output", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=HANG_CAP_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    found = orjson.loads(out.read_bytes())["scicode"]
    assert {k: found[k] for k in ("agent", "starts", "rows", "scored")} == {
        "agent": "scicode_agent",
        "starts": True,
        "rows": 2,
        "scored": 0,
    }
    assert "2x 502: scicode_agent: POST" in found["reason"]
    assert "/verify answered 500" in found["reason"]
    assert "test_data_fpath is not configured" in found["reason"]


def test_a_partial_rerun_never_writes_over_a_results_file_it_was_not_given_as_seed(tmp_path: Path) -> None:
    """`--only` over an existing output is refused unless the output is the `--seed`, whose every
    other server is then kept: a rerun of some servers once replaced the whole file with them."""
    out = tmp_path / "servers.json"
    earlier = {"another_server": {"starts": True, "rows": 5, "scored": 5, "reward_mean": 1.0, "agent": "simple_agent",
                                  "reason": None, "category": "pure"}}  # fmt: skip
    out.write_bytes(orjson.dumps(earlier))
    harness = [sys.executable, str(REPO / "bench" / "nemo_gym_servers.py"), "--root", str(NEMO_GYM_ROOT)]
    done = subprocess.run(
        [*harness, "--only", "scicode", "--rows", "1", "--output", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=HANG_CAP_S, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert f"pass --seed {out}" in done.stderr
    assert orjson.loads(out.read_bytes()) == earlier  # untouched
    done = subprocess.run(
        [*harness, "--only", "scicode", "--rows", "1", "--output", str(out), "--seed", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=HANG_CAP_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    merged = orjson.loads(out.read_bytes())
    assert merged["another_server"] == earlier["another_server"]
    assert merged["scicode"]["agent"] == "scicode_agent"


def test_the_harness_keeps_the_last_error_an_agent_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A NeMo Gym agent that exits before /health: its row names why (ng_cli's config error with
    its indented problems, or a traceback's exception line), not only the exit code."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    from nemo_gym_servers import last_error

    config = (
        "loading...\nerror: 2 problems in instance 'a' (responses_api_agents/harness_exa_search):\n"
        "  a.agent: missing required key 'agent'\n  a.image: missing required key 'image'\nhint: add it\n"
    )
    assert last_error(config) == (
        "error: 2 problems in instance 'a' (responses_api_agents/harness_exa_search): | "
        "a.agent: missing required key 'agent' | a.image: missing required key 'image'"
    )
    traceback = "Traceback (most recent call last):\n  File \"app.py\", line 1\nValueError: first\nImportError: cannot import name 'X'\n"
    assert last_error(traceback) == "ImportError: cannot import name 'X'"
    assert last_error("all is well\n") is None


def test_playwright_finds_the_os_chromium_at_its_own_build_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each Chromium build the installed driver names (its browsers.json) is a link to the OS's
    browser under PLAYWRIGHT_BROWSERS_PATH; a browser of another kind is left alone."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    from _nemo_gym_browser import os_chromium_for_playwright

    fake = tmp_path / "playwright"
    (fake / "driver" / "package").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    browsers = [{"name": "chromium", "revision": "1234"}, {"name": "chromium-headless-shell", "revision": "1234"},
                {"name": "firefox", "revision": "1538"}]  # fmt: skip
    (fake / "driver" / "package" / "browsers.json").write_text(orjson.dumps({"browsers": browsers}).decode())
    monkeypatch.setitem(sys.modules, "playwright", None)
    del sys.modules["playwright"]
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", "/already/set")
    assert os_chromium_for_playwright(tmp_path / "b") is None  # the user's own choice is kept
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", "")
    if not any(Path(p).is_file() for p in ("/usr/lib/chromium/chromium", "/usr/bin/chromium")):
        pytest.skip("no OS Chromium on this machine")
    version = os_chromium_for_playwright(tmp_path / "b")
    assert version is not None
    assert "Chromium" in version
    assert os.environ["PLAYWRIGHT_BROWSERS_PATH"] == str(tmp_path / "b")
    builds = tmp_path / "b"
    shell = (
        builds / "chromium_headless_shell-1234" / "chrome-headless-shell-linux64" / "chrome-headless-shell"
    )
    assert shell.is_symlink()
    assert (builds / "chromium-1234" / "chrome-linux64" / "chrome").is_symlink()
    assert not list((tmp_path / "b").glob("firefox*"))


def test_the_anthropic_replay_answers_claude_code_with_the_recorded_turns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """claude_code_agent's CLI speaks Anthropic's Messages API: the replay finds the prompt in the
    first user message (Claude Code wraps it in blocks), answers turn N after N assistant messages,
    names a recorded tool as the request's MCP tool, and streams as Anthropic does."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    from _nemo_gym_replay import anthropic_replay_app

    from ng_cli.servers.testing import serve_in_thread

    prompt = "Use the get_weather MCP tool for Paris."
    call = {
        "type": "function_call",
        "call_id": "toolu_1",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    }
    answer = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Sunny."}]}
    first = {
        "role": "user",
        "content": [{"type": "text", "text": f"<system-reminder>x</system-reminder>{prompt}"}],
    }
    tools = [{"name": "Bash"}, {"name": "mcp__example_mcp_weather__get_weather"}]
    with serve_in_thread(anthropic_replay_app({prompt: [[call], [answer]]})) as url:
        body = {"model": "m", "messages": [first], "tools": tools}
        said = httpx.post(f"{url}/v1/messages", json=body, timeout=30).json()
        assert said["stop_reason"] == "tool_use"
        assert said["content"] == [
            {"type": "tool_use", "id": "toolu_1", "name": "mcp__example_mcp_weather__get_weather",
             "input": {"city": "Paris"}}
        ]  # fmt: skip
        later = [first, {"role": "assistant", "content": said["content"]}, {"role": "user", "content": "ok"}]
        stream = httpx.post(
            f"{url}/v1/messages", json={**body, "messages": later, "stream": True}, timeout=30
        )
        assert stream.headers["content-type"].startswith("text/event-stream")
        events = [
            line.removeprefix("event: ") for line in stream.text.splitlines() if line.startswith("event: ")
        ]
        assert events == ["message_start", "content_block_start", "content_block_delta", "content_block_stop",
                          "message_delta", "message_stop"]  # fmt: skip
        assert '"text_delta", "text": "Sunny."' in stream.text
        assert '"stop_reason": "end_turn"' in stream.text
        unknown = httpx.post(
            f"{url}/v1/messages", json={**body, "messages": [{"role": "user", "content": "hi"}]}
        )
        assert unknown.json()["content"] == [{"type": "text", "text": ""}]
