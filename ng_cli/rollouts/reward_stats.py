"""NeMo Gym's reward statistics, computed as it computes them, for the files its users' scripts read.

NeMo Gym 0.7.0 (`nemo_gym/reward_profile.py`: `RewardProfiler.profile_from_data`,
`compute_aggregate_metrics`) describes rollouts with pandas; this is the same arithmetic in plain
Python, checked against its output (`tests/unit/rollouts/test_reward_stats.py`):

    per task   (group_level_metrics)   mean/max/min/median/std of every numeric field, the rollouts
    per agent  (agent_level_metrics)   the same over all of an agent's rollouts (+ across repeats)
    per repeat (repeat_level_metrics)  mean/median/std/sem/min/max/p25/p75 and a 95% t-interval

A numeric field is a top-level int, float or bool (as 0/1) whose name does not start with `_`,
and every number of `response.usage`. `std` is the sample standard deviation (n - 1); a task
with one rollout gets std 0. Every statistic is a float, as pandas gives them (`max/input_tokens`
is 12.0). An environment's own metric hooks run in `environment_metrics`.
Histograms (NeMo Gym's W&B objects) are never serialised, so they are not computed.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ng_cli.rollouts.results import ROLLOUT_KEY, TASK_KEY

__all__ = ["add_across_repeats", "profile_from_data", "rollout_numbers", "t_interval"]

_AGENT_REF = "agent_ref"
_DESCRIBE = ("mean", "max", "min", "median", "std")
_REPEAT_STATS = ("mean", "median", "std", "sem", "min", "max", "p25", "p75")
_ACROSS = ("mean", "median", "std", "min", "max", "se")
_NOT_PRIMARY_PREFIXES = tuple(
    f"{stat}/"
    for stat in ("max", "min", "median", "std", "sem", "se", "p25", "p75", "ci_low_95", "ci_high_95")
)
_NOT_PRIMARY_NAMES = frozenset({TASK_KEY, ROLLOUT_KEY, "sample_count", "missing_count", "num_repeats"})

Numbers = dict[str, float | int]


def rollout_numbers(result: Mapping[str, Any]) -> Numbers:
    """The numeric fields NeMo Gym describes: `response.usage`'s numbers, then the result's own."""
    response = result.get("response")
    usage = response.get("usage") if isinstance(response, Mapping) else None
    numbers: Numbers = {}
    for source in (usage if isinstance(usage, Mapping) else {}, result):
        for key, value in source.items():
            if key.startswith("_") or (source is result and key == "response"):
                continue
            if isinstance(value, bool):
                numbers[key] = int(value)
            elif isinstance(value, int | float):
                numbers[key] = value
    return numbers


def _rollout_info(result: Mapping[str, Any]) -> dict[str, Any]:
    """NeMo Gym's `rollout_info_from_result` (reward first, then usage, then the other numbers)."""
    task, rollout = result[TASK_KEY], result[ROLLOUT_KEY]
    info: dict[str, Any] = {"rollout_id": f"{task}:{rollout}", TASK_KEY: task, ROLLOUT_KEY: rollout}
    if "reward" in result:
        info["reward"] = result["reward"]
    info.update(rollout_numbers(result))
    return info


def _describe(records: Sequence[Numbers], columns: Sequence[str]) -> dict[str, Any]:
    """pandas `describe` as NeMo Gym stacks it: `<stat>/<column>`, missing values skipped, NaN dropped."""
    values = {column: [r[column] for r in records if column in r] for column in columns}
    stds = {column: statistics.stdev(v) if len(v) > 1 else None for column, v in values.items()}
    if all(std is None for std in stds.values()):  # NeMo Gym: 0 rather than NaN for one sample
        stds = {column: 0.0 if len(v) == len(records) else None for column, v in values.items()}
    described: dict[str, Any] = {}
    for stat in _DESCRIBE:
        for column, column_values in values.items():
            if not column_values:
                continue
            if stat == "std":
                if stds[column] is not None:
                    described[f"std/{column}"] = stds[column]
                continue
            described[f"{stat}/{column}"] = _stat(stat, column_values)
    return described


def _stat(stat: str, values: Sequence[float]) -> float:
    if stat == "mean":
        return statistics.fmean(values)
    if stat == "median":
        return float(statistics.median(values))
    if stat == "max":  # pandas describes every column as floats: 12.0, never 12
        return float(max(values))
    if stat == "min":
        return float(min(values))
    raise ValueError(stat)


def _quantile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (pandas' and numpy's default)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (position - low))


def _columns(records: Iterable[Numbers], exclude: Iterable[str] = ()) -> list[str]:
    skipped = set(exclude)
    return [c for c in dict.fromkeys(key for record in records for key in record) if c not in skipped]


def profile_from_data(
    rows: Sequence[Mapping[str, Any]], results: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(group, agent, repeat) level metrics of aligned materialized rows and results, NeMo Gym's
    `profile_from_data` without fan-out (a task runs on one agent here)."""
    by_key = {(r[TASK_KEY], r[ROLLOUT_KEY]): r for r in results}
    expected = Counter(row[TASK_KEY] for row in rows)
    infos: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    first_row: dict[Any, Mapping[str, Any]] = {}
    records: list[tuple[str | None, Any, Any, Numbers]] = []
    for row in sorted(rows, key=lambda r: (r[TASK_KEY], r[ROLLOUT_KEY])):
        result = by_key.get((row[TASK_KEY], row[ROLLOUT_KEY]))
        if result is None:
            continue
        task = row[TASK_KEY]
        infos[task].append(_rollout_info(result))
        records.append((_agent_of(row), task, row[ROLLOUT_KEY], rollout_numbers(result)))
        first_row.setdefault(task, row)
    if not records:
        return [], [], []
    columns = _columns(numbers for _, _, _, numbers in records)
    group_level = []
    for task in sorted(first_row):
        group = [numbers for _, t, _, numbers in records if t == task]
        sample = {k: v for k, v in first_row[task].items() if k not in (TASK_KEY, ROLLOUT_KEY)}
        count, wanted = len(infos[task]), expected[task]
        group_level.append(
            {
                TASK_KEY: task,
                **_describe(group, columns),
                "sample": sample,
                "num_rollouts": count,
                "expected_num_rollouts": wanted,
                "missing_num_rollouts": wanted - count,
                "reward_profile_completion_pct": 100.0 if wanted == 0 else 100.0 * count / wanted,
                "rollout_infos": sorted(infos[task], key=lambda info: info[ROLLOUT_KEY]),
            }
        )
    agents = sorted({agent for agent, _, _, _ in records if agent is not None})
    agent_level = [
        {**_describe([n for a, _, _, n in records if a == agent], columns), _AGENT_REF: {"name": agent}}
        for agent in agents
    ]
    repeat_level = _repeat_level(records, columns)
    add_across_repeats(agent_level, repeat_level)
    return group_level, agent_level, repeat_level


def _agent_of(row: Mapping[str, Any]) -> str | None:
    ref = row.get(_AGENT_REF)
    name = ref.get("name") if isinstance(ref, Mapping) else ref
    return name if isinstance(name, str) else None


def _repeat_level(
    records: Sequence[tuple[str | None, Any, Any, Numbers]], columns: Sequence[str]
) -> list[dict[str, Any]]:
    """Per agent and rollout index, across tasks; only agents with more than one rollout index."""
    repeats_of: dict[str, set[Any]] = defaultdict(set)
    tasks_of: dict[str, set[Any]] = defaultdict(set)
    for agent, task, rollout, _ in records:
        if agent is not None:
            repeats_of[agent].add(rollout)
            tasks_of[agent].add(task)
    entries = []
    for agent in sorted(a for a, repeats in repeats_of.items() if len(repeats) > 1):
        for rollout in sorted(repeats_of[agent]):
            group = [(t, n) for a, t, r, n in records if a == agent and r == rollout]
            present = len({t for t, _ in group})
            entry: dict[str, Any] = {
                _AGENT_REF: {"name": agent},
                ROLLOUT_KEY: rollout,
                "sample_count": present,
                "missing_count": len(tasks_of[agent]) - present,
            }
            for column in sorted(columns):
                entry.update(
                    _spread([n[column] for _, n in group if column in n], column, _REPEAT_STATS, "/")
                )
            entries.append(entry)
    return entries


def _spread(values: Sequence[float], column: str, stats: Sequence[str], marker: str) -> dict[str, float]:
    """Summary statistics of one column and its 95% t-interval (NeMo Gym's per-repeat shape)."""
    n = len(values)
    if n == 0:
        return {}
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if n > 1 else 0.0
    error = std / math.sqrt(n)
    computed = {
        "mean": mean,
        "median": float(statistics.median(values)),
        "std": std,
        "sem": error,
        "se": error,
        "min": float(min(values)),
        "max": float(max(values)),
        "p25": _quantile(values, 0.25),
        "p75": _quantile(values, 0.75),
    }
    out = {f"{stat}{marker}{column}": computed[stat] for stat in stats}
    interval = t_interval(mean, error, n)
    if interval is not None:
        out[f"ci_low_95{marker}{column}"], out[f"ci_high_95{marker}{column}"] = interval
    return out


def add_across_repeats(agent_level: list[dict[str, Any]], repeat_level: Sequence[Mapping[str, Any]]) -> None:
    """Each primary (`mean/*`) repeat metric summarised across repeats, into its agent's entry."""
    for entry in agent_level:
        name = entry[_AGENT_REF]["name"]
        repeats = [r for r in repeat_level if r[_AGENT_REF]["name"] == name]
        if not repeats:
            continue
        columns = [
            c
            for c in dict.fromkeys(key for r in repeats for key in r)
            if c not in _NOT_PRIMARY_NAMES and c != _AGENT_REF and not c.startswith(_NOT_PRIMARY_PREFIXES)
        ]
        for column in columns:
            values = [r[column] for r in repeats if isinstance(r.get(column), int | float)]
            entry.update(_spread(values, column, _ACROSS, "_across_repeats/"))


def t_interval(mean: float, error: float, n: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """Student's t interval (scipy's `t.interval`), None for n <= 1, a point when the error is 0."""
    if n <= 1:
        return None
    if error == 0:
        return mean, mean
    half = _t_quantile(0.5 + confidence / 2, n - 1) * error
    return mean - half, mean + half


def _t_quantile(p: float, df: int) -> float:
    """The p-quantile (p > 0.5) of Student's t with `df` degrees of freedom, by bisection on its CDF."""
    low, high = 0.0, 1.0
    while _t_cdf(high, df) < p:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        if _t_cdf(middle, df) < p:
            low = middle
        else:
            high = middle
        if high - low <= 1e-15 * max(1.0, high):
            break
    return (low + high) / 2


def _t_cdf(t: float, df: int) -> float:
    """CDF of Student's t for t >= 0, through the regularised incomplete beta function."""
    x = df / (df + t * t)
    return 1.0 - 0.5 * _betainc(df / 2, 0.5, x)


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b) (continued fraction, Numerical Recipes' betacf)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-16:
            break
    return h
