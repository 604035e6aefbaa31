"""What the report counts while it streams the rollouts: compact columns, never the rows.

Per rollout it keeps six numbers (task, repeat, reward, agent, model turns, output tokens) and
its status; per task the prompt's first 100 characters. The run-level numbers (pass@k, mean@k,
failures by class) come from the collector's own `Scoreboard`, filled from these columns, so
the report and `_metrics.json` agree by construction.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ng_cli.report.conversation import first_user_text, model_turns
from ng_cli.report.rows import Row
from ng_cli.rollouts.metrics import Scoreboard
from ng_cli.rollouts.results import Outcome
from ng_cli.rollouts.versions import VersionTally

__all__ = ["PROMPT_CHARS", "FailureRow", "Tally", "agent_of"]

PROMPT_CHARS = 100


def agent_of(row: Mapping[str, Any]) -> str:
    """The agent a row was run with (`agent_ref.name`, as the collector writes it)."""
    ref = row.get("agent_ref")
    if isinstance(ref, Mapping):
        return str(ref.get("name") or "agent")
    return str(ref) if ref else "agent"


@dataclass(frozen=True)
class FailureRow:
    """One line of the failures file, as the report uses it."""

    task_index: int
    rollout_index: int
    agent: str
    kind: str


@dataclass
class Tally:
    """Columns over the readable rows, in file order, plus the failures and per-task prompts."""

    agents: list[str] = field(default_factory=list)
    task: array[int] = field(default_factory=lambda: array("q"))
    repeat: array[int] = field(default_factory=lambda: array("q"))
    reward: array[float] = field(default_factory=lambda: array("d"))
    agent: array[int] = field(default_factory=lambda: array("l"))
    turns: array[int] = field(default_factory=lambda: array("l"))
    tokens: array[int] = field(default_factory=lambda: array("q"))
    line: array[int] = field(default_factory=lambda: array("q"))
    is_incomplete: array[int] = field(default_factory=lambda: array("b"))
    incomplete: Counter[str] = field(default_factory=Counter)
    prompts: dict[int, str] = field(default_factory=dict)
    task_agent: dict[int, int] = field(default_factory=dict)
    failures: list[FailureRow] = field(default_factory=list)
    versions: VersionTally = field(default_factory=VersionTally)
    """The weight versions of the rollouts (`rollouts.versions`), when their calls were stamped."""
    reward_by_version: dict[tuple[int, int], list[float]] = field(default_factory=dict)
    """(agent, start version) -> [reward sum, rollouts], over the rows whose calls were stamped."""

    def add(self, row: Row) -> None:
        """Count one readable row."""
        outcome = row.outcome
        self.versions.add(outcome.weight_version)
        agent = self._agent_id(agent_of(row.data))
        if outcome.weight_version is not None:
            sums = self.reward_by_version.setdefault((agent, int(outcome.weight_version["start"])), [0.0, 0])
            sums[0] += outcome.reward
            sums[1] += 1
        response = row.data.get("response")
        self.task.append(outcome.task_index)
        self.repeat.append(outcome.rollout_index)
        self.reward.append(outcome.reward)
        self.agent.append(agent)
        self.turns.append(model_turns(response.get("output") if isinstance(response, Mapping) else None))
        self.tokens.append(outcome.output_tokens)
        self.line.append(row.line)
        self.is_incomplete.append(outcome.incomplete_reason is not None)
        if outcome.incomplete_reason is not None:
            self.incomplete[outcome.incomplete_reason] += 1
        if outcome.task_index not in self.prompts:
            self.prompts[outcome.task_index] = first_user_text(row.data)[:PROMPT_CHARS]
            self.task_agent[outcome.task_index] = agent

    def add_failures(self, records: Iterable[Mapping[str, Any]]) -> None:
        """The failures file's records (rollouts that never got a reward)."""
        for record in records:
            failure = FailureRow(
                task_index=int(record["_ng_task_index"]),
                rollout_index=int(record["_ng_rollout_index"]),
                agent=str(record.get("agent") or "agent"),
                kind=str(record.get("kind") or "unknown"),
            )
            self.failures.append(failure)
            self.task_agent.setdefault(failure.task_index, self._agent_id(failure.agent))
            # No row carries this task's prompt when every repeat failed; say where to find it.
            self.prompts.setdefault(
                failure.task_index, f"(no scored rollout; input line {record.get('input_line')})"
            )

    @property
    def rollouts(self) -> int:
        return len(self.reward)

    def task_order(self) -> list[int]:
        """Every task seen (in rows or failures), by task index."""
        return sorted(self.task_agent)

    def num_repeats(self, declared: int | None) -> int:
        """k: the run's `num_repeats` when known, at least the largest repeat index seen + 1."""
        seen = max((*self.repeat, *(f.rollout_index for f in self.failures)), default=0) + 1
        return max(seen, declared or 1)

    def scoreboard(self, num_repeats: int, *, repeats_below: int | None = None) -> Scoreboard:
        """The collector's scoreboard over these rollouts (tasks renumbered densely, in order).

        `repeats_below=k` keeps only each task's first k repeats (for the pass@k curve).
        """
        tasks = self.task_order()
        dense = {task: i for i, task in enumerate(tasks)}
        k = repeats_below or num_repeats
        board = Scoreboard(
            num_tasks=len(tasks),
            num_repeats=k,
            agents=self.agents,
            task_agents=[self.task_agent[task] for task in tasks],
        )
        for i in range(self.rollouts):
            if self.repeat[i] < k:
                outcome = Outcome(
                    task_index=dense[self.task[i]],
                    rollout_index=self.repeat[i],
                    reward=self.reward[i],
                    output_tokens=self.tokens[i],
                    incomplete_reason="incomplete" if self.is_incomplete[i] else None,
                )
                board.record(outcome)
        if repeats_below is None:
            for failure in self.failures:
                if failure.task_index in dense:
                    board.record_failure(dense[failure.task_index], failure.kind)
        return board

    def _agent_id(self, name: str) -> int:
        if name not in self.agents:
            self.agents.append(name)
        return self.agents.index(name)
