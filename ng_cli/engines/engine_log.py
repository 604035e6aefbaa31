"""What an engine says about itself at start, read from its log lines, and the start-up check on it.

vLLM exposes no endpoint with its parallel layout (vLLM 0.26 and 0.32: `/server_info` only in
dev mode), so the source is its own start-up log, read line by line as it streams:

    ng_engine: vllm=0.32.0 torch=2.13.0+cpu ...            engine_main.py, before vLLM starts
    Initializing a V1 LLM engine (v0.26.0) with config: ... tensor_parallel_size=1,
        pipeline_parallel_size=1, data_parallel_size=2, ...  (once per engine core)
    [EP Rank 0/2] Expert parallelism is enabled. ...        (once per worker, only when EP > 1)

    EngineCore failed to start.                            vLLM gave up starting; then its cause,
    RuntimeError: Worker failed with error '...'           the first `...Error: ...` line after it

The expert-parallel size an engine really uses is the N of `[EP Rank r/N]`; an engine that
loaded MoE layers with EP 1 logs no such line, which is exactly the silent failure of the seeds'
pull request, so a configured EP > 1 with no line reads as effective EP 1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ng_cli.engines.plan import EngineSpec

__all__ = ["EngineFacts", "parallelism_problems"]

_VERSIONS = re.compile(r"ng_engine: vllm=(?P<vllm>\S+) torch=(?P<torch>\S+)")
_ENGINE_CONFIG = re.compile(
    r"Initializing a V1 LLM engine \(v(?P<version>[^)]+)\) with config: (?P<config>.*)"
)
_SIZE = re.compile(r"\b(tensor|pipeline|data)_parallel_size=(\d+)")
_EP_RANK = re.compile(r"\[EP Rank (\d+)/(\d+)\] Expert parallelism is enabled")
_START_FAILED = "EngineCore failed to start"
_ERROR = re.compile(r"\b(?P<error>[A-Za-z_.]*(?:Error|Exception)): (?P<message>.+)")


@dataclass
class EngineFacts:
    """Accumulates what one engine process logged about itself; feed it every line."""

    vllm_version: str | None = None
    torch_version: str | None = None
    tensor_parallel_sizes: set[int] = field(default_factory=set)
    pipeline_parallel_sizes: set[int] = field(default_factory=set)
    data_parallel_sizes: set[int] = field(default_factory=set)
    ep_ranks: dict[int, int] = field(default_factory=dict)
    """EP rank -> the EP size it reported."""
    start_failed: bool = False
    """vLLM logged that its engine core failed to start. Its process does not always exit then: on
    two H200s a TP 2 engine whose workers crashed (CUDA errors) kept its API server up, and ng_run
    waited out the whole start-up timeout for an engine that had already given up."""
    start_failure: str | None = None
    """The first error line after that: what failed."""

    def feed(self, line: str) -> None:
        if _START_FAILED in line:
            self.start_failed = True
        elif self.start_failed and self.start_failure is None and (match := _ERROR.search(line)):
            self.start_failure = f"{match['error']}: {match['message'].strip()}"[:400]
        if "ng_engine:" in line and (match := _VERSIONS.search(line)):
            self.vllm_version, self.torch_version = match["vllm"], match["torch"]
        elif "Initializing a V1 LLM engine" in line and (match := _ENGINE_CONFIG.search(line)):
            self.vllm_version = self.vllm_version or match["version"]
            sizes = {kind: int(value) for kind, value in _SIZE.findall(match["config"])}
            for kind, target in (
                ("tensor", self.tensor_parallel_sizes),
                ("pipeline", self.pipeline_parallel_sizes),
                ("data", self.data_parallel_sizes),
            ):
                if kind in sizes:
                    target.add(sizes[kind])
        elif "[EP Rank" in line and (match := _EP_RANK.search(line)):
            self.ep_ranks[int(match[1])] = int(match[2])

    @property
    def effective_ep_sizes(self) -> set[int]:
        """Every EP size the engine's workers reported; {1} when none reported one."""
        return set(self.ep_ranks.values()) or {1}

    def summary(self) -> str:
        ep = "/".join(str(size) for size in sorted(self.effective_ep_sizes))
        tp = "/".join(str(size) for size in sorted(self.tensor_parallel_sizes)) or "?"
        return f"vllm {self.vllm_version or '?'}, torch {self.torch_version or '?'}, TP {tp}, EP {ep}"


def parallelism_problems(engine: EngineSpec, facts: EngineFacts) -> list[str]:
    """Configured vs effective sizes, one line per mismatch (empty: the engine runs as planned)."""
    problems: list[str] = []
    is_parallel = engine.tensor_parallel_size > 1 or engine.expert_parallel_size > 1
    if not facts.tensor_parallel_sizes:
        if is_parallel:
            problems.append(
                f"{engine.name}: logged no 'Initializing a V1 LLM engine' line: its parallel sizes are unknown"
            )
    elif facts.tensor_parallel_sizes != {engine.tensor_parallel_size}:
        problems.append(
            f"{engine.name}: tensor-parallel size configured {engine.tensor_parallel_size}, "
            f"effective {sorted(facts.tensor_parallel_sizes)}"
        )
    effective_ep = facts.effective_ep_sizes
    if effective_ep != {engine.expert_parallel_size}:
        ranks = (
            ", ".join(f"rank {rank}: {size}" for rank, size in sorted(facts.ep_ranks.items()))
            or "none logged"
        )
        problems.append(
            f"{engine.name}: expert-parallel size configured {engine.expert_parallel_size}, "
            f"effective {'/'.join(str(size) for size in sorted(effective_ep))} ([EP Rank] lines: {ranks})"
        )
    return problems
