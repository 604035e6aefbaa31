"""Configs written to hurt, through the real console scripts: each is exit 2 with file:line, no traceback.

Hostile YAML (3,000 levels of nesting, an alias bomb, one of long strings), a misspelt ng_run option, an entrypoint
that climbs out of its folder, and ng_test pointed at a system folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
STACK = REPO / "tests" / "fixtures" / "stack"


def script(
    name: str, *args: str, cwd: Path, root: Path | None = None, env_dir: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a console script; with `root`, that repo root and its env.yaml, else an empty env.yaml
    written to `env_dir` (default: the cwd, which must then be a test's own tmp_path)."""
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("NG_REPO_ROOT", None)
    env.pop("NG_ENV_YAML", None)
    if root is not None:
        env["NG_REPO_ROOT"] = str(root)
    else:
        env_yaml = (env_dir or cwd) / "empty-env.yaml"
        env_yaml.write_text("{}\n")
        env["NG_ENV_YAML"] = str(env_yaml)
    return subprocess.run(
        [str(Path(sys.executable).with_name(name)), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,  # the alias bomb used to run for minutes
        check=False,
    )


def refused(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert "RecursionError" not in result.stderr
    return result.stderr


def alias_bomb() -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


def long_string_bomb() -> str:
    """About 100 KB that expand to 10 GB: few values (under the value bound), each 100 KB long."""
    lines = ["s: &s " + "x" * 100_000, "l0: &l0 [" + ", ".join(["*s"] * 10) + "]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 5)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("a: " + "{x: " * 3000 + "1" + "}" * 3000 + "\n", 1, "nesting deeper than 100 levels"),
        (
            "a:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 3000)) + "  " * 3000 + "v: 1\n",
            101,
            "nesting",
        ),
        ("a: " + "[" * 3000 + "]" * 3000 + "\n", 1, "nesting deeper"),
        (alias_bomb(), 6, "aliases expand to more than"),
        (long_string_bomb(), 3, "YAML expands to more than 4 MiB of text"),
    ],
    ids=["nested-mappings", "nested-blocks", "nested-lists", "alias-bomb", "long-string-bomb"],
)
@pytest.mark.parametrize(
    "command", [("ng_dump_config",), ("ng_run", "+dry_run=true")], ids=["ng_dump_config", "ng_run"]
)
def test_hostile_yaml_is_refused_with_its_line(
    tmp_path: Path, text: str, line: int, message: str, command: tuple[str, ...]
) -> None:
    (tmp_path / "hostile.yaml").write_text(text)

    stderr = refused(script(command[0], "-c", "hostile.yaml", *command[1:], cwd=tmp_path))

    assert f"hostile.yaml:{line}  " in stderr
    assert message in stderr


def test_a_deeply_nested_override_is_refused(tmp_path: Path) -> None:
    stderr = refused(script("ng_dump_config", "+a=" + "[" * 3000 + "]" * 3000, cwd=tmp_path))
    assert "nested too deeply" in stderr


@pytest.mark.parametrize(
    ("typo", "suggested"),
    [("+dry_rn=true", "dry_run"), ("+ready_timout_s=5", "ready_timeout_s"), ("+toolz_a.x=1", "tools_a")],
)
def test_ng_run_refuses_a_misspelt_option_before_starting_anything(typo: str, suggested: str) -> None:
    result = script("ng_run", "-c", "configs/stack.yaml", "++head_server.port=0", typo, cwd=STACK, root=STACK)

    stderr = refused(result)
    assert (
        f"<command line>  {typo[1:].split('=')[0].split('.')[0]}: unknown option of ng_run "
        f"(did you mean +{suggested}?)" in stderr
    )
    assert "[tools_a]" not in result.stderr + result.stdout  # no server was started


def test_ng_run_accepts_env_values_interpolated_values_and_collector_options_from_a_file(
    tmp_path: Path,
) -> None:
    # policy_api_key comes from the stack's env.yaml; num_repeats is ng_collect_rollouts' option:
    # accepted from a config file both commands read, refused on ng_run's own command line
    (tmp_path / "collect.yaml").write_text("num_repeats: 4\n")
    shared = str(tmp_path / "collect.yaml")
    result = script(
        "ng_run", "-c", "configs/stack.yaml", "-c", shared, "+dry_run=true", cwd=STACK, root=STACK
    )
    assert result.returncode == 0, result.stderr
    typed_here = script(
        "ng_run", "-c", "configs/stack.yaml", "+dry_run=true", "+num_repeats=4", cwd=STACK, root=STACK
    )
    assert (
        "num_repeats: an option of ng_collect_rollouts and ng_e2e_collect_rollouts, not of ng_run"
        in refused(typed_here)
    )

    (tmp_path / "stack.yaml").write_text(
        "tools:\n  resources_servers:\n    example_single_tool_call:\n      entrypoint: app.py\n      domain: ${my_domain}\n"
    )
    typed = script("ng_run", "-c", "stack.yaml", "+dry_run=true", "+my_domain=other", cwd=tmp_path)
    assert typed.returncode == 0, typed.stderr  # read by ${my_domain}: a value, not an option
    unused = script(
        "ng_run", "-c", "stack.yaml", "+dry_run=true", "+my_domain=other", "+my_domian=x", cwd=tmp_path
    )
    assert "my_domian: unknown option of ng_run" in refused(unused)


def test_an_entrypoint_outside_its_folder_is_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    (tmp_path / "x.py").write_text(f"open({str(marker)!r}, 'w').write('pwned')\n")
    climb = "../" * 12 + str(tmp_path / "x.py").lstrip("/")
    (tmp_path / "evil.yaml").write_text(
        f"evil:\n  resources_servers:\n    example_single_tool_call:\n      domain: other\n      entrypoint: {climb}\n"
    )

    for extra in ((), ("+dry_run=true",)):
        stderr = refused(script("ng_run", "-c", "evil.yaml", "++head_server.port=0", *extra, cwd=tmp_path))
        assert "evil.yaml:5  " in stderr
        assert "resolves outside resources_servers/example_single_tool_call/" in stderr
    assert not marker.exists()


@pytest.mark.parametrize("entrypoint", ["/etc", "/tmp", "ng_cli", "tests", "resources_servers"])
def test_ng_test_runs_only_server_folders_of_the_project(tmp_path: Path, entrypoint: str) -> None:
    stderr = refused(script("ng_test", f"+entrypoint={entrypoint}", cwd=tmp_path))
    assert "is not a server folder of this project" in stderr
    assert "resources_servers/example_single_tool_call" in stderr  # the hint lists real ones


@pytest.mark.parametrize("name", ["head_server", "policy_model", "config_paths", "e" * 300])
def test_ng_init_resources_server_refuses_reserved_and_overlong_names(tmp_path: Path, name: str) -> None:
    root = tmp_path / "repo"
    (root / "resources_servers").mkdir(parents=True)
    stderr = refused(
        script("ng_init_resources_server", f"+entrypoint=resources_servers/{name}", cwd=root, root=root)
    )
    assert "nothing was written" in stderr
    assert list((root / "resources_servers").iterdir()) == []


def test_non_finite_options_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text('{"responses_create_params": {"input": "hi"}}\n')
    result = script(
        "ng_collect_rollouts",
        "+input_jsonl_fpath=in.jsonl",
        "+output_jsonl_fpath=out.jsonl",
        "+rollout_timeout_s=inf",
        "+pass_threshold=nan",
        "+agent_urls={a: 'http://127.0.0.1:9'}",
        cwd=tmp_path,
    )
    stderr = refused(result)
    assert "<command line>  rollout_timeout_s: expected a finite number, got inf" in stderr
    assert "<command line>  pass_threshold: expected a finite number, got nan" in stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty-env.yaml", "in.jsonl"]
