"""`+install_requirements=true`: servers' requirements.txt installed with the real pip into a
scratch environment, from tiny wheels built here (no network: `PIP_NO_INDEX`, `--find-links`).

The scratch venv sees the test's own site-packages and this checkout through a `.pth` file (so
ng_run, and pip, run in it), while pip installs into the venv's own site-packages: the shared
project environment is never written to. The last test runs the real `ng_run` in that venv: a server
whose app.py imports a package that only the step installs starts and answers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

import pytest

from ng_cli.config.compose import ComposedConfig, compose_config
from ng_cli.errors import ConfigError
from ng_cli.launcher.packages import ensure_requirements
from tests.fixtures.wheelhouse import make_wheel

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
APP = """
from typing import Any, ClassVar

import ng_tiny

from ng_cli.config.schema import ResourcesServerConfig
from ng_cli.servers import ResourcesServer, VerifyRequest


class TinyEnv(ResourcesServer[ResourcesServerConfig]):
    config_class: ClassVar[type[ResourcesServerConfig]] = ResourcesServerConfig

    async def verify(self, session_id: str, request: VerifyRequest) -> dict[str, Any]:
        return {"reward": 1.0, "tiny_version": ng_tiny.VERSION}
"""


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    house = tmp_path_factory.mktemp("wheels")
    make_wheel(house, "ng-tiny", "1.0")
    make_wheel(house, "ng-tiny", "2.0")
    return house


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A fresh venv seeing the test's packages (pip among them) and this checkout after its own;
    pip run by its interpreter installs into the venv's own site-packages."""
    root = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=300)
    python = root / "bin" / "python"
    own = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    (Path(own) / "ng_shared.pth").write_text(f"{REPO}\n{sysconfig.get_paths()['purelib']}\n")
    return python


def _pip_env(wheels: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }


def _repo(tmp_path: Path, requirements: dict[str, str]) -> tuple[Path, Path]:
    """A repo tree with one resources server per entry (its requirements.txt) and a config."""
    root = tmp_path / "repo"
    config = []
    for name, text in requirements.items():
        folder = root / "resources_servers" / name
        folder.mkdir(parents=True)
        (folder / "app.py").write_text(APP)
        (folder / "requirements.txt").write_text(text)
        config.append(f"{name}_instance:\n  resources_servers:\n    {name}:\n      entrypoint: app.py\n")
    (root / "stack.yaml").write_text("".join(config))
    return root, root / "stack.yaml"


def _compose(root: Path, config: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> ComposedConfig:
    monkeypatch.setenv("NG_REPO_ROOT", str(root))
    monkeypatch.setenv("NG_ENV_YAML", str(root / "no-env.yaml"))
    (root / "no-env.yaml").write_text("{}\n")
    return compose_config([f"+config_paths=[{config}]", *extra], cwd=root)


def _version(python: Path) -> str | None:
    found = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('ng-tiny'))"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    return found.stdout.strip() if found.returncode == 0 else None


def test_unmet_requirements_are_installed_once_and_then_need_no_pip(
    tmp_path: Path, venv: Path, wheels: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, config = _repo(tmp_path, {"tiny_env": "-e nemo-gym[dev] @ ../../\nng-tiny==1.0\n"})
    composed = _compose(root, config, monkeypatch)
    said: list[str] = []
    warned: list[str] = []
    common = {"python": str(venv), "say": said.append, "warn": warned.append}

    first = ensure_requirements(composed, install=False, **common)  # type: ignore[arg-type]
    assert [item.line for item in first.missing] == ["ng-tiny==1.0"]  # nemo-gym's line skipped
    [warning] = warned
    assert "server 'tiny_env_instance' needs 'ng-tiny==1.0'" in warning
    assert "+install_requirements=true" in warning
    assert _version(venv) is None

    dry = ensure_requirements(composed, install=True, dry_run=True, env=_pip_env(wheels), **common)  # type: ignore[arg-type]
    assert (dry.installed, _version(venv)) == (False, None)
    assert said[-1] == "requirements: would install for tiny_env_instance: ng-tiny==1.0"

    done = ensure_requirements(composed, install=True, env=_pip_env(wheels), **common)  # type: ignore[arg-type]
    assert (done.installed, _version(venv)) == (True, "1.0")
    assert any(line.startswith("[pip] Successfully installed ng-tiny-1.0") for line in said)

    said.clear()
    offline = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "nothing-here")}
    again = ensure_requirements(composed, install=True, env=offline, **common)  # type: ignore[arg-type]
    assert (again.installed, again.missing) == (False, [])
    assert said == ["requirements: all 1 of 1 server(s) already met"]  # no pip line: pip never ran


def test_two_servers_pinning_different_versions_are_refused_before_pip(
    tmp_path: Path, venv: Path, wheels: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, config = _repo(tmp_path, {"env_one": "ng-tiny==1.0\n", "env_two": "numpy>=1\nng-tiny==2.0\n"})
    composed = _compose(root, config, monkeypatch)
    said: list[str] = []
    with pytest.raises(ConfigError) as caught:
        ensure_requirements(composed, install=True, python=str(venv), env=_pip_env(wheels), say=said.append)
    message = str(caught.value)
    assert "servers 'env_one_instance' and 'env_two_instance' need different versions of ng-tiny" in message
    assert "env_one/requirements.txt:1: ng-tiny==1.0" in message
    assert "env_two/requirements.txt:2: ng-tiny==2.0" in message
    assert "nothing was installed or started" in (caught.value.hint or "")
    assert (_version(venv), said) == (None, [])


def test_a_server_needing_another_version_of_our_own_package_is_refused(
    tmp_path: Path, venv: Path, wheels: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, config = _repo(tmp_path, {"old_env": "pydantic<2\n"})
    composed = _compose(root, config, monkeypatch)
    with pytest.raises(ConfigError, match=r"server 'old_env_instance' needs a version of pydantic the stack"):
        ensure_requirements(composed, install=True, python=str(venv), env=_pip_env(wheels), say=print)


def test_ng_run_installs_then_starts_a_server_that_imports_the_package(
    tmp_path: Path, venv: Path, wheels: Path
) -> None:
    root, config = _repo(tmp_path, {"tiny_env": "ng-tiny==2.0\n"})
    (root / "no-env.yaml").write_text("{}\n")
    ready = tmp_path / "ready.json"
    env = {**_pip_env(wheels), "NG_REPO_ROOT": str(root), "NG_ENV_YAML": str(root / "no-env.yaml")}
    env["PYTHONPATH"] = str(REPO)
    process = subprocess.Popen(
        [str(venv), "-c", "from ng_cli.commands.run import main; main()", f"+config_paths=[{config}]",
         "++head_server.port=0", "+install_requirements=true", f"+ready_file={ready}"],
        cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not ready.exists():
            assert process.poll() is None, process.communicate()[0]
            assert time.monotonic() < deadline, "ng_run was not ready in time"
            time.sleep(0.1)
        [server] = json.loads(ready.read_text())["servers"]
        row = {"responses_create_params": {"input": "hi"}, "response": {"output": []}}
        request = urllib.request.Request(
            f"{server['url']}/verify",
            data=json.dumps(row).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as reply:
            verdict = json.loads(reply.read())
        assert (verdict["reward"], verdict["tiny_version"]) == (1.0, "2.0")
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        output = process.communicate(timeout=60)[0]
    assert "requirements: installing for tiny_env_instance: ng-tiny==2.0" in output
    assert _version(venv) == "2.0"
