"""Ray is optional: without a `ray` block it is never imported; a dry run with one prints the placement
without connecting; with one and no Ray installed, ng_run says how to install it (no traceback).

Each check runs in a fresh interpreter, since this test process may have imported Ray already.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.fixtures.ray_required import require_ray
from tests.fixtures.stack.harness import STACK_ROOT, run_script

pytestmark = [pytest.mark.integration, pytest.mark.ray]

_RUN_WITHOUT_RAY = """
import io, sys
from pathlib import Path
from rich.console import Console
from ng_cli.config.compose import compose_config
from ng_cli.launcher.supervise import launch
config = compose_config(["+config_paths=[configs/stack.yaml]", "+dry_run=true"], cwd=Path(sys.argv[1]))
assert launch(config, console=Console(file=io.StringIO())) == 0
assert "ray" not in sys.modules, "ray imported without a ray block"
print("ok")
"""
_RAY_MISSING = """
import io, sys
from pathlib import Path
sys.modules["ray"] = None  # what an environment without the extra looks like to `import ray`
from rich.console import Console
from ng_cli.config.compose import compose_config
from ng_cli.errors import ConfigError
from ng_cli.launcher.supervise import launch
config = compose_config(["+config_paths=[configs/stack.yaml]", "++ray.address=local"], cwd=Path(sys.argv[1]))
try:
    launch(config, console=Console(file=io.StringIO()))
except ConfigError as error:
    print(error, "|", error.hint)
"""


def _python(script: str) -> str:
    env_root = {"NG_REPO_ROOT": str(STACK_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script, str(STACK_ROOT)],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, **env_root},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_without_a_ray_block_ray_is_never_imported() -> None:
    assert _python(_RUN_WITHOUT_RAY).strip() == "ok"


def test_a_ray_block_without_ray_installed_says_what_to_install() -> None:
    out = _python(_RAY_MISSING)
    assert "ray.address is set but Ray is not installed" in out
    assert "pip install -e '.[ray]'" in out


def test_dry_run_prints_the_placement_without_touching_a_cluster() -> None:
    done = run_script("ng_run", "-c", "configs/stack.yaml", "+dry_run=true", "++ray.address=ray://nowhere:10001",
                      "++ray.servers=[tools_a]", "++ray.servers_listen_on=node")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Ray placement (ray.address ray://nowhere:10001" in done.stdout
    assert "-server-tools_a" in done.stdout


def test_a_bad_ray_key_is_refused_with_its_name_and_no_traceback() -> None:
    done = run_script("ng_run", "-c", "configs/stack.yaml", "++ray.address=auto", "++ray.engine_num_cpu=2")
    assert done.returncode == 2
    assert "ray.engine_num_cpu: unknown key" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_address_where_no_cluster_answers_fails_at_once_naming_the_key() -> None:
    require_ray()
    done = run_script(
        "ng_run", "-c", "configs/stack.yaml", "++head_server.port=0", "++ray.address=127.0.0.1:1"
    )
    assert done.returncode == 1
    assert "ray.address 127.0.0.1:1: nothing answers at 127.0.0.1:1" in done.stderr
    assert "Traceback" not in done.stderr
