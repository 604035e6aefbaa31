"""The new-user path, end to end, with every command as a real console script.

    ng_init_resources_server -> ng_test -> ng_prepare_data -> ng_e2e_collect_rollouts -> ng_reward_profile

The environment is written into a temporary repo root (`NG_REPO_ROOT`) that links the shipped
agents and model servers, as a fresh clone would have them. The model behind vllm_model is the
stub vLLM (its reply is "Echo: <last user text>"): the rewards it earns are whatever the
template's real rule makes of that, so the test checks that every rollout is scored, not how well.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.commands import ng
from tests.fixtures.new_environment import NAME, make_root, read_jsonl
from tests.fixtures.stub_vllm import StubProcess

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
CONFIG = f"+config_paths=[resources_servers/{NAME}/configs/{NAME}.yaml,responses_api_models/vllm_model/configs/vllm_model.yaml]"


def stub_args(engine: StubProcess) -> list[str]:
    return [
        f"+policy_base_url={engine.base_url}",
        "+policy_api_key=stub-key",
        "+policy_model_name=stub-model",
    ]


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that mention `text` (the stack's children would)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found


def test_a_new_environment_scores_rollouts_with_no_edit(tmp_path: Path) -> None:
    root, env = make_root(tmp_path)
    created = ng("ng_init_resources_server", f"+entrypoint=resources_servers/{NAME}", cwd=root, env=env)
    assert created.returncode == 0, created.stderr
    tested = ng(
        "ng_test", f"+entrypoint=resources_servers/{NAME}", "+should_validate_data=true", cwd=root, env=env
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert " passed" in tested.stdout

    with StubProcess() as engine:
        prepared = ng(
            "ng_prepare_data",
            CONFIG,
            *stub_args(engine),
            "+output_dirpath=prepared",
            "+mode=example_validation",
            cwd=root,
            env=env,
        )
        assert prepared.returncode == 0, prepared.stderr
        collated = read_jsonl(root / "prepared" / "example.jsonl")
        assert [row["agent_ref"] for row in collated] == [
            {"type": "responses_api_agents", "name": f"{NAME}_simple_agent"}
        ] * 5
        assert (
            orjson.loads((root / "prepared" / "example_metrics.json").read_bytes())["total"]["examples"] == 5
        )

        output = root / "results" / "rollouts.jsonl"
        collected = ng(
            "ng_e2e_collect_rollouts",
            CONFIG,
            *stub_args(engine),
            "+split=example",
            f"+output_jsonl_fpath={output}",
            "+num_repeats=2",
            "+num_repeats_add_seed=true",
            cwd=root,
            env=env,
        )
        assert collected.returncode == 0, collected.stderr
        seeds = sorted(body.get("seed") for body in orjson.loads(_get(f"{engine.root_url}/_stub/requests")))

    rows = read_jsonl(output)
    assert sorted((row["_ng_task_index"], row["_ng_rollout_index"]) for row in rows) == [
        (task, repeat) for task in range(5) for repeat in range(2)
    ]
    assert all(isinstance(row["reward"], float) and row["reward"] in (0.0, 1.0) for row in rows)
    assert all(
        row["responses_create_params"]["metadata"]["extra_body"] == f'{{"seed": {row["_ng_rollout_index"]}}}'
        for row in rows
    )
    assert seeds == [0] * 5 + [1] * 5  # what the engine received
    assert processes_mentioning(str(tmp_path)) == []
    assert not list((tmp_path / "tmp").iterdir())  # the run dir is gone too

    profile = root / "results" / "profile.jsonl"
    profiled = ng(
        "ng_reward_profile",
        f"+input_jsonl_fpath={root / 'results' / 'rollouts_inputs' / 'example.jsonl'}",
        f"+rollouts_jsonl_fpath={output}",
        f"+output_jsonl_fpath={profile}",
        cwd=root,
        env=env,
    )
    assert profiled.returncode == 0, profiled.stderr
    lines = read_jsonl(profile)
    assert [line["rollouts"] for line in lines] == [2] * 5
    by_task: dict[int, list[float]] = {}
    for row in rows:
        by_task.setdefault(row["_ng_task_index"], []).append(row["reward"])
    assert [line["mean_reward"] for line in lines] == [sum(by_task[t]) / 2 for t in range(5)]


def test_ctrl_c_keeps_finished_rollouts_leaves_no_process_and_resumes(tmp_path: Path) -> None:
    root, env = make_root(tmp_path)
    assert (
        ng("ng_init_resources_server", f"+entrypoint=resources_servers/{NAME}", cwd=root, env=env).returncode
        == 0
    )
    output = root / "results" / "rollouts.jsonl"
    with StubProcess(delay_s=0.3) as engine:
        command = [
            str(BIN / "ng_e2e_collect_rollouts"),
            CONFIG,
            *stub_args(engine),
            "+split=example",
            f"+output_jsonl_fpath={output}",
            "+num_repeats=4",
            "+num_samples_in_parallel=1",
        ]
        process = subprocess.Popen(
            command, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        try:
            deadline = time.monotonic() + HANG_CAP_S
            while not (output.exists() and output.stat().st_size > 0):
                assert process.poll() is None, process.communicate()[0]
                assert time.monotonic() < deadline
                time.sleep(0.05)
            process.send_signal(signal.SIGINT)
            log, _ = process.communicate(timeout=HANG_CAP_S)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == 130, log
        assert "run the same command again to resume" in log
        assert processes_mentioning(str(tmp_path)) == []
        kept = read_jsonl(output)
        assert 1 <= len(kept) < 20

        resumed = ng(
            "ng_e2e_collect_rollouts", *command[1:-1], "+num_samples_in_parallel=8", cwd=root, env=env
        )
    assert resumed.returncode == 0, resumed.stderr
    rows = read_jsonl(output)
    assert sorted((r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows) == [
        (t, k) for t in range(5) for k in range(4)
    ]
    assert rows[: len(kept)] == kept  # what the first run wrote is kept as it was
    assert f"{len(kept)} from an earlier run" in resumed.stderr
    assert processes_mentioning(str(tmp_path)) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["+split=training"], "split: Input should be 'example', 'validation' or 'train', got 'training'"),
        (["+split=train"], "no such file"),
        (
            ["+split=example", "+input_jsonl_fpath=x.jsonl"],
            "input_jsonl_fpath: not offered by ng_e2e_collect_rollouts",
        ),
        (["+split=example", "+num_repeat=3"], "did you mean +num_repeats"),
    ],
)
def test_bad_inputs_exit_2_before_any_server_starts(tmp_path: Path, args: list[str], message: str) -> None:
    root, env = make_root(tmp_path)
    assert (
        ng("ng_init_resources_server", f"+entrypoint=resources_servers/{NAME}", cwd=root, env=env).returncode
        == 0
    )
    output = root / "results" / "rollouts.jsonl"
    result = ng(
        "ng_e2e_collect_rollouts",
        CONFIG,
        "+policy_base_url=http://127.0.0.1:9/v1",
        "+policy_api_key=k",
        "+policy_model_name=m",
        f"+output_jsonl_fpath={output}",
        *args,
        cwd=root,
        env=env,
    )
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not (root / "results" / "rollouts_servers.log").exists()  # no stack was started
    assert not output.exists()


def _get(url: str) -> bytes:
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as answer:
        return bytes(answer.read())
