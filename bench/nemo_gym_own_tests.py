"""Run NeMo Gym's servers' own `tests/` under `ng_test` (our stand-ins for `nemo_gym`).

    python bench/nemo_gym_own_tests.py --root <NeMo Gym root> [--categories pure second_model]

For each server folder of the chosen categories (as `bench/nemo_gym_servers.py` reads them)
that has tests: `ng_cli.launcher.server_tests.run_suite`, what `ng_test +entrypoint=...` runs,
from NeMo Gym's root. Prints one line per server and the counts; writes
bench/results/nemo_gym_own_tests.json ({server: {"category", "status", "seconds", "tail"}}).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from nemo_gym_servers import classify  # noqa: E402

from ng_cli.launcher.server_tests import has_tests, run_suite  # noqa: E402

RESULTS = REPO / "bench" / "results" / "nemo_gym_own_tests.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--categories", nargs="*", default=["pure", "second_model"])
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    root = args.root.resolve()
    os.chdir(root)
    found: dict[str, dict[str, object]] = {}
    for folder in sorted(p for p in (root / "resources_servers").iterdir() if p.is_dir()):
        category = classify(folder)["category"]
        if category not in args.categories or not has_tests(folder):
            continue
        result = run_suite(folder, pytest_args=["-q", "-p", "no:cacheprovider", "-x"], capture=True)
        found[folder.name] = {"category": category, "status": result.status, "seconds": round(result.duration_s, 1),
                              "tail": list(result.output_tail[-3:])}  # fmt: skip
        print(
            f"{folder.name:45s} {category:13s} {result.status}  {result.output_tail[-1][:100] if result.output_tail else ''}",
            flush=True,
        )
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    counts = Counter((v["category"], v["status"] == "passed") for v in found.values())
    for category in args.categories:
        total = sum(n for (c, _), n in counts.items() if c == category)
        print(f"{category}: {counts[(category, True)]} of {total} servers with tests pass them")


if __name__ == "__main__":
    main()
