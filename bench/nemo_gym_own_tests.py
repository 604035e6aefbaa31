"""Run NeMo Gym's servers' own `tests/` under `ng_test` (our stand-ins for `nemo_gym`).

    python bench/nemo_gym_own_tests.py --root <NeMo Gym root> [--categories pure second_model]
        [--install-requirements /tmp/SCRATCH] [--only NAME ...] [--seed earlier.json]

For each server folder of the chosen categories (as `bench/nemo_gym_servers.py` reads them)
that has tests: `ng_cli.launcher.server_tests.run_suite`, what `ng_test +entrypoint=...` runs,
from NeMo Gym's root, the whole suite (no `-x`: the counts say how much of it passes). With
`--install-requirements`, each suite runs with the interpreter `bench/nemo_gym_servers.py`
builds for that server (its requirements.txt installed by ng_run's own step, the packages it or
its tests import unlisted that NeMo Gym brings in the shared layer: `bench/_nemo_gym_envs.Scratch`), as
NeMo Gym runs a server's tests in the server's own environment. Prints one line per server and
the counts (by the harness's category and by `catalog`, the category docs/compat.md's table
gives: `ng_cli.catalog`); writes bench/results/nemo_gym_own_tests.json ({server: {"category",
"catalog", "status", "seconds", "summary", "failures", "tail"}}, plus the requirement notes with
`--install-requirements`) after each server, so a stopped run keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from nemo_gym_servers import classify  # noqa: E402

from ng_cli.catalog.classify import classify as catalog_classify  # noqa: E402
from ng_cli.catalog.facts import read_server  # noqa: E402
from ng_cli.errors import NgError  # noqa: E402
from ng_cli.launcher.server_tests import has_tests, run_suite  # noqa: E402

RESULTS = REPO / "bench" / "results" / "nemo_gym_own_tests.json"
PYTEST_ARGS = ["-q", "-p", "no:cacheprovider"]
_LISTED_FAILURES = 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--categories", nargs="*", default=["pure", "second_model"])
    parser.add_argument("--only", nargs="*", default=None, help="these servers only")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument(
        "--seed", type=Path, help="an earlier results file: its servers are kept, not run again"
    )
    parser.add_argument("--timeout-s", type=float, default=600.0, help="a suite running longer is stopped")
    parser.add_argument(
        "--install-requirements", type=Path, metavar="SCRATCH",
        help="run each suite in the server's own environment under SCRATCH, built as "
        "bench/nemo_gym_servers.py --install-requirements builds it (and reusing what is there)",
    )  # fmt: skip
    args = parser.parse_args()
    root = args.root.resolve()
    output = args.output.resolve()  # before the chdir below: never written into NeMo Gym's tree
    seed = args.seed.resolve() if args.seed else None
    scratch = None
    if args.install_requirements is not None:
        from _nemo_gym_envs import Scratch

        scratch = Scratch(args.install_requirements.resolve(), root)
    os.chdir(root)
    found: dict[str, dict[str, Any]] = {}
    if seed and seed.exists():
        found.update(json.loads(seed.read_text()))
    for folder in sorted(p for p in (root / "resources_servers").iterdir() if p.is_dir()):
        category = classify(folder)["category"]
        if category not in args.categories or not has_tests(folder) or folder.name in found:
            continue
        if args.only is not None and folder.name not in args.only:
            continue
        found[folder.name] = _run(folder, category, scratch, args.timeout_s)
        print(f"{folder.name:45s} {category:13s} {found[folder.name]['status']}  "
              f"{found[folder.name]['summary'][:100]}", flush=True)  # fmt: skip
        _write(output, found)
    _write(output, found)
    for key in ("category", "catalog"):  # the harness's reading, then docs/compat.md's table's
        counts = Counter((v[key], v["status"] == "passed") for v in found.values())
        for category in sorted({c for c, _ in counts}):
            total = counts[(category, True)] + counts[(category, False)]
            print(f"{key} {category}: {counts[(category, True)]} of {total} servers with tests pass them")


def _run(folder: Path, category: str, scratch: Any, timeout_s: float) -> dict[str, Any]:
    """One server's suite: its status, pytest's summary line and the failing tests pytest names."""
    notes: dict[str, Any] = {}
    python = None
    if scratch is not None:
        try:
            interpreter, notes = scratch.prepare(folder.name, with_tests=True)
        except NgError as error:
            reason = " | ".join(str(error).splitlines()[:2])[:400]
            return {"category": category, "catalog": catalog_classify(read_server(folder)).category.value,
                    "status": "requirements.txt not installed", "seconds": 0.0,
                    "summary": reason, "failures": [], "tail": [], "requirements": "failed"}  # fmt: skip
        python = str(interpreter)
    result = run_suite(folder, pytest_args=PYTEST_ARGS, capture=True, python=python, timeout_s=timeout_s)
    lines = list(result.output_tail)
    failures = [line for line in lines if line.startswith(("FAILED ", "ERROR "))][:_LISTED_FAILURES]
    return {
        "category": category,
        "catalog": catalog_classify(read_server(folder)).category.value,
        "status": result.status,
        "seconds": round(result.duration_s, 1),
        "summary": lines[-1].strip("= ") if lines else "",
        "failures": failures,
        "tail": lines[-3:],
        **notes,
    }


def _write(output: Path, found: dict[str, dict[str, Any]]) -> None:
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    tmp.replace(output)


if __name__ == "__main__":
    main()
