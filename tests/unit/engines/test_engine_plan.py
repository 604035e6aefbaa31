"""`plan_engines`: config + visible devices -> engines (pure: synthetic model dirs, no process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ng_cli.engines.config import LocalVllmModelConfig
from ng_cli.engines.plan import ENGINE_MAIN, InstanceEngines, plan_engines, visible_devices
from ng_cli.errors import ConfigError

PY = "/opt/vllm/bin/python"
GPUS8 = tuple(str(i) for i in range(8))


def model_dir(tmp_path: Path, *, model_type: str = "qwen2", experts: int = 0, name: str = "m") -> Path:
    path = tmp_path / name
    path.mkdir(exist_ok=True)
    config: dict[str, Any] = {"model_type": model_type, "hidden_size": 64}
    if experts:
        config["num_experts"] = experts
    (path / "config.json").write_text(json.dumps(config))
    return path


def plan(
    path: Path,
    *,
    devices: tuple[str, ...] = GPUS8,
    env: dict[str, str] | None = None,
    **block: Any,
) -> InstanceEngines:
    block.setdefault("vllm_serve_kwargs", {})
    config = LocalVllmModelConfig.model_validate(
        {"model": str(path), "return_token_id_information": False, "uses_reasoning_parser": False, **block}
    )
    return plan_engines(
        "policy", config, env=env or {}, devices=devices, python=PY, source="conf/m.yaml:3", api_key="k"
    )


def bound(engines: InstanceEngines) -> InstanceEngines:
    http, rpc = engines.ports_needed()
    return engines.with_ports(range(8000, 8000 + http), range(29000, 29000 + rpc))


def test_dense_data_parallel_is_independent_engines_on_consecutive_tp_bundles(tmp_path: Path) -> None:
    engines = plan(
        model_dir(tmp_path), vllm_serve_kwargs={"tensor_parallel_size": 2, "data_parallel_size": 3}
    )

    assert engines.mode == "replicas"
    assert [e.devices for e in engines.engines] == [("0", "1"), ("2", "3"), ("4", "5")]
    assert [e.name for e in engines.engines] == ["policy/engine-0", "policy/engine-1", "policy/engine-2"]
    assert {e.data_parallel_size for e in engines.engines} == {1}
    argv = bound(engines).engines[1].argv()
    assert argv[:2] == [PY, str(ENGINE_MAIN)]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    assert "--data-parallel-size" not in argv
    assert engines.engines[1].env["CUDA_VISIBLE_DEVICES"] == "2,3"


def test_tp_times_pp_devices_per_engine(tmp_path: Path) -> None:
    engines = plan(
        model_dir(tmp_path), vllm_serve_kwargs={"tensor_parallel_size": 2, "pipeline_parallel_size": 2}
    )

    (engine,) = engines.engines
    assert engine.devices == ("0", "1", "2", "3")
    argv = bound(engines).engines[0].argv()
    assert argv[argv.index("--pipeline-parallel-size") + 1] == "2"


def test_visible_devices_come_from_cuda_visible_devices_then_the_count() -> None:
    assert visible_devices({"CUDA_VISIBLE_DEVICES": "4, 6,GPU-ab"}, 2) == ("4", "6", "GPU-ab")
    assert visible_devices({"CUDA_VISIBLE_DEVICES": ""}, 2) == ()
    assert visible_devices({}, 3) == ("0", "1", "2")
    assert visible_devices({}, None) == ()


def test_moe_internal_lb_is_one_vllm_dp_group_per_expert_group(tmp_path: Path) -> None:
    engines = plan(
        model_dir(tmp_path, model_type="qwen3_moe", experts=16),
        vllm_serve_kwargs={"data_parallel_size": 8},
        expert_parallel_size=2,
    )

    assert engines.mode == "internal_lb"
    assert len(engines.engines) == 4
    assert [e.devices for e in engines.engines] == [("0", "1"), ("2", "3"), ("4", "5"), ("6", "7")]
    assert {e.expert_parallel_size for e in engines.engines} == {2}
    argvs = [e.argv() for e in bound(engines).engines]
    for argv in argvs:
        assert argv[argv.index("--data-parallel-size") + 1] == "2"
        assert "--enable-expert-parallel" in argv
        assert "--data-parallel-rank" not in argv
    rpc_ports = [argv[argv.index("--data-parallel-rpc-port") + 1] for argv in argvs]
    assert len(set(rpc_ports)) == 4  # groups on one host must not share a coordinator port


def test_moe_external_lb_is_one_endpoint_per_rank_sharing_the_group_coordinator(tmp_path: Path) -> None:
    engines = bound(
        plan(
            model_dir(tmp_path, model_type="qwen3_moe", experts=16),
            vllm_serve_kwargs={"data_parallel_size": 4},
            expert_parallel_size=2,
            data_parallel_mode="external_lb",
        )
    )

    assert [(e.group, e.data_parallel_rank, e.devices) for e in engines.engines] == [
        (0, 0, ("0",)),
        (0, 1, ("1",)),
        (1, 0, ("2",)),
        (1, 1, ("3",)),
    ]
    assert len({e.port for e in engines.engines}) == 4
    assert engines.engines[0].rpc_port == engines.engines[1].rpc_port != engines.engines[2].rpc_port
    argv = engines.engines[1].argv()
    assert argv[argv.index("--data-parallel-rank") + 1] == "1"
    assert argv[argv.index("--data-parallel-address") + 1] == "127.0.0.1"
    assert engines.server_overrides()["base_url"] == [f"http://127.0.0.1:{8000 + i}/v1" for i in range(4)]


def test_enable_expert_parallel_alone_spans_every_dp_rank(tmp_path: Path) -> None:
    engines = plan(
        model_dir(tmp_path, model_type="mixtral", experts=8),
        vllm_serve_kwargs={
            "data_parallel_size": 2,
            "tensor_parallel_size": 2,
            "enable_expert_parallel": True,
        },
    )

    (engine,) = engines.engines
    assert (engine.data_parallel_size, engine.tensor_parallel_size, engine.expert_parallel_size) == (2, 2, 4)
    assert engine.devices == ("0", "1", "2", "3")


@pytest.mark.parametrize("mode", ["internal_lb", "external_lb"])
def test_the_seeds_configuration_never_yields_an_engine_with_ep_1(tmp_path: Path, mode: str) -> None:
    """8 GPUs, expert_parallel_size 2, async (NeMo RL's PR description): every engine shards experts."""
    engines = plan(
        model_dir(tmp_path, model_type="qwen3_moe", experts=128),
        vllm_serve_kwargs={"data_parallel_size": 8},
        expert_parallel_size=2,
        data_parallel_mode=mode,
    )

    assert {e.expert_parallel_size for e in engines.engines} == {2}
    assert all("--enable-expert-parallel" in e.argv() for e in bound(engines).engines)
    assert sorted(d for e in engines.engines for d in e.devices) == sorted(GPUS8)


def test_the_seeds_pull_request_plan_is_refused_with_the_right_plan(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        plan(
            model_dir(tmp_path, model_type="qwen3_moe", experts=128),
            vllm_serve_kwargs={"data_parallel_size": 8},
            expert_parallel_size=2,
            data_parallel_mode="replicas",
        )

    message = caught.value.message
    assert message.startswith("conf/m.yaml:3  policy.data_parallel_mode: replicas")
    assert "experts would not be sharded" in message
    assert caught.value.hint is not None
    assert "internal_lb -> 4 engine(s)" in caught.value.hint
    assert "EP 2 per group" in caught.value.hint


def test_ep_within_tp_is_allowed_for_replicas(tmp_path: Path) -> None:
    engines = plan(
        model_dir(tmp_path, model_type="qwen3_moe", experts=16),
        vllm_serve_kwargs={"data_parallel_size": 2, "tensor_parallel_size": 2},
        expert_parallel_size=2,
        data_parallel_mode="replicas",
    )

    assert [(e.data_parallel_size, e.expert_parallel_size) for e in engines.engines] == [(1, 2), (1, 2)]


@pytest.mark.parametrize(
    ("block", "experts", "expected"),
    [
        ({"vllm_serve_kwargs": {"data_parallel_size": 4, "tensor_parallel_size": 4}}, 0, "asks for 16 GPUs"),
        ({"vllm_serve_kwargs": {"data_parallel_size": 2}, "expert_parallel_size": 2}, 0, "has no experts"),
        (
            {
                "vllm_serve_kwargs": {"data_parallel_size": 4, "tensor_parallel_size": 2},
                "expert_parallel_size": 3,
            },
            16,
            "is not data-parallel x tensor-parallel size",
        ),
        (
            {"vllm_serve_kwargs": {"data_parallel_size": 3}, "expert_parallel_size": 2},
            16,
            "is not a multiple of 2",
        ),
        (
            {"vllm_serve_kwargs": {"data_parallel_size": 1}, "expert_parallel_size": 4},
            16,
            "needs 4 data-parallel ranks",
        ),
        (
            {"vllm_serve_kwargs": {"data_parallel_size": 8}, "expert_parallel_size": 8},
            4,
            "exceeds the model's 4 experts",
        ),
        ({"vllm_serve_kwargs": {"tensor_parallel_size": 0}}, 0, "expected a positive integer"),
        ({"vllm_serve_kwargs": {"port": 8000}}, 0, "vllm_serve_kwargs.port: set by ng_run"),
        ({"vllm_serve_kwargs": {"db_password": "x"}}, 0, "a secret would be visible"),
        ({"vllm_serve_kwargs": {"served_model_name": "other"}}, 0, "does not include model"),
        ({"vllm_serve_kwargs": {"data_parallel_size": 2}, "engine_ports": [9000]}, 0, "lists 1 ports for 2"),
    ],
)
def test_impossible_plans_are_config_errors_naming_where(
    tmp_path: Path, block: dict[str, Any], experts: int, expected: str
) -> None:
    path = model_dir(tmp_path, model_type="qwen3_moe" if experts else "llama", experts=experts)
    with pytest.raises(ConfigError) as caught:
        plan(path, devices=GPUS8[:8], **block)

    assert expected in caught.value.message
    assert caught.value.message.startswith("conf/m.yaml:3  policy.")


def test_a_model_that_is_not_a_local_directory_is_refused_offline(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a local model directory") as caught:
        plan(tmp_path / "nowhere", hf_home=str(tmp_path / "hf"))
    assert caught.value.hint is not None
    assert "never download" in caught.value.hint


def test_a_hub_id_is_found_in_the_hf_home_cache(tmp_path: Path) -> None:
    snapshot = tmp_path / "hf" / "hub" / "models--Qwen--Tiny" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text('{"model_type": "qwen2"}')

    config = LocalVllmModelConfig.model_validate(
        {"model": "Qwen/Tiny", "hf_home": str(tmp_path / "hf"), "return_token_id_information": False,
         "uses_reasoning_parser": False}
    )  # fmt: skip
    engines = plan_engines("p", config, env={}, devices=(), python=PY)

    (engine,) = engines.engines
    assert engine.model_path == snapshot
    assert engine.served_model_name == "Qwen/Tiny"
    assert engine.env["HF_HOME"] == str(tmp_path / "hf")


def test_cpu_engines_have_no_devices_and_the_cpu_settings(tmp_path: Path) -> None:
    engines = plan(model_dir(tmp_path), devices=(), vllm_serve_kwargs={"data_parallel_size": 2})

    assert [e.devices for e in engines.engines] == [(), ()]
    assert engines.engines[0].env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert "CUDA_VISIBLE_DEVICES" not in engines.env_of(engines.engines[0], {"CUDA_VISIBLE_DEVICES": "0"})
    assert engines.engines[0].describe()["devices"] == "cpu"


def test_secrets_go_to_the_environment_never_to_argv(tmp_path: Path) -> None:
    engines = bound(
        plan(
            model_dir(tmp_path),
            api_key="sk-config",
            vllm_serve_kwargs={"hf_token": "hf-secret", "api_key": "ignored-in-argv"},
            vllm_serve_env_vars={"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"},
        )
    )

    engine = engines.engines[0]
    argv = " ".join(engine.argv())
    env = engines.env_of(engine, {"PATH": "/bin"})
    assert "sk-config" not in argv
    assert "hf-secret" not in argv
    assert "ignored-in-argv" not in argv
    assert env["VLLM_API_KEY"] == "sk-config"
    assert env["HF_TOKEN"] == "hf-secret"
    assert env["VLLM_ATTENTION_BACKEND"] == "FLASH_ATTN"
    assert env["HF_HUB_OFFLINE"] == "1"
    assert engines.server_overrides()["api_key"] == "sk-config"
    assert "sk-config" not in repr(engines)


def test_without_a_key_each_plan_gets_a_fresh_random_one(tmp_path: Path) -> None:
    config = LocalVllmModelConfig.model_validate(
        {
            "model": str(model_dir(tmp_path)),
            "return_token_id_information": False,
            "uses_reasoning_parser": False,
        }
    )
    first, second = (plan_engines("p", config, env={}, devices=(), python=PY) for _ in range(2))

    assert len(first.api_key) >= 24
    assert first.api_key != second.api_key


def test_configured_engine_ports_are_used_in_order(tmp_path: Path) -> None:
    engines = plan(
        model_dir(tmp_path), vllm_serve_kwargs={"data_parallel_size": 2}, engine_ports=[9100, 9101]
    )

    assert engines.ports_needed() == (0, 0)
    assert [e.base_url for e in engines.engines] == ["http://127.0.0.1:9100/v1", "http://127.0.0.1:9101/v1"]


def test_a_base_url_means_no_engines() -> None:
    config = LocalVllmModelConfig.model_validate(
        {"model": "m", "base_url": "http://gpu:8000/v1", "return_token_id_information": False,
         "uses_reasoning_parser": False}
    )  # fmt: skip
    assert not config.launches_engines


def test_moe_dp_on_cpu_is_planned_with_a_warning_about_the_cpu_build(tmp_path: Path) -> None:
    engines = plan(
        model_dir(tmp_path, model_type="qwen3_moe", experts=16),
        devices=(),
        vllm_serve_kwargs={"data_parallel_size": 2},
        expert_parallel_size=2,
    )

    assert [e.expert_parallel_size for e in engines.engines] == [2]
    assert any(note.level == "warning" and "all_gatherv" in note.text for note in engines.notes)


def test_replicas_can_share_a_gpu(tmp_path: Path) -> None:
    engines = plan(
        model_dir(tmp_path),
        devices=("0",),
        vllm_serve_kwargs={"data_parallel_size": 2, "gpu_memory_utilization": 0.4},
        replicas_per_device=2,
    )

    assert [e.devices for e in engines.engines] == [("0",), ("0",)]
    with pytest.raises(ConfigError, match="asks for 2 GPUs"):
        plan(
            model_dir(tmp_path),
            devices=("0",),
            vllm_serve_kwargs={"data_parallel_size": 3},
            replicas_per_device=2,
        )
