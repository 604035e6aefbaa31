"""write_report: one self-contained file, streamed in chunks, written whole or not at all."""

from __future__ import annotations

import base64
import re
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from ng_cli.errors import ConfigError, DataError
from ng_cli.report import report_path_for, write_report
from ng_cli.report.build import CHUNK_ROLLOUTS
from tests.fixtures.rollouts.rollout_rows import rollout_row, write_jsonl


def embedded(html: str, block: str) -> Any:
    match = re.search(rf'<script id="{block}" type="application/json">(.*?)</script>', html, re.S)
    assert match, block
    return orjson.loads(match.group(1))


def conversations(html: str) -> list[dict[str, Any]]:
    return [
        row
        for chunk in embedded(html, "ng-chunks")
        for row in orjson.loads(zlib.decompress(base64.b64decode(chunk)))
    ]


def test_the_report_sits_beside_the_rollouts_and_holds_everything(tmp_path: Path) -> None:
    rows = [
        rollout_row(task, repeat, float(repeat % 2)) for task in range(CHUNK_ROLLOUTS) for repeat in range(2)
    ]
    source = write_jsonl(tmp_path / "out.jsonl", rows)
    result = write_report(source)
    assert result.path == report_path_for(source) == tmp_path / "out_report.html"
    assert (result.rollouts, result.failed, result.exit_code) == (2 * CHUNK_ROLLOUTS, 0, 0)
    html = result.path.read_text()
    assert result.size_bytes == len(html.encode())
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", html)  # nothing to fetch
    data = embedded(html, "ng-data")
    assert data["k"] == 2
    assert data["tasks"]["task"] == list(range(CHUNK_ROLLOUTS))
    assert len(embedded(html, "ng-chunks")) == 2
    browsed = conversations(html)
    assert [view["line"] for view in browsed] == list(range(1, 2 * CHUNK_ROLLOUTS + 1))
    assert data["rollouts"]["repeat"][:4] == [0, 1, 0, 1]
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl", "out_report.html"] or sorted(
        p.name for p in tmp_path.iterdir()
    ) == ["out.jsonl", "out_report.html"]


def test_text_from_the_model_cannot_close_the_script_or_inject_markup(tmp_path: Path) -> None:
    row = rollout_row(0, 0, 1.0, note="</script><script>alert(1)</script>")
    row["agent_ref"]["name"] = "<img src=x onerror=alert(1)>"
    result = write_report(write_jsonl(tmp_path / "out.jsonl", [row]))
    html = result.path.read_text()
    assert html.count("</script>") == 3  # data, chunks, the page's script
    markup = re.sub(r'<script id="ng-[a-z]+" type="application/json">.*?</script>', "", html, flags=re.S)
    assert "<img src=x" not in markup  # HTML parsers see no tag inside a JSON script block
    assert "&lt;img src=x onerror=alert(1)&gt;" in markup
    assert embedded(html, "ng-data")["agents"] == ["<img src=x onerror=alert(1)>"]


@pytest.mark.parametrize("text", ["<!--<script", "<!--<SCRIPT>x</script>", "</Script ", "<!-- -->"])
def test_the_data_blocks_never_hold_what_changes_how_html_reads_script_text(
    tmp_path: Path, text: str
) -> None:
    # In a script block, `<!--` then `<script` makes the parser skip the block's own `</script>`:
    # the rest of the page (the page's script too) became script text, and the tables stayed empty.
    row = rollout_row(0, 0, 1.0, city=text, agent=f"agent {text}")
    result = write_report(write_jsonl(tmp_path / "out.jsonl", [row]))
    html = result.path.read_text()
    blocks = re.findall(r'<script id="ng-[a-z]+" type="application/json">(.*?)</script>', html, re.S)
    assert len(blocks) == 2
    for block in blocks:
        assert not re.search(r"<!--|<script|</script", block, re.I), block[:200]
    data = embedded(html, "ng-data")
    assert data["agents"] == [f"agent {text}"]  # JSON reads the escapes back as the text
    assert text in data["tasks"]["prompt"][0]


def test_bad_lines_are_reported_in_the_page_and_by_the_exit_code(tmp_path: Path) -> None:
    source = write_jsonl(
        tmp_path / "out.jsonl",
        [rollout_row(0, 0, 1.0), {"other": "schema"}, rollout_row(0, 0, 0.5)],
        tail=b'{"torn',
    )
    result = write_report(source)
    assert result.exit_code == 1
    assert result.problems.count == 3
    described = result.describe()
    assert f"{source}:2: not a rollout row" in described
    assert f"{source}:3: duplicate of task 0 repeat 0 (kept the first)" in described
    assert f"{source}:4: torn last line" in described
    html = result.path.read_text()
    assert 'id="notes"' in html
    assert "skipped 3 unreadable lines" in html
    assert embedded(html, "ng-data")["rollouts"]["reward"] == [1.0]


def test_metrics_and_failures_files_beside_the_rollouts_are_used(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "out.jsonl", [rollout_row(0, 0, 0.4), rollout_row(1, 1, 0.9)])
    (tmp_path / "out_metrics.json").write_bytes(
        orjson.dumps(
            {"num_repeats": 4, "pass_threshold": 0.5, "run": {"rollouts_per_s": 12.5, "elapsed_s": 3.0}}
        )
    )
    failure = {
        "_ng_task_index": 2,
        "_ng_rollout_index": 0,
        "agent": "agent",
        "kind": "http_5xx",
        "input_line": 3,
    }
    (tmp_path / "out_failures.jsonl").write_bytes(orjson.dumps(failure) + b"\n")
    html = write_report(source).path.read_text()
    data = embedded(html, "ng-data")
    assert (data["k"], data["threshold"]) == (4, 0.5)
    assert data["failures"] == {"task": [2], "repeat": [0], "kind": ["http_5xx"]}
    assert data["tasks"]["prompt"][2] == "(no scored rollout; input line 3)"
    assert "12.500" not in html
    assert "<b>12.5</b>" in html
    assert "a rollout passes when reward ≥ 0.5" in html


def test_a_broken_metrics_file_is_a_note_not_an_error(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "out.jsonl", [rollout_row(0, 0, 1.0)])
    (tmp_path / "out_metrics.json").write_text("{")
    result = write_report(source)
    assert result.exit_code == 0
    assert result.notes == [
        f"{tmp_path / 'out_metrics.json'}: not a metrics file written by ng_collect_rollouts (JSONDecodeError); ignored"
    ]


def test_a_missing_input_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such file"):
        write_report(tmp_path / "out.jsonl", tmp_path / "report.html")
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_destination_is_refused_before_anything_is_read_or_written(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "out.jsonl", [rollout_row(0, 0, 1.0)])
    (tmp_path / "taken").write_text("a file, not a folder")
    with pytest.raises(ConfigError, match=r"taken\) is a file, not a directory; nothing was written"):
        write_report(source, tmp_path / "taken" / "report.html")
    target = tmp_path / "report.html"
    target.mkdir()  # a directory where the file should go
    with pytest.raises(ConfigError, match=r"report\.html: it is a directory; nothing was written"):
        write_report(source, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl", "report.html", "taken"]
    assert list(target.iterdir()) == []


@pytest.mark.parametrize(
    "name", ["out.jsonl", "out_failures.jsonl", "out_metrics.json", "out_fingerprint.json"]
)
def test_the_report_is_never_written_over_a_file_of_the_run(tmp_path: Path, name: str) -> None:
    source = write_jsonl(tmp_path / "out.jsonl", [rollout_row(0, 0, 1.0)])
    (tmp_path / "out_metrics.json").write_bytes(b'{"num_repeats": 1}')
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(ConfigError, match=f"output_html_fpath: .*{name} is the same file as"):
        write_report(source, tmp_path / name)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
