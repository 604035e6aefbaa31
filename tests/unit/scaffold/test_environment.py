"""ng_init_resources_server's library: the name checks, and all files or none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ng_cli.errors import ConfigError
from ng_cli.scaffold import init_resources_server, parse_entrypoint
from ng_cli.scaffold.environment import RESERVED_NAMES, example_rows


def tree(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


@pytest.mark.parametrize(
    "entrypoint", ["resources_servers/my_env", "resources_servers/my_env/", " resources_servers/a1 "]
)
def test_accepts_a_snake_case_name_under_resources_servers(entrypoint: str, tmp_path: Path) -> None:
    assert parse_entrypoint(entrypoint, root=tmp_path) == entrypoint.strip().rstrip("/").split("/")[1]


def test_accepts_an_absolute_path_inside_the_repo(tmp_path: Path) -> None:
    assert parse_entrypoint(str(tmp_path / "resources_servers" / "env_x"), root=tmp_path) == "env_x"


@pytest.mark.parametrize(
    ("entrypoint", "message"),
    [
        ("resources_servers/My-Env", "not a valid environment name"),
        ("resources_servers/1env", "not a valid environment name"),
        ("resources_servers/class", "not a valid environment name"),
        ("resources_servers/..", "not a valid environment name"),
        ("responses_api_agents/my_env", "not a folder directly under resources_servers/"),
        ("resources_servers/a/b", "not a folder directly under resources_servers/"),
        ("../resources_servers/my_env", "not a folder directly under resources_servers/"),
        ("my_env", "not a folder directly under resources_servers/"),
        ("/etc/resources_servers/my_env", "is outside"),
        ("", "expected resources_servers/<name>"),
        (None, "expected resources_servers/<name>"),
    ],
)
def test_refuses_bad_entrypoints_and_writes_nothing(entrypoint: object, message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        init_resources_server(entrypoint, root=tmp_path)
    assert caught.value.exit_code == 2
    assert tree(tmp_path) == []


@pytest.mark.parametrize(
    "name",
    ["head_server", "policy_model", "config_paths", "policy_base_url", "num_repeats", "ray", "default_host"],
)
def test_refuses_a_name_the_config_tree_reserves(name: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        init_resources_server(f"resources_servers/{name}", root=tmp_path)
    assert f"entrypoint: {name!r} is a reserved top-level config key" in caught.value.message
    assert "nothing was written" in caught.value.message
    assert caught.value.exit_code == 2
    assert tree(tmp_path) == []


def test_every_top_level_key_a_command_reads_is_reserved() -> None:
    from ng_cli.config.command_options import CommonOptions, option_names
    from tests.fixtures.commands import command_options_models

    read = set(option_names(CommonOptions)) | {"dotenv_path"}
    for model in command_options_models().values():
        read |= set(option_names(model))
    assert read - RESERVED_NAMES == set()


@pytest.mark.parametrize("length", [65, 300])
def test_refuses_a_name_too_long_for_a_file_name(length: int, tmp_path: Path) -> None:
    name = "e" * length
    with pytest.raises(ConfigError) as caught:
        init_resources_server(f"resources_servers/{name}", root=tmp_path)
    assert f"is {length} characters long; at most 64" in caught.value.message
    assert tree(tmp_path) == []


def test_accepts_a_name_of_the_longest_length(tmp_path: Path) -> None:
    created = init_resources_server(f"resources_servers/{'e' * 64}", root=tmp_path)
    assert (created.folder / "configs" / f"{'e' * 64}.yaml").is_file()


def test_writes_every_file_of_the_template(tmp_path: Path) -> None:
    created = init_resources_server("resources_servers/my_env", root=tmp_path)
    folder = tmp_path / "resources_servers" / "my_env"
    assert created.folder == folder
    assert {p.relative_to(folder).as_posix() for p in created.files} == {
        "app.py",
        "configs/my_env.yaml",
        "data/example.jsonl",
        "tests/test_app.py",
        "README.md",
    }
    app = (folder / "app.py").read_text()
    assert "class MyEnv(ResourcesServer[MyEnvConfig])" in app
    assert "__NAME__" not in app
    assert "__CLASS__" not in app
    config = (folder / "configs" / "my_env.yaml").read_text()
    assert "my_env_simple_agent:" in config
    assert "resources_servers/my_env/data/example.jsonl" in config
    assert not [p for p in (tmp_path / "resources_servers").iterdir() if p.name.startswith(".")]


def test_an_existing_folder_is_left_untouched(tmp_path: Path) -> None:
    folder = tmp_path / "resources_servers" / "taken"
    folder.mkdir(parents=True)
    (folder / "mine.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="already exists; nothing was written"):
        init_resources_server("resources_servers/taken", root=tmp_path)
    assert tree(folder) == ["mine.txt"]
    assert (folder / "mine.txt").read_text() == "keep me"
    assert [p.name for p in (tmp_path / "resources_servers").iterdir()] == ["taken"]


def test_a_failure_while_writing_leaves_no_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ng_cli.scaffold.environment as environment

    def broken() -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(environment, "example_rows", broken)
    with pytest.raises(OSError, match="No space"):
        init_resources_server("resources_servers/my_env", root=tmp_path)
    assert list((tmp_path / "resources_servers").iterdir()) == []


def test_example_rows_are_five_addition_tasks_with_their_sums() -> None:
    rows = [json.loads(line) for line in example_rows().splitlines()]
    assert len(rows) == 5
    for row in rows:
        question = row["responses_create_params"]["input"][-1]["content"]
        a, b = question.removeprefix("What is ").removesuffix("?").split(" + ")
        assert row["expected_answer"] == int(a) + int(b)
        assert [tool["name"] for tool in row["responses_create_params"]["tools"]] == ["add"]
