"""Resume safely: the identity of a run (input + relevant config), and what an earlier run left.

Running the same command again continues a run: (task, rollout) pairs already in the output are
skipped and everything else, earlier failures included, is run. That is only correct when the
rows and the way they are rolled out are unchanged, so the first run stores a fingerprint in
`<output stem>_fingerprint.json`:

    input file sha256 and size, agent_name, num_repeats, limit, responses_create_params overrides,
    num_repeats_add_seed, agent_map, max_staleness

Parallelism, timeouts and retry settings are not part of it: they change how, not what.
`max_staleness` changes what a row says (its `stale` flag is decided when it is written), so rows
flagged under one K and metrics that state another cannot share a file. A different fingerprint
is a ConfigError that offers `+overwrite=true`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import orjson

from ng_cli.errors import ConfigError
from ng_cli.outputs import check_outputs, reads, write_bytes_atomically, writes
from ng_cli.rollouts.config import CollectConfig
from ng_cli.rollouts.inputs import InputSummary

__all__ = [
    "FINGERPRINT_VERSION",
    "Fingerprint",
    "OutputPaths",
    "check_resumable",
    "refuse_writing_input",
    "write_fingerprint",
]

FINGERPRINT_VERSION = 1


@dataclass(frozen=True)
class OutputPaths:
    """The files one run writes, all beside the output: `out.jsonl` -> `out_failures.jsonl`, ...

    `_materialized_inputs.jsonl` and `_aggregate_metrics.json` are NeMo Gym's files, under its names."""

    output: Path
    failures: Path
    fingerprint: Path
    metrics: Path
    materialized: Path
    aggregate_metrics: Path

    @classmethod
    def for_output(cls, output: Path) -> OutputPaths:
        stem = output.with_suffix("") if output.suffix == ".jsonl" else output
        return cls(
            output=output,
            failures=stem.with_name(stem.name + "_failures.jsonl"),
            fingerprint=stem.with_name(stem.name + "_fingerprint.json"),
            metrics=stem.with_name(stem.name + "_metrics.json"),
            materialized=stem.with_name(stem.name + "_materialized_inputs.jsonl"),
            aggregate_metrics=stem.with_name(stem.name + "_aggregate_metrics.json"),
        )

    @property
    def report(self) -> Path:
        """`<stem>_report.html`: where `+report=true` (and ng_report by default) writes the report."""
        stem = self.output.with_suffix("") if self.output.suffix == ".jsonl" else self.output
        return stem.with_name(stem.name + "_report.html")

    @property
    def all(self) -> tuple[Path, ...]:
        return (
            self.output,
            self.failures,
            self.fingerprint,
            self.metrics,
            self.materialized,
            self.aggregate_metrics,
        )

    def remove_run_files(self) -> None:
        """Everything but the output itself (which the writer truncates under its lock)."""
        for path in self.all[1:]:
            path.unlink(missing_ok=True)


@dataclass(frozen=True)
class Fingerprint:
    """What makes two runs the same run."""

    input_sha256: str
    input_size_bytes: int
    agent_name: str | None
    num_repeats: int
    limit: int | None
    responses_create_params: dict[str, Any]
    num_repeats_add_seed: bool = False
    version: int = FINGERPRINT_VERSION
    agent_map: dict[str, str] = field(default_factory=dict)
    max_staleness: int | None = None
    fan_out: dict[str, list[str]] | None = None
    """NeMo Gym's fan_out: another fan-out numbers the rollouts differently."""

    @classmethod
    def of(cls, config: CollectConfig, summary: InputSummary) -> Fingerprint:
        return cls(
            input_sha256=summary.sha256,
            input_size_bytes=summary.size_bytes,
            agent_name=config.agent_name,
            num_repeats=config.num_repeats,
            limit=config.limit,
            responses_create_params=config.responses_create_params,
            num_repeats_add_seed=config.num_repeats_add_seed,
            agent_map=config.agent_map,
            max_staleness=config.max_staleness,
            fan_out=config.fan_out,
        )

    @classmethod
    def from_json(cls, raw: bytes) -> Fingerprint:
        data = orjson.loads(raw)
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)

    def differences(self, earlier: Fingerprint) -> list[str]:
        """Human lines naming each field that changed, earlier -> now."""
        changed = []
        for name in (f.name for f in fields(self)):
            before, now = getattr(earlier, name), getattr(self, name)
            if before != now:
                label = f"input file ({name})" if name.startswith("input_") else name
                changed.append(f"{label}: {_shown(before)} -> {_shown(now)}")
        return changed


def _shown(value: Any) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= 80 else text[:77] + "..."


def check_resumable(paths: OutputPaths, fingerprint: Fingerprint, *, input_path: Path) -> bool:
    """True if earlier results exist and belong to this run; False if there is nothing to resume.

    Raises ConfigError when earlier files exist for a different input or config, or without a
    fingerprint to tell.
    """
    has_results = _non_empty(paths.output) or _non_empty(paths.failures)
    if not has_results:
        return False
    if not paths.fingerprint.exists():
        raise ConfigError(
            f"{paths.output} already holds results, but {paths.fingerprint.name} is missing, so it cannot "
            "tell whether they came from this input and config",
            hint="add +overwrite=true to start over, or choose another +output_jsonl_fpath",
        )
    try:
        earlier = Fingerprint.from_json(paths.fingerprint.read_bytes())
    except (orjson.JSONDecodeError, TypeError) as exc:
        raise ConfigError(
            f"{paths.fingerprint}: unreadable fingerprint ({exc})", hint="add +overwrite=true to start over"
        ) from exc
    changed = fingerprint.differences(earlier)
    if changed:
        raise ConfigError(
            f"{paths.output} holds results of a different run, so they cannot be resumed with {input_path} and "
            "this config:\n  " + "\n  ".join(changed),
            hint="add +overwrite=true to discard them and start over, or choose another +output_jsonl_fpath",
        )
    return True


def refuse_writing_input(paths: OutputPaths, input_path: Path, *, report: bool = False) -> None:
    """The collector's case of the output guard (`ng_cli.outputs.check_outputs`).

    Checked before anything is opened for writing, overwrite or not: `+overwrite=true` with the
    output equal to the input would truncate the input. Every file of the run counts (and
    `_report.html` with `report`), and so do the `_failures`/`_metrics`/`_fingerprint` siblings
    of the input; so does an output that cannot be written (a directory, a device, no folder).
    """
    written = (*paths.all, paths.report) if report else paths.all
    input_files = OutputPaths.for_output(input_path).all
    check_outputs(
        writes("output_jsonl_fpath", paths.output, *written),
        reads("input_jsonl_fpath", input_path, *input_files[1:]),
    )


def write_fingerprint(paths: OutputPaths, fingerprint: Fingerprint) -> None:
    """Write atomically (temp file + rename), so a crash leaves the old one or the new one."""
    write_bytes_atomically(paths.fingerprint, fingerprint.to_json())


def _non_empty(path: Path) -> bool:
    return path.exists() and path.stat().st_size > 0
