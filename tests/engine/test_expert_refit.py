"""The files check of an expert-parallel refit on a real CPU vLLM engine (issue 41, step 1).

ng_run serves a tiny Qwen3-MoE (4 experts, top 2) with `enable_expert_parallel: true` (EP world
size 1 on CPU: the rank holds every expert) and `weight_updates: true`, so the model server's
verify reads each rank's experts back from the files after a load from disk
(`engines/expert_check.py`). The CPU build repacks the experts' weights for its kernel, so the
slots are compared as multisets of their values; that is counted apart from exact ones.

1. An update to another checkpoint passes, and its result lists every expert checked.
2. The worker asked to check against files other than those it loaded fails through vLLM's
   HTTP error with a message that names the rank, the layer and the expert. (The model server
   failing the update on such an answer and rolling every rank back is
   tests/integration/test_weight_update_rollback.py's, on stand-ins: a real engine cannot be
   made to load other values than the files it is given.)
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ng_cli.launcher.admin_keys import admin_key
from ng_cli.toolchain.local_vllm import build_tiny_model
from ng_cli.training import WeightsClient
from tests.fixtures.engine_stack import ENGINE_KEY, EXAMPLE_ENV_CONFIG, EngineStack, engine_stack

CPU_CONFIG = "responses_api_models/local_vllm_model/configs/tiny_weather_cpu.yaml"
EXPERTS, LAYERS = 4, 2

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two tiny MoEs of the same shape and tokenizer, other random weights (seeds 0 and 1)."""
    base = tmp_path_factory.mktemp("moe")
    return {
        name: build_tiny_model(base / name, seed=seed, experts=EXPERTS) for name, seed in (("A", 0), ("B", 1))
    }


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, checkpoints: dict[str, Path]) -> Iterator[EngineStack]:
    overrides = [
        f"++{ENGINE_KEY}.model={checkpoints['A']}",
        f"++{ENGINE_KEY}.weight_updates=true",
        f"++{ENGINE_KEY}.vllm_serve_kwargs.enable_expert_parallel=true",
        f"++{ENGINE_KEY}.vllm_serve_kwargs.max_model_len=512",
    ]
    with engine_stack(
        tmp_path_factory.mktemp("stack"), [EXAMPLE_ENV_CONFIG, CPU_CONFIG], overrides
    ) as running:
        yield running


def test_an_update_checks_every_expert_against_the_files(
    stack: EngineStack, checkpoints: dict[str, Path]
) -> None:
    client = WeightsClient.connect(stack.process.head_url)
    result = client.update(str(checkpoints["B"]), version=1)
    assert result["version"] == 1
    (workers,) = result["experts"].values()
    (check,) = workers
    assert (check["layers"], check["held"], check["checked"], check["unchecked"]) == (
        LAYERS,
        LAYERS * EXPERTS,
        LAYERS * EXPERTS,
        None,
    )
    assert check["exact"] + check["as_multiset"] == LAYERS * EXPERTS
    assert check["held_ids"] == list(range(EXPERTS))
    assert check["sampled"] is False
    assert check["bytes_read"] > 0


def test_a_worker_whose_experts_differ_from_the_files_names_them(
    stack: EngineStack, checkpoints: dict[str, Path]
) -> None:
    """Loaded B (the test above); asked to check against A's files: every expert differs."""
    key = admin_key(stack.process.head_url, "policy_model") or ""
    root = str(stack.engines[0]["url"]).removesuffix("/v1").rstrip("/")
    body = {
        "method": "ng_check_experts",
        "kwargs": {"weights_path": str(checkpoints["A"]), "budget_bytes": 1 << 30, "seed": 0},
    }
    request = urllib.request.Request(
        f"{root}/collective_rpc",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=300)
    message = raised.value.read().decode()
    assert raised.value.code == 500, message
    assert f"EP rank 0 of 1: {LAYERS * EXPERTS} of {LAYERS * EXPERTS} checked experts differ" in message
    assert "model.layers.0.mlp.experts expert 0 (w13, w2)" in message
