"""Data and expert parallelism through ng_run on two GPUs: issue 28's two-GPU part, one LB mode a run.

    <engine python> bench/moe_dp_ep.py --mode internal_lb|external_lb \
        --checkpoint-a /tmp/ng-ckpt/moeA --checkpoint-b /tmp/ng-ckpt/moeB \
        [--change-expert 0:11] [--soak-s 300] [--updates 3] \
        [--phases ep,rollouts,refit,expert,soak,update,load] --output FILE.json

`ng_run` starts the example environment with responses_api_models/local_vllm_model/configs/
moe_dp2_ep2.yaml (the tiny Qwen3-MoE, 16 experts, data parallel 2 and expert parallel 2 over two
GPUs), booted from checkpoint A with `weight_updates: true` and `data_parallel_mode: --mode`.
Checkpoints: `bench/make_random_checkpoint.py --config-dir <tiny_model.py --experts 16 output>`.
The phases, in order, on that one stack:

* ep: what every engine logged about itself (ng_run's ready file: `[EP Rank r/N]` lines, read by
  ng_cli.engines.engine_log; a configured EP that did not take stops ng_run before this).
* rollouts: ng_collect_rollouts over the example rows through agent, model server and engines:
  rows, failures, rewards, and which engine endpoints served (the model server's counters).
* refit: idle A -> B -> A with probes that discriminate (`_refit_probes.py`): the first token's
  top-5 logprobs on six prompts at every engine endpoint and the model server (B differs on
  every one, A comes back exactly), every engine's fingerprint, and each update's check of every
  rank's experts against the files (the model server's verify under EP).
* expert: A -> B2 -> A, B2 = A with expert `--change-expert LAYER:EXPERT` scaled by
  `--expert-scale` (written into the workdir): only the rank that holds it changes its
  fingerprint, the shared part stays on every rank, the files check passes, and the answers
  where that expert is routed change.
* soak: `--soak-parallel` streamed chats kept on ONE rank's endpoint (external_lb: rank 0's own
  API server) for `--soak-s`, while the other rank gets only a short probe every `--probe-every-s`:
  per window, rank 0's streamed chunks/s (vLLM streams about one token a chunk; the record's
  "tokens" count chunks) and the longest gap between two chunks of any stream; failures;
  the idle rank's probe latencies. (internal_lb has one endpoint for both ranks: the soak then
  loads the group, and no rank idles; the record says so.)
* update: `--updates` idle weight updates A <-> B through the model server (`ng_update_weights`'s
  route: every rank paused, each reloads its own 8 experts from the files, fingerprints compared,
  resumed), each followed by a greedy probe that must answer as that checkpoint did before.
* load: the same updates while `--load-parallel` rollouts are in flight (weight_update_8b's load
  phase: rows lost and failed, every row's weight versions, the longest stall a streamed client saw),
  each update followed by the logprob probes, compared with the checkpoint's idle answers (within
  `_refit_probes.TOLERANCE`: batch shapes change the kernels' summation order).

Writes the record after every phase and copies the ng_run log beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

MOE_CONFIG = "responses_api_models/local_vllm_model/configs/moe_dp2_ep2.yaml"
ENV_CONFIG = "resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml"
SOAK_PROMPT = [{"role": "user", "content": "Tell me about the weather in every city you know."}]


async def _stream(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """One streamed chat: tokens (chunks), first-chunk latency, longest gap between chunks, error."""
    started = time.perf_counter()
    last, first, gap, chunks = started, None, 0.0, 0
    try:
        async with session.post(url, json=body) as answer:
            if answer.status != 200:
                return {"started": started, "error": f"HTTP {answer.status}: {(await answer.text())[:200]}"}
            async for raw in answer.content:
                line = raw.decode().strip()
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                now = time.perf_counter()
                if first is None:
                    first = now - started
                else:
                    gap = max(gap, now - last)
                last = now
                chunks += 1
    except (TimeoutError, aiohttp.ClientError) as error:
        return {"started": started, "error": repr(error)[:200]}
    return {"started": started, "ended": time.perf_counter(), "chunks": chunks, "first_s": first, "gap_s": gap,
            "error": None}  # fmt: skip


async def _soak(
    loaded: str, idle: str | None, *, key: str, model: str, seconds: float, parallel: int, tokens: int,
    probe_every_s: float, window_s: float,
) -> dict[str, Any]:  # fmt: skip
    """`parallel` streams kept on `loaded` for `seconds`; a short probe of `idle` every `probe_every_s`."""
    body = {"model": model, "messages": SOAK_PROMPT, "max_tokens": tokens, "temperature": 1.0,
            "ignore_eos": True, "stream": True}  # fmt: skip
    probe = {"model": model, "messages": SOAK_PROMPT, "max_tokens": 8, "temperature": 0.0}
    calls: list[dict[str, Any]] = []
    probes: list[dict[str, Any]] = []
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=600)
    headers = {"Authorization": f"Bearer {key}"}
    started = time.perf_counter()
    deadline = started + seconds
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, headers=headers) as session:

        async def worker() -> None:
            while time.perf_counter() < deadline:
                calls.append(await _stream(session, f"{loaded}/chat/completions", body))

        async def prober() -> None:
            while idle and time.perf_counter() < deadline:
                t0 = time.perf_counter()
                try:
                    async with session.post(f"{idle}/chat/completions", json=probe) as answer:
                        await answer.read()
                        probes.append({"at_s": round(t0 - started, 1), "status": answer.status,
                                       "seconds": round(time.perf_counter() - t0, 4)})  # fmt: skip
                except (TimeoutError, aiohttp.ClientError) as error:
                    probes.append({"at_s": round(t0 - started, 1), "error": repr(error)[:200]})
                await asyncio.sleep(max(0.0, probe_every_s - (time.perf_counter() - t0)))

        await asyncio.gather(prober(), *(worker() for _ in range(parallel)))
    elapsed = time.perf_counter() - started
    done = [c for c in calls if not c["error"]]
    windows = []
    for index in range(int(elapsed // window_s) + 1):
        lo, hi = started + index * window_s, started + (index + 1) * window_s
        ended = [c for c in done if lo <= c["ended"] < hi]
        windows.append({"from_s": index * window_s, "calls_ended": len(ended),
                        "tokens_per_s": round(sum(c["chunks"] for c in ended) / window_s, 1)})  # fmt: skip
    return {
        "seconds": round(elapsed, 1), "parallel": parallel, "max_tokens": tokens,
        "calls": len(calls), "failed": len(calls) - len(done),
        "errors": sorted({c["error"] for c in calls if c["error"]})[:10],
        "tokens": sum(c["chunks"] for c in done),
        "tokens_per_s": round(sum(c["chunks"] for c in done) / elapsed, 1),
        "longest_gap_s": round(max((c["gap_s"] for c in done), default=0.0), 4),
        "first_chunk_s_max": round(max((c["first_s"] or 0.0 for c in done), default=0.0), 4),
        "windows": windows,
        "idle_rank_probes": len(probes),
        "idle_rank_probe_failures": sum(1 for p in probes if p.get("status") != 200),
        "idle_rank_probe_s_max": max((p.get("seconds", 0.0) for p in probes), default=None),
        "idle_rank_probes_all": probes,
    }  # fmt: skip


def _served(engine_url: str, key: str) -> str:
    import urllib.request

    request = urllib.request.Request(f"{engine_url}/models", headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return str(json.loads(answer.read())["data"][0]["id"])


def _served_by(stack: Any) -> dict[str, float]:
    served: dict[str, float] = stack.ok_requests()
    return served


def main() -> None:
    from _refit_probes import Probes, make_b2, phase_expert, phase_refit, summarise_load, with_logprobs
    from weight_update_8b import ENGINE_LINES, Run, nvidia_smi, phase_idle, phase_load, probe

    from ng_cli.launcher.admin_keys import admin_key
    from ng_cli.training import WeightsClient
    from tests.fixtures.engine_stack import ENGINE_KEY, engine_stack

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("internal_lb", "external_lb", "config"), required=True,
                        help="data_parallel_mode (config: as the config says; the CPU smoke run)")  # fmt: skip
    parser.add_argument("--config", default=MOE_CONFIG)
    parser.add_argument("--checkpoint-a", type=Path, required=True)
    parser.add_argument("--checkpoint-b", type=Path, required=True)
    parser.add_argument("--phases", default="ep,rollouts,refit,expert,soak,update,load")
    parser.add_argument("--change-expert", default="0:11", help="LAYER:EXPERT that B2 changes")
    parser.add_argument(
        "--expert-scale", type=float, default=4.0, help="B2's factor on that expert's weights"
    )
    parser.add_argument("--rollout-repeats", type=int, default=20, help="x 5 example rows")
    parser.add_argument("--soak-s", type=float, default=300.0)
    parser.add_argument("--soak-parallel", type=int, default=128)
    parser.add_argument("--soak-tokens", type=int, default=256)
    parser.add_argument("--probe-every-s", type=float, default=10.0)
    parser.add_argument("--updates", type=int, default=3)
    parser.add_argument("--load-parallel", type=int, default=256)
    parser.add_argument("--load-repeats", type=int, default=1000, help="x 5 example rows")
    parser.add_argument("--override", action="append", default=[], help="extra ng_run overrides")
    parser.add_argument("--workdir", type=Path, default=Path(f"/tmp/ng-moe-{os.getpid()}"))
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    phases = [p for p in args.phases.split(",") if p]
    args.workdir.mkdir(parents=True, exist_ok=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    overrides = [
        f"++{ENGINE_KEY}.model={args.checkpoint_a}",
        f"++{ENGINE_KEY}.weight_updates=true",
        *([f"++{ENGINE_KEY}.data_parallel_mode={args.mode}"] if args.mode != "config" else []),
        "++example_single_tool_call_simple_agent.responses_api_agents.simple_agent.num_workers=4",
        *args.override,
    ]
    record: dict[str, Any] = {
        "mode": args.mode, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "gpu": nvidia_smi()},
        "configs": [ENV_CONFIG, args.config], "overrides": overrides, "phases": {},
    }  # fmt: skip

    def save() -> None:
        args.output.write_text(json.dumps(record, indent=2, default=str))

    started = time.perf_counter()
    log = ""
    try:
        with engine_stack(args.workdir / "stack", [ENV_CONFIG, args.config], overrides) as stack:
            record["stack_ready_s"] = round(time.perf_counter() - started, 1)
            record["engines"] = stack.engines
            record["memory_after_start"] = nvidia_smi()
            print(
                f"stack ready in {record['stack_ready_s']} s: {[e['reported'] for e in stack.engines]}",
                flush=True,
            )
            client = WeightsClient.connect(stack.process.head_url)
            key = admin_key(stack.process.head_url, "policy_model") or ""
            run = Run(stack, client, key, args.checkpoint_a, args.checkpoint_b, record)
            run.answers["A"] = probe(stack.model_url)[0]
            probes = Probes(stack, key, _served(str(stack.engines[0]["url"]), key))
            references: dict[str, Any] = {}
            save()
            for phase in phases:
                t0 = time.perf_counter()
                print(f"phase {phase}", flush=True)
                try:
                    result: dict[str, Any]
                    if phase == "ep":
                        reported = [str(e["reported"]) for e in stack.engines]
                        sizes = [int(m[1]) for r in reported if (m := re.search(r"EP (\d+)", r))]
                        result = {"engines": [e["name"] for e in stack.engines], "reported": reported,
                                  "ep_sizes": sizes, "ep_2_on_every_engine": bool(sizes) and set(sizes) == {2}}  # fmt: skip
                    elif phase == "rollouts":
                        before = _served_by(stack)
                        collector = stack.collect(
                            "rollouts", args.rollout_repeats, parallel=64, max_tokens=128
                        )
                        out, _ = collector.communicate(timeout=900)
                        rows = stack.rows("rollouts")
                        after = _served_by(stack)
                        result = {"exit": collector.returncode, "rows": len(rows), "expected": 5 * args.rollout_repeats,
                                  "with_reward": sum(1 for r in rows if "reward" in r),
                                  "failures_file": (stack.tmp / "rollouts_failures.jsonl").is_file(),
                                  "ok_calls_per_endpoint": {u: after.get(u, 0) - before.get(u, 0) for u in after},
                                  "tail": out[-800:]}  # fmt: skip
                    elif phase == "soak":
                        urls = [str(e["url"]) for e in stack.engines]
                        served = _served(urls[0], key)
                        result = asyncio.run(_soak(
                            urls[0], urls[1] if len(urls) > 1 else None, key=key, model=served,
                            seconds=args.soak_s, parallel=args.soak_parallel, tokens=args.soak_tokens,
                            probe_every_s=args.probe_every_s, window_s=30.0,
                        ))  # fmt: skip
                        result["loaded"] = urls[0]
                        result["zero_failed"] = (
                            result["failed"] == 0 and result["idle_rank_probe_failures"] == 0
                        )
                        result["idle"] = (
                            urls[1] if len(urls) > 1 else "none: internal_lb has one endpoint for both ranks"
                        )
                    elif phase == "refit":
                        result = phase_refit(run, probes, references)
                    elif phase == "expert":
                        layer, expert = (int(part) for part in args.change_expert.split(":"))
                        b2 = make_b2(args.checkpoint_a, args.workdir / "moeB2", layer=layer, expert=expert,
                                     scale=args.expert_scale)  # fmt: skip
                        result = phase_expert(run, probes, b2, references)
                    elif phase == "update":
                        result = phase_idle(run, args.updates, cold=False)
                    elif phase == "load":
                        restore = with_logprobs(run, probes, references)
                        try:
                            # The tiny MoE ends 1,000 rollouts in ~12 s: the updates start 1 s in,
                            # 1 s apart, so that every one has rollouts in flight.
                            result = phase_load(run, args.updates, parallel=args.load_parallel, tokens=128,
                                                repeats=args.load_repeats, gap_s=1.0, watchers=4,
                                                baseline_s=1.0)  # fmt: skip
                        finally:
                            restore()
                        result["logprobs"] = summarise_load(result["updates"])
                    else:
                        result = {"error": f"unknown phase {phase}"}
                except Exception as exc:  # recorded; the next phase runs
                    result = {"error": repr(exc)[:3000]}
                result["phase_s"] = round(time.perf_counter() - t0, 1)
                record["phases"][phase] = result
                save()
                print(
                    json.dumps(
                        {
                            k: v
                            for k, v in result.items()
                            if not isinstance(v, list | dict) and "tail" not in k
                        },
                        default=str,
                    ),
                    flush=True,
                )
            record["final_status"] = client.status()
            log = stack.log()
    except Exception as exc:  # recorded
        record["error"] = repr(exc)[:3000]
        log_path = args.workdir / "stack" / "ng_run.log"
        log = log_path.read_text(errors="replace") if log_path.is_file() else ""
    record["engine_lines"] = [
        line for line in log.splitlines()
        if (any(m in line for m in ENGINE_LINES) or "EP Rank" in line or "data_parallel" in line)
        and "Avg prompt throughput" not in line
    ][-300:]  # fmt: skip
    record["total_s"] = round(time.perf_counter() - started, 1)
    save()
    args.output.with_suffix(".ng_run.log").write_text(log[-4_000_000:])
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
