"""No command writes over a file it reads, or to a path it cannot write: exit 2, nothing written.

Each case runs the real console script on real files. An output can name an input in many ways
(the same path, a symlink, a hard link, or a file the command derives from the output), and every
one must be refused before the first byte is written and before any server starts; the inputs
must be byte-for-byte what they were and no new file may appear.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from tests.fixtures.commands import ng
from tests.fixtures.new_environment import NAME, make_root
from tests.fixtures.rollouts.rollout_rows import rollout_row, write_jsonl
from tests.fixtures.stub_vllm import StubProcess

pytestmark = pytest.mark.integration

MODEL = ["+policy_base_url=http://127.0.0.1:9/v1", "+policy_api_key=k", "+policy_model_name=m"]
OTHER = "other_env"


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every file under `root` (bytes) and every link (its target), by relative path."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        if path.is_symlink():
            found[key] = os.readlink(path)
        elif path.is_file():
            found[key] = path.read_bytes()
    return found


def assert_refused(result: object, *needles: str) -> None:
    returncode, stderr = result.returncode, result.stderr  # type: ignore[attr-defined]
    assert returncode == 2, result.stdout + stderr  # type: ignore[attr-defined]
    assert "nothing was written" in stderr, stderr
    assert "Traceback" not in stderr + result.stdout  # type: ignore[attr-defined]
    for needle in needles:
        assert needle in stderr, stderr


def device(path: Path, minor: int) -> Path:
    """A character device like /dev/null (minor 3) or /dev/full (minor 7), made in a temp folder."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    except PermissionError:
        pytest.skip("cannot make a device node here (no CAP_MKNOD)")
    return path


# ng_report ----------------------------------------------------------------------------------------


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A finished run: rollouts, failures, metrics, and an env.yaml for the commands."""
    write_jsonl(tmp_path / "out.jsonl", [rollout_row(0, 0, 1.0), rollout_row(0, 1, 0.0)])
    (tmp_path / "out_failures.jsonl").write_bytes(
        b'{"_ng_task_index": 1, "_ng_rollout_index": 0, "kind": "timeout"}\n'
    )
    (tmp_path / "out_metrics.json").write_bytes(b'{"num_repeats": 2}\n')
    (tmp_path / "env.yaml").write_text("{}\n")
    return tmp_path


def command_env(run_dir: Path) -> dict[str, str]:
    return {**os.environ, "NG_ENV_YAML": str(run_dir / "env.yaml"), "COLUMNS": "200"}


def _link(run_dir: Path) -> str:
    (run_dir / "link.html").symlink_to(run_dir / "out.jsonl")
    return "link.html"


def _hard_link(run_dir: Path) -> str:
    os.link(run_dir / "out.jsonl", run_dir / "hard.html")
    return "hard.html"


@pytest.mark.parametrize(
    ("make_output", "named"),
    [
        (lambda _d: "out.jsonl", "out.jsonl"),
        (_link, "out.jsonl"),
        (_hard_link, "out.jsonl"),
        (lambda d: str(d / "sub" / ".." / "out.jsonl"), "out.jsonl"),
        (lambda _d: "out_failures.jsonl", "out_failures.jsonl"),
        (lambda _d: "out_metrics.json", "out_metrics.json"),
    ],
    ids=["same", "symlink", "hard_link", "dots", "failures", "metrics"],
)
def test_ng_report_never_writes_over_what_it_reads(
    run_dir: Path, make_output: Callable[[Path], str], named: str
) -> None:
    (run_dir / "sub").mkdir()
    output = make_output(run_dir)
    before = snapshot(run_dir)

    result = ng(
        "ng_report",
        "+input_jsonl_fpath=out.jsonl",
        f"+output_html_fpath={output}",
        cwd=run_dir,
        env=command_env(run_dir),
    )

    assert_refused(result, "output_html_fpath", named, "input_jsonl_fpath")
    assert snapshot(run_dir) == before


@pytest.mark.parametrize("minor", [3, 7], ids=["null", "full"])
def test_ng_report_refuses_a_device_as_its_output(run_dir: Path, minor: int) -> None:
    """os.replace over a device node would swap /dev/null itself for an HTML file (as root)."""
    node = device(run_dir / "dev", minor)
    result = ng(
        "ng_report",
        "+input_jsonl_fpath=out.jsonl",
        f"+output_html_fpath={node}",
        cwd=run_dir,
        env=command_env(run_dir),
    )
    assert_refused(result, "output_html_fpath", "not a regular file")
    assert stat.S_ISCHR(node.lstat().st_mode)


# ng_reward_profile --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "extra", "named"),
    [
        ("tasks.jsonl", [], "input_jsonl_fpath"),
        ("out.jsonl", [], "rollouts_jsonl_fpath"),
        ("out_failures.jsonl", [], "rollouts_jsonl_fpath"),
        ("tasks", ["+keep_pass_rate=[0.0,1.0]"], "input_jsonl_fpath"),  # tasks.kept.jsonl is the input
    ],
    ids=["tasks", "rollouts", "rollouts_failures", "kept_file_is_the_tasks"],
)
def test_ng_reward_profile_never_writes_over_what_it_reads(
    run_dir: Path, output: str, extra: list[str], named: str
) -> None:
    tasks = b'{"responses_create_params": {"input": "a"}}\n{"responses_create_params": {"input": "b"}}\n'
    (run_dir / "tasks.jsonl").write_bytes(tasks)
    if output == "tasks":
        os.replace(run_dir / "tasks.jsonl", run_dir / "tasks.kept.jsonl")
    inputs = "tasks.kept.jsonl" if output == "tasks" else "tasks.jsonl"
    before = snapshot(run_dir)

    result = ng(
        "ng_reward_profile",
        f"+input_jsonl_fpath={inputs}",
        "+rollouts_jsonl_fpath=out.jsonl",
        f"+output_jsonl_fpath={output}",
        *extra,
        cwd=run_dir,
        env=command_env(run_dir),
    )

    assert_refused(result, "output_jsonl_fpath", named)
    assert snapshot(run_dir) == before


# ng_prepare_data and ng_e2e_collect_rollouts ------------------------------------------------------


def config_arg(*names: str) -> str:
    files = [f"resources_servers/{name}/configs/{name}.yaml" for name in names]
    return (
        "+config_paths=["
        + ",".join([*files, "responses_api_models/vllm_model/configs/vllm_model.yaml"])
        + "]"
    )


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A repo root with two new environments, each with its example dataset."""
    root, env = make_root(tmp_path)
    for name in (NAME, OTHER):
        created = ng("ng_init_resources_server", f"+entrypoint=resources_servers/{name}", cwd=root, env=env)
        assert created.returncode == 0, created.stderr
    return root, env


@pytest.mark.parametrize("environments", [(NAME,), (NAME, OTHER)], ids=["one", "two"])
def test_ng_prepare_data_never_writes_over_a_dataset(
    repo: tuple[Path, dict[str, str]], environments: tuple[str, ...]
) -> None:
    root, env = repo
    before = snapshot(root / "resources_servers")

    result = ng(
        "ng_prepare_data",
        config_arg(*environments),
        *MODEL,
        f"+output_dirpath=resources_servers/{NAME}/data",
        "+mode=example_validation",
        cwd=root,
        env=env,
    )

    assert_refused(result, "output_dirpath", f"resources_servers/{NAME}/data/example.jsonl", "dataset")
    assert snapshot(root / "resources_servers") == before


def e2e(root: Path, env: dict[str, str], output: str, *extra: str, model: list[str] = MODEL) -> object:
    return ng(
        "ng_e2e_collect_rollouts",
        config_arg(NAME),
        *model,
        "+split=example",
        f"+output_jsonl_fpath={output}",
        *extra,
        cwd=root,
        env=env,
    )


def test_ng_e2e_never_writes_over_its_own_dataset(repo: tuple[Path, dict[str, str]]) -> None:
    """With a model that answers, the old code collected and wrote the rollouts over the dataset."""
    root, env = repo
    dataset = root / "resources_servers" / NAME / "data" / "example.jsonl"
    rows = dataset.read_bytes()
    before = snapshot(root)

    with StubProcess() as engine:
        model = [
            f"+policy_base_url={engine.base_url}",
            "+policy_api_key=stub-key",
            "+policy_model_name=stub-model",
        ]
        result = e2e(root, env, str(dataset), "+overwrite=true", model=model)

    assert_refused(result, "output_jsonl_fpath", str(dataset), "the dataset")
    assert dataset.read_bytes() == rows
    assert snapshot(root) == before  # no collated input, no servers log: nothing started


def test_ng_e2e_never_collates_over_a_dataset(repo: tuple[Path, dict[str, str]]) -> None:
    """`out.jsonl` collates into `out_inputs/example.jsonl`, here (through a link) the dataset itself."""
    root, env = repo
    (root / "results").mkdir()
    (root / "results" / "out_inputs").symlink_to(root / "resources_servers" / NAME / "data")
    before = snapshot(root)

    result = e2e(root, env, "results/out.jsonl")

    assert_refused(result, "output_jsonl_fpath", "results/out_inputs/example.jsonl", "dataset")
    assert snapshot(root) == before


def _directory(tmp_path: Path) -> str:
    (tmp_path / "somewhere").mkdir()
    return str(tmp_path / "somewhere")


def _under_a_file(tmp_path: Path) -> str:
    (tmp_path / "blocker").write_text("a file")
    return str(tmp_path / "blocker" / "out.jsonl")


@pytest.mark.parametrize(
    ("make_output", "reason"),
    [
        (_directory, "it is a directory"),
        (_under_a_file, "is a file, not a directory"),
        (lambda _tmp: "/proc/ng-cli-e2e.jsonl", "cannot create files in /proc"),
        (lambda tmp: str(device(tmp / "null", 3)), "not a regular file"),
        (lambda tmp: str(device(tmp / "full", 7)), "not a regular file"),
    ],
    ids=["directory", "under_a_file", "proc", "dev_null", "dev_full"],
)
def test_ng_e2e_refuses_an_unwritable_output_before_any_server_starts(
    repo: tuple[Path, dict[str, str]], tmp_path: Path, make_output: Callable[[Path], str], reason: str
) -> None:
    root, env = repo
    output = make_output(tmp_path)
    before = snapshot(tmp_path)

    result = e2e(root, env, output)

    assert_refused(result, "output_jsonl_fpath", reason)
    assert snapshot(tmp_path) == before  # no `<output>_servers.log`, no `<output>_inputs/`
    assert not list((tmp_path / "tmp").iterdir())  # no stack run dir either


def test_a_fresh_output_folder_is_written_and_holds_only_the_splits(
    repo: tuple[Path, dict[str, str]],
) -> None:
    """The guard refuses only what it must, and its checks leave nothing behind."""
    root, env = repo
    result = ng(
        "ng_prepare_data",
        config_arg(NAME, OTHER),
        *MODEL,
        "+output_dirpath=results",
        "+mode=example_validation",
        cwd=root,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (root / "results").iterdir()) == ["example.jsonl", "example_metrics.json"]
    metrics = orjson.loads((root / "results" / "example_metrics.json").read_bytes())
    assert [d["agent"] for d in metrics["datasets"]] == [f"{NAME}_simple_agent", f"{OTHER}_simple_agent"]
