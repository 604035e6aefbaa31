"""Reading YAML fragments: key lines, OmegaConf's scalar rules, duplicate keys, syntax errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ng_cli.config.fragments import Include, collect_fragments, load_fragment, parse_config_paths
from ng_cli.errors import ConfigError

WriteFile = Callable[[Path, str], Path]


def test_every_key_and_list_item_gets_its_line(repo: Path, write: WriteFile) -> None:
    path = write(
        repo / "conf/lines.yaml", "# header\ntop:\n  inner: 1\n  items:\n    - a\n    - {k: v}\nlast: 2\n"
    )
    fragment = load_fragment(path)
    assert fragment.sources == {
        "top": "conf/lines.yaml:2",
        "top.inner": "conf/lines.yaml:3",
        "top.items": "conf/lines.yaml:4",
        "top.items.0": "conf/lines.yaml:5",
        "top.items.1": "conf/lines.yaml:6",
        "top.items.1.k": "conf/lines.yaml:6",
        "last": "conf/lines.yaml:7",
    }


def test_includes_keep_the_line_they_were_listed_on(repo: Path, write: WriteFile) -> None:
    path = write(repo / "conf/inc.yaml", "config_paths:\n  - a.yaml\n  - b.yaml\n")
    assert load_fragment(path).includes == (
        Include("a.yaml", "conf/inc.yaml:2"),
        Include("b.yaml", "conf/inc.yaml:3"),
    )


def test_yaml_merge_keys_work(repo: Path, write: WriteFile) -> None:
    path = write(repo / "conf/merge.yaml", "base: &b {x: 1, y: 2}\nchild:\n  <<: *b\n  y: 3\n")
    assert load_fragment(path).data["child"] == {"x": 1, "y": 3}


def test_duplicate_keys_are_an_error_with_both_lines(repo: Path, write: WriteFile) -> None:
    path = write(repo / "conf/dup.yaml", "a:\n  port: 1\n  host: h\n  port: 2\n")
    with pytest.raises(
        ConfigError, match=r"conf/dup\.yaml:4:3  duplicate key 'port' \(first defined at line 2\)"
    ):
        load_fragment(path)


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("a: [1, 2\nb: 3\n", "2:2"),  # unclosed flow sequence: PyYAML notices at the next key's ':'
        ("a:\n\tb: 1\n", "2:1"),  # tab indentation
        ("a: 'unterminated\n", "2:1"),
    ],
    ids=["unclosed-list", "tab", "unterminated-quote"],
)
def test_syntax_errors_name_line_and_column(repo: Path, write: WriteFile, text: str, position: str) -> None:
    path = write(repo / "conf/bad.yaml", text)
    with pytest.raises(ConfigError) as caught:
        load_fragment(path)
    assert str(caught.value).startswith(f"conf/bad.yaml:{position}  YAML syntax error: ")


def test_aliases_of_long_strings_are_bounded_by_their_text(repo: Path, write: WriteFile) -> None:
    # 1,000 values (far under the bound on values) of 100 KB each: 100 MB once expanded, which
    # every later step (interpolation, masking, dumping) would go through
    text = "s: &s " + "x" * 100_000 + "\nl0: &l0 [" + ", ".join(["*s"] * 10) + "]\n"
    text += "".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]\n" for i in range(1, 3))
    path = write(repo / "conf/strings.yaml", text)
    with pytest.raises(
        ConfigError,
        match=r"conf/strings\.yaml:3  YAML expands to more than 4 MiB of text \(aliases resolved\)",
    ):
        load_fragment(path)


def test_aliases_within_the_bounds_are_read(repo: Path, write: WriteFile) -> None:
    text = "s: &s " + "x" * 100_000 + "\nl0: [" + ", ".join(["*s"] * 40) + "]\n"  # 4 MB
    assert len(load_fragment(write(repo / "conf/ok.yaml", text)).data["l0"]) == 40


def test_top_level_must_be_a_mapping(repo: Path, write: WriteFile) -> None:
    with pytest.raises(ConfigError, match="top level of a config file must be a mapping"):
        load_fragment(write(repo / "conf/list.yaml", "- a\n- b\n"))


def test_empty_file_is_an_empty_mapping(repo: Path, write: WriteFile) -> None:
    assert load_fragment(write(repo / "conf/empty.yaml", "# nothing\n")).data == {}


def test_unreadable_file(repo: Path) -> None:
    (repo / "conf/dir.yaml").mkdir()
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_fragment(repo / "conf/dir.yaml")


@pytest.mark.usefixtures("repo")
def test_collect_order_and_dedup(cwd: Path) -> None:
    fragments = collect_fragments(
        [Include("conf/agent.yaml", None), Include("conf/echo.yaml", None)], cwd=cwd
    )
    assert [fragment.name for fragment in fragments] == [
        "conf/model.yaml",
        "conf/echo.yaml",
        "conf/agent.yaml",
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, []), ("a.yaml, b.yaml", ["a.yaml", "b.yaml"]), (["a.yaml"], ["a.yaml"]), ("", [])],
)
def test_parse_config_paths(value: object, expected: list[str]) -> None:
    assert parse_config_paths(value, origin=None) == expected


def test_parse_config_paths_rejects_other_shapes() -> None:
    with pytest.raises(
        ConfigError, match=r"conf/x\.yaml:3  config_paths: expected a list of YAML file paths"
    ):
        parse_config_paths({"a": 1}, origin="conf/x.yaml:3")
