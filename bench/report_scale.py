"""ng_report at scale: generation time, HTML size, and how the page behaves, for 1k to 100k rollouts.

    .venv/bin/python bench/report_scale.py [--sizes 1000,10000,100000] [--no-browser]

The rollouts are synthetic but shaped like real ones (the weather task: a system and a user
message, reasoning, a tool call, its output and the answer, token ids and logprobs on each model
turn, 8 repeats per task, 2 agents, 2% failures in a failures file), so the bytes per row match
what a collection run writes (~3.5 kB). For each size it times `write_report`, its peak memory
(ru_maxrss of a fresh child process), and, with Chromium and Playwright present, how long the
page takes to load and to open one rollout from the table. Prints a table and writes
bench/results/report_scale.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from _options import add_out_option
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.fixtures.browser: the same Chromium launch as the browser test

from tests.fixtures.browser import chromium_page, chromium_path  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "report_scale.json"
REPEATS = 8
CITIES = ["Paris", "London", "Oslo", "Tokyo", "Lima", "Cairo", "Delhi", "Rome"]


def synthetic_row(task: int, repeat: int, rng: random.Random) -> dict[str, Any]:
    """One scored rollout shaped like the weather task's (token ids included)."""
    city = CITIES[task % len(CITIES)]
    right = rng.random() < 0.6
    prompt = [rng.randrange(32000) for _ in range(rng.randint(120, 200))]
    first_gen = [rng.randrange(32000) for _ in range(rng.randint(15, 40))]
    second_gen = [rng.randrange(32000) for _ in range(rng.randint(10, 60))]
    answer = f"In {city} it is sunny, {24 if right else 19} degrees."
    output = [
        {
            "type": "reasoning",
            "id": f"rs_{task}_{repeat}",
            "summary": [{"type": "summary_text", "text": f"I should look up {city}."}],
        },
        {
            "type": "function_call",
            "id": f"fc_{task}_{repeat}",
            "call_id": f"call_{task}_{repeat}",
            "name": "get_weather",
            "arguments": json.dumps({"city": city}),
            "status": "completed",
            "prompt_token_ids": prompt,
            "generation_token_ids": first_gen,
            "generation_log_probs": [round(-rng.random(), 4) for _ in first_gen],
        },
        {
            "type": "function_call_output",
            "call_id": f"call_{task}_{repeat}",
            "output": json.dumps({"city": city, "condition": "sunny", "temperature": 24, "unit": "celsius"}),
        },
        {
            "type": "message",
            "id": f"msg_{task}_{repeat}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": answer, "annotations": []}],
            "prompt_token_ids": prompt + first_gen + [rng.randrange(32000) for _ in range(40)],
            "generation_token_ids": second_gen,
            "generation_log_probs": [round(-rng.random(), 4) for _ in second_gen],
        },
    ]
    return {
        "responses_create_params": {
            "input": [
                {"role": "system", "content": "You are a helpful assistant. Use the get_weather tool."},
                {"role": "user", "content": f"What is the weather in {city} right now? (task {task})"},
            ],
            "max_output_tokens": 512,
        },
        "expected_city": city,
        "agent_ref": {"type": "responses_api_agents", "name": f"agent_{task % 2}"},
        "response": {
            "id": f"resp_{task}_{repeat}",
            "status": "completed",
            "output": output,
            "usage": {"input_tokens": len(prompt) * 2, "output_tokens": len(first_gen) + len(second_gen)},
        },
        "reward": 1.0 if right else 0.0,
        "_ng_task_index": task,
        "_ng_rollout_index": repeat,
    }


def write_rollouts(directory: Path, n: int) -> Path:
    """`n` rollout attempts: 98% in out.jsonl, 2% in out_failures.jsonl."""
    rng = random.Random(n)
    path = directory / f"out_{n}.jsonl"
    with path.open("wb") as out, (directory / f"out_{n}_failures.jsonl").open("wb") as failures:
        for i in range(n):
            task, repeat = divmod(i, REPEATS)
            if rng.random() < 0.02:
                kind = rng.choice(["timeout", "http_5xx", "context_overflow"])
                record = {
                    "_ng_task_index": task,
                    "_ng_rollout_index": repeat,
                    "agent": f"agent_{task % 2}",
                    "input_line": task + 1,
                    "kind": kind,
                    "message": "synthetic",
                    "attempt": 3,
                }
                failures.write(orjson.dumps(record) + b"\n")
            else:
                out.write(orjson.dumps(synthetic_row(task, repeat, rng)) + b"\n")
    return path


def time_generation(rollouts: Path) -> dict[str, Any]:
    """write_report in a fresh process: wall time, CPU time (which other load on the machine
    barely changes) and peak memory."""
    code = (
        "import json, resource, sys, time; from pathlib import Path; from ng_cli.report import write_report\n"
        "t, c = time.perf_counter(), time.process_time(); r = write_report(Path(sys.argv[1]))\n"
        "s, cpu = time.perf_counter() - t, time.process_time() - c\n"
        "print(json.dumps({'seconds': s, 'cpu_s': cpu, 'bytes': r.size_bytes, 'path': str(r.path),"
        " 'peak_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(rollouts)], check=True, capture_output=True, text=True
    )
    return dict(json.loads(out.stdout))


def time_browser(report: Path) -> dict[str, float] | None:
    """Load the page in headless Chromium, then sort the table and open a rollout from it."""
    executable = chromium_path()
    if executable is None or importlib.util.find_spec("playwright") is None:
        return None
    with chromium_page(executable) as page:
        start = time.perf_counter()
        page.goto(report.as_uri())
        page.wait_for_selector("body[data-ready=true]", timeout=120_000)
        loaded_s = time.perf_counter() - start
        page.click("#tasks th[data-key=mean]")
        start = time.perf_counter()
        page.click("#tasks th[data-key=mean]")
        page.wait_for_selector("#tasks tbody tr")
        sort_s = time.perf_counter() - start
        start = time.perf_counter()
        page.locator("#tasks tbody tr").last.click()
        page.wait_for_selector("#conversation .tool-call", timeout=60_000)
        open_s = time.perf_counter() - start
        heap = page.evaluate("performance.memory ? performance.memory.usedJSHeapSize : 0")
        nodes = page.evaluate("document.getElementsByTagName('*').length")
    return {
        "load_s": loaded_s,
        "sort_s": sort_s,
        "open_rollout_s": open_s,
        "js_heap_mb": heap / 1e6,
        "dom_nodes": nodes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--no-browser", action="store_true")
    add_out_option(parser, RESULTS)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        for n in (int(size) for size in args.sizes.split(",")):
            rollouts = write_rollouts(directory, n)
            generated = time_generation(rollouts)
            browser = None if args.no_browser else time_browser(Path(generated["path"]))
            rows.append(
                {
                    "rollouts": n,
                    "jsonl_mb": rollouts.stat().st_size / 1e6,
                    "generate_s": generated["seconds"],
                    "generate_cpu_s": generated["cpu_s"],
                    "html_mb": generated["bytes"] / 1e6,
                    "peak_rss_mb": generated["peak_mb"],
                    "browser": browser,
                }
            )
    table = Table(title="ng_report: generation and page, by rollouts")
    for header in (
        "rollouts",
        "JSONL MB",
        "generate s",
        "CPU s",
        "peak RSS MB",
        "HTML MB",
        "page load s",
        "sort s",
        "open rollout s",
        "DOM nodes",
    ):
        table.add_column(header, justify="right")
    for row in rows:
        b = row["browser"] or {}
        table.add_row(
            f"{row['rollouts']:,}",
            f"{row['jsonl_mb']:.1f}",
            f"{row['generate_s']:.2f}",
            f"{row['generate_cpu_s']:.2f}",
            f"{row['peak_rss_mb']:.0f}",
            f"{row['html_mb']:.2f}",
            *(f"{b[key]:.2f}" if key in b else "-" for key in ("load_s", "sort_s", "open_rollout_s")),
            str(b.get("dom_nodes", "-")),
        )
    Console().print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "machine": platform.platform(),
                "cpus": os.cpu_count(),
                "load_avg_1m": os.getloadavg()[0],
                "rows": rows,
            },
            indent=2,
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
