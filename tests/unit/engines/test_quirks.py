"""Model quirks and NeMo RL's engine switches, on synthetic config.json files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ng_cli.engines.config import LocalVllmModelConfig
from ng_cli.engines.plan import plan_engines
from ng_cli.engines.quirks import (
    ASYNC_TIMEOUT_ENV,
    DEFAULT_SAMPLE_TIMEOUT_S,
    SampleTimeoutError,
    apply_quirks,
    sample_timeout_s,
)
from ng_cli.errors import ConfigError, UpstreamTimeoutError


def _model(tmp_path: Path, model_type: str) -> Path:
    path = tmp_path / model_type
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"model_type": model_type}))
    return path


def _plan(path: Path, env: dict[str, str] | None = None, **kwargs: object) -> tuple[list[str], list[str]]:
    config = LocalVllmModelConfig.model_validate(
        {"model": str(path), "return_token_id_information": False, "uses_reasoning_parser": False,
         "vllm_serve_kwargs": kwargs, "engine_ports": [8000]}
    )  # fmt: skip
    engines = plan_engines("p", config, env=env or {}, devices=(), python="py")
    return engines.engines[0].argv(), [f"{note.level}: {note.text}" for note in engines.notes]


def test_gemma3_asked_for_dummy_weights_loads_real_ones_and_says_why(tmp_path: Path) -> None:
    argv, notes = _plan(_model(tmp_path, "gemma3"), load_format="dummy")

    assert argv[argv.index("--load-format") + 1] == "auto"
    assert "dummy" not in argv
    (warning,) = [note for note in notes if note.startswith("warning: load_format")]
    assert "dummy overridden with auto for model_type 'gemma3'" in warning
    assert "normalizer" in warning


@pytest.mark.parametrize("model_type", ["gemma2", "gemma3_text"])
def test_other_gemmas_get_auto_with_an_info_line(tmp_path: Path, model_type: str) -> None:
    argv, notes = _plan(_model(tmp_path, model_type))

    assert argv[argv.index("--load-format") + 1] == "auto"
    assert any(note.startswith(f"info: load_format: auto for model_type '{model_type}'") for note in notes)


def test_a_llama_is_untouched_but_for_the_eager_default(tmp_path: Path) -> None:
    argv, notes = _plan(_model(tmp_path, "llama"), load_format="dummy")

    assert argv[argv.index("--load-format") + 1] == "dummy"
    assert "--enforce-eager" in argv
    assert not any(note.startswith("warning") for note in notes)


def test_enforce_eager_defaults_on_and_an_explicit_false_wins(tmp_path: Path) -> None:
    path = _model(tmp_path, "qwen2")
    default_argv, default_notes = _plan(path)
    explicit_argv, explicit_notes = _plan(path, enforce_eager=False)

    assert "--enforce-eager" in default_argv
    assert any("enforce_eager: true by default" in note for note in default_notes)
    assert "--no-enforce-eager" in explicit_argv
    assert "--enforce-eager" not in explicit_argv
    assert not any("enforce_eager" in note for note in explicit_notes)


def test_v0_runtime_request_is_a_clear_warning(tmp_path: Path) -> None:
    _, notes = _plan(_model(tmp_path, "qwen2"), env={"NRL_VLLM_USE_V1": "0"})

    assert any(note.startswith("warning: NRL_VLLM_USE_V1=0") and "always run V1" in note for note in notes)
    _, quiet = _plan(_model(tmp_path, "llama"), env={"NRL_VLLM_USE_V1": "1"})
    assert not any("NRL_VLLM_USE_V1" in note for note in quiet)


def test_sample_timeout_reads_the_env_with_600_by_default() -> None:
    assert sample_timeout_s({}) == DEFAULT_SAMPLE_TIMEOUT_S == 600
    assert sample_timeout_s({ASYNC_TIMEOUT_ENV: "1800"}) == 1800
    with pytest.raises(ValueError, match="not a number"):
        sample_timeout_s({ASYNC_TIMEOUT_ENV: "soon"})


def test_a_bad_timeout_is_refused_by_the_planner(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="must be a positive number"):
        _plan(_model(tmp_path, "qwen2"), env={ASYNC_TIMEOUT_ENV: "-5"})


def test_the_timeout_error_says_what_the_seed_says_with_the_doubled_export_line() -> None:
    error = SampleTimeoutError(600.0)

    assert isinstance(error, UpstreamTimeoutError)
    assert "vLLM async generation timed out" in error.message
    assert "NRL_VLLM_ASYNC_TIMEOUT_SECONDS=600" in error.message
    assert error.hint == "export NRL_VLLM_ASYNC_TIMEOUT_SECONDS=1200"
    assert SampleTimeoutError(45.5).hint == "export NRL_VLLM_ASYNC_TIMEOUT_SECONDS=91"


def test_apply_quirks_leaves_the_input_alone() -> None:
    asked = {"load_format": "dummy"}
    result, _ = apply_quirks(asked, model_type="gemma3", env={})
    assert asked == {"load_format": "dummy"}
    assert result["load_format"] == "auto"


@pytest.mark.parametrize("switch", [("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")])
def test_tensor_parallel_where_multicast_is_off_runs_without_the_allreduce_fusion(
    switch: tuple[str, str],
) -> None:
    kwargs, notes = apply_quirks(
        {"compilation_config": {"mode": 3}}, model_type="llama", env=dict([switch]), tensor_parallel_size=2
    )
    assert kwargs["compilation_config"] == {"mode": 3, "pass_config": {"fuse_allreduce_rms": False}}
    assert any(
        "fuse_allreduce_rms: false" in note.text and f"{switch[0]}={switch[1]}" in note.text for note in notes
    )


def test_the_allreduce_fusion_is_left_alone_without_tp_without_the_switch_or_when_the_user_set_it() -> None:
    off = {"NCCL_NVLS_ENABLE": "0"}
    for kwargs, env in (
        ({"tensor_parallel_size": 1}, off),
        ({"tensor_parallel_size": 2}, {"NCCL_NVLS_ENABLE": "1"}),
        (
            {"tensor_parallel_size": 2, "compilation_config": {"pass_config": {"fuse_allreduce_rms": True}}},
            off,
        ),
    ):
        result, notes = apply_quirks(kwargs, model_type="llama", env=env)
        assert result.get("compilation_config") == kwargs.get("compilation_config")
        assert not any("fuse_allreduce_rms" in note.text for note in notes)


def test_the_fusion_switch_reaches_the_engine_argv(tmp_path: Path) -> None:
    argv, _ = _plan(_model(tmp_path, "llama"), env={"NCCL_NVLS_ENABLE": "0"}, tensor_parallel_size=2)
    at = argv.index("--compilation-config")
    assert json.loads(argv[at + 1]) == {"pass_config": {"fuse_allreduce_rms": False}}
