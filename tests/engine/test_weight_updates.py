"""Weight updates on real CPU vLLM engines that ng_run starts (two replicas), mid-collection.

Checkpoints A (the embedded model), B and C (`tests/fixtures/checkpoints.py`: embedding rows of
two words exchanged) answer the probe conversation differently. One stack serves every test here
in order (module scope: engines take a minute to start on CPU):

1. A -> B -> C -> A before any traffic: three distinct probe answers, and A's again exactly.
2. >= 200 multi-turn tool rollouts plus probe rollouts, 64 in parallel, with three updates fired
   during the collection (mode keep): 0 lost, 0 failed, 0 aborted; every call stamped
   start == end == v answers the probe as v's checkpoint does; the calls that span an update are
   exactly those the update reports (and each was in flight at its pause).
3. mode abort: the calls it cuts short are sent again, never scored as finished.
4. bad checkpoints: refused with exit 2 and the reason, version unchanged, old weights serving,
   a collection running meanwhile unaffected.
5. the prefix cache: the first call on each engine after an update reuses nothing.
6. an engine killed after an update comes back with the current weights (same fingerprint as the
   other replica's) before it serves.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ng_cli.launcher.admin_keys import admin_key
from ng_cli.training import WeightsClient
from ng_cli.upstream.weights import WeightUpdateError
from tests.fixtures import checkpoints
from tests.fixtures.caps import HANG_CAP_S
from tests.fixtures.engine_stack import (
    ENGINE_KEY,
    EXAMPLE_ENV_CONFIG,
    ROOT,
    EngineStack,
    engine_stack,
    kill_engine_process,
    wait_for,
)
from tests.fixtures.stack_process import console_script

CPU_CONFIG = "responses_api_models/local_vllm_model/configs/tiny_weather_cpu.yaml"
MODEL = ROOT / "models" / "tiny-weather"
AGENT = "example_single_tool_call_simple_agent"
SYSTEM = "You are a helpful assistant. Use the get_weather tool, then answer with the condition and the temperature."
PROBE_INPUT: list[dict[str, Any]] = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "What is the weather in Paris right now?"},
    {
        "type": "function_call",
        "call_id": "call_probe",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    },
    {
        "type": "function_call_output",
        "call_id": "call_probe",
        "output": '{"city":"Paris","condition":"sunny","temperature":21,"unit":"celsius"}',
    },
]
SAMPLING = {"temperature": 0.0}
PROBE_TOKENS = 24
"""More than any checkpoint's whole answer (15 tokens with its end)."""
TOOL_TOKENS = 48


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("checkpoints")
    return {
        "A": checkpoints.copy(MODEL, base / "A"),
        "B": checkpoints.swapped(MODEL, base / "B", "Ġdegrees", "ĠElacas"),
        "C": checkpoints.swapped(MODEL, base / "C", "It", "ĠCassul"),
    }


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineStack]:
    overrides = [
        f"++{ENGINE_KEY}.weight_updates=true",
        f"++{ENGINE_KEY}.vllm_serve_kwargs.data_parallel_size=2",
        f"++{ENGINE_KEY}.health_probe_interval_s=1",
    ]
    with engine_stack(
        tmp_path_factory.mktemp("stack"), [EXAMPLE_ENV_CONFIG, CPU_CONFIG], overrides
    ) as running:
        yield running


@pytest.fixture(scope="module")
def client(stack: EngineStack) -> WeightsClient:
    return WeightsClient.connect(stack.process.head_url)


@pytest.fixture(scope="module")
def probes(stack: EngineStack, client: WeightsClient, ckpts: dict[str, Path]) -> dict[str, str]:
    """v0 = A (boot); v1 = B, v2 = C, v3 = A: each checkpoint's probe answer, with no traffic."""
    answers = {"A": probe(stack)[0]}
    for version, name in ((1, "B"), (2, "C"), (3, "A")):
        result = client.update(str(ckpts[name]), version=version)
        assert result["version"] == version
        assert result["spanning_calls"] == []
        text, stamp = probe(stack)
        assert stamp["start"] == stamp["end"] == version
        answers[name if version < 3 else "A again"] = text
    return answers


def probe(stack: EngineStack, conversation: list[dict[str, Any]] = PROBE_INPUT) -> tuple[str, dict[str, Any]]:
    body = json.dumps({"input": conversation, **SAMPLING, "max_output_tokens": PROBE_TOKENS}).encode()
    request = urllib.request.Request(
        f"{stack.model_url}/v1/responses", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as answer:
        response = json.loads(answer.read())
    return answer_text(response["output"]), response["weight_version"]


def answer_text(output: list[dict[str, Any]]) -> str:
    return "".join(
        part.get("text", "")
        for item in output
        if item.get("type") == "message"
        for part in item.get("content") or []
    )


def write_input(path: Path, copies: int) -> Path:
    """`copies` times: the 5 example rows (multi-turn tool rollouts), then the probe row (its answer
    turn only), so probes run all through the collection, under every version it sees."""
    example = ROOT / "resources_servers/example_single_tool_call/data/example.jsonl"
    rows = [json.loads(line) for line in example.read_text().splitlines() if line.strip()]
    for row in rows:
        row["responses_create_params"]["max_output_tokens"] = TOOL_TOKENS
    params = {**rows[0]["responses_create_params"], "input": PROBE_INPUT, "max_output_tokens": PROBE_TOKENS}
    block = [*rows, {**rows[0], "responses_create_params": params, "probe": True}]
    path.write_text("".join(json.dumps(row) + "\n" for _ in range(copies) for row in block))
    return path


def collect(stack: EngineStack, name: str, *, copies: int, parallel: int) -> subprocess.Popen[str]:
    return stack.collect(
        name,
        parallel=parallel,
        max_tokens=None,  # per row: TOOL_TOKENS, PROBE_TOKENS
        input_path=write_input(stack.tmp / f"{name}_input.jsonl", copies),
        extra=[f"+responses_create_params.{key}={value}" for key, value in SAMPLING.items()],
    )


def finished(
    collector: subprocess.Popen[str], stack: EngineStack, name: str, expected: int
) -> list[dict[str, Any]]:
    out, _ = collector.communicate(timeout=900)
    assert collector.returncode == 0, out[-3000:]
    assert not (stack.tmp / f"{name}_failures.jsonl").exists(), out[-3000:]
    rows = stack.rows(name)
    assert len(rows) == expected
    assert all(isinstance(row["reward"], float) for row in rows)
    return rows


def still_running(collector: subprocess.Popen[str]) -> bool:
    """True while the collection runs; a collection that ended fails the test at once, with its output."""
    if collector.poll() is not None:
        pytest.fail(
            f"the collection ended (exit {collector.returncode}) before the updates: {collector.communicate()[0][-3000:]}"
        )
    return True


def whole_probe_under(row: dict[str, Any], version: int) -> bool:
    """A probe rollout whose answer was generated wholly under `version` (an update waits for one,
    so the probes are answered under every version the test checks)."""
    call = row["weight_version"]["calls"][-1]
    return bool(row.get("probe")) and call["start"] == call["end"] == version


def calls_of(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [call for row in rows for call in row["weight_version"]["calls"]]


def test_checkpoints_answer_differently_and_a_reload_restores_exactly(probes: dict[str, str]) -> None:
    assert len({probes["A"], probes["B"], probes["C"]}) == 3, probes
    assert probes["A again"] == probes["A"]
    assert "21 degrees celsius" in probes["A"]
    assert "21 Elacas celsius" in probes["B"]
    assert "Cassul is sunny" in probes["C"]


def test_three_updates_during_a_collection_lose_and_mislabel_nothing(
    stack: EngineStack, client: WeightsClient, ckpts: dict[str, Path], probes: dict[str, str]
) -> None:
    checkpoint_of = {3: "A", 4: "B", 5: "C", 6: "A"}
    copies = 40  # 6 rows x 40: 200 tool rollouts and 40 probe rollouts
    collector = collect(stack, "keep", copies=copies, parallel=64)
    results: list[dict[str, Any]] = []
    # Each update fires on an event: its share of rollouts written and, at that moment, at least 8
    # model calls in flight at the model server (its `in_flight` count). Firing on rows alone ran
    # behind the collection on 2 idle cores: at 150 of 240 rows the third update found nothing in
    # flight (a fresh-clone run failed `in_flight_at_pause` so).
    for version, after_rows in ((4, 30), (5, 60), (6, 90)):

        def ready(n: int = after_rows, current: int = version - 1) -> bool:
            rows = stack.rows("keep")
            return (
                still_running(collector)
                and len(rows) >= n
                and any(whole_probe_under(row, current) for row in rows)
                and client.status()["in_flight"] >= 8
            )

        wait_for(ready, HANG_CAP_S, f"{after_rows} rollouts, a probe under v{version - 1}, 8 calls in flight")
        results.append(client.update(str(ckpts[checkpoint_of[version]]), version=version, mode="keep"))
    rows = finished(collector, stack, "keep", 6 * copies)

    assert [result["version"] for result in results] == [4, 5, 6]
    assert all(result["in_flight_at_pause"] for result in results)  # fired mid-collection
    assert stack.counter("ng_model_aborted_requests_total") == 0
    assert stack.counter("ng_model_calls_retried_after_weight_update_total") == 0
    calls = calls_of(rows)
    spanning = {call["call"] for call in calls if call["start"] != call["end"]}
    reported = {call for result in results for call in result["spanning_calls"]}
    assert spanning == reported
    for result in results:
        assert set(result["spanning_calls"]) <= set(result["in_flight_at_pause"])
    assert {call["end"] for call in calls} <= {3, 4, 5, 6}
    probe_calls = [
        (row["weight_version"]["calls"][-1], answer_text(row["response"]["output"]))
        for row in rows
        if row.get("probe")
    ]
    whole = [(call["start"], text) for call, text in probe_calls if call["start"] == call["end"]]
    assert len(whole) >= 10
    for version, text in whole:
        assert text == probes[checkpoint_of[version]], (version, text)
    assert len({version for version, _ in whole}) >= 3  # probes answered under several versions
    metrics = json.loads((stack.tmp / "keep_metrics.json").read_text())["weight_versions"]
    assert metrics["spanning_an_update"] == sum(row["weight_version"]["staleness"] > 0 for row in rows)


def test_abort_mode_sends_cut_calls_again_and_never_scores_them(
    stack: EngineStack, client: WeightsClient, ckpts: dict[str, Path]
) -> None:
    retried_before = stack.counter("ng_model_calls_retried_after_weight_update_total")
    # 120 rollouts: the update fires at 8, leaving the collection many seconds to run, so a test
    # scheduled late on a busy machine still finds calls decoding at the engine to cut.
    collector = collect(stack, "abort", copies=20, parallel=32)
    wait_for(
        lambda: (
            still_running(collector) and len(stack.rows("abort")) >= 8 and client.status()["in_flight"] >= 4
        ),
        HANG_CAP_S,
        "8 rollouts and 4 calls in flight",
    )
    result = client.update(str(ckpts["B"]), version=7, mode="abort")
    rows = finished(collector, stack, "abort", 120)
    assert result["in_flight_at_pause"]
    assert stack.counter("ng_model_calls_retried_after_weight_update_total") > retried_before
    # A cut call is sent again under the new weights and never scored cut; a call that straddles
    # is one whose generation had ended at the engine before the pause (its answer still on the
    # way): the update reports each such call.
    straddling = {call["call"] for call in calls_of(rows) if call["start"] != call["end"]}
    assert straddling <= set(result["spanning_calls"])


def test_bad_checkpoints_are_refused_and_change_nothing(
    stack: EngineStack, client: WeightsClient, probes: dict[str, str]
) -> None:
    bad = stack.tmp / "bad"
    cases = {
        "no weights file": (checkpoints.no_weights(bad / "empty"), "holds no *.safetensors"),
        "wrong shapes": (checkpoints.wrong_shape(MODEL, bad / "shape"), "does not fit the model"),
        "garbage bytes": (checkpoints.garbage(bad / "garbage"), "not a safetensors file"),
        "missing path": (bad / "nowhere", "does not exist"),
    }
    collector = collect(stack, "bad", copies=4, parallel=16)
    for what, (path, reason) in cases.items():
        done = subprocess.run(
            [str(console_script("ng_update_weights")), f"+path={path}", "+version=8", f"+head_server_url={stack.process.head_url}"],
            cwd=ROOT, env=stack.env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 2, (what, done.stdout, done.stderr)
        assert reason in done.stderr, (what, done.stderr)
        assert "Traceback" not in done.stderr, (what, done.stderr)
        assert client.status()["version"] == 7
    finished(collector, stack, "bad", 24)
    text, stamp = probe(stack)
    assert stamp["start"] == stamp["end"] == 7
    assert text == probes["B"]


def test_no_prefix_computed_under_old_weights_is_reused(
    stack: EngineStack, client: WeightsClient, ckpts: dict[str, Path]
) -> None:
    key = admin_key(stack.process.head_url, "policy_model")
    assert key is not None
    engines = [str(engine["url"]).removesuffix("/v1") for engine in stack.engines]

    def hits() -> dict[str, float]:
        return {root: engine_counter(root, key, "vllm:prefix_cache_hits_total") for root in engines}

    # The CPU engine caches whole blocks of 128 tokens: a prompt of several blocks, so a hit shows.
    long_input = [{"role": "system", "content": " ".join([SYSTEM] * 8)}, *PROBE_INPUT[1:]]
    for _ in range(4):  # warm both engines' caches with it under version 7 (B)
        probe(stack, long_input)
    client.update(str(ckpts["C"]), version=8)
    seen: set[str] = set()
    repeat_hit = False
    for _ in range(6):
        before_hits, before_ok = hits(), stack.ok_requests()
        _, stamp = probe(stack, long_input)
        after_hits, after_ok = hits(), stack.ok_requests()
        assert stamp["start"] == 8
        served = next(url for url in after_ok if after_ok[url] > before_ok.get(url, 0.0))
        root = served.removesuffix("/v1")
        gained = after_hits[root] - before_hits[root]
        if root not in seen:
            assert gained == 0, f"{root} reused {gained} cached tokens computed before the update"
            seen.add(root)
        else:
            repeat_hit |= gained > 0
    assert repeat_hit  # the cache works, so the zeros above mean something


def test_a_restarted_engine_serves_the_current_weights(
    stack: EngineStack, client: WeightsClient, probes: dict[str, str]
) -> None:
    key = admin_key(stack.process.head_url, "policy_model")
    assert key is not None
    status = client.status()
    assert status["version"] == 8
    first = stack.engines[0]
    kill_engine_process(first)
    wait_for(lambda: "policy_model/engine-0 is serving again" in stack.log(), 600, "engine-0 to restart")
    wait_for(lambda: stack.is_healthy(str(first["url"])), HANG_CAP_S, "the model server to readmit engine-0")
    assert re.search(r"engine \S+ rejoined and loaded version 8", stack.log())
    roots = [str(engine["url"]).removesuffix("/v1") for engine in stack.engines]
    fingerprints = [engine_fingerprint(root, key) for root in roots]
    assert fingerprints[0] == fingerprints[1] == status["fingerprint"]
    answers = {probe(stack)[0] for _ in range(4)}
    assert answers == {probes["C"]}


def engine_counter(root: str, key: str, name: str) -> float:
    request = urllib.request.Request(f"{root}/metrics", headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        text = answer.read().decode()
    return sum(
        float(value)
        for value in re.findall(rf"^{re.escape(name)}(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.MULTILINE)
    )


def engine_fingerprint(root: str, key: str) -> list[str]:
    body = json.dumps({"method": "ng_weights_fingerprint"}).encode()
    request = urllib.request.Request(
        f"{root}/collective_rpc",
        data=body,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        return list(json.loads(answer.read())["results"])


def test_the_engines_admin_routes_need_the_key(stack: EngineStack) -> None:
    root = str(stack.engines[1]["url"]).removesuffix("/v1")
    for route in ("/pause?mode=abort", "/collective_rpc", "/sleep"):
        request = urllib.request.Request(f"{root}{route}", data=b"{}", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 401
    request = urllib.request.Request(f"{stack.model_url}/admin/weights/update", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 401


def test_ng_status_shows_the_weight_version(stack: EngineStack) -> None:
    done = subprocess.run(
        [str(console_script("ng_status")), f"+head_server_url={stack.process.head_url}"],
        cwd=ROOT, env=stack.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"weights: policy_model version 8 \(\S+/C\), admitting", done.stdout), done.stdout


def test_sleep_on_the_cpu_build_is_a_no_op_that_says_so(stack: EngineStack, client: WeightsClient) -> None:
    slept = client.sleep(1)
    assert "no-op" in slept["warning"]
    asleep = client.status()
    assert (asleep["admitting"], asleep["sleeping"]) == (False, True)  # drained and held until wake_up
    with pytest.raises(WeightUpdateError, match="asleep"):
        client.update(str(MODEL), version=99)
    woken = client.wake_up()
    assert set(woken["timings"]) == {str(engine["url"]).removesuffix("/v1") for engine in stack.engines}
    assert client.status()["admitting"] is True
    _, stamp = probe(stack)
    assert stamp["start"] == client.status()["version"]
