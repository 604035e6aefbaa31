"""Resume safely: the identity of a run (input + relevant config), and what an earlier run left.

Running the same command again continues a run: (task, rollout) pairs already in the output are
skipped and everything else, earlier failures included, is run. That is only correct when the
rows and the way they are rolled out are unchanged, so the first run stores a fingerprint in
`<output stem>_fingerprint.json`:

    input file sha256 and size, agent_name, num_repeats, limit, responses_create_params overrides,
    num_repeats_add_seed

Parallelism, timeouts and retry settings are not part of it: they change how, not what. A
different fingerprint is a ConfigError that offers `+overwrite=true`.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import orjson

from ng_cli.errors import ConfigError
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
    """The files one run writes, all beside the output: `out.jsonl` -> `out_failures.jsonl`, ..."""

    output: Path
    failures: Path
    fingerprint: Path
    metrics: Path

    @classmethod
    def for_output(cls, output: Path) -> OutputPaths:
        stem = output.with_suffix("") if output.suffix == ".jsonl" else output
        return cls(
            output=output,
            failures=stem.with_name(stem.name + "_failures.jsonl"),
            fingerprint=stem.with_name(stem.name + "_fingerprint.json"),
            metrics=stem.with_name(stem.name + "_metrics.json"),
        )

    @property
    def all(self) -> tuple[Path, ...]:
        return (self.output, self.failures, self.fingerprint, self.metrics)

    def remove_run_files(self) -> None:
        """Everything but the output itself (which the writer truncates under its lock)."""
        for path in (self.failures, self.fingerprint, self.metrics):
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


def refuse_writing_input(paths: OutputPaths, input_path: Path) -> None:
    """ConfigError when a file this run writes is the input, or a run file beside it.

    Checked before anything is opened for writing, overwrite or not: `+overwrite=true` with the
    output equal to the input would truncate the input. Same file means the same path after
    resolving symlinks, or the same inode (a hard link); the `_failures`/`_metrics`/
    `_fingerprint` siblings of either side count too.
    """
    guarded = OutputPaths.for_output(input_path).all
    for written in paths.all:
        for protected in guarded:
            if _same_file(written, protected):
                what = (
                    "the input"
                    if protected == input_path
                    else f"{protected.name}, a run file beside the input"
                )
                raise ConfigError(
                    f"output_jsonl_fpath: {paths.output} would write {written} over {what} "
                    f"(input_jsonl_fpath: {input_path}); nothing was written",
                    hint="choose an output path that is not the input, e.g. +output_jsonl_fpath=rollouts.jsonl",
                )


def _same_file(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return a.resolve() == b.resolve()
    except OSError:
        return False


def write_fingerprint(paths: OutputPaths, fingerprint: Fingerprint) -> None:
    """Write atomically (temp file + rename), so a crash leaves the old one or the new one."""
    tmp = paths.fingerprint.with_name(paths.fingerprint.name + ".tmp")
    tmp.write_bytes(fingerprint.to_json())
    os.replace(tmp, paths.fingerprint)


def _non_empty(path: Path) -> bool:
    return path.exists() and path.stat().st_size > 0
