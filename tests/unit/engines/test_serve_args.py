"""`vllm_serve_kwargs` -> argv, as vLLM's parser reads it (checked against vLLM 0.32's parser by hand:
`--no-<flag>` exists for its booleans, lists are space-separated, mappings are JSON)."""

from __future__ import annotations

import pytest

from ng_cli.engines.serve_args import render_serve_args, split_secret_kwargs
from ng_cli.errors import ConfigError


def test_values_render_as_vllm_expects() -> None:
    argv = render_serve_args(
        {
            "enable_auto_tool_choice": True,
            "trust_remote_code": False,
            "tool_call_parser": "hermes",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 4096,
            "middleware": ["a.b", "c.d"],
            "model_loader_extra_config": {"enable_multithread_load": True, "num_threads": 16},
            "quantization": None,
            "allowed_origins": [],
        }
    )

    assert argv == [
        "--enable-auto-tool-choice",
        "--no-trust-remote-code",
        "--tool-call-parser", "hermes",
        "--gpu-memory-utilization", "0.9",
        "--max-model-len", "4096",
        "--middleware", "a.b", "c.d",
        "--model-loader-extra-config", '{"enable_multithread_load":true,"num_threads":16}',
    ]  # fmt: skip


def test_dashed_keys_work_too() -> None:
    assert render_serve_args({"max-num-seqs": 8}) == ["--max-num-seqs", "8"]


def test_known_secrets_move_to_the_environment() -> None:
    public, env = split_secret_kwargs({"api_key": "k", "hf_token": "t", "dtype": "auto"}, where="")
    assert public == {"dtype": "auto"}
    assert env == {"VLLM_API_KEY": "k", "HF_TOKEN": "t"}


def test_other_secrets_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"vllm_serve_kwargs\.s3_secret") as caught:
        split_secret_kwargs({"s3_secret": "x"}, where="")
    assert caught.value.hint is not None
    assert "vllm_serve_env_vars" in caught.value.hint
