"""Offline engine install, timed: scripts/build_vllm_env.sh from a wheelhouse, network off.

    .venv/bin/python bench/offline_install.py --wheelhouse DIR [--python PY] [--dry-run]
    .venv/bin/python bench/offline_install.py --parts OUT/part01 OUT/part02 ... [--python PY] [--dry-run]

With --parts, each part is copied into a fresh folder and staged by a call of its own (as on a
machine where each transfer carries one part and is gone on the next), and the last call
installs. Every call runs under `unshare -n` where that works (no network at all; pip has
--no-index anyway). The venv goes to a temporary folder, removed afterwards. Prints a table of
the calls and of the installer's phases (from its log lines) and writes
bench/results/offline_install_LABEL.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
SCRIPT = ROOT / "scripts" / "build_vllm_env.sh"
_LINE = re.compile(r"^\[build_vllm_env (\d\d):(\d\d):(\d\d)\] (.*)$")


def _offline_prefix() -> list[str]:
    """`unshare -n` when this user may make a network namespace, else nothing (pip is --no-index)."""
    if shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"], check=False).returncode == 0:
        return ["unshare", "-n"]
    return []


def _call(args: list[str], prefix: list[str]) -> dict[str, Any]:
    start = time.monotonic()
    result = subprocess.run(
        [*prefix, "bash", str(SCRIPT), *args], capture_output=True, text=True, check=False
    )
    wall = time.monotonic() - start
    sys.stderr.write(result.stderr)
    return {
        "args": args,
        "rc": result.returncode,
        "wall_s": round(wall, 2),
        "log": result.stderr.splitlines(),
    }


def _phases(log: list[str]) -> list[tuple[str, int]]:
    """Seconds from each installer log line to the next (1 s resolution: the log's clock)."""
    stamped = []
    for line in log:
        if match := _LINE.match(line):
            h, m, s, text = match.groups()
            stamped.append((int(h) * 3600 + int(m) * 60 + int(s), text))
    return [(text[:70], (stamped[i + 1][0] - t) % 86400) for i, (t, text) in enumerate(stamped[:-1])]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--wheelhouse", type=Path)
    source.add_argument("--parts", type=Path, nargs="+")
    parser.add_argument("--python", help="target interpreter (default: the manifest's pythonX.Y)")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument(
        "--label", default="run", help="results go to bench/results/offline_install_LABEL.json"
    )
    parser.add_argument("--out", type=Path, help="the results file (default: offline_install_LABEL.json)")
    args = parser.parse_args()
    prefix = _offline_prefix()
    common = (["--python", args.python] if args.python else []) + (["--dry-run"] if args.dry_run else [])
    calls: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ng-bench-install-") as scratch:
        work = Path(scratch)
        venv = ["--venv", str(work / "venv")]
        if args.wheelhouse:
            calls.append(_call(["--wheelhouse", str(args.wheelhouse), *venv, *common], prefix))
        else:
            stage = ["--stage", str(work / "stage")]
            for i, part in enumerate(args.parts):
                carried = work / "carried"
                shutil.rmtree(carried, ignore_errors=True)
                shutil.copytree(part, carried)
                last = i == len(args.parts) - 1
                tail = [*venv, *common] if last else ["--stage-only"]
                calls.append(_call(["--wheelhouse", str(carried), *stage, *tail], prefix))
                if calls[-1]["rc"] != 0:
                    break
    table = Table(
        title=f"offline install ({'unshare -n' if prefix else 'network not cut'}, {os.cpu_count()} cores)"
    )
    table.add_column("call")
    table.add_column("rc", justify="right")
    table.add_column("wall s", justify="right")
    for i, call in enumerate(calls, start=1):
        table.add_row(str(i), str(call["rc"]), f"{call['wall_s']:.1f}")
    phases = Table(title="phases of the last call (installer log, 1 s resolution)")
    phases.add_column("phase")
    phases.add_column("s", justify="right")
    for text, seconds in _phases(calls[-1]["log"]):
        phases.add_row(text, str(seconds))
    console = Console()
    console.print(table, phases)
    results: Path = args.out or RESULTS / f"offline_install_{args.label}.json"
    results.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "when_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cores": os.cpu_count(),
            "load_avg": os.getloadavg(),
            "python": platform.python_version(),
        },
        "network_cut": bool(prefix),
        "source": str(args.wheelhouse or [str(p) for p in args.parts]),
        "dry_run": args.dry_run,
        "calls": calls,
        "total_wall_s": round(sum(c["wall_s"] for c in calls), 2),
    }
    results.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    console.print(f"wrote {results}")
    return max(int(c["rc"]) for c in calls)


if __name__ == "__main__":
    sys.exit(main())
