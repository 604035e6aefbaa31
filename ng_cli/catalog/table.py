"""docs/compat.md's table of NeMo Gym's resources servers: one row per folder, made from its files.

    server | what it needs | agent | runs here | why not

"Runs here" comes from `bench/results/nemo_gym_servers.json` (written by the harness that runs
every server under ng_run: {server: {starts, rows, scored, reward_mean, agent, reason}}); a
server it does not list, or every server when the file is absent, is "untested", and "why not"
then says what is expected to stand in the way (marked "expected"). Only the text between the
two marker comments is replaced, so the prose around it stays whoever's it is.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from ng_cli.catalog.classify import Category, Classification, classify
from ng_cli.catalog.facts import read_server
from ng_cli.errors import ConfigError, DataError

__all__ = ["BEGIN", "END", "Row", "ServerResult", "build_rows", "load_results", "render", "replace_table"]

BEGIN = "<!-- nemo_gym_servers:begin (made by scripts/nemo_gym_compat_table.py; do not edit) -->"
END = "<!-- nemo_gym_servers:end -->"
OUR_AGENTS = frozenset(
    {
        "simple_agent",
        "non_executing_simple_agent",
        "gymnasium_agent",
        "tool_simulation_agent",
        "speed_bench_agent",
    }
)
REFERENCE_COUNTS = {Category.PURE: 41, Category.MODEL: 36, Category.PYPI: 18, Category.OUTSIDE: 48}
"""The hand count in ../shared/NEMO_GYM_ENVS.md, shown beside ours."""


class ServerResult(BaseModel):
    """One server's entry in the results file (other keys the harness adds are ignored)."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    starts: bool
    rows: int
    scored: int
    reward_mean: float | None
    agent: str
    reason: str | None


@dataclass(frozen=True)
class Row:
    server: str
    classification: Classification
    agents: tuple[str, ...]
    result: ServerResult | None

    @property
    def runs_here(self) -> str:
        if self.result is None:
            return "untested"
        if self.result.starts and self.result.scored > 0:
            mean = self.result.reward_mean
            shown = f", mean reward {mean:.3f}" if mean is not None and math.isfinite(mean) else ""
            return f"yes ({self.result.scored} of {self.result.rows} rows scored{shown})"
        return "no"

    @property
    def why_not(self) -> str:
        if self.result is not None:
            if self.runs_here.startswith("yes"):
                return ""
            return self.result.reason or ("did not start" if not self.result.starts else "no row scored")
        return f"expected: {self._expected()}" if self._expected() else ""

    def _expected(self) -> str:
        category = self.classification.category
        missing = [agent for agent in self.agents if agent not in OUR_AGENTS]
        if category is Category.LIBRARY:
            return "not a server"
        if category is Category.OUTSIDE:
            return self.classification.needs.removeprefix("outside: ")
        reasons = []
        if self.agents and all(agent in missing for agent in self.agents):
            reasons.append(f"its agent ({', '.join(missing)}) is not here")
        if category is Category.MODEL:
            reasons.append("a judge/second model must be configured")
        if self.classification.packages:
            reasons.append("its packages (`+install_requirements=true`)")
        return "; ".join(reasons)


def load_results(path: Path) -> dict[str, ServerResult] | None:
    """The results file, or None when it does not exist; a bad one is a DataError naming the key."""
    if not path.is_file():
        return None
    try:
        raw = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise DataError(f"{path}: not JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise DataError(
            f"{path}: expected an object {{server: {{starts, rows, ...}}}}, got {type(raw).__name__}"
        )
    results = {}
    for server, entry in raw.items():
        try:
            results[str(server)] = ServerResult.model_validate(entry)
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(map(str, problem["loc"])) or "entry"
            raise DataError(f"{path}: {server}.{where}: {problem['msg']}") from exc
    return results


def build_rows(resources_servers: Path, results: Mapping[str, ServerResult] | None) -> list[Row]:
    """One row per folder of NeMo Gym's `resources_servers/`, sorted by name."""
    if not resources_servers.is_dir():
        raise ConfigError(f"{resources_servers} is not a folder; --nemo-gym takes NeMo Gym's root")
    rows = []
    for folder in sorted(
        path for path in resources_servers.iterdir() if path.is_dir() and not path.name.startswith((".", "_"))
    ):
        facts = read_server(folder)
        result = None if results is None else results.get(folder.name)
        rows.append(Row(folder.name, classify(facts), tuple(facts.agents), result))
    return rows


def render(rows: Sequence[Row]) -> str:
    """The markdown between the markers: the counts, then the table."""
    counts = Counter(row.classification.category for row in rows)
    ours = ", ".join(f"{category.value} {counts[category]}" for category in REFERENCE_COUNTS)
    theirs = " / ".join(str(count) for count in REFERENCE_COUNTS.values())
    tested = sum(1 for row in rows if row.result is not None)
    running = sum(1 for row in rows if row.runs_here.startswith("yes"))
    lines = [
        f"{len(rows)} folders: {ours}; libraries {counts[Category.LIBRARY]} "
        f"(NEMO_GYM_ENVS.md's hand count: {theirs}). Runs here: {running} of {tested} tested"
        + ("" if tested else " (no results file: every row is untested)")
        + ".",
        "",
        "| server | what it needs | agent | runs here | why not |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        agents = ", ".join(agent if agent in OUR_AGENTS else f"{agent} (NeMo Gym's)" for agent in row.agents)
        cells = [row.server, row.classification.needs, agents or "-", row.runs_here, row.why_not]
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def replace_table(document: str, table: str, *, name: str = "docs/compat.md") -> str:
    """`document` with the text between BEGIN and END replaced by `table`."""
    start = document.find(BEGIN)
    end = document.find(END)
    if start < 0 or end < start:
        raise ConfigError(
            f"{name} has no table markers; put these two lines where the table goes:\n{BEGIN}\n{END}"
        )
    return document[: start + len(BEGIN)] + "\n" + table + document[end:]


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")
