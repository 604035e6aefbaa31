"""A run resumes only with the same input and config; otherwise the error says what changed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ng_cli.errors import ConfigError
from ng_cli.rollouts.config import CollectConfig
from ng_cli.rollouts.inputs import scan_input
from ng_cli.rollouts.resume import Fingerprint, OutputPaths, check_resumable, write_fingerprint


@pytest.fixture
def fingerprint(tmp_path: Path) -> Fingerprint:
    source = tmp_path / "in.jsonl"
    source.write_text('{"responses_create_params": {}}\n')
    config = CollectConfig(
        input_jsonl_fpath=source,
        output_jsonl_fpath=tmp_path / "out.jsonl",
        agent_name="a",
        num_repeats=4,
        responses_create_params={"temperature": 0.7},
    )
    return Fingerprint.of(config, scan_input(source, limit=None, agent_name="a"))


@pytest.mark.parametrize(
    ("output", "stem"),
    [("runs/out.jsonl", "runs/out"), ("out.json", "out.json"), ("out", "out"), ("a.b.jsonl", "a.b")],
)
def test_run_files_sit_beside_the_output(output: str, stem: str) -> None:
    paths = OutputPaths.for_output(Path(output))
    assert paths.failures == Path(f"{stem}_failures.jsonl")
    assert paths.fingerprint == Path(f"{stem}_fingerprint.json")
    assert paths.metrics == Path(f"{stem}_metrics.json")


def test_fingerprint_round_trips(fingerprint: Fingerprint) -> None:
    assert Fingerprint.from_json(fingerprint.to_json()) == fingerprint


def test_parallelism_and_timeouts_are_not_part_of_the_fingerprint(
    tmp_path: Path, fingerprint: Fingerprint
) -> None:
    source = tmp_path / "in.jsonl"
    config = CollectConfig(
        input_jsonl_fpath=source,
        output_jsonl_fpath=tmp_path / "elsewhere.jsonl",
        agent_name="a",
        num_repeats=4,
        responses_create_params={"temperature": 0.7},
        num_samples_in_parallel=3,
        rollout_timeout_s=5,
        max_attempts=9,
    )
    assert Fingerprint.of(config, scan_input(source, limit=None, agent_name="a")) == fingerprint


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"input_sha256": "0" * 64}, "input file (input_sha256)"),
        ({"input_size_bytes": 1}, "input file (input_size_bytes)"),
        ({"agent_name": "b"}, 'agent_name: "a" -> "b"'),
        ({"num_repeats": 8}, "num_repeats: 4 -> 8"),
        ({"limit": 10}, "limit: null -> 10"),
        ({"responses_create_params": {"temperature": 1.0}}, "responses_create_params"),
        ({"num_repeats_add_seed": True}, "num_repeats_add_seed: false -> true"),
        ({"agent_map": {"a": "b"}}, 'agent_map: {} -> {"a":"b"}'),
        ({"max_staleness": 5}, "max_staleness: null -> 5"),
    ],
)
def test_differences_name_each_changed_field(fingerprint: Fingerprint, change: dict, named: str) -> None:
    now = replace(fingerprint, **change)
    (difference,) = now.differences(fingerprint)
    assert named in difference


def test_nothing_to_resume_without_results(tmp_path: Path, fingerprint: Fingerprint) -> None:
    paths = OutputPaths.for_output(tmp_path / "out.jsonl")
    assert check_resumable(paths, fingerprint, input_path=tmp_path / "in.jsonl") is False
    paths.output.write_bytes(b"")  # an empty output (a run that wrote nothing) is not a result
    assert (
        check_resumable(paths, replace(fingerprint, num_repeats=1), input_path=tmp_path / "in.jsonl") is False
    )


def test_same_fingerprint_resumes(tmp_path: Path, fingerprint: Fingerprint) -> None:
    paths = OutputPaths.for_output(tmp_path / "out.jsonl")
    paths.output.write_text("{}\n")
    write_fingerprint(paths, fingerprint)
    assert check_resumable(paths, fingerprint, input_path=tmp_path / "in.jsonl") is True


@pytest.mark.parametrize("existing", ["output", "failures"])
def test_a_different_run_is_refused_with_overwrite_offered(
    tmp_path: Path, fingerprint: Fingerprint, existing: str
) -> None:
    paths = OutputPaths.for_output(tmp_path / "out.jsonl")
    getattr(paths, existing).write_text("{}\n")
    write_fingerprint(paths, fingerprint)
    with pytest.raises(ConfigError) as caught:
        check_resumable(paths, replace(fingerprint, num_repeats=2), input_path=tmp_path / "in.jsonl")
    assert "num_repeats: 4 -> 2" in caught.value.message
    assert caught.value.hint is not None
    assert "+overwrite=true" in caught.value.hint


def test_results_without_a_fingerprint_are_refused(tmp_path: Path, fingerprint: Fingerprint) -> None:
    paths = OutputPaths.for_output(tmp_path / "out.jsonl")
    paths.output.write_text("{}\n")
    with pytest.raises(ConfigError, match=r"out_fingerprint\.json is missing"):
        check_resumable(paths, fingerprint, input_path=tmp_path / "in.jsonl")


def test_an_unreadable_fingerprint_is_refused(tmp_path: Path, fingerprint: Fingerprint) -> None:
    paths = OutputPaths.for_output(tmp_path / "out.jsonl")
    paths.output.write_text("{}\n")
    paths.fingerprint.write_text("{not json")
    with pytest.raises(ConfigError, match="unreadable fingerprint"):
        check_resumable(paths, fingerprint, input_path=tmp_path / "in.jsonl")


def test_a_fingerprint_written_before_num_repeats_add_seed_still_resumes(fingerprint: Fingerprint) -> None:
    import orjson

    older = orjson.loads(fingerprint.to_json())
    del older["num_repeats_add_seed"]
    assert Fingerprint.from_json(orjson.dumps(older)).differences(fingerprint) == []


@pytest.mark.parametrize("sibling", ["out_materialized_inputs.jsonl", "out_aggregate_metrics.json"])
def test_nemo_gyms_run_files_are_guarded_like_the_others(tmp_path: Path, sibling: str) -> None:
    """An input named like a file the run writes beside its output is refused before any write."""
    from ng_cli.rollouts.resume import refuse_writing_input

    source = tmp_path / sibling
    source.write_text('{"responses_create_params": {}}\n')
    with pytest.raises(ConfigError, match="is the same file as"):
        refuse_writing_input(OutputPaths.for_output(tmp_path / "out.jsonl"), source)
    assert source.read_text() == '{"responses_create_params": {}}\n'


def test_resuming_with_another_max_staleness_is_refused(tmp_path: Path) -> None:
    """Rows written under +max_staleness=5 are not flagged past 0: resuming them with 0 would leave
    spanning rows unflagged while the metrics say K=0 (issue 43, point 14)."""
    source = tmp_path / "in.jsonl"
    source.write_text('{"responses_create_params": {}}\n')
    summary = scan_input(source, limit=None, agent_name="a")

    def fingerprint_with(max_staleness: int | None) -> Fingerprint:
        config = CollectConfig(
            input_jsonl_fpath=source,
            output_jsonl_fpath=tmp_path / "out.jsonl",
            agent_name="a",
            num_repeats=4,
            responses_create_params={"temperature": 0.7},
            max_staleness=max_staleness,
        )
        return Fingerprint.of(config, summary)

    paths = OutputPaths.for_output(tmp_path / "out.jsonl")
    paths.output.write_text("{}\n")
    write_fingerprint(paths, fingerprint_with(5))
    with pytest.raises(ConfigError) as caught:
        check_resumable(paths, fingerprint_with(0), input_path=source)
    assert "max_staleness: 5 -> 0" in caught.value.message
    assert check_resumable(paths, fingerprint_with(5), input_path=source) is True


def test_a_fingerprint_written_before_max_staleness_resumes_without_it(fingerprint: Fingerprint) -> None:
    import orjson

    older = orjson.loads(fingerprint.to_json())
    older.pop("max_staleness", None)
    assert Fingerprint.from_json(orjson.dumps(older)).differences(fingerprint) == []
