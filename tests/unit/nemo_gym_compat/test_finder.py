"""`nemo_gym` import names: our stand-ins answer only where no real NeMo Gym is installed.

Each case runs in a fresh interpreter, since the finder and the imported names are process-wide.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SERVERS = REPO / "tests" / "fixtures" / "nemo_gym_servers"
APP = SERVERS / "resources_servers" / "example_session_state_mgmt" / "app.py"


def _python(code: str, *, cwd: Path, extra_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    paths = [str(REPO), *([str(extra_path)] if extra_path else [])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_without_nemo_gym_the_stand_ins_answer(tmp_path: Path) -> None:
    done = _python(
        """
        from ng_cli.servers import nemo_gym_finder as finder
        assert finder.install()
        import nemo_gym.base_resources_server as base
        from nemo_gym.server_utils import SESSION_ID_KEY
        print(base.__name__, SESSION_ID_KEY)
        try:
            import nemo_gym.telemetry
        except ModuleNotFoundError as error:
            print("refused", error.name)
        """,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "ng_cli.nemo_gym_compat.api.base_resources_server",
        "session_id",
        "refused",
        "nemo_gym.telemetry",
    ]


def test_an_installed_nemo_gym_is_never_shadowed(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "nemo_gym").mkdir(parents=True)
    (site / "nemo_gym" / "__init__.py").write_text("REAL = True\n")
    done = _python(
        f"""
        from pathlib import Path
        from ng_cli.errors import ConfigError
        from ng_cli.servers import nemo_gym_finder as finder
        from ng_cli.servers.loading import load_server_class
        assert not finder.install()
        import nemo_gym
        print("real", nemo_gym.REAL)
        try:
            load_server_class(Path({str(APP)!r}))
        except ConfigError as error:
            print("refused:", error.message)
        except ModuleNotFoundError as error:
            print("real import:", error.name)
        """,
        cwd=tmp_path,
        extra_path=site,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "real True"
    # the app imports the installed package (here one without base_resources_server): never ours
    assert done.stdout.splitlines()[1] == "real import: nemo_gym.base_resources_server"


def test_nemo_gyms_own_source_folder_at_the_root_is_not_an_installation(tmp_path: Path) -> None:
    (tmp_path / "nemo_gym").mkdir()
    (tmp_path / "nemo_gym" / "__init__.py").write_text("raise ImportError('needs ray and wandb')\n")
    done = _python(
        """
        from ng_cli.servers import nemo_gym_finder as finder
        assert finder.install()
        import nemo_gym.openai_utils as utils
        print(utils.__name__)
        """,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ng_cli.nemo_gym_compat.api.openai_utils"


INTERNAL = {"direct_dispatch", "mcp_access", "openai_client"}
"""Modules of ours that NeMo Gym has no module for (helpers of the stand-ins)."""


def test_every_stand_in_module_is_one_module_under_both_names(tmp_path: Path) -> None:
    """A stand-in left out of STAND_INS still imports as `nemo_gym.X`, through the package's path,
    but as a second copy: a test that patches `nemo_gym.path_utils` would miss the copy that
    `rollout_collection` uses (found for deliverables, path_utils, base_responses_api_model, skills)."""
    from ng_cli.servers.nemo_gym_finder import STAND_INS

    api = REPO / "ng_cli" / "nemo_gym_compat" / "api"
    modules = {path.stem for path in api.glob("*.py") if path.stem != "__init__"}
    assert modules - INTERNAL <= STAND_INS, sorted(modules - INTERNAL - STAND_INS)
    names = sorted(modules - INTERNAL)
    done = _python(
        f"""
        import importlib
        from ng_cli.servers import nemo_gym_finder as finder
        assert finder.install()
        for name in {names!r}:
            ours = importlib.import_module("ng_cli.nemo_gym_compat.api." + name)
            assert importlib.import_module("nemo_gym." + name) is ours, name
        print("same", len({names!r}))
        """,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["same", str(len(names))]
