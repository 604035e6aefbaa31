"""NeMo Gym's trainer-facing API (`ng_cli.trainer_api`) on the fixture stack: RunHelper starts it
from a config dict in this process, run_examples runs rows on its agent, shutdown stops it.

The calls are the ones TRL's `grpo_nemo_gym.py` and NeMo RL's NemoGym actor make, through the
`nemo_gym` import names (`install()`). Children inherit a marker in their environment, so a
process of the stack that survives `shutdown()` is found in /proc.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ng_cli.errors import ConfigError, LaunchError, NgError
from ng_cli.launcher.ports import is_port_free
from ng_cli.servers.http import ConnectionLimits
from ng_cli.trainer_api import install, uninstall
from tests.fixtures.stack.harness import MARKER_VAR, STACK_ROOT, marked_pids

pytestmark = pytest.mark.integration

AGENT = "relay"


def own_children() -> list[int]:
    """This process's live child processes (every thread's)."""
    found: list[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        found += [int(pid) for pid in (task / "children").read_text().split()]
    return found


@pytest.fixture(scope="module")
def nemo_gym() -> Iterator[Any]:
    """`import nemo_gym...` answered by ng_cli, as `python -m ng_cli.trainer_api` sets it up."""
    assert install()
    import nemo_gym.cli
    import nemo_gym.rollout_collection
    import nemo_gym.server_utils

    yield nemo_gym
    uninstall()


@pytest.fixture(scope="module")
def marker() -> Iterator[str]:
    """The fixture repo as root and working directory, and a marker every child inherits."""
    saved = (Path.cwd(), {key: os.environ.get(key) for key in ("NG_REPO_ROOT", "NG_ENV_YAML", MARKER_VAR)})
    value = uuid.uuid4().hex
    os.environ.update({"NG_REPO_ROOT": str(STACK_ROOT), MARKER_VAR: value})
    os.environ.pop("NG_ENV_YAML", None)
    os.chdir(STACK_ROOT)
    try:
        yield value
    finally:
        os.chdir(saved[0])
        for key, old in saved[1].items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def start(**extra: Any) -> Any:
    """A RunHelper started as TRL's `launch_nemo_gym` starts it (its dict's keys included)."""
    from nemo_gym.cli import GlobalConfigDictParserConfig, RunHelper
    from nemo_gym.server_utils import HEAD_SERVER_KEY_NAME
    from omegaconf import DictConfig

    initial = {
        HEAD_SERVER_KEY_NAME: {"host": "0.0.0.0", "port": 0},
        "config_paths": ["configs/stack.yaml"],
        "global_aiohttp_connector_limit_per_host": 16_384,
        "global_aiohttp_connector_limit": 65_536,
        "hf_token": "hf_not_used",
        **extra,
    }
    helper = RunHelper()
    helper.start(
        global_config_dict_parser_config=GlobalConfigDictParserConfig(
            initial_global_config_dict=DictConfig(initial), skip_load_from_cli=True
        )
    )
    return helper


@pytest.fixture
def own_marker(marker: str, monkeypatch: pytest.MonkeyPatch) -> str:  # noqa: ARG001 (marker: set up first)
    """A marker of the test's own, apart from the module's shared stack."""
    value = uuid.uuid4().hex
    monkeypatch.setenv(MARKER_VAR, value)
    return value


@pytest.fixture(scope="module")
def running(nemo_gym: Any, marker: str) -> Iterator[Any]:  # noqa: ARG001 (nemo_gym: the import names)
    helper = start()
    try:
        yield helper
    finally:
        helper._stop_at_exit()
    assert marked_pids(marker) == []


def head_config(helper: Any) -> Any:
    from nemo_gym.server_utils import BaseServerConfig

    return BaseServerConfig(host="127.0.0.1", port=helper.stack.plan.head.port)


def rows(count: int) -> list[dict[str, Any]]:
    return [
        {
            "_rowidx": index,
            "agent_ref": {"name": AGENT},
            "responses_create_params": {"input": f"question {index}"},
            "expected": "canned answer" if index % 2 else "something else",
        }
        for index in range(count)
    ]


def collect(examples: list[dict[str, Any]], head: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """TRL's way: a private event loop, the iterator's awaitables awaited in turn."""
    from nemo_gym.rollout_collection import RolloutCollectionHelper

    async def run() -> list[tuple[dict[str, Any], dict[str, Any]]]:
        return [
            await task
            for task in RolloutCollectionHelper().run_examples(examples=examples, head_server_config=head)
        ]

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(run())
    finally:
        loop.close()


def test_run_examples_gives_each_row_and_its_verified_result(running: Any) -> None:
    examples = rows(6)

    done = collect(examples, head_config(running))

    assert sorted(row["_rowidx"] for row, _ in done) == list(range(6))
    for row, result in done:
        assert any(row is given for given in examples)  # the row as given, not a copy
        assert result["reward"] == (1.0 if row["_rowidx"] % 2 else 0.0)  # from echo_tools' /verify
        assert result["response"]["output_text"] == "canned answer", result
    running.poll()


def test_the_limits_reach_the_stack_and_hf_token_does_not(running: Any) -> None:
    from urllib.request import urlopen

    with urlopen(f"{running.stack.plan.head.url}/config", timeout=10) as answer:
        config = json.loads(answer.read())
    assert config["global_aiohttp_connector_limit"] == 65_536
    assert config["global_aiohttp_connector_limit_per_host"] == 16_384
    assert "hf_token" not in config
    spec = running.stack.plan.spec_for(AGENT, listen_fd=None)
    assert spec.http_limits == ConnectionLimits(total=65_536, per_host=16_384)


def test_a_row_without_agent_ref_is_refused_before_any_row_is_sent(running: Any) -> None:
    examples = rows(3)
    del examples[1]["agent_ref"]

    with pytest.raises(ValueError, match=r"row\(s\) 1 have no agent_ref") as caught:
        collect(examples, head_config(running))
    assert "relay" in str(caught.value.hint)  # type: ignore[attr-defined]


def test_an_unknown_agent_is_refused_with_the_stack_s_agents(running: Any) -> None:
    examples = rows(2)
    examples[0]["agent_ref"] = {"name": "relai"}

    with pytest.raises(ValueError, match=r"'relai' \(did you mean 'relay'\?\)"):
        collect(examples, head_config(running))


def test_run_from_config_collects_with_the_collector(running: Any, tmp_path: Path) -> None:
    from nemo_gym.rollout_collection import RolloutCollectionConfig, RolloutCollectionHelper

    source = tmp_path / "in.jsonl"
    source.write_text(
        "".join(json.dumps({k: v for k, v in row.items() if k != "_rowidx"}) + "\n" for row in rows(2))
    )
    config = RolloutCollectionConfig(
        input_jsonl_fpath=source,
        output_jsonl_fpath=tmp_path / "out.jsonl",
        num_repeats=2,
        head_server_url=running.stack.plan.head.url,
    )

    results = asyncio.run(RolloutCollectionHelper().run_from_config(config))

    assert [(r["_ng_task_index"], r["_ng_rollout_index"], r["reward"]) for r in results] == [
        (0, 0, 0.0),
        (0, 1, 0.0),
        (1, 0, 1.0),
        (1, 1, 1.0),
    ]

    # NeMo Gym's retain_results_in_memory: false: the rows go to the file only
    unkept = config.model_copy(
        update={"output_jsonl_fpath": tmp_path / "unkept.jsonl", "retain_results_in_memory": False}
    )
    assert asyncio.run(RolloutCollectionHelper().run_from_config(unkept)) == []
    assert len((tmp_path / "unkept.jsonl").read_text().splitlines()) == 4


@pytest.mark.usefixtures("nemo_gym")
def test_shutdown_stops_everything_and_a_second_shutdown_says_so(own_marker: str) -> None:
    before = set(own_children())  # the module's shared stack's
    helper = start()
    head_port = helper.stack.plan.head.port
    assert marked_pids(own_marker)

    helper.shutdown()

    assert marked_pids(own_marker) == []
    assert set(own_children()) <= before
    assert is_port_free("127.0.0.1", head_port)
    with pytest.raises(NgError, match="already shut down"):
        helper.shutdown()
    with pytest.raises(ConfigError, match="no head server"):  # not the stopped stack's address
        collect(rows(1), None)


@pytest.mark.usefixtures("nemo_gym")
def test_a_stack_that_fails_to_start_names_the_server_and_leaves_nothing(own_marker: str) -> None:
    failing = {"tools_b": {"resources_servers": {"echo_tools": {"fail_on_startup": "tools_b cannot start"}}}}
    from nemo_gym.cli import RunHelper

    with pytest.raises(LaunchError, match="tools_b") as caught:
        start(**failing)

    assert "tools_b cannot start" in str(caught.value)
    assert marked_pids(own_marker) == []
    with pytest.raises(NgError, match="no stack is running"):
        RunHelper().shutdown()


@pytest.mark.usefixtures("nemo_gym")
def test_an_unknown_key_in_the_dict_is_refused_before_anything_starts(own_marker: str) -> None:
    with pytest.raises(ConfigError, match=r"<initial_global_config_dict>  num_sampels: unknown option"):
        start(num_sampels=3)
    assert marked_pids(own_marker) == []


def test_the_head_answers_nemo_gym_s_global_config_route_with_live_addresses(running: Any) -> None:
    """What TRL's multi-environment example reads to find its agents, then posts rows to."""
    from urllib.request import Request, urlopen

    from omegaconf import OmegaConf

    with urlopen(f"{running.stack.plan.head.url}/global_config_dict_yaml", timeout=10) as answer:
        tree = OmegaConf.create(json.loads(answer.read()))  # a JSON string of YAML text, as NeMo Gym's
    agent = tree[AGENT].responses_api_agents.relay_agent
    assert f"http://127.0.0.1:{agent.port}" == running.stack.plan.server(AGENT).url
    assert tree.policy_api_key != "sk-SECRET-123"  # masked

    body = json.dumps(rows(2)[1]).encode()
    request = Request(
        f"http://{agent.host}:{agent.port}/run", data=body, headers={"Content-Type": "application/json"}
    )
    with urlopen(request, timeout=30) as answer:
        assert json.loads(answer.read())["reward"] == 1.0


@pytest.mark.usefixtures("nemo_gym")
def test_the_calls_nemo_rl_s_nemo_gym_actor_makes(own_marker: str, tmp_path: Path) -> None:
    """NeMo RL's `NemoGym._spinup` / `run_rollouts` / `health_check` / shutdown, in its order and
    with its keys (a dotenv_path that does not exist, base URLs as a list, default_host, a port
    range, a Ray address): the keys that mean nothing here are dropped with a warning."""
    from nemo_gym.cli import GlobalConfigDictParserConfig, RunHelper
    from nemo_gym.rollout_collection import RolloutCollectionHelper
    from nemo_gym.server_utils import HEAD_SERVER_KEY_NAME, BaseServerConfig
    from omegaconf import DictConfig

    initial: dict[str, Any] = {"config_paths": ["configs/stack.yaml"]}
    initial["policy_model_name"] = "the-model"
    initial["policy_api_key"] = "dummy_key"
    initial["policy_base_url"] = ["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"]
    initial.setdefault("default_host", "127.0.0.1")
    initial["port_range_low"], initial["port_range_high"] = 5000, 5999
    initial.setdefault("global_aiohttp_connector_limit_per_host", 16_384)
    initial.setdefault("global_aiohttp_connector_limit", 65_536)
    initial["ray_head_node_address"] = "127.0.0.1:6379"
    head_port = 0  # NeMo RL picks a free port in its range; 0 lets the OS pick here
    initial[HEAD_SERVER_KEY_NAME] = {"host": "0.0.0.0", "port": head_port}
    rh = RunHelper()
    rh.start(
        global_config_dict_parser_config=GlobalConfigDictParserConfig(
            dotenv_path=tmp_path / "nemo_gym_env.yaml",
            initial_global_config_dict=DictConfig(initial),
            skip_load_from_cli=True,
        )
    )
    try:
        head_server_config = BaseServerConfig(host="127.0.0.1", port=rh.stack.plan.head.port)
        rch = RolloutCollectionHelper()

        async def run_rollouts(examples: list[dict[str, Any]]) -> list[tuple[int, float]]:
            done = []
            for task in rch.run_examples(examples=examples, head_server_config=head_server_config):
                row, result = await task
                done.append((row["_rowidx"], result["reward"]))
            return done

        assert sorted(asyncio.run(run_rollouts(rows(4)))) == [(0, 0.0), (1, 1.0), (2, 0.0), (3, 1.0)]
        rh.poll()  # health_check

        bad = rows(1)
        bad[0]["responses_create_params"] = "not an object"  # the agent answers 4xx: not retried

        with pytest.raises(Exception) as caught:  # noqa: PT011 - NeMo RL reads status off any error
            asyncio.run(run_rollouts(bad))
        assert isinstance(getattr(caught.value, "status", None), int)
        assert 400 <= caught.value.status < 500  # type: ignore[attr-defined]
        assert any("row 0 (agent 'relay')" in note for note in caught.value.__notes__)
    finally:
        rh.shutdown()
    assert marked_pids(own_marker) == []
