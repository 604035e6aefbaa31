"""The output guard on real files: every way an output can name an input, and every unwritable output."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from ng_cli.errors import ConfigError
from ng_cli.outputs import check_outputs, reads, same_file, writes


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"a": 1}\n')
    return path


def _symlink(data: Path) -> Path:
    (data.parent / "link.jsonl").symlink_to(data)
    return data.parent / "link.jsonl"


def _hard_link(data: Path) -> Path:
    os.link(data, data.parent / "hard.jsonl")
    return data.parent / "hard.jsonl"


def _dots(data: Path) -> Path:
    (data.parent / "sub").mkdir()
    return data.parent / "sub" / ".." / data.name


def _through_a_linked_folder(data: Path) -> Path:
    (data.parent / "alias").symlink_to(data.parent)
    return data.parent / "alias" / data.name


@pytest.mark.parametrize(
    "name_it",
    [lambda d: d, _symlink, _hard_link, _dots, _through_a_linked_folder],
    ids=["same", "symlink", "hard_link", "dots", "linked_folder"],
)
def test_an_output_that_is_an_input_is_refused_naming_both(
    data: Path, name_it: Callable[[Path], Path]
) -> None:
    output = name_it(data)
    before = listing(data.parent)
    with pytest.raises(ConfigError) as refused:
        check_outputs(writes("output_jsonl_fpath", output), reads("input_jsonl_fpath", data))
    message = str(refused.value)
    assert message.startswith(f"output_jsonl_fpath: {output} is the same file as input_jsonl_fpath: {data};")
    assert message.endswith("nothing was written")
    assert refused.value.exit_code == 2
    assert listing(data.parent) == before


def test_a_derived_file_is_checked_and_named_with_the_option_it_comes_from(tmp_path: Path) -> None:
    output = tmp_path / "out.jsonl"
    metrics = tmp_path / "out_metrics.json"
    with pytest.raises(
        ConfigError, match=r"out.jsonl would write .*out_metrics.json, which is the same file as"
    ):
        check_outputs(
            writes("output_jsonl_fpath", output, output, metrics),
            reads("rollouts_jsonl_fpath", tmp_path / "r.jsonl", metrics),  # does not exist yet: by path
        )


def test_files_that_differ_pass_and_the_probe_leaves_nothing(data: Path, tmp_path: Path) -> None:
    output = tmp_path / "new" / "deeper" / "out.jsonl"
    check_outputs(
        writes("output_jsonl_fpath", output, output, tmp_path / "new" / "out_x.json"), reads("k", data)
    )
    assert listing(tmp_path) == ["in.jsonl"]  # the missing folders are not made by the check
    assert not same_file(output, data)


def _directory(tmp: Path) -> Path:
    (tmp / "folder").mkdir()
    return tmp / "folder"


def _fifo(tmp: Path) -> Path:
    os.mkfifo(tmp / "pipe")
    return tmp / "pipe"


def _under_a_file(tmp: Path) -> Path:
    (tmp / "blocker").write_text("a file")
    return tmp / "blocker" / "deeper" / "out.jsonl"


@pytest.mark.parametrize(
    ("make_output", "reason"),
    [
        (_directory, "it is a directory"),
        (_fifo, "it is not a regular file"),  # opening it for writing would block forever
        (lambda _tmp: Path("/dev/null"), "it is not a regular file"),
        (lambda _tmp: Path("/dev/full"), "it is not a regular file"),
        (_under_a_file, "a part of its folder path ({tmp}/blocker) is a file, not a directory"),
        (lambda _tmp: Path("/proc/ng-cli-guard.jsonl"), "cannot create files in /proc"),
    ],
    ids=["directory", "fifo", "dev_null", "dev_full", "under_a_file", "proc"],
)
def test_an_output_that_cannot_be_written_is_refused_before_anything_is(
    tmp_path: Path, make_output: Callable[[Path], Path], reason: str
) -> None:
    output = make_output(tmp_path)
    before = listing(tmp_path)
    with pytest.raises(ConfigError) as refused:
        check_outputs(writes("output_html_fpath", output), [])
    message = str(refused.value)
    assert message.startswith(f"output_html_fpath: cannot write {output}: ")
    assert reason.format(tmp=tmp_path) in message
    assert message.endswith("; nothing was written")
    assert listing(tmp_path) == before


def test_a_derived_file_that_cannot_be_written_names_its_output(tmp_path: Path) -> None:
    """`+output_jsonl_fpath=/tmp` wrote `/tmp_servers.log`: the output itself is refused first."""
    (tmp_path / "out_metrics.json").mkdir()
    with pytest.raises(
        ConfigError, match=r"cannot write .*out_metrics.json \(from .*out.jsonl\): it is a directory"
    ):
        check_outputs(
            writes(
                "output_jsonl_fpath",
                tmp_path / "out.jsonl",
                tmp_path / "out.jsonl",
                tmp_path / "out_metrics.json",
            ),
            [],
        )


def test_an_input_clash_is_named_before_an_unwritable_sibling(data: Path, tmp_path: Path) -> None:
    (tmp_path / "in_metrics.json").mkdir()
    with pytest.raises(ConfigError, match="is the same file as"):
        check_outputs(writes("o", data, tmp_path / "in_metrics.json", data), reads("i", data))
