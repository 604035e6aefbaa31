"""Options several bench scripts share (imported by name: a script's own folder is on sys.path)."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_out_option"]


def add_out_option(parser: argparse.ArgumentParser, default: Path) -> None:
    """`--out FILE`: where the results JSON goes; `default` is the committed bench/results/ file,
    which a smoke run (tests/bench) never writes over."""
    parser.add_argument(
        "--out",
        type=Path,
        default=default,
        help="the results file (default: %(default)s; a smoke run writes elsewhere)",
    )
