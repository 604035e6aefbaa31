"""What a server's requirements.txt may hand to the shared pip run, read as pip reads it (issue 43,
point 16): real direct references only, no pip options riding along, `-e git+...` as a VCS
editable, URL credentials never shown, a clear error for a file that is not UTF-8, and ng-cli
itself refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from ng_cli.errors import ConfigError
from ng_cli.launcher.packages import ensure_requirement_files
from ng_cli.packages.credentials import hide_credentials
from ng_cli.packages.requirements import read_requirements
from ng_cli.packages.resolve import is_satisfied

PASSWORD = "s3cr3t-pa55word"


def _file(tmp_path: Path, text: str | bytes) -> Path:
    folder = tmp_path / "env"
    folder.mkdir(exist_ok=True)
    path = folder / "requirements.txt"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def _refusal(tmp_path: Path, text: str | bytes) -> ConfigError:
    path = _file(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        read_requirements("env", path)
    return caught.value


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("foo://example.org/pkg", "pip does not install from foo:// URLs"),
        ("numpy://x", "pip does not install from numpy:// URLs"),
        ("https://example.org/a/page", "a URL alone on a line must be a VCS URL"),
        ("https:///no-host/pkg-1.0.tar.gz", "a https URL names a host"),
        ("pkg @ ftp2://example.org/pkg.whl", "is not a URL pip installs from"),
        ("pkg @ ./local", "is not a URL pip installs from"),
        ("https://example.org/x/not_a-wheel.whl", "not a wheel's file name"),
    ],
)
def test_a_url_must_be_a_direct_reference_pip_installs_from(tmp_path: Path, line: str, said: str) -> None:
    error = _refusal(tmp_path, f"numpy\n{line}\n")
    assert said in error.message
    assert "requirements.txt:2:" in error.message


@pytest.mark.parametrize(
    ("line", "option"),
    [
        (
            "https://example.org/r/pkg-1.0-py3-none-any.whl --index-url https://evil.example/simple",
            "--index-url",
        ),
        ("git+https://example.org/o/r.git#egg=r --trusted-host evil.example", "--trusted-host"),
        ("numpy==1.26.4 --hash=sha256:0123abcd", "--hash"),
        ("pkg @ https://example.org/pkg-1.0.tar.gz --config-settings=x=y", "--config-settings"),
        ("-e ./local --global-option=build_ext", "--global-option"),
        ("--extra-index-url https://evil.example/simple", "--extra-index-url"),
        ("-i https://evil.example/simple", "-i"),
        ("-r other.txt", "-r"),
    ],
)
def test_pip_options_on_a_line_are_refused_by_name(tmp_path: Path, line: str, option: str) -> None:
    error = _refusal(tmp_path, line + "\n")
    assert f"'{option}' is a pip option" in error.message or f"pip option ('{option}')" in error.message
    assert "requirements.txt:1:" in error.message


def test_direct_references_pip_installs_from_are_read_with_their_names(tmp_path: Path) -> None:
    items = read_requirements(
        "env",
        _file(
            tmp_path,
            "pkg-a @ https://example.org/pkg_a-1.0.tar.gz\n"
            "git+ssh://git@example.org/o/pkg-b.git@v2#egg=pkg_b\n"
            "https://example.org/dl/Pkg_C-2.1-py3-none-any.whl ; python_version < '3.0'\n"
            "https://example.org/dl/pkg-d-0.3.tar.gz#egg=pkg-d\n",
        ),
    )
    assert [(item.name, item.version) for item in items] == [
        ("pkg-a", None),
        ("pkg-b", None),
        ("pkg-c", "2.1"),
        ("pkg-d", None),
    ]
    assert is_satisfied(items[2], {})  # pip's '; ' marker of a URL is kept: not for this Python
    assert not is_satisfied(items[0], {})


def test_an_editable_vcs_url_stays_a_url(tmp_path: Path) -> None:
    [item] = read_requirements(
        "env", _file(tmp_path, "-e git+https://example.org/o/tool.git@main#egg=tool\n")
    )
    assert item.line == "-e git+https://example.org/o/tool.git@main#egg=tool"
    assert item.name == "tool"


def test_an_editable_vcs_url_without_its_name_is_refused(tmp_path: Path) -> None:
    error = _refusal(tmp_path, "--editable=git+https://example.org/o/tool.git\n")
    assert "an editable VCS URL needs '#egg=<name>'" in error.message


def test_an_editable_path_is_made_absolute_in_every_spelling(tmp_path: Path) -> None:
    items = read_requirements("env", _file(tmp_path, "-e ./a[x]\n--editable ./b\n--editable=./c\n-e./d\n"))
    folder = (tmp_path / "env").resolve()
    assert [item.line for item in items] == [f"-e {folder / 'a'}[x]", *(f"-e {folder / n}" for n in "bcd")]


def test_a_line_continued_with_a_backslash_is_one_requirement(tmp_path: Path) -> None:
    [item] = read_requirements("env", _file(tmp_path, "# pinned\nnumpy \\\n    >=1.26 \\\n    ,<3\n"))
    assert (item.lineno, item.line) == (2, "numpy >=1.26 ,<3")


@pytest.mark.parametrize(
    "line",
    [
        f"pkg @ git+https://alice:{PASSWORD}@example.org/o/pkg.git@v1 --hash=sha256:00",
        f"git+https://alice:{PASSWORD}@example.org/o/pkg.git trailing-word",
        f"https://alice:{PASSWORD}@example.org/page",
        f"pkg @ foo://alice:{PASSWORD}@example.org/x",
        f"-e git+https://alice:{PASSWORD}@example.org/o/pkg.git",
        f"pkg @ https://alice:{PASSWORD}@example.org/p.whl ; bad marker",
    ],
)
def test_a_refusal_never_shows_a_url_password(tmp_path: Path, line: str) -> None:
    error = _refusal(tmp_path, line + "\n")
    assert PASSWORD not in f"{error.message} {error.hint}"
    assert "alice:***@example.org" in error.message


def test_an_accepted_lines_description_hides_its_password(tmp_path: Path) -> None:
    [item] = read_requirements(
        "env", _file(tmp_path, f"pkg @ git+https://alice:{PASSWORD}@example.org/o/p.git\n")
    )
    assert PASSWORD in item.line  # pip gets it
    assert PASSWORD not in item.describe()
    assert item.shown == "pkg @ git+https://alice:***@example.org/o/p.git"


def test_the_steps_warnings_and_plans_hide_url_passwords(tmp_path: Path) -> None:
    path = _file(tmp_path, f"absent-pkg @ git+https://alice:{PASSWORD}@example.org/o/p.git\n")
    warned: list[str] = []
    said: list[str] = []
    ensure_requirement_files({"env": path}, install=False, warn=warned.append)
    ensure_requirement_files({"env": path}, install=True, dry_run=True, say=said.append)
    assert PASSWORD not in " ".join(warned + said)
    assert "alice:***@example.org" in warned[0]
    assert said == [
        "requirements: would install for env: absent-pkg @ git+https://alice:***@example.org/o/p.git"
    ]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("https://user:pw@host/x", "https://user:***@host/x"),
        (
            "see git+https://u:p@ss@host/r.git and http://h/x",
            "see git+https://u:***@host/r.git and http://h/x",
        ),
        ("https://ghp_token123@github.com/o/r", "https://***@github.com/o/r"),
        ("no url here: a@b", "no url here: a@b"),
        ("https://host/path@v1", "https://host/path@v1"),
    ],
)
def test_credentials_are_hidden_anywhere_in_a_text(text: str, shown: str) -> None:
    assert hide_credentials(text) == shown


def test_a_file_that_is_not_utf8_names_the_file_and_line(tmp_path: Path) -> None:
    error = _refusal(tmp_path, b"numpy\n# caf\xe9 (latin-1)\nscipy\n")
    assert "requirements.txt:2: not UTF-8 text (byte 0xe9" in error.message


def test_a_pyproject_that_is_not_utf8_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_bytes(b'[project]\nname = "x"\ndependencies = ["caf\xe9"]\n')
    with pytest.raises(ConfigError, match=r"pyproject\.toml:3: not UTF-8 text"):
        read_requirements("env", path)


def test_a_utf8_byte_order_mark_is_not_part_of_the_first_requirement(tmp_path: Path) -> None:
    [item] = read_requirements("env", _file(tmp_path, "\ufeffnumpy>=1\n".encode()))
    assert item.name == "numpy"


@pytest.mark.parametrize(
    "line",
    [
        "ng-cli",
        "NG_CLI>=0.1",
        "ng.cli[dev]",
        "Ng-_Cli @ git+https://example.org/o/ng_cli.git",
        "git+https://example.org/o/ng_cli.git#egg=ng_cli",
        "https://example.org/dl/ng_cli-9.9-py3-none-any.whl",
        "-e git+https://example.org/o/ng.git#egg=ng-cli",
    ],
)
def test_ng_cli_itself_is_refused_in_any_spelling(tmp_path: Path, line: str) -> None:
    error = _refusal(tmp_path, line + "\n")
    assert "asks for ng-cli, the project ng_run itself runs on" in error.message
    assert "replace the running code" in error.message


def test_a_path_to_ng_clis_own_project_is_refused(tmp_path: Path) -> None:
    project = tmp_path / "checkout"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "NG_cli"\n')
    error = _refusal(tmp_path, "-e ../checkout[dev]\n")
    assert "asks for ng-cli" in error.message
    other = tmp_path / "other"
    other.mkdir()
    (other / "pyproject.toml").write_text('[project]\nname = "other"\n')
    [item] = read_requirements("env", _file(tmp_path, "-e ../other\n"))
    assert item.line == f"-e {other.resolve()}"
