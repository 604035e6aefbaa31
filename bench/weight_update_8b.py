"""Weight updates at real size on a GPU: one stack, every figure of issue 28's one-GPU part.

    <engine python> bench/weight_update_8b.py --config ENV.yaml --config gpu_dense_8b_weights.yaml \
        --checkpoint-a /tmp/ng-ckpt/A --checkpoint-b /tmp/ng-ckpt/B [--updates 5] \
        [--phases warm,floor,cold,load,sleep] [--override KEY=VALUE ...] --output FILE.json

`ng_run` starts the stack once (the engine boots from checkpoint A, `weight_updates: true`), then
the phases run in order on the same engine, each update alternating A and B through the model
server's admin route (`WeightsClient.update`, what `ng_update_weights` sends), mode keep:

* warm: `--updates` idle updates with both checkpoints in the page cache. After each, a greedy
  probe through CUDA graphs (batch 1) must answer as that checkpoint answered before (A at
  boot, B at its first update) and A's answer must differ from B's: a graph that read stale
  weight storage after a reload would show here (vllm#48312), beside the fingerprints the
  update's verify phase compares.
* floor: what the hardware gives without vLLM, in a separate process: the checkpoint's files read
  into memory (page cache warm, then after `drop_caches`), `safetensors.safe_open(device="cuda")`
  of every tensor (warm, cold) and a pinned host-to-device copy; and the fingerprint alone
  (`collective_rpc ng_weights_fingerprint`), which every reload includes.
* cold: the same idle updates with `sync; echo 3 > /proc/sys/vm/drop_caches` before each (when
  that is refused, said so in the record, and the phase is skipped).
* load: a collection keeps `--load-parallel` rollouts in flight (`--load-tokens` each) while
  `--updates` updates run; a few streamed chats beside it measure the longest gap a client sees.
  Afterwards: rows lost, failures, aborted and retried calls, and every row's weight versions
  (calls that span an update are exactly among those the updates reported).
* sleep: `sleep(1)` and `wake_up()` (then level 2, whose weights are discarded, followed by an
  update that loads them again), with nvidia-smi's memory before and after, the times, and the
  probe answer after waking.

Writes the record after every phase (a phase that fails records its error, the next runs), the
ng_run log's engine lines about loading, and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHECKPOINT_GLOB = "*.safetensors"


# -- the floor, in a process of its own (`--floor MODE DIR`) ------------------------------------


def floor(mode: str, directory: Path) -> dict[str, Any]:
    files = sorted(directory.glob(CHECKPOINT_GLOB))
    total = sum(file.stat().st_size for file in files)
    if mode == "read":
        buffer = bytearray(256 << 20)
        view = memoryview(buffer)
        started = time.perf_counter()
        for file in files:
            with open(file, "rb", buffering=0) as handle:
                while handle.readinto(view):
                    pass
        seconds = time.perf_counter() - started
        return {
            "mode": mode,
            "bytes": total,
            "seconds": round(seconds, 3),
            "gb_per_s": round(total / seconds / 1e9, 3),
        }
    import torch
    from safetensors import safe_open

    torch.cuda.init()
    torch.empty(1, device="cuda")
    pinned = torch.empty(1 << 30, dtype=torch.uint8).pin_memory()
    pinned.fill_(1)
    target = torch.empty_like(pinned, device="cuda")
    copies = []
    for _ in range(3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        target.copy_(pinned, non_blocking=True)
        torch.cuda.synchronize()
        copies.append(time.perf_counter() - t0)
    del target, pinned
    started = time.perf_counter()
    for file in files:
        with safe_open(str(file), framework="pt", device="cuda") as handle:
            for name in handle.keys():  # noqa: SIM118 - a safe_open handle is not iterable
                tensor = handle.get_tensor(name)
                del tensor
    torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    return {
        "mode": mode,
        "bytes": total,
        "safe_open_to_gpu_s": round(seconds, 3),
        "safe_open_to_gpu_gb_per_s": round(total / seconds / 1e9, 3),
        "pinned_h2d_gb_per_s": round((1 << 30) / min(copies) / 1e9, 2),
    }


# -- helpers ------------------------------------------------------------------------------------


def nvidia_smi() -> dict[str, Any]:
    try:
        gpu = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.used,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout.strip().splitlines()[0]  # fmt: skip
        apps = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30, check=False,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError, IndexError) as error:
        return {"error": str(error)}
    name, used, total = (part.strip() for part in gpu.split(","))
    return {"gpu": name, "used_mib": int(used), "total_mib": int(total), "apps": apps.splitlines()}


def page_cached_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Cached:"):
            return round(int(line.split()[1]) / 1024**2, 2)
    return float("nan")


def drop_caches() -> str | None:
    """None when the page cache was dropped; else why not."""
    subprocess.run(["sync"], check=False)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as handle:
            handle.write("3\n")
    except OSError as error:
        return f"drop_caches refused: {error}"
    return None


def post(url: str, body: Any, *, key: str | None = None, timeout: float = 300) -> Any:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return json.loads(answer.read())


PROBE_MESSAGES = [
    {"role": "user", "content": "What is the weather in Paris right now? Answer in one sentence."}
]


def probe(model_url: str) -> tuple[list[int] | str, dict[str, Any]]:
    """A greedy chat answer through the model server (batch 1: CUDA graphs), and its stamp."""
    answer = post(
        f"{model_url}/v1/chat/completions",
        {"messages": PROBE_MESSAGES, "temperature": 0.0, "max_tokens": 16},
    )
    return answer["choices"][0]["message"].get("content") or "", answer.get("weight_version") or {}


def p50(values: list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


def summarise(updates: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"updates": len(updates)}
    for key in (
        "window_s",
        "reload_s",
        "pause_s",
        "resume_s",
        "reset_cache_s",
        "reload_gb_per_s",
        "client_wall_s",
    ):
        values = [u[key] for u in updates if u.get(key) is not None]
        if values:
            out[f"{key}_p50"] = p50(values)
            out[f"{key}_max"] = round(max(values), 4)
            out[f"{key}_min"] = round(min(values), 4)
    return out


class Run:
    """The stack's admin client, the versions, the checkpoints and the probe answers."""

    def __init__(self, stack: Any, client: Any, key: str, a: Path, b: Path, record: dict[str, Any]) -> None:
        self.stack, self.client, self.key = stack, client, key
        self.paths = {"A": a, "B": b}
        self.current = "A"
        self.version = 0
        self.answers: dict[str, Any] = {}
        self.record = record
        self.engine_root = str(stack.engines[0]["url"]).removesuffix("/v1").rstrip("/")

    def update(self, *, check_probe: bool, before: Any = None) -> dict[str, Any]:
        target = "B" if self.current == "A" else "A"
        extra = before() if before else {}
        started = time.perf_counter()
        result = self.client.update(str(self.paths[target]), version=self.version + 1)
        wall = time.perf_counter() - started
        self.version += 1
        self.current = target
        timings = list(result["engines"].values())
        row: dict[str, Any] = {
            "version": result["version"],
            "checkpoint": target,
            "bytes": result["bytes"],
            "window_s": result["window_s"],
            "client_wall_s": round(wall, 4),
            **{
                f"{phase}_s": max(t.get(phase, 0.0) for t in timings)
                for phase in ("pause", "reload", "reset_cache", "resume")
            },
            "in_flight_at_pause": len(result["in_flight_at_pause"]),
            "spanning_calls": result["spanning_calls"],
            "prefix_cache_reset": result.get("prefix_cache_reset"),
            "problems": result.get("problems"),
            **extra,
        }
        row["reload_gb_per_s"] = round(row["bytes"] / row["reload_s"] / 1e9, 3) if row["reload_s"] else None
        if check_probe:
            text, stamp = probe(self.stack.model_url)
            expected = self.answers.setdefault(target, text)
            row["probe"] = {"text": text, "stamp": stamp, "as_before": text == expected}
        return row

    def fingerprint_s(self, times: int = 3) -> list[float]:
        seconds = []
        for _ in range(times):
            started = time.perf_counter()
            post(f"{self.engine_root}/collective_rpc", {"method": "ng_weights_fingerprint"}, key=self.key)
            seconds.append(round(time.perf_counter() - started, 4))
        return seconds


def phase_idle(run: Run, count: int, *, cold: bool) -> dict[str, Any]:
    if cold:
        refused = drop_caches()
        if refused:
            return {"skipped": refused}

    def before() -> dict[str, Any]:
        if not cold:
            return {"page_cache_gib": page_cached_gib()}
        cached = page_cached_gib()
        refused = drop_caches()
        return {
            "page_cache_gib_before_drop": cached,
            "page_cache_gib": page_cached_gib(),
            "drop": refused or "ok",
        }

    updates = [run.update(check_probe=True, before=before) for _ in range(count)]
    probes_ok = all(u["probe"]["as_before"] for u in updates)
    return {
        "summary": summarise(updates),
        "probes_as_before": probes_ok,
        "a_and_b_answer_differently": run.answers.get("A") != run.answers.get("B"),
        "updates": updates,
    }


def phase_floor(run: Run) -> dict[str, Any]:
    def sub(mode: str) -> dict[str, Any]:
        out = subprocess.run(
            [sys.executable, __file__, "--floor", mode, str(run.paths["A"])],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        if out.returncode != 0:
            return {"mode": mode, "error": out.stderr[-2000:]}
        floor: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
        return floor

    result: dict[str, Any] = {"fingerprint_s": run.fingerprint_s()}
    sub("read")  # make sure A is in the page cache
    result["warm_read"] = sub("read")
    result["warm_gpu"] = sub("gpu")
    refused = drop_caches()
    if refused:
        result["cold"] = refused
        return result
    result["cold_read"] = sub("read")
    drop_caches()
    result["cold_gpu"] = sub("gpu")
    sub("read")  # leave A warm again
    return result


def stream_watcher(model_url: str, stop: threading.Event, calls: list[dict[str, Any]], tokens: int) -> None:
    body = {
        "messages": [{"role": "user", "content": "Describe the weather in Oslo in detail."}],
        "max_tokens": tokens,
        "temperature": 1.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    while not stop.is_set():
        started = time.perf_counter()
        last = started
        first: float | None = None
        gap = 0.0
        gap_at = 0.0
        chunks = 0
        stamp: Any = None
        error = None
        try:
            request = urllib.request.Request(
                f"{model_url}/v1/chat/completions", data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"},
            )  # fmt: skip
            with urllib.request.urlopen(request, timeout=600) as answer:
                for raw in answer:
                    line = raw.decode().strip()
                    if not line.startswith("data:") or line == "data: [DONE]":
                        continue
                    now = time.perf_counter()
                    if first is None:
                        first = now - started
                    elif now - last > gap:
                        gap, gap_at = now - last, last
                    last = now
                    chunks += 1
                    payload = json.loads(line[5:])
                    if isinstance(payload, dict) and payload.get("weight_version"):
                        stamp = payload["weight_version"]
        except Exception as exc:  # recorded
            error = repr(exc)[:300]
        calls.append({
            "started": started, "first_chunk_s": None if first is None else round(first, 4),
            "longest_gap_s": round(gap, 4), "gap_started": gap_at, "chunks": chunks,
            "seconds": round(time.perf_counter() - started, 4), "weight_version": stamp, "error": error,
        })  # fmt: skip


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The collector's rows, split on "\\n" alone: generated text can hold U+0085 or U+2028 (seen:
    U+0085 in a random model's output), which `str.splitlines()` also splits on and JSON leaves as
    they are."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().split("\n") if line.strip()]


def phase_load(
    run: Run,
    count: int,
    *,
    parallel: int,
    tokens: int,
    repeats: int,
    gap_s: float,
    watchers: int,
    baseline_s: float = 10.0,
) -> dict[str, Any]:
    """`count` updates `gap_s` apart while the collection runs, after `baseline_s` of the watchers'
    calls with no update (a 256-token call takes ~5 s on the 8B; a tiny model's whole collection
    can end within 10 s, so it passes less)."""
    stack, client = run.stack, run.client
    first_version = run.version + 1
    collector = stack.collect("load", repeats, parallel=parallel, max_tokens=tokens)
    started = time.perf_counter()
    deadline = time.monotonic() + 600
    while client.status()["in_flight"] < int(parallel * 0.8):
        if collector.poll() is not None or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    ramp_s = time.perf_counter() - started
    stop = threading.Event()
    calls: list[dict[str, Any]] = []
    threads = [
        threading.Thread(target=stream_watcher, args=(stack.model_url, stop, calls, tokens), daemon=True)
        for _ in range(watchers)
    ]
    for thread in threads:
        thread.start()
    time.sleep(baseline_s)
    updates = []
    update_marks = []
    for _ in range(count):
        if collector.poll() is not None:
            break
        in_flight = client.status()["in_flight"]
        mark = time.perf_counter()
        row = run.update(check_probe=False)
        row["in_flight_when_asked"] = in_flight
        update_marks.append((mark, time.perf_counter()))
        updates.append(row)
        time.sleep(gap_s)
    stop.set()
    out, _ = collector.communicate(timeout=1200)
    for thread in threads:
        thread.join(timeout=700)
    collection_s = time.perf_counter() - started
    try:
        rows, rows_error = read_rows(stack.tmp / "load.jsonl"), None
    except ValueError as error:  # the updates and the stalls above are kept
        rows, rows_error = [], repr(error)[:500]
    failures_path = stack.tmp / "load_failures.jsonl"
    failures = len(failures_path.read_text().splitlines()) if failures_path.is_file() else 0
    expected = 5 * repeats
    versions = set(range(first_version - 1, run.version + 1))
    row_calls = [call for row in rows for call in (row.get("weight_version") or {}).get("calls", [])]
    spanning = {call["call"] for call in row_calls if call["start"] != call["end"]}
    reported = {call for u in updates for call in u["spanning_calls"]}
    problems = []
    for row in rows:
        wv = row.get("weight_version")
        if not wv or not wv.get("calls"):
            problems.append(f"row without weight_version: {str(row)[:200]}")
            continue
        starts = [c["start"] for c in wv["calls"]]
        ends = [c["end"] for c in wv["calls"]]
        if (
            wv["start"] != min(starts)
            or wv["end"] != max(ends)
            or any(s > e for s, e in zip(starts, ends, strict=True))
        ):
            problems.append(f"row versions inconsistent: {wv}")
        if not set(starts) | set(ends) <= versions:
            problems.append(f"row versions outside {sorted(versions)}: {wv}")
    if not spanning <= reported:
        problems.append(f"{len(spanning - reported)} spanning call(s) the updates did not report")
    # The watchers' calls: baseline (ended before the first update) vs those that overlapped one.
    first_mark = update_marks[0][0] if update_marks else float("inf")
    baseline = [c for c in calls if c["started"] + c["seconds"] < first_mark and not c["error"]]
    overlapped = [
        c for c in calls
        if not c["error"] and any(c["started"] < end and c["started"] + c["seconds"] > mark for mark, end in update_marks)
    ]  # fmt: skip
    stalls = {
        "watchers": watchers,
        "calls": len(calls),
        "errors": [c["error"] for c in calls if c["error"]],
        "baseline_longest_gap_s": round(max((c["longest_gap_s"] for c in baseline), default=0.0), 4),
        "baseline_first_chunk_s_max": round(max((c["first_chunk_s"] or 0.0 for c in baseline), default=0.0), 4),
        "overlapping_calls": len(overlapped),
        "longest_gap_s": round(max((c["longest_gap_s"] for c in overlapped), default=0.0), 4),
        "first_chunk_s_max": round(max((c["first_chunk_s"] or 0.0 for c in overlapped), default=0.0), 4),
        "watcher_stamps_spanning": sum(1 for c in overlapped if c["weight_version"] and c["weight_version"].get("start") != c["weight_version"].get("end")),
    }  # fmt: skip
    stalls["longest_stall_s"] = max(stalls["longest_gap_s"], stalls["first_chunk_s_max"])
    return {
        "parallel": parallel,
        "max_output_tokens": tokens,
        "ramp_s": round(ramp_s, 2),
        "collection_s": round(collection_s, 2),
        "collector_exit": collector.returncode,
        "collector_tail": out[-1500:],
        "rollouts_expected": expected,
        "rollouts_written": len(rows),
        "rows_error": rows_error,
        "lost": None if rows_error else expected - len(rows) - failures,
        "failed": failures,
        "aborted_requests": stack.counter("ng_model_aborted_requests_total"),
        "retried_after_update": stack.counter("ng_model_calls_retried_after_weight_update_total"),
        "rows_spanning_an_update": sum(
            1 for row in rows if (row.get("weight_version") or {}).get("staleness", 0) > 0
        ),
        "calls_spanning": len(spanning),
        "calls_reported_spanning": len(reported),
        "version_problems": problems[:20],
        "versions_right": not problems,
        "stalls": stalls,
        "summary": summarise(updates),
        "updates": [{**u, "spanning_calls": len(u["spanning_calls"])} for u in updates],
    }


def phase_sleep(run: Run) -> dict[str, Any]:
    result: dict[str, Any] = {}
    text_before, _ = probe(run.stack.model_url)
    for level in (1, 2):
        part: dict[str, Any] = {"memory_before": nvidia_smi()}
        try:
            t0 = time.perf_counter()
            answer = run.client.sleep(level)
            part["sleep_s"] = round(time.perf_counter() - t0, 3)
            part["sleep_answer"] = answer
            part["memory_asleep"] = nvidia_smi()
            part["status_asleep"] = {
                k: v for k, v in run.client.status().items() if k in ("sleeping", "version", "in_flight")
            }
            t0 = time.perf_counter()
            part["wake_answer"] = run.client.wake_up()
            part["wake_s"] = round(time.perf_counter() - t0, 3)
            part["memory_awake"] = nvidia_smi()
            if level == 1:
                text, stamp = probe(run.stack.model_url)
                part["probe_after_wake"] = {"text": text, "stamp": stamp, "as_before": text == text_before}
            else:  # level 2 discarded the weights: the trainer's next step is an update
                part["update_after_wake"] = run.update(check_probe=True)
            freed = part["memory_before"].get("used_mib", 0) - part["memory_asleep"].get("used_mib", 0)
            part["freed_mib"] = freed
            part["restored_mib"] = part["memory_awake"].get("used_mib", 0) - part["memory_asleep"].get(
                "used_mib", 0
            )
        except Exception as exc:  # recorded
            part["error"] = repr(exc)[:2000]
        result[f"level_{level}"] = part
    return result


ENGINE_LINES = (
    "Loading weights took", "Model loading took", "Reloading", "weights took", "sleep", "Sleep", "wake",
    "KV cache", "CUDA graph", "Graph capturing", "torch.compile", "fastsafetensors", "Filesystem type",
    "Free memory on device", "Error", "Traceback", "ng_engine:", "memory", "is ready", "weights:",
)  # fmt: skip


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--floor":
        print(json.dumps(floor(sys.argv[2], Path(sys.argv[3]))))
        return

    from rich.console import Console
    from rich.table import Table

    from ng_cli.launcher.admin_keys import admin_key
    from ng_cli.training import WeightsClient
    from tests.fixtures.engine_stack import ENGINE_KEY, engine_stack

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", required=True)
    parser.add_argument("--checkpoint-a", type=Path, required=True)
    parser.add_argument("--checkpoint-b", type=Path, required=True)
    parser.add_argument("--updates", type=int, default=5)
    parser.add_argument("--phases", default="warm,floor,cold,load,sleep")
    parser.add_argument("--override", action="append", default=[], help="extra ng_run overrides")
    parser.add_argument("--load-parallel", type=int, default=256)
    parser.add_argument("--load-tokens", type=int, default=256)
    parser.add_argument("--load-repeats", type=int, default=1000, help="x 5 example rows")
    parser.add_argument("--load-gap-s", type=float, default=2.0)
    parser.add_argument("--watchers", type=int, default=4)
    parser.add_argument("--label", default="")
    parser.add_argument("--workdir", type=Path, default=Path(f"/tmp/ng-wu8b-{os.getpid()}"))
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    phases = [p for p in args.phases.split(",") if p]
    args.workdir.mkdir(parents=True, exist_ok=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)

    overrides = [f"++{ENGINE_KEY}.weight_updates=true", *args.override]
    record: dict[str, Any] = {
        "label": args.label,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
                    "gpu": nvidia_smi()},
        "configs": args.config,
        "overrides": overrides,
        "checkpoints": {"A": str(args.checkpoint_a), "B": str(args.checkpoint_b)},
        "phases": {},
    }  # fmt: skip

    def save() -> None:
        args.output.write_text(json.dumps(record, indent=2, default=str))

    console = Console(width=160)
    started = time.perf_counter()
    try:
        with engine_stack(args.workdir / "stack", args.config, overrides) as stack:
            record["stack_ready_s"] = round(time.perf_counter() - started, 1)
            record["memory_after_start"] = nvidia_smi()
            console.print(f"stack ready in {record['stack_ready_s']} s; GPU {record['memory_after_start']}")
            client = WeightsClient.connect(stack.process.head_url)
            key = admin_key(stack.process.head_url, "policy_model") or ""
            run = Run(stack, client, key, args.checkpoint_a, args.checkpoint_b, record)
            text, stamp = probe(stack.model_url)
            run.answers["A"] = text
            record["boot_probe"] = {"text": text, "stamp": stamp}
            save()
            for phase in phases:
                t0 = time.perf_counter()
                console.print(f"[bold]phase {phase}[/bold] (version {run.version})")
                try:
                    if phase == "warm":
                        result = phase_idle(run, args.updates, cold=False)
                    elif phase == "cold":
                        result = phase_idle(run, args.updates, cold=True)
                    elif phase == "floor":
                        result = phase_floor(run)
                    elif phase == "load":
                        result = phase_load(
                            run, args.updates, parallel=args.load_parallel, tokens=args.load_tokens,
                            repeats=args.load_repeats, gap_s=args.load_gap_s, watchers=args.watchers,
                        )  # fmt: skip
                    elif phase == "sleep":
                        result = phase_sleep(run)
                    else:
                        result = {"error": f"unknown phase {phase}"}
                except Exception as exc:  # recorded, the next phase runs
                    result = {"error": repr(exc)[:3000]}
                result["phase_s"] = round(time.perf_counter() - t0, 1)
                record["phases"][phase] = result
                save()
                console.print(
                    json.dumps(
                        {
                            k: v
                            for k, v in result.items()
                            if k
                            in (
                                "summary",
                                "error",
                                "skipped",
                                "phase_s",
                                "probes_as_before",
                                "lost",
                                "failed",
                                "versions_right",
                            )
                        },
                        default=str,
                    )
                )
            record["final_status"] = client.status()
            log = stack.log()
    except Exception as exc:  # recorded
        record["error"] = repr(exc)[:3000]
        log_path = args.workdir / "stack" / "ng_run.log"
        log = log_path.read_text(errors="replace") if log_path.is_file() else ""
    lines = [
        line for line in log.splitlines()
        if any(marker in line for marker in ENGINE_LINES) and "Avg prompt throughput" not in line
    ]  # fmt: skip
    record["engine_lines"] = lines[-300:]
    # vLLM's own account of each reload (the worker's `reload_weights`, without our fingerprint).
    record["vllm_reload_logged_s"] = [
        float(match[1])
        for match in re.finditer(r"Reloading and processing weights took ([0-9.]+) seconds", log)
    ]
    record["total_s"] = round(time.perf_counter() - started, 1)
    save()
    (args.output.with_suffix(".ng_run.log")).write_text(log[-4_000_000:])

    table = Table(
        title=f"weight updates {args.label} ({record['machine']['gpu'].get('gpu', '?')})",
        title_justify="left",
    )
    for column in ("", "n", "window p50", "window max", "reload p50", "reload max", "GB/s p50", "pause p50"):
        table.add_column(column, justify="left" if not column else "right")
    for name in ("warm", "cold", "load"):
        s = record["phases"].get(name, {}).get("summary")
        if s:
            table.add_row(
                name, str(s["updates"]), f"{s['window_s_p50']:.3f}", f"{s['window_s_max']:.3f}",
                f"{s['reload_s_p50']:.3f}", f"{s['reload_s_max']:.3f}", f"{s['reload_gb_per_s_p50']:.2f}",
                f"{s['pause_s_p50']:.3f}",
            )  # fmt: skip
    console.print(table)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
