"""Split a wheelhouse into parts of at most N MiB, and gather it back from parts or loose folders.

Why parts: an air-gapped machine is often reached through a channel with a size limit per
transfer (our GPU machines take 64 MiB per call, working tree included). Each part travels in a
folder of its own with the parts list (every part's size and sha256), so whichever part arrives
can be checked on its own, and whichever are absent can be named. Parts are byte slices of one
uncompressed tar: wheels are already compressed.
"""

from __future__ import annotations

import json
import re
import shutil
import tarfile
from dataclasses import asdict, dataclass
from pathlib import Path

from ng_cli.toolchain.wheelhouse.manifest import MANIFEST_NAME, WheelhouseError, sha256_file

__all__ = ["PARTS_NAME", "Gathered", "Part", "PartsList", "gather", "split_wheelhouse"]

PARTS_NAME = "ng-wheelhouse-parts.json"
MIB = 1 << 20
_PART_RE = re.compile(r"\.(\d+)-of-(\d+)$")
_LOOSE_SUFFIXES = (".whl", ".whl.zst", MANIFEST_NAME)


def split_wheelhouse(wheelhouse: Path, out: Path, *, part_mib: int, stem: str) -> list[Path]:
    """Tar ``wheelhouse`` and cut it into ``out/partNN/`` folders of at most ``part_mib`` MiB each."""
    if part_mib < 1:
        raise WheelhouseError(f"--split-mb must be at least 1, got {part_mib}")
    out.mkdir(parents=True, exist_ok=True)
    archive = out / f"{stem}.tar"
    with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(wheelhouse.iterdir()):
            tar.add(path, arcname=f"wheelhouse/{path.name}")
    limit = part_mib * MIB
    total = archive.stat().st_size
    count = max(1, -(-total // limit))
    names = [f"{stem}.tar.{i:02d}-of-{count:02d}" for i in range(1, count + 1)]
    folders: list[Path] = []
    with archive.open("rb") as source:
        for i, name in enumerate(names, start=1):
            folder = out / f"part{i:02d}"
            folder.mkdir(parents=True, exist_ok=True)
            with (folder / name).open("wb") as sink:
                remaining = limit
                while remaining and (chunk := source.read(min(remaining, MIB))):
                    sink.write(chunk)
                    remaining -= len(chunk)
            folders.append(folder)
    listing = PartsList(
        archive=archive.name,
        size=total,
        sha256=sha256_file(archive),
        parts=[
            Part(name, (f / name).stat().st_size, sha256_file(f / name))
            for name, f in zip(names, folders, strict=True)
        ],
    )
    for folder in folders:
        (folder / PARTS_NAME).write_text(json.dumps(asdict(listing), indent=2) + "\n", encoding="utf-8")
    archive.unlink()
    return folders


@dataclass(frozen=True)
class Part:
    """One byte slice of the wheelhouse tar."""

    name: str
    size: int
    sha256: str


@dataclass(frozen=True)
class PartsList:
    """The tar that the parts join to, and every part in order; a copy travels with each part."""

    archive: str
    size: int
    sha256: str
    parts: list[Part]


@dataclass(frozen=True)
class Gathered:
    """What the sources gave: the wheelhouse folder once complete, else the parts still missing."""

    wheelhouse: Path | None
    have: list[str]
    missing: list[str]


def _read_listing(path: Path) -> PartsList:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return PartsList(
            archive=str(data["archive"]),
            size=int(data["size"]),
            sha256=str(data["sha256"]),
            parts=[Part(str(p["name"]), int(p["size"]), str(p["sha256"])) for p in data["parts"]],
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise WheelhouseError(f"{path}: not a readable parts list ({type(exc).__name__}: {exc})") from None


def _sources(paths: list[Path]) -> tuple[list[Path], list[Path], list[Path]]:
    """Sort what was given into part files, parts lists and loose wheelhouse files."""
    parts: list[Path] = []
    listings: list[Path] = []
    loose: list[Path] = []
    for given in paths:
        if not given.exists():
            raise WheelhouseError(f"--wheelhouse {given}: no such file or folder")
        for path in sorted(given.iterdir()) if given.is_dir() else [given]:
            if _PART_RE.search(path.name):
                parts.append(path)
            elif path.name == PARTS_NAME:
                listings.append(path)
            elif path.name.endswith(_LOOSE_SUFFIXES):
                loose.append(path)
    return parts, listings, loose


def _stage_parts(parts: list[Path], listing: PartsList, stage: Path) -> tuple[list[str], list[str]]:
    """Copy each given part into ``stage`` after checking it against the list; name the absent ones."""
    expected = {p.name: p for p in listing.parts}
    for part in parts:
        entry = expected.get(part.name)
        if entry is None:
            raise WheelhouseError(
                f"{part}: not a part of this wheelhouse (its parts list names {sorted(expected)})"
            )
        target = stage / part.name
        if target.is_file() and sha256_file(target) == entry.sha256:
            continue
        actual = sha256_file(part)
        if actual != entry.sha256:
            raise WheelhouseError(f"{part}: sha256 mismatch: expected {entry.sha256}, found {actual}")
        shutil.copyfile(part, target)
    have = [name for name in expected if (stage / name).is_file()]
    return have, [name for name in expected if name not in have]


def _join_parts(listing: PartsList, stage: Path) -> Path:
    archive = stage / listing.archive
    with archive.open("wb") as sink:
        for entry in listing.parts:
            with (stage / entry.name).open("rb") as source:
                shutil.copyfileobj(source, sink, MIB)
    if (actual := sha256_file(archive)) != listing.sha256:
        archive.unlink()
        raise WheelhouseError(f"{archive}: the joined parts have sha256 {actual}, expected {listing.sha256}")
    target = stage / "wheelhouse"
    shutil.rmtree(target, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(stage, filter="data")
    archive.unlink()
    return target


def gather(sources: list[Path], stage: Path) -> Gathered:
    """Bring parts and loose files from all ``sources`` into ``stage``; join the parts once all are there.

    ``stage`` may already hold parts from earlier calls (a carried folder is gone on the next one).
    """
    stage.mkdir(parents=True, exist_ok=True)
    parts, listings, loose = _sources(sources)
    listings += [stage / PARTS_NAME] if (stage / PARTS_NAME).is_file() else []
    if listings:
        listing = _read_listing(listings[0])
        for other in listings[1:]:
            if _read_listing(other).sha256 != listing.sha256:
                raise WheelhouseError(f"{other} and {listings[0]} list parts of two different wheelhouses")
        if listings[0] != stage / PARTS_NAME:
            shutil.copyfile(listings[0], stage / PARTS_NAME)
        have, missing = _stage_parts(parts, listing, stage)
        if missing:
            return Gathered(None, have, missing)
        wheelhouse = stage / "wheelhouse"
        if not (wheelhouse / MANIFEST_NAME).is_file():
            wheelhouse = _join_parts(listing, stage)
        return Gathered(wheelhouse, have, [])
    if parts:
        raise WheelhouseError(f"parts given ({parts[0].name}, ...) but no {PARTS_NAME} beside them")
    if not loose:
        raise WheelhouseError(
            f"no wheelhouse files in {', '.join(map(str, sources))} (no {MANIFEST_NAME}, no parts)"
        )
    wheelhouse = stage / "wheelhouse"
    wheelhouse.mkdir(exist_ok=True)
    for path in loose:
        link = wheelhouse / path.name
        if not link.exists():
            link.symlink_to(path.resolve())
    return Gathered(wheelhouse, [], [])
