"""Reading servers' requirements.txt and deciding what is met and what conflicts (pure parts).

The lines are shapes found in NeMo Gym 0.7.0's 145 `resources_servers/*/requirements.txt`
(`-e nemo-gym[dev] @ ../../`, pins, ranges with comments, extras, `name @ git+...`, a bare
git URL with `#egg=`, a bare wheel URL, `-e ./local[extra]`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement

from ng_cli.errors import ConfigError
from ng_cli.packages.requirements import is_nemo_gym_line, read_requirements, requirements_file
from ng_cli.packages.resolve import Distribution, conflicts, is_satisfied, protected_requirements

NEMO_GYM_LINES = [
    "-e nemo-gym[dev] @ ../../",
    "-e nemo-gym[dev,sandbox] @ ../..",
    "-e ../../",
    "nemo-gym",
    "nemo_gym[dev]",
]


@pytest.mark.parametrize("line", NEMO_GYM_LINES)
def test_lines_naming_nemo_gym_are_skipped(line: str) -> None:
    assert is_nemo_gym_line(line)


@pytest.mark.parametrize("line", ["nemo-gym-extras", "-e ../../other", "gymnasium==1.1.1"])
def test_other_lines_are_not_nemo_gym(line: str) -> None:
    assert not is_nemo_gym_line(line)


def _file(tmp_path: Path, text: str, name: str = "env") -> Path:
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    path = folder / "requirements.txt"
    path.write_text(text)
    return path


def test_a_file_is_read_into_named_requirements_with_lines(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "-e nemo-gym[dev] @ ../../\n\n# a comment\n"
        "rouge-score>=0.1.2       # Apache-2.0 (ROUGE-L similarity)\n"
        "sacrebleu[ja,ko]>=2.4\n"
        "hypotest @ git+https://github.com/EdisonScientific/hypotest.git@8557273\n"
        "git+https://github.com/microsoft/tale-suite.git@train_test_splits#egg=tale-suite\n"
        "https://example.org/releases/en_core_web_sm-3.8.0-py3-none-any.whl\n"
        "git+https://github.com/abukharin-nv/verifiable-instructions.git\n"
        "-e ./pocketshell[pcre]\n",
    )
    items = read_requirements("env", path)
    assert [(item.lineno, item.name) for item in items] == [
        (4, "rouge-score"),
        (5, "sacrebleu"),
        (6, "hypotest"),
        (7, "tale-suite"),
        (8, "en-core-web-sm"),
        (9, None),
        (10, None),
    ]
    assert items[0].line == "rouge-score>=0.1.2"  # the comment is not pip's business
    assert items[4].version == "3.8.0"
    assert items[6].line == f"-e {(tmp_path / 'env' / 'pocketshell').resolve()}[pcre]"
    assert items[0].where == f"{path}:4"


def test_a_pip_option_is_refused_with_its_file_and_line(tmp_path: Path) -> None:
    path = _file(tmp_path, "numpy\n--index-url https://example.org/simple\n")
    with pytest.raises(ConfigError, match=r"requirements.txt:2: '--index-url .*' is a pip option"):
        read_requirements("env", path)


def test_a_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    path = _file(tmp_path, "numpy\nnot a requirement ===\n")
    with pytest.raises(ConfigError, match=r"requirements.txt:2: .* not a requirement pip understands"):
        read_requirements("env", path)


INSTALLED = {
    "rouge-score": Distribution("0.1.2"),
    "sacrebleu": Distribution("2.4.3", ('mecab-python3; extra == "ja"', 'ipadic; extra == "ja"', "regex")),
    "mecab-python3": Distribution("1.0.9"),
    "hypotest": Distribution("0.3.0"),
    "pydantic": Distribution("2.9.2"),
}


@pytest.mark.parametrize(
    ("line", "met"),
    [
        ("rouge-score>=0.1.2", True),
        ("rouge-score>=0.2", False),
        ("absent-package", False),
        ("sacrebleu>=2.4", True),
        ("sacrebleu[ja]>=2.4", False),  # the extra's ipadic is not installed
        ("hypotest @ git+https://example.org/hypotest.git@abc", True),
        ("git+https://example.org/unnamed.git", False),  # only pip can tell
        ("absent-package; python_version < '3.0'", True),  # not for this Python
    ],
)
def test_what_is_met_needs_no_pip(tmp_path: Path, line: str, met: bool) -> None:
    [item] = read_requirements("env", _file(tmp_path, line + "\n"))
    assert is_satisfied(item, INSTALLED) is met


def test_two_servers_pinning_different_versions_conflict_by_name(tmp_path: Path) -> None:
    first = read_requirements("env_a", _file(tmp_path, "rdkit==2025.9.6\nnumpy>=1.26\n", "a"))
    second = read_requirements("env_b", _file(tmp_path, "rdkit==2024.3.1\nnumpy<3\n", "b"))
    [problem] = conflicts(first + second, {})
    assert "servers 'env_a' and 'env_b' need different versions of rdkit" in problem
    assert "a/requirements.txt:1: rdkit==2025.9.6" in problem
    assert "b/requirements.txt:1: rdkit==2024.3.1" in problem


def test_a_pin_outside_another_servers_range_conflicts_and_compatible_ones_do_not(tmp_path: Path) -> None:
    first = read_requirements("env_a", _file(tmp_path, "scipy==1.10.0\ntiktoken==0.9.0\n", "a"))
    second = read_requirements("env_b", _file(tmp_path, "scipy>=1.14.1\ntiktoken\n", "b"))
    [problem] = conflicts(first + second, {})
    assert "of scipy" in problem


def test_a_server_that_needs_another_version_of_the_stacks_own_package_is_refused(tmp_path: Path) -> None:
    items = read_requirements("old_env", _file(tmp_path, "pydantic<2\nrouge-score\n"))
    protected = protected_requirements(["pydantic>=2.6", 'pytest>=8; extra == "dev"'], INSTALLED)
    [problem] = conflicts(items, protected)
    assert "server 'old_env' needs a version of pydantic the stack itself cannot run with" in problem
    assert "ng_cli's 'pydantic>=2.6' (2.9.2 installed)" in problem
    assert conflicts(read_requirements("ok", _file(tmp_path, "pydantic>=2\n", "ok")), protected) == []


def test_protected_requirements_skip_extras() -> None:
    protected = protected_requirements(["pydantic>=2.6", 'pytest>=8; extra == "dev"'], INSTALLED)
    assert set(protected) == {"pydantic"}
    assert protected["pydantic"] == (Requirement("pydantic>=2.6"), "2.9.2")


PYPROJECT = """\
[project]
name = "code-fim"
dependencies = [
    "nemo-gym[dev]",
    "human-eval-infilling",
    "json-repair==0.53.0",
    "pocketshell",
]

[tool.uv.sources]
nemo-gym = { path = "../..", editable = true }
human-eval-infilling = { git = "https://github.com/o/human-eval-infilling.git", rev = "abc123" }
pocketshell = { path = "./pocketshell", editable = true }

[tool.uv]
override-dependencies = ["torch>=2.11"]
"""


def test_a_pyproject_declares_packages_as_requirements_txt_does(tmp_path: Path) -> None:
    # code_fim, conversational_tool_use_simulation, osworld, vlm_eval_kit: no requirements.txt
    folder = tmp_path / "code_fim"
    folder.mkdir()
    (folder / "pyproject.toml").write_text(PYPROJECT)
    path = requirements_file(folder)
    assert path == folder / "pyproject.toml"
    items = read_requirements("code_fim", path)
    assert [(item.lineno, item.line) for item in items] == [
        (
            5,
            "human-eval-infilling @ git+https://github.com/o/human-eval-infilling.git@abc123",
        ),  # uv's git source
        (6, "json-repair==0.53.0"),
        (7, f"-e {(folder / 'pocketshell').resolve()}"),  # uv's path source, made absolute
    ]  # NeMo Gym's own line dropped although uv gives it a path; uv's overrides are not pip's
    assert [item.name for item in items] == ["human-eval-infilling", "json-repair", None]


def test_requirements_txt_wins_and_a_pyproject_without_dependencies_declares_nothing(tmp_path: Path) -> None:
    both = tmp_path / "both"
    both.mkdir()
    (both / "pyproject.toml").write_text(PYPROJECT)
    (both / "requirements.txt").write_text("rouge-score\n")
    assert requirements_file(both) == both / "requirements.txt"
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert requirements_file(bare) is None
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "pyproject.toml").write_text("[project\n")
    with pytest.raises(ConfigError, match=r"pyproject\.toml: not valid TOML"):
        requirements_file(broken)
