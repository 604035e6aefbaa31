"""ng_prepare_data as a console script: every bad row listed, nothing written on one, bounded memory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.fixtures.commands import ng
from tests.fixtures.new_environment import NAME, make_root, read_jsonl

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
MODEL = [
    "+policy_base_url=http://127.0.0.1:9/v1",
    "+policy_api_key=k",
    "+policy_model_name=m",
]


def good_row(a: int, b: int) -> dict[str, Any]:
    return {
        "responses_create_params": {"input": f"What is {a} + {b}?", "temperature": 0.5},
        "expected_answer": a + b,
    }


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root, env = make_root(tmp_path)
    assert (
        ng("ng_init_resources_server", f"+entrypoint=resources_servers/{NAME}", cwd=root, env=env).returncode
        == 0
    )
    return root, env


def config_args() -> list[str]:
    return [
        f"+config_paths=[resources_servers/{NAME}/configs/{NAME}.yaml,responses_api_models/vllm_model/configs/vllm_model.yaml]",
        *MODEL,
    ]


def write_split(root: Path, split: str, rows: list[Any]) -> Path:
    path = root / "resources_servers" / NAME / "data" / f"{split}.jsonl"
    path.write_bytes(b"".join((row if isinstance(row, bytes) else orjson.dumps(row)) + b"\n" for row in rows))
    return path


def test_train_preparation_collates_both_splits_with_metrics(repo: tuple[Path, dict[str, str]]) -> None:
    root, env = repo
    write_split(root, "train", [good_row(i, i + 1) for i in range(7)])
    write_split(root, "validation", [good_row(i, 2 * i) for i in range(3)])
    result = ng(
        "ng_prepare_data",
        *config_args(),
        "+output_dirpath=out",
        "+mode=train_preparation",
        cwd=root,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    train = read_jsonl(root / "out" / "train.jsonl")
    assert [row["expected_answer"] for row in train] == [2 * i + 1 for i in range(7)]
    assert {row["agent_ref"]["name"] for row in train} == {f"{NAME}_simple_agent"}
    metrics = orjson.loads((root / "out" / "validation_metrics.json").read_bytes())
    assert metrics["total"]["examples"] == 3
    assert metrics["datasets"][0]["temperature"]["avg"] == 0.5
    assert set(metrics["total"]["words"]) == {"count", "avg", "min", "max", "median", "std"}
    assert not (root / "out" / "example.jsonl").exists()  # not this mode's split


def test_every_bad_row_is_listed_and_nothing_is_written(repo: tuple[Path, dict[str, str]]) -> None:
    root, env = repo
    train = write_split(
        root,
        "train",
        [
            good_row(1, 2),
            b"{broken",
            {"responses_create_params": {"input": "q"}},  # the environment's row model needs expected_answer
            good_row(3, 4),
            {"responses_create_params": {"input": "q"}, "expected_answer": "seven"},
            {"responses_create_params": {"tools": []}, "expected_answer": 1},
            {**good_row(5, 6), "agent_ref": {"type": "responses_api_agents", "name": "other_agent"}},
        ],
    )
    write_split(root, "validation", [good_row(1, 1)])
    (root / "out").mkdir()
    result = ng(
        "ng_prepare_data",
        *config_args(),
        "+output_dirpath=out",
        "+mode=train_preparation",
        cwd=root,
        env=env,
    )
    assert result.returncode == 2, result.stderr
    name = train.relative_to(root).as_posix()
    listed = [line for line in result.stderr.splitlines() if line.startswith(f"{name}:")]
    assert [int(line.split(":")[1]) for line in listed] == [2, 3, 5, 6, 7]
    assert "not valid JSON" in listed[0]
    assert "expected_answer: missing" in listed[1]
    assert "expected_answer: Input should be a valid integer" in listed[2]
    assert "responses_create_params.input: missing" in listed[3]
    assert "agent_ref names 'other_agent'" in listed[4]
    assert "5 problems" in result.stderr
    assert "Traceback" not in result.stderr
    assert list((root / "out").iterdir()) == []  # not even the valid validation split


def test_a_bad_mode_and_a_missing_output_dir_are_config_errors(repo: tuple[Path, dict[str, str]]) -> None:
    root, env = repo
    bad_mode = ng("ng_prepare_data", *config_args(), "+output_dirpath=out", "+mode=train", cwd=root, env=env)
    assert bad_mode.returncode == 2
    assert "mode: Input should be 'train_preparation' or 'example_validation', got 'train'" in bad_mode.stderr
    no_dir = ng("ng_prepare_data", *config_args(), "+mode=example_validation", cwd=root, env=env)
    assert no_dir.returncode == 2
    assert "output_dirpath: where do the collated splits go?" in no_dir.stderr


def peak_rss_kib(command: list[str], *, cwd: Path, env: dict[str, str]) -> tuple[int, int]:
    """Exit code and peak resident memory (KiB) of a child process, from wait4's rusage."""
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    assert process.stderr is not None
    process.stderr.close()
    return process.returncode, usage.ru_maxrss


@pytest.mark.slow
def test_memory_does_not_grow_with_the_dataset(repo: tuple[Path, dict[str, str]]) -> None:
    root, env = repo
    command = [
        str(BIN / "ng_prepare_data"),
        *config_args(),
        "+output_dirpath=out",
        "+mode=train_preparation",
    ]
    write_split(root, "validation", [good_row(1, 1)])
    write_split(root, "train", [good_row(1, 2)])
    code, small_kib = peak_rss_kib(command, cwd=root, env=env)
    assert code == 0
    padding = "lorem ipsum " * 80
    path = root / "resources_servers" / NAME / "data" / "train.jsonl"
    with path.open("wb") as out:
        for i in range(60_000):
            row = good_row(i, 1)
            row["responses_create_params"]["input"] = f"{padding} What is {i} + 1?"
            out.write(orjson.dumps(row) + b"\n")
    size_kib = path.stat().st_size // 1024
    code, big_kib = peak_rss_kib(command, cwd=root, env=env)
    assert code == 0
    assert len(read_jsonl(root / "out" / "train.jsonl")) == 60_000
    assert size_kib > 50_000
    assert big_kib - small_kib < size_kib / 5, (small_kib, big_kib, size_kib)
