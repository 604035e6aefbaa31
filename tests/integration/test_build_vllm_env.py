"""scripts/build_vllm_env.sh end to end on tiny real wheels: venv, pip --no-index, parts, refusals.

The engine's own recipe (import vllm) is overridden with --smoke/--quick for these demo wheels;
everything else is the script as users run it. The machine's pip config and PIP_* variables are
left in place on purpose: the install must not use them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ng_cli.toolchain.wheelhouse.parts import PARTS_NAME, split_wheelhouse
from tests.fixtures.wheelhouse import REPO, make_wheel, write_wheelhouse

pytestmark = pytest.mark.integration

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
SMOKE = "import ngdemo_app, ngdemo_lib; assert ngdemo_lib.VERSION == '1.0'"
QUICK = "import importlib.util as u; assert u.find_spec('ngdemo_app')"


def build(
    *args: str | Path, smoke: str = SMOKE, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    command = ["bash", str(REPO / "scripts" / "build_vllm_env.sh"), *map(str, args)]
    command += ["--python", sys.executable, "--smoke", smoke, "--quick", QUICK]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=300, check=False, env={**os.environ, **(env or {})}
    )


@pytest.fixture
def house(tmp_path: Path) -> Path:
    house = tmp_path / "house"
    house.mkdir()
    app = make_wheel(house, "ngdemo-app", "1.0", requires=("ngdemo-lib==1.0",))
    write_wheelhouse(
        house, [app, make_wheel(house, "ngdemo-lib", "1.0")], python=PY, install=["ngdemo-app==1.0"]
    )
    return house


def test_installs_from_the_wheelhouse_alone_into_a_fresh_venv(house: Path, tmp_path: Path) -> None:
    venv = tmp_path / "engine-venv"
    # An extra wheel source pip would use if its environment leaked in: the install must not see it.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    make_wheel(elsewhere, "ngdemo-lib", "9.9")
    result = build("--wheelhouse", house, "--venv", venv, env={"PIP_FIND_LINKS": str(elsewhere)})
    assert result.returncode == 0, result.stderr
    assert "checking sha256 of every file" in result.stderr
    assert (venv / ".ng_ready").read_text() == "torch==0.0.0+test ngdemo-app==1.0"
    run = subprocess.run(
        [venv / "bin" / "python", "-c", "import ngdemo_lib; print(ngdemo_lib.VERSION)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert run.stdout.strip() == "1.0"
    # Built beside its place and moved: scripts name the final path, no build folder is left.
    assert str(venv) in (venv / "bin" / "pip").read_text().splitlines()[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "engine-venv", "house"]
    again = build("--wheelhouse", house, "--venv", venv)
    assert again.returncode == 0
    assert "ready:" in again.stderr


def test_a_missing_wheel_is_named_and_nothing_is_installed(house: Path, tmp_path: Path) -> None:
    (house / "ngdemo_lib-1.0-py3-none-any.whl").unlink()
    result = build("--wheelhouse", house, "--venv", tmp_path / "venv")
    assert result.returncode == 2
    assert "missing: ngdemo_lib-1.0-py3-none-any.whl" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "venv").exists()


def test_a_wrong_hash_is_named_and_an_existing_venv_is_kept(house: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    assert build("--wheelhouse", house, "--venv", venv).returncode == 0
    (venv / ".ng_ready").write_text("older")
    wheel = house / "ngdemo_app-1.0-py3-none-any.whl"
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    result = build("--wheelhouse", house, "--venv", venv)
    assert result.returncode == 2
    assert "size mismatch: ngdemo_app-1.0-py3-none-any.whl" in result.stderr
    assert (venv / ".ng_ready").read_text() == "older"


def test_a_dependency_absent_from_a_resolve_wheelhouse_exits_2(tmp_path: Path) -> None:
    house = tmp_path / "house"
    house.mkdir()
    app = make_wheel(house, "ngdemo-app", "1.0", requires=("ngdemo-absent",))
    write_wheelhouse(house, [app], python=PY, install=["ngdemo-app==1.0"])
    result = build("--wheelhouse", house, "--venv", tmp_path / "venv")
    assert result.returncode == 2
    assert "No matching distribution found for ngdemo-absent" in result.stderr
    assert not (tmp_path / "venv").exists()


def test_a_failed_smoke_import_leaves_nothing_behind(house: Path, tmp_path: Path) -> None:
    result = build("--wheelhouse", house, "--venv", tmp_path / "venv", smoke="import not_installed_anywhere")
    assert result.returncode == 1
    assert "smoke import failed" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["house"]


def test_parts_carried_one_per_call_then_installed(house: Path, tmp_path: Path) -> None:
    folders = split_wheelhouse(house, tmp_path / "parts", part_mib=1, stem="demo")
    stage = tmp_path / "stage"
    for i, folder in enumerate(folders[:-1], start=1):
        staged = build("--wheelhouse", folder, "--stage", stage, "--stage-only")
        assert staged.returncode == 0, staged.stderr
        assert f"have {i} of {len(folders)} parts" in staged.stderr
    incomplete = build("--wheelhouse", stage, "--venv", tmp_path / "venv")
    assert incomplete.returncode == 2
    assert f"missing: demo.tar.{len(folders):02d}-of-{len(folders):02d}" in incomplete.stderr
    done = build("--wheelhouse", folders[-1], "--stage", stage, "--venv", tmp_path / "venv")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "venv" / ".ng_ready").is_file()
    assert (stage / PARTS_NAME).is_file()


def test_exact_mode_sees_the_provided_packages_of_the_target_python(tmp_path: Path) -> None:
    """The target python here is a venv (like the GPU image's /opt/torch/.venv); pytest stands in for torch."""
    house = tmp_path / "house"
    house.mkdir()
    wheels = [make_wheel(house, "ngdemo-app", "1.0"), make_wheel(house, "ngdemo-lib", "1.0")]
    write_wheelhouse(house, wheels, python=PY, mode="exact", provided=[f"pytest=={pytest.__version__}"])
    venv = tmp_path / "venv"
    result = build("--wheelhouse", house, "--venv", venv, smoke=SMOKE + "; import pytest")
    assert result.returncode == 0, result.stderr
    assert f"provided by {sys.executable}: pytest {pytest.__version__}" in result.stderr
    write_wheelhouse(house, wheels, python=PY, mode="exact", provided=["pytest==0.0.1"])
    refused = build("--wheelhouse", house, "--venv", tmp_path / "other")
    assert refused.returncode == 2
    assert (
        f"has pytest {pytest.__version__}; this wheelhouse (ngdemo-app==1.0) needs pytest==0.0.1"
        in refused.stderr
    )


def test_a_wheelhouse_for_another_python_is_refused(tmp_path: Path) -> None:
    house = tmp_path / "house"
    house.mkdir()
    write_wheelhouse(house, [make_wheel(house, "ngdemo-app", "1.0")], python="3.99", install=["ngdemo-app"])
    result = build("--wheelhouse", house, "--venv", tmp_path / "venv")
    assert result.returncode == 2
    assert f"is Python {PY}; this wheelhouse is for Python 3.99" in result.stderr


def test_a_wheel_for_another_platform_is_named_and_exits_2(tmp_path: Path) -> None:
    house = tmp_path / "house"
    house.mkdir()
    alien = make_wheel(house, "ngdemo-app", "1.0", tag="cp399-cp399-manylinux_2_99_s390x")
    write_wheelhouse(house, [alien], python=PY, mode="exact")
    result = build("--wheelhouse", house, "--venv", tmp_path / "venv")
    assert result.returncode == 2
    assert "ngdemo_app-1.0-cp399-cp399-manylinux_2_99_s390x.whl is not a supported wheel" in result.stderr
    assert not (tmp_path / "venv").exists()
