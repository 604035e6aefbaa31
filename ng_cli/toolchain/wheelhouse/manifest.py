"""The wheelhouse manifest: which files it holds with their sha256, and what to install from them.

The manifest is the contract between the machine that made the wheelhouse and the air-gapped one
that installs it: a file that is missing, altered or not listed stops the install before anything
is written (exit 2), with every problem named at once.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "FORMAT",
    "MANIFEST_NAME",
    "Manifest",
    "WheelFile",
    "WheelhouseError",
    "read_manifest",
    "sha256_file",
    "verify_wheelhouse",
    "write_manifest",
]

FORMAT = 1
MANIFEST_NAME = "ng-wheelhouse.json"
_CHUNK = 1 << 20


class WheelhouseError(Exception):
    """The wheelhouse or the target does not fit: a file missing, a hash wrong, a version off (exit 2)."""

    exit_code = 2


@dataclass(frozen=True)
class WheelFile:
    """One file of the wheelhouse; a ``.whl.zst`` also names the wheel it decompresses to."""

    name: str
    size: int
    sha256: str
    wheel: str | None = None
    """For a zstd-compressed wheel: the wheel's file name once decompressed."""
    wheel_sha256: str | None = None
    note: str = ""
    """Why the file differs from upstream, e.g. the kernels removed from a repacked wheel."""


@dataclass(frozen=True)
class Manifest:
    """What a wheelhouse is for (target python, platform, torch) and how to install it."""

    python: str
    """Target interpreter, major.minor, e.g. "3.12"."""
    platforms: list[str]
    """Platform tags the wheels were chosen for; empty means the making machine's own."""
    torch: str
    """The target's torch build, e.g. "2.11.0+cu130"."""
    engine: str
    """The engine requirement, e.g. "vllm==0.26.0"."""
    why: str
    """Why that engine release: the torch pin that matches the target."""
    mode: Literal["exact", "resolve"]
    """exact: install every listed wheel, no dependency resolution (a verified subset);
    resolve: let pip resolve ``install`` against the wheelhouse alone."""
    install: list[str]
    """Requirements handed to pip in resolve mode."""
    provided: list[str]
    """Requirements the target's python must already satisfy (not in the wheelhouse)."""
    pip_wheel: str
    """The pip wheel that bootstraps pip into the new venv (the target may lack ensurepip)."""
    files: list[WheelFile] = field(default_factory=list)
    made_utc: str = ""
    format: int = FORMAT

    @property
    def want(self) -> str:
        """The ready-marker text: the same "torch==X <engine>" the online CPU build writes."""
        return f"torch=={self.torch} {self.engine}"


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks (wheels are up to hundreds of MB)."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def write_manifest(directory: Path, manifest: Manifest) -> Path:
    """Write the manifest as indented JSON beside the files it lists."""
    path = directory / MANIFEST_NAME
    path.write_text(json.dumps(asdict(manifest), indent=2) + "\n", encoding="utf-8")
    return path


def _require(data: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in data:
        raise WheelhouseError(f"{where}: missing key {key!r}")
    value = data[key]
    if not isinstance(value, kind):
        raise WheelhouseError(f"{where}: key {key!r} should be {kind.__name__}, got {type(value).__name__}")
    return value


def _wheel_file(raw: Any, where: str) -> WheelFile:
    if not isinstance(raw, dict):
        raise WheelhouseError(f"{where}: expected an object, got {type(raw).__name__}")
    return WheelFile(
        name=_require(raw, "name", str, where),
        size=_require(raw, "size", int, where),
        sha256=_require(raw, "sha256", str, where),
        wheel=raw.get("wheel"),
        wheel_sha256=raw.get("wheel_sha256"),
        note=str(raw.get("note", "")),
    )


def read_manifest(directory: Path) -> Manifest:
    """Read and check the manifest of a wheelhouse directory; every error names the file and key."""
    path = directory / MANIFEST_NAME
    if not path.is_file():
        raise WheelhouseError(
            f"{path}: no manifest here; is {directory} a wheelhouse made by make_vllm_wheelhouse.sh?"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise WheelhouseError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise WheelhouseError(f"{path}: expected a JSON object")
    where = str(path)
    if _require(data, "format", int, where) != FORMAT:
        raise WheelhouseError(f"{where}: format {data['format']} is not the supported {FORMAT}")
    mode = _require(data, "mode", str, where)
    if mode not in ("exact", "resolve"):
        raise WheelhouseError(f"{where}: key 'mode' must be 'exact' or 'resolve', got {mode!r}")
    files = [
        _wheel_file(raw, f"{where}: files[{i}]") for i, raw in enumerate(_require(data, "files", list, where))
    ]
    return Manifest(
        python=_require(data, "python", str, where),
        platforms=_require(data, "platforms", list, where),
        torch=_require(data, "torch", str, where),
        engine=_require(data, "engine", str, where),
        why=_require(data, "why", str, where),
        mode=mode,
        install=_require(data, "install", list, where),
        provided=_require(data, "provided", list, where),
        pip_wheel=_require(data, "pip_wheel", str, where),
        files=files,
        made_utc=str(data.get("made_utc", "")),
    )


def verify_wheelhouse(directory: Path) -> Manifest:
    """Check every listed file's size and sha256 and refuse unlisted wheels; raise with all problems."""
    manifest = read_manifest(directory)
    problems: list[str] = []
    listed = {entry.name for entry in manifest.files}
    for entry in manifest.files:
        path = directory / entry.name
        if not path.is_file():
            problems.append(f"missing: {entry.name} ({entry.size} bytes, sha256 {entry.sha256})")
        elif path.stat().st_size != entry.size:
            problems.append(
                f"size mismatch: {entry.name}: expected {entry.size} bytes, found {path.stat().st_size}"
            )
        elif (actual := sha256_file(path)) != entry.sha256:
            problems.append(f"sha256 mismatch: {entry.name}: expected {entry.sha256}, found {actual}")
    if manifest.pip_wheel not in listed:
        problems.append(f"the pip wheel {manifest.pip_wheel} is not among the listed files")
    for path in sorted(directory.iterdir()):
        if path.name.endswith((".whl", ".whl.zst")) and path.name not in listed:
            problems.append(f"not in the manifest: {path.name} (remove it, or remake the wheelhouse)")
    if problems:
        lines = "\n  ".join(problems)
        raise WheelhouseError(
            f"wheelhouse {directory} does not match its manifest ({len(problems)} problem(s)):\n  {lines}"
        )
    return manifest
