"""`import nemo_gym` in a trainer's process: ng_cli's names only when asked for, never over a real
NeMo Gym (`python -m ng_cli.trainer_api SCRIPT`, in a fresh interpreter each time)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

TRAINER = """\
import sys
from nemo_gym.cli import GlobalConfigDictParserConfig, RunHelper
from nemo_gym.rollout_collection import RolloutCollectionHelper
from nemo_gym.server_utils import HEAD_SERVER_KEY_NAME, BaseServerConfig
print(RunHelper.__module__, RolloutCollectionHelper.__module__, HEAD_SERVER_KEY_NAME, sys.argv[1:])
"""


def run(*args: str, cwd: Path, extra_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ}
    if extra_path is not None:
        env["PYTHONPATH"] = f"{extra_path}{os.pathsep}{env.get('PYTHONPATH', '')}"
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_without_opting_in_nemo_gym_is_not_importable(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAINER)

    done = run("train.py", cwd=tmp_path)

    assert done.returncode == 1
    assert "No module named 'nemo_gym'" in done.stderr


def test_the_runner_gives_a_nemo_gym_trainer_ng_cli_s_api_and_its_own_arguments(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAINER)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train.py").write_text(TRAINER)

    as_script = run("-m", "ng_cli.trainer_api", "train.py", "--config", "c.yaml", cwd=tmp_path)
    as_module = run("-m", "ng_cli.trainer_api", "-m", "pkg.train", "--x", cwd=tmp_path)

    assert as_script.returncode == 0, as_script.stderr
    expected = "ng_cli.trainer_api.run_helper ng_cli.trainer_api.collection head_server"
    assert as_script.stdout.strip() == f"{expected} ['--config', 'c.yaml']"
    assert as_module.returncode == 0, as_module.stderr
    assert as_module.stdout.strip() == f"{expected} ['--x']"


def test_a_real_nemo_gym_is_never_shadowed(tmp_path: Path) -> None:
    real = tmp_path / "site"
    (real / "nemo_gym").mkdir(parents=True)
    (real / "nemo_gym" / "__init__.py").write_text("")
    (real / "nemo_gym" / "cli.py").write_text(
        "class RunHelper: pass\nGlobalConfigDictParserConfig = object\n"
    )
    (real / "nemo_gym" / "rollout_collection.py").write_text("class RolloutCollectionHelper: pass\n")
    (real / "nemo_gym" / "server_utils.py").write_text(
        "HEAD_SERVER_KEY_NAME = 'real'\nBaseServerConfig = object\n"
    )
    (tmp_path / "train.py").write_text(TRAINER)

    done = run("-m", "ng_cli.trainer_api", "train.py", cwd=tmp_path, extra_path=real)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "nemo_gym.cli nemo_gym.rollout_collection real []"
    assert "NeMo Gym is installed" in done.stderr
