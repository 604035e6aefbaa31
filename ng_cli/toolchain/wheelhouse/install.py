"""Install an engine venv from a wheelhouse, with no network: pip runs with --no-index and no config.

Called by scripts/build_vllm_env.sh, which passes the recipe it shares with the online CPU build
(the smoke import, the packages to drop, the marker). The order makes failures harmless:

1. gather the parts or folders given (a part may arrive per call: ``--stage DIR --stage-only``);
2. check every file's sha256 against the manifest, the target python's version and the torch it
   must provide; any problem: exit 2 with all of them named, nothing written;
3. build the venv in a sibling folder, smoke-import it, write the ready marker, and only then
   move it into place (the previous venv, if any, is replaced in one rename).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ng_cli.toolchain.wheelhouse.manifest import Manifest, WheelhouseError, sha256_file, verify_wheelhouse
from ng_cli.toolchain.wheelhouse.parts import gather

__all__ = ["default_venv", "main", "pip_env", "relocate"]

_NO_MATCH = "No matching distribution found for"
_BAD_TAG = "is not a supported wheel on this platform"
_DECOMPRESS = (
    "import sys, zstandard\n"
    "with open(sys.argv[1], 'rb') as src, open(sys.argv[2], 'wb') as dst:\n"
    "    zstandard.ZstdDecompressor(max_window_size=2**28).copy_stream(src, dst)\n"
)


def log(message: str) -> None:
    print(f"[build_vllm_env {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def pip_env() -> dict[str, str]:
    """The environment for pip: no PIP_* variables, no config file, no proxy, no prompts.

    A machine's pip config may add find-links or indexes (this one adds three): with them, a
    wheel missing from the wheelhouse could be taken from elsewhere and the check would lie.
    """
    env = {
        k: v for k, v in os.environ.items() if not k.upper().startswith(("PIP_", "HTTP_PROXY", "HTTPS_PROXY"))
    }
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def _run(command: list[str], what: str) -> str:
    result = subprocess.run(command, capture_output=True, text=True, env=pip_env(), check=False)
    if result.returncode == 0:
        return result.stdout
    output = result.stdout + result.stderr
    for line in output.splitlines():
        if _NO_MATCH in line or _BAD_TAG in line:
            raise WheelhouseError(
                f"{what}: {line.strip()} (the wheelhouse lacks it, or it was made for another target)"
            )
    tail = "\n".join(output.splitlines()[-25:])
    raise RuntimeError(f"{what} failed (exit {result.returncode}):\n{tail}")


def _target_facts(python: str) -> tuple[str, list[str]]:
    """The target interpreter's major.minor and its site-packages folders."""
    code = (
        "import site, sys, sysconfig; print('%d.%d' % sys.version_info[:2]); "
        "print('\\n'.join(dict.fromkeys([sysconfig.get_paths()['purelib'], *site.getsitepackages()])))"
    )
    try:
        out = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, check=True
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise WheelhouseError(f"--python {python}: cannot run it ({exc})") from None
    return out[0], out[1:]


def _check_provided(python: str, manifest: Manifest, *, dry_run: bool) -> None:
    """Each provided requirement (torch==X) must be installed in the target python, at that version."""
    for requirement in manifest.provided:
        name, _, version = requirement.partition("==")
        code = f"import importlib.metadata as m; print(m.version({name!r}))"
        result = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
        found = result.stdout.strip()
        if result.returncode == 0 and found.split("+", 1)[0] == version:
            log(f"provided by {python}: {name} {found}")
            continue
        problem = (
            (f"{python} has {name} {found}" if result.returncode == 0 else f"{python} has no {name}")
            + f"; this wheelhouse ({manifest.engine}) needs {requirement} there (made for torch {manifest.torch})"
        )
        if not dry_run:
            raise WheelhouseError(problem)
        log(f"warning (dry run goes on): {problem}")


def _decompress(python: Path, wheelhouse: Path, manifest: Manifest, into: Path) -> None:
    for entry in manifest.files:
        if entry.wheel is None:
            continue
        target = into / entry.wheel
        log(f"decompressing {entry.name}")
        _run(
            [str(python), "-c", _DECOMPRESS, str(wheelhouse / entry.name), str(target)], "zstd decompression"
        )
        if (actual := sha256_file(target)) != entry.wheel_sha256:
            raise WheelhouseError(
                f"{entry.wheel}: decompressed sha256 {actual}, manifest says {entry.wheel_sha256}"
            )


def relocate(venv: Path, old: Path, new: Path) -> None:
    """Point a venv built at ``old`` to ``new``: its scripts' shebangs and activate files name the path."""
    for path in (venv / "bin").iterdir():
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if str(old).encode() in data[:4096] or path.name.startswith("activate"):
            path.write_bytes(data.replace(str(old).encode(), str(new).encode()))
    config = venv / "pyvenv.cfg"
    config.write_text(config.read_text(encoding="utf-8").replace(str(old), str(new)), encoding="utf-8")


def _build(python: str, venv: Path, wheelhouse: Path, manifest: Manifest, args: argparse.Namespace) -> None:
    """Create the venv and pip-install the wheelhouse into it, offline."""
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True)
    venv_python = venv / "bin" / "python"
    _, site_dirs = _target_facts(python)
    if manifest.provided:
        # Chain to the target python's own packages (torch): --system-site-packages would reach
        # the base interpreter's, not those of a venv such as the GPU image's /opt/torch/.venv.
        own_site = Path(_target_facts(str(venv_python))[1][0])
        (own_site / "_ng_provided.pth").write_text("\n".join(site_dirs) + "\n", encoding="utf-8")
    pip_wheel = wheelhouse / manifest.pip_wheel
    pip = [str(venv_python), "-m", "pip", "--isolated", "-q"]
    offline = ["--no-index", "--no-cache-dir", "--only-binary=:all:"]
    log(f"bootstrapping pip from {pip_wheel.name}")
    _run(
        [
            str(venv_python),
            f"{pip_wheel}/pip",
            "--isolated",
            "-q",
            "install",
            *offline,
            "--no-deps",
            "--no-compile",
            str(pip_wheel),
        ],
        "pip",
    )
    with tempfile.TemporaryDirectory(prefix="ng-wheels-") as scratch:
        unpacked = Path(scratch)
        if any(entry.wheel for entry in manifest.files):
            zstandard = [e.name for e in manifest.files if e.name.startswith("zstandard-")]
            if not zstandard:
                raise WheelhouseError(
                    "the wheelhouse holds .whl.zst files but no zstandard wheel to open them"
                )
            _run(
                [*pip, "install", *offline, "--no-deps", "--no-compile", str(wheelhouse / zstandard[0])],
                "installing zstandard",
            )
            _decompress(venv_python, wheelhouse, manifest, unpacked)
        plain = [
            str(wheelhouse / e.name)
            for e in manifest.files
            if e.wheel is None and e.name != manifest.pip_wheel
        ]
        wheels = plain + [str(unpacked / e.wheel) for e in manifest.files if e.wheel]
        links = ["--find-links", str(wheelhouse), "--find-links", str(unpacked)]
        if manifest.mode == "exact":
            command = [*pip, "install", *offline, "--no-deps", "--no-compile", *wheels]
        else:
            command = [*pip, "install", *offline, *links, "--no-compile", *manifest.install]
        if args.dry_run:
            command.insert(len(pip) + 1, "--dry-run")
        log(
            f"pip install --no-index ({manifest.mode}: {len(wheels)} wheels{', dry run' if args.dry_run else ''})"
        )
        _run(command, "pip install --no-index")
    if args.dry_run:
        return
    if manifest.mode == "resolve" and args.drop:
        log(f"removing {' '.join(args.drop)}")
        _run([*pip, "uninstall", "-y", *args.drop], "pip uninstall")
    log(f"smoke import: {args.smoke}")
    smoke = subprocess.run([str(venv_python), "-c", args.smoke], capture_output=True, text=True, check=False)
    if smoke.returncode != 0:
        raise RuntimeError(f"smoke import failed in the new venv:\n{smoke.stderr[-3000:]}")
    (venv / args.marker).write_text(manifest.want, encoding="utf-8")


def default_venv(manifest: Manifest) -> Path:
    """$NG_VLLM_VENV, else the CPU engine's usual place for a CPU wheelhouse, else ~/.cache/ng_cli/vllm-venv."""
    if configured := os.environ.get("NG_VLLM_VENV"):
        return Path(configured)
    name = "vllm-cpu-venv" if manifest.torch.endswith("+cpu") else "vllm-venv"
    return Path.home() / ".cache" / "ng_cli" / name


def _is_ready(venv: Path, marker: str, want: str, quick: str) -> bool:
    path = venv / marker
    if not path.is_file() or path.read_text(encoding="utf-8") != want:
        return False
    return (
        subprocess.run(
            [str(venv / "bin" / "python"), "-c", quick], capture_output=True, check=False
        ).returncode
        == 0
    )


def install(args: argparse.Namespace) -> int:
    """Gather, verify and install; return 0 when the venv is ready (or the parts staged)."""
    stage = args.stage or Path(tempfile.mkdtemp(prefix="ng-wheelhouse-"))
    try:
        gathered = gather(args.wheelhouse, stage)
        if gathered.wheelhouse is None:
            note = (
                f"have {len(gathered.have)} of {len(gathered.have) + len(gathered.missing)} parts in {stage}"
            )
            if args.stage_only:
                log(f"staged: {note}; still to come: {', '.join(gathered.missing)}")
                return 0
            raise WheelhouseError(f"incomplete wheelhouse: {note}; missing: {', '.join(gathered.missing)}")
        log(f"checking sha256 of every file in {gathered.wheelhouse}")
        try:
            manifest = verify_wheelhouse(gathered.wheelhouse)
        except WheelhouseError as exc:
            given = ", ".join(map(str, args.wheelhouse))
            raise WheelhouseError(f"{exc}\n(gathered from --wheelhouse {given})") from None
        log(
            f"verified {len(manifest.files)} files: {manifest.engine} for python {manifest.python}, torch {manifest.torch}"
        )
        if args.stage_only:
            log("staged: complete and verified")
            return 0
        return _install_verified(args, gathered.wheelhouse, manifest)
    finally:
        if args.stage is None:
            shutil.rmtree(stage, ignore_errors=True)


def _install_verified(args: argparse.Namespace, wheelhouse: Path, manifest: Manifest) -> int:
    python = args.python or f"python{manifest.python}"
    version, _ = _target_facts(python)
    if version != manifest.python:
        raise WheelhouseError(
            f"--python {python} is Python {version}; this wheelhouse is for Python {manifest.python}"
        )
    _check_provided(python, manifest, dry_run=args.dry_run)
    venv = (args.venv or default_venv(manifest)).absolute()
    if not args.dry_run and _is_ready(venv, args.marker, manifest.want, args.quick):
        log(f"ready: {venv} ({manifest.want})")
        return 0
    venv.parent.mkdir(parents=True, exist_ok=True)
    building = venv.with_name(f"{venv.name}.building-{os.getpid()}")
    old = venv.with_name(f"{venv.name}.old-{os.getpid()}")
    start = time.monotonic()
    try:
        _build(python, building, wheelhouse, manifest, args)
        if args.dry_run:
            log(f"dry run passed in {time.monotonic() - start:.0f} s; nothing installed")
            return 0
        relocate(building, building, venv)
        if venv.exists():
            venv.rename(old)
        building.rename(venv)
    finally:
        shutil.rmtree(building, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    log(f"done in {time.monotonic() - start:.0f} s: {venv} ({manifest.want})")
    return 0


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="build_vllm_env.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--wheelhouse", type=Path, action="append", required=True, help="folder or part; repeatable"
    )
    parser.add_argument(
        "--venv", type=Path, help="where the venv goes (default: $NG_VLLM_VENV, else by target)"
    )
    parser.add_argument("--python", help="target interpreter (default: pythonX.Y of the manifest)")
    parser.add_argument("--stage", type=Path, help="keep gathered parts here between calls")
    parser.add_argument("--stage-only", action="store_true", help="only gather and check; install nothing")
    parser.add_argument(
        "--dry-run", action="store_true", help="check and resolve with pip --dry-run; install nothing"
    )
    parser.add_argument("--smoke", required=True, help="python code the new venv must run before it is used")
    parser.add_argument(
        "--quick", required=True, help="fast check that an existing ready venv is still whole"
    )
    parser.add_argument(
        "--drop", nargs="*", default=[], help="packages to uninstall after a resolve-mode install"
    )
    parser.add_argument("--marker", default=".ng_ready")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point of scripts/build_vllm_env.sh: exit 2 on a wheelhouse or target that does not fit."""
    args = _parse(argv)
    try:
        return install(args)
    except WheelhouseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
