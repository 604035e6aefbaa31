"""A weights delta against the full checkpoint of the same weights, from disk, interleaved, on one stack.

    <engine python> bench/weight_delta.py --config ENV.yaml --config gpu_dense_8b_weights.yaml \
        --checkpoint-a /tmp/ng-ckpt/A --checkpoint-b /tmp/ng-ckpt/B2 --delta /tmp/ng-ckpt/D2 \
        [--rounds 5] [--override KEY=VALUE ...] --output FILE.json

B (`--checkpoint-b`) and the delta A -> B (`--delta`) come from `bench/make_random_checkpoint.py
--changed-from A --fraction F --delta-out D`. `ng_run` boots the engine on A (its config's
`model`), then each round, through the model server's admin route (what `ng_update_weights`
sends), mode keep, idle:

    full A (not timed: back to the delta's base)  ->  the delta  (timed)
    full A (not timed)                            ->  full B     (timed)

After each timed update: every engine's fingerprint (the verify's) and a greedy probe with the
top-5 logprobs of every token; the delta's must equal full B's, every round. The first delta
after A also makes the model server read A once for its content digest (before the pause, never
in the window; the client's wall time shows it). Prints the window (pause to resume) p50, min and
max of each kind, the apply/reload phase, and the bytes each read.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROBE = [{"role": "user", "content": "What is the weather in Paris right now? Answer in one sentence."}]


def post(url: str, body: Any, *, key: str | None = None, timeout: float = 300) -> Any:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return json.loads(answer.read())


def probe(model_url: str) -> dict[str, Any]:
    """A greedy chat answer through the model server, with every token's logprob and top 5."""
    body = {"messages": PROBE, "temperature": 0.0, "max_tokens": 16, "logprobs": True, "top_logprobs": 5}
    choice = post(f"{model_url}/v1/chat/completions", body)["choices"][0]
    content = (choice.get("logprobs") or {}).get("content") or []
    return {
        "text": choice["message"].get("content") or "",
        "logprobs": [
            [item["token"], item["logprob"], [[top["token"], top["logprob"]] for top in item["top_logprobs"]]]
            for item in content
        ],
    }


def stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {
        "p50": round(statistics.median(values), 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
    }


def timed_update(client: Any, path: Path, version: int) -> dict[str, Any]:
    started = time.perf_counter()
    result = client.update(str(path), version=version)
    wall = time.perf_counter() - started
    timings = list(result["engines"].values())
    return {
        "version": version,
        "path": str(path),
        "bytes": result["bytes"],
        "window_s": result["window_s"],
        "client_wall_s": round(wall, 4),
        "reload_s": max(t.get("reload", 0.0) for t in timings),
        "pause_s": max(t.get("pause", 0.0) for t in timings),
        "deltas": result.get("deltas"),
    }


def run_rounds(stack: Any, client: Any, args: argparse.Namespace, record: dict[str, Any], save: Any) -> None:
    version = 0
    rounds: list[dict[str, Any]] = []
    record["rounds"] = rounds
    for index in range(args.rounds):
        row: dict[str, Any] = {"round": index}
        if version:  # the engines hold full B after a round: back to the delta's base, A
            version += 1
            client.update(str(args.checkpoint_a), version=version)
        version += 1
        row["delta"] = timed_update(client, args.delta, version)
        row["delta"]["fingerprint"] = client.status()["fingerprint"]
        row["delta"]["probe"] = probe(stack.model_url)
        version += 1
        client.update(str(args.checkpoint_a), version=version)
        version += 1
        row["full"] = timed_update(client, args.checkpoint_b, version)
        row["full"]["fingerprint"] = client.status()["fingerprint"]
        row["full"]["probe"] = probe(stack.model_url)
        row["fingerprints_equal"] = row["delta"]["fingerprint"] == row["full"]["fingerprint"]
        row["probes_equal"] = row["delta"]["probe"] == row["full"]["probe"]
        rounds.append(row)
        save()
        print(
            f"round {index}: delta window {row['delta']['window_s']:.3f} s (apply {row['delta']['reload_s']:.3f}, "
            f"{row['delta']['bytes'] / 1e9:.3f} GB), full window {row['full']['window_s']:.3f} s "
            f"(reload {row['full']['reload_s']:.3f}, {row['full']['bytes'] / 1e9:.3f} GB); "
            f"fingerprints equal {row['fingerprints_equal']}, probes equal {row['probes_equal']}",
            flush=True,
        )
    record["summary"] = {
        "rounds": len(rounds),
        "delta_window_s": stats([row["delta"]["window_s"] for row in rounds]),
        "full_window_s": stats([row["full"]["window_s"] for row in rounds]),
        "delta_apply_s": stats([row["delta"]["reload_s"] for row in rounds]),
        "full_reload_s": stats([row["full"]["reload_s"] for row in rounds]),
        "delta_client_wall_s": stats([row["delta"]["client_wall_s"] for row in rounds]),
        "delta_bytes": rounds[0]["delta"]["bytes"] if rounds else None,
        "full_bytes": rounds[0]["full"]["bytes"] if rounds else None,
        "all_fingerprints_equal": all(row["fingerprints_equal"] for row in rounds),
        "all_probes_equal": all(row["probes_equal"] for row in rounds),
        "probe_answers": sorted({row["full"]["probe"]["text"] for row in rounds}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", required=True)
    parser.add_argument(
        "--checkpoint-a", type=Path, required=True, help="the boot checkpoint, the delta's base"
    )
    parser.add_argument(
        "--checkpoint-b", type=Path, required=True, help="the full checkpoint the delta gives"
    )
    parser.add_argument("--delta", type=Path, required=True, help="the delta from A to B")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--override", action="append", default=[], help="extra ng_run overrides")
    parser.add_argument("--label", default="")
    parser.add_argument("--workdir", type=Path, default=Path(f"/tmp/ng-delta-{os.getpid()}"))
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    args.output.parent.mkdir(parents=True, exist_ok=True)

    from ng_cli.training import WeightsClient
    from ng_cli.upstream.checkpoint import Checkpoint
    from ng_cli.upstream.delta import Delta
    from tests.fixtures.engine_stack import ENGINE_KEY, engine_stack

    delta = Delta.read(args.delta.absolute())  # a malformed delta stops here, before the stack starts
    problems = delta.differences(Checkpoint.read(args.checkpoint_a.absolute()))
    if problems:
        raise SystemExit(f"{args.delta} does not fit {args.checkpoint_a}: {problems}")
    args.checkpoint_a, args.checkpoint_b, args.delta = (
        args.checkpoint_a.absolute(),
        args.checkpoint_b.absolute(),
        args.delta.absolute(),
    )
    overrides = [f"++{ENGINE_KEY}.weight_updates=true", *args.override]
    record: dict[str, Any] = {
        "label": args.label,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "configs": args.config,
        "overrides": overrides,
        "checkpoints": {"A": str(args.checkpoint_a), "B": str(args.checkpoint_b), "delta": str(args.delta)},
        "delta_tensors": {
            "whole": sum(t.kind == "whole" for t in delta.tensors.values()),
            "elements": sum(t.kind == "elements" for t in delta.tensors.values()),
            "elements_changed": sum(t.count for t in delta.tensors.values()),
        },
    }

    def save() -> None:
        args.output.write_text(json.dumps(record, indent=2, default=str))

    started = time.perf_counter()
    args.workdir.mkdir(parents=True, exist_ok=True)
    try:
        with engine_stack(args.workdir / "stack", args.config, overrides) as stack:
            record["stack_ready_s"] = round(time.perf_counter() - started, 1)
            client = WeightsClient.connect(stack.process.head_url)
            record["boot_probe"] = probe(stack.model_url)
            save()
            run_rounds(stack, client, args, record, save)
            log = stack.log()
            record["engine_delta_lines"] = [
                line for line in log.splitlines() if "ng_cli: weights delta" in line
            ][-20:]
    except Exception as exc:  # recorded, then raised: the session sees the failure
        record["error"] = repr(exc)[:3000]
        save()
        raise
    record["total_s"] = round(time.perf_counter() - started, 1)
    save()
    print(json.dumps(record.get("summary"), indent=1))
    print(f"wrote {args.output}")
    summary = record.get("summary") or {}
    if not (summary.get("all_fingerprints_equal") and summary.get("all_probes_equal")):
        raise SystemExit(
            "the delta's weights differ from the full checkpoint's (see the rounds in the record)"
        )


if __name__ == "__main__":
    main()
