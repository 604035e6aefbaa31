"""Weights deltas (issue 41 step 3) on real CPU vLLM engines that ng_run starts (two replicas).

Checkpoints: A (the embedded model), B = A with two embedding rows exchanged (an element patch
of the tied embeddings), the final norm scaled (whole) and a few k_proj bias elements changed
(a part of the fused qkv bias); C = B with two more rows exchanged, some down_proj elements
changed and q_proj scaled (linear layers, which the CPU build packs into its kernels: applied by
the composed reload, `engines/delta_apply.py`). The deltas A->B and B->C come from the maker.
One stack serves every test here, in order:

1. full B, C, A from disk: each one's answers (text, token ids, logprobs with the top 5) and
   fingerprint, the reference for what follows;
2. delta A->B gives B's answers and fingerprint exactly, applied in place; then delta B->C gives
   C's, by the composed reload;
3. a delta whose base is not what the engines hold is refused before any engine pauses;
4. a delta that fails at the engine, or whose values are NaN, is rolled back through the chain
   (full A, then A->B, then B->C): C's fingerprint and answers again.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ng_cli.launcher.admin_keys import admin_key
from ng_cli.training import WeightsClient
from ng_cli.training.delta import Change, make_delta, write_delta
from ng_cli.upstream.delta import checkpoint_digest
from ng_cli.upstream.weights import WeightUpdateError
from tests.fixtures import checkpoints
from tests.fixtures.delta_checkpoints import bump, edited, scale, set_to, swap_rows
from tests.fixtures.engine_stack import ENGINE_KEY, EXAMPLE_ENV_CONFIG, ROOT, EngineStack, engine_stack

CPU_CONFIG = "responses_api_models/local_vllm_model/configs/tiny_weather_cpu.yaml"
MODEL = ROOT / "models" / "tiny-weather"
EMBEDDINGS = "model.embed_tokens.weight"
SYSTEM = "You are a helpful assistant. Use the get_weather tool, then answer with the condition and the temperature."
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "What is the weather in Paris right now?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_probe",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "call_probe",
        "content": '{"city":"Paris","condition":"sunny","temperature":21,"unit":"celsius"}',
    },
]


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("checkpoints")
    a = checkpoints.copy(MODEL, base / "A")
    b = edited(
        a,
        base / "B",
        {
            EMBEDDINGS: swap_rows(MODEL, "Ġdegrees", "ĠElacas", 256),
            "model.norm.weight": scale(1.01),
            "model.layers.0.self_attn.k_proj.bias": bump(range(3, 9), 0.25),
        },
    )
    c = edited(
        b,
        base / "C",
        {
            EMBEDDINGS: swap_rows(MODEL, "It", "ĠCassul", 256),
            "model.layers.1.mlp.down_proj.weight": bump(range(0, 4000, 7), 0.05),
            "model.layers.2.self_attn.q_proj.weight": scale(1.02),
        },
    )
    nan = edited(
        c, base / "C-nan", {"model.layers.3.input_layernorm.weight": set_to(range(256), float("nan"))}
    )
    made = {
        "A": a,
        "B": b,
        "C": c,
        "A->B": base / "A-B",
        "B->C": base / "B-C",
        "C->nan": base / "C-nan-delta",
        "C->bad": base / "C-bad-delta",
    }
    make_delta(a, b, made["A->B"])
    make_delta(b, c, made["B->C"])
    make_delta(c, nan, made["C->nan"])
    # Passes the model server's checks (manifest, headers, base) but not the engine's: an index
    # outside the tensor, found before anything is written.
    write_delta(
        made["C->bad"],
        base=checkpoint_digest(c),
        result="0" * 64,
        changes=[
            Change(
                "model.norm.weight",
                "F32",
                (256,),
                indices=(10**6).to_bytes(4, "little"),
                values=b"\x00\x00\x80\x3f",
                index_dtype="I32",
            )
        ],
    )
    return made


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, ckpts: dict[str, Path]) -> Iterator[EngineStack]:  # noqa: ARG001 (made first: a fixture error shows before the engines start)
    overrides = [
        f"++{ENGINE_KEY}.weight_updates=true",
        f"++{ENGINE_KEY}.vllm_serve_kwargs.data_parallel_size=2",
    ]
    with engine_stack(
        tmp_path_factory.mktemp("stack"), [EXAMPLE_ENV_CONFIG, CPU_CONFIG], overrides
    ) as running:
        yield running


@pytest.fixture(scope="module")
def client(stack: EngineStack) -> WeightsClient:
    return WeightsClient.connect(stack.process.head_url)


def engine_roots(stack: EngineStack) -> list[str]:
    return [str(engine["url"]).removesuffix("/v1") for engine in stack.engines]


def _engine_call(stack: EngineStack, root: str, route: str, body: dict[str, Any] | None) -> Any:
    key = admin_key(stack.process.head_url, "policy_model")
    request = urllib.request.Request(
        f"{root}{route}",
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=300) as answer:
        return json.loads(answer.read())


def answers(stack: EngineStack) -> list[Any]:
    """Each engine's greedy answer to the probe: text, token ids, and every token's logprob with the top 5."""
    seen = []
    for root in engine_roots(stack):
        model = _engine_call(stack, root, "/v1/models", None)["data"][0]["id"]
        body = {
            "model": model,
            "messages": MESSAGES,
            "max_tokens": 24,
            "temperature": 0,
            "logprobs": True,
            "top_logprobs": 5,
            "return_token_ids": True,
        }
        choice = _engine_call(stack, root, "/v1/chat/completions", body)["choices"][0]
        logprobs = [
            (item["token"], item["logprob"], [(top["token"], top["logprob"]) for top in item["top_logprobs"]])
            for item in choice["logprobs"]["content"]
        ]
        seen.append((choice["message"]["content"], choice.get("token_ids"), logprobs))
    return seen


def fingerprints(stack: EngineStack) -> list[list[str]]:
    return [
        list(_engine_call(stack, root, "/collective_rpc", {"method": "ng_weights_fingerprint"})["results"])
        for root in engine_roots(stack)
    ]


@pytest.fixture(scope="module")
def full(stack: EngineStack, client: WeightsClient, ckpts: dict[str, Path]) -> dict[str, Any]:
    """Each checkpoint loaded whole from disk (v1 B, v2 C, v3 A): its answers and fingerprint."""
    seen: dict[str, Any] = {}
    for version, name in ((1, "B"), (2, "C"), (3, "A")):
        result = client.update(str(ckpts[name]), version=version)
        assert result["deltas"] == []
        seen[name] = (answers(stack), client.status()["fingerprint"])
    return seen


def test_full_checkpoints_answer_differently(full: dict[str, Any]) -> None:
    texts = {name: answers_[0][0] for name, (answers_, _) in full.items()}
    assert len(set(texts.values())) == 3, texts
    assert "21 Elacas celsius" in texts["B"]
    assert "Cassul" in texts["C"]
    for answers_, _ in full.values():
        assert answers_[0] == answers_[1]  # both replicas alike
        assert answers_[0][1]  # token ids came back
    assert len({fingerprint[0] for _, fingerprint in full.values()}) == 3


def test_a_delta_chain_gives_what_the_full_checkpoints_give(
    stack: EngineStack, client: WeightsClient, ckpts: dict[str, Path], full: dict[str, Any]
) -> None:
    result = client.update(str(ckpts["A->B"]), version=4)
    assert result["deltas"] == [str(ckpts["A->B"])]
    assert result["bytes"] < 20_000  # the checkpoint is 12 MB
    assert (answers(stack), client.status()["fingerprint"]) == full["B"]
    assert fingerprints(stack) == [full["B"][1]] * 2  # each replica, as the verify saw them

    result = client.update(str(ckpts["B->C"]), version=5)
    assert result["deltas"] == [str(ckpts["A->B"]), str(ckpts["B->C"])]
    assert (answers(stack), client.status()["fingerprint"]) == full["C"]
    log = stack.log()
    assert f"weights delta {ckpts['A->B']} applied (in place)" in log
    assert f"weights delta {ckpts['B->C']} applied (composed reload)" in log


def test_a_delta_made_against_other_weights_is_refused_before_any_pause(
    stack: EngineStack, client: WeightsClient, ckpts: dict[str, Path], full: dict[str, Any]
) -> None:
    with pytest.raises(
        WeightUpdateError, match="made against other weights than the engines hold"
    ) as refused:
        client.update(str(ckpts["A->B"]), version=6)  # the engines hold C
    assert refused.value.phase == "check"
    assert refused.value.timings == {}  # no engine was paused
    assert client.status()["version"] == 5
    assert (answers(stack), client.status()["fingerprint"]) == full["C"]


@pytest.mark.parametrize(
    ("delta", "phase", "reason"), [("C->bad", "reload", "outside its"), ("C->nan", "verify", "NaN")]
)
def test_a_delta_that_fails_is_rolled_back_through_the_chain(
    stack: EngineStack,
    client: WeightsClient,
    ckpts: dict[str, Path],
    full: dict[str, Any],
    delta: str,
    phase: str,
    reason: str,
) -> None:
    with pytest.raises(WeightUpdateError, match=reason) as failed:
        client.update(str(ckpts[delta]), version=7)
    assert failed.value.phase == phase
    assert failed.value.rolled_back
    status = client.status()
    assert status["version"] == 5
    assert status["deltas"] == [str(ckpts["A->B"]), str(ckpts["B->C"])]
    assert (answers(stack), status["fingerprint"]) == full["C"]
    assert fingerprints(stack) == [full["C"][1]] * 2
