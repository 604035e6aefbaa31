"""Weight updates through the whole stack: the pause-to-resume window and the reload time.

    .venv/bin/python bench/weight_update.py [--updates 6] [--under-load] [--config FILE ...]
        [--checkpoint-a DIR --checkpoint-b DIR] [--override KEY=VALUE ...]

`ng_run` starts the engines with `weight_updates: true` (default: the embedded model on the CPU
engine, `tiny_weather_cpu.yaml`; on a GPU pass the 8B config and two real checkpoints), then
`--updates` updates alternate between checkpoints A and B (mode keep), each through the model
server's admin route as `ng_update_weights` sends it. Idle first; with `--under-load`, the same
again while a collection keeps 64 rollouts in flight (the window then includes frozen requests).

Per update: the window (stop admitting -> admit again, as the model server measures it), each
engine's reload and pause times, and the GB/s of the reload (checkpoint bytes / reload time).
Prints a table (p50 and max) and writes bench/results/weight_update.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the stack harness and checkpoint makers live under tests/fixtures

from ng_cli.training import WeightsClient  # noqa: E402
from tests.fixtures import checkpoints  # noqa: E402
from tests.fixtures.engine_stack import ENGINE_KEY, EXAMPLE_ENV_CONFIG, engine_stack, wait_for  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "weight_update.json"
CPU_CONFIG = "responses_api_models/local_vllm_model/configs/tiny_weather_cpu.yaml"


def run_updates(
    client: WeightsClient, paths: list[Path], first_version: int, count: int
) -> list[dict[str, Any]]:
    results = []
    for i in range(count):
        path = paths[i % 2]
        started = time.perf_counter()
        result = client.update(str(path), version=first_version + i)
        wall = time.perf_counter() - started
        engines = result["engines"]
        reload_s = max(timings["reload"] for timings in engines.values())
        results.append(
            {
                "version": result["version"],
                "checkpoint": str(path),
                "bytes": result["bytes"],
                "window_s": result["window_s"],
                "client_wall_s": round(wall, 4),
                "reload_s": reload_s,
                "pause_s": max(timings["pause"] for timings in engines.values()),
                "reload_gb_per_s": round(result["bytes"] / reload_s / 1e9, 3) if reload_s else None,
                "spanning_calls": len(result["spanning_calls"]),
                "engines": engines,
            }
        )
    return results


def summary(results: list[dict[str, Any]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key in ("window_s", "reload_s", "pause_s", "reload_gb_per_s"):
        values = [r[key] for r in results if r[key] is not None]
        out[f"{key}_p50"] = round(statistics.median(values), 4)
        out[f"{key}_max"] = round(max(values), 4)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=6)
    parser.add_argument("--under-load", action="store_true")
    parser.add_argument("--config", action="append", default=None, help="config files (default: the CPU one)")
    parser.add_argument("--override", action="append", default=[], help="extra ng_run overrides")
    parser.add_argument("--checkpoint-a", type=Path)
    parser.add_argument("--checkpoint-b", type=Path)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="ng-bench-weights-") as tmp_name:
        tmp = Path(tmp_name)
        model = ROOT / "models" / "tiny-weather"
        a = args.checkpoint_a or checkpoints.copy(model, tmp / "A")
        b = args.checkpoint_b or checkpoints.swapped(model, tmp / "B", "Ġdegrees", "ĠElacas")
        configs = args.config or [EXAMPLE_ENV_CONFIG, CPU_CONFIG]
        overrides = [f"++{ENGINE_KEY}.weight_updates=true", *args.override]
        with engine_stack(tmp / "stack", configs, overrides) as stack:
            client = WeightsClient.connect(stack.process.head_url)
            idle = run_updates(client, [b, a], 1, args.updates)
            loaded: list[dict[str, Any]] = []
            if args.under_load:
                collector = stack.collect("load", 200, parallel=64, max_tokens=64)
                wait_for(lambda: client.status()["in_flight"] >= 32, 600, "64 rollouts in flight")
                loaded = run_updates(client, [b, a], 1 + args.updates, args.updates)
                collector.kill()
                collector.communicate()

    record = {
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "configs": configs,
        "overrides": overrides,
        "checkpoint_bytes": idle[0]["bytes"],
        "idle": {"summary": summary(idle), "updates": idle},
        **({"under_load": {"summary": summary(loaded), "updates": loaded}} if loaded else {}),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=2))
    table = Table(
        title=f"weight updates ({idle[0]['bytes'] / 1e6:.1f} MB checkpoint), seconds", title_justify="left"
    )
    for column in ("", "window p50", "window max", "reload p50", "reload max", "pause p50", "GB/s p50"):
        table.add_column(column, justify="left" if not column else "right")
    for name, part in (("idle", idle), ("under load", loaded)):
        if part:
            s = summary(part)
            table.add_row(
                name,
                f"{s['window_s_p50']:.3f}", f"{s['window_s_max']:.3f}",
                f"{s['reload_s_p50']:.3f}", f"{s['reload_s_max']:.3f}",
                f"{s['pause_s_p50']:.3f}", f"{s['reload_gb_per_s_p50']:.3f}",
            )  # fmt: skip
    Console().print(table)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
