#!/usr/bin/env python3
"""Rewrite docs/compat.md's table of NeMo Gym's resources servers from NeMo Gym's own files.

    python scripts/nemo_gym_compat_table.py --nemo-gym /path/to/nemo_gym-0.7.0

One row per folder of `<root>/resources_servers/` (what it needs, its agent, whether it runs
here and why not); "runs here" comes from bench/results/nemo_gym_servers.json when it exists.
Only the text between the table's two marker comments changes; the file is rewritten in one
step (nothing half-written). The rules are ng_cli/catalog/ (facts.py, classify.py, table.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ng_cli.catalog.table import build_rows, load_results, render, replace_table  # noqa: E402
from ng_cli.errors import NgError  # noqa: E402
from ng_cli.outputs.atomic import write_bytes_atomically  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--nemo-gym", required=True, type=Path, help="NeMo Gym's root (holds resources_servers/)"
    )
    parser.add_argument("--doc", type=Path, default=REPO / "docs" / "compat.md", help="the file to rewrite")
    parser.add_argument(
        "--results", type=Path, default=REPO / "bench" / "results" / "nemo_gym_servers.json",
        help="the harness's results (absent: every row is untested)",
    )  # fmt: skip
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is not what it would write")
    args = parser.parse_args(argv)
    try:
        rows = build_rows(args.nemo_gym / "resources_servers", load_results(args.results))
        before = args.doc.read_text(encoding="utf-8")
        after = replace_table(before, render(rows), name=str(args.doc))
    except (NgError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.check:
        print("up to date" if after == before else f"{args.doc} is not what the script makes")
        return 0 if after == before else 1
    if after != before:
        write_bytes_atomically(args.doc, after.encode("utf-8"))
    print(f"{args.doc}: {len(rows)} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
