"""Which requirements of a stack are met by an environment, and which cannot be met together.

Pure: the environment is given as what `environment.probe` read from it (distribution name ->
version and requirements). A conflict found here is reported before pip runs, naming both sides:
two servers whose versions of one package cannot both hold (a pin outside the other's range),
or a server that needs another version of a package the stack itself runs on (ng_cli's own
dependencies are never changed: a server that needs `pydantic<2` cannot share our process).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ng_cli.packages.requirements import ServerRequirement

__all__ = ["Distribution", "Installed", "applies", "conflicts", "is_satisfied", "protected_requirements"]


@dataclass(frozen=True)
class Distribution:
    version: str
    requires: tuple[str, ...] = ()


Installed = Mapping[str, Distribution]
"""Canonical distribution name -> what is installed."""


def applies(requirement: Requirement, extra: str = "") -> bool:
    """Whether the requirement's marker holds here (for an extra's dependencies, with `extra`)."""
    if requirement.marker is None:
        return True
    environment = {key: str(value) for key, value in default_environment().items()}
    return requirement.marker.evaluate({**environment, "extra": extra})


def is_satisfied(item: ServerRequirement, installed: Installed) -> bool:
    """Whether the environment already meets the line, so pip (and the network) is not needed.

    A named requirement: installed, its version in the range, and the dependencies its extras
    add installed in theirs. A URL or path with a known name: that name is installed (at the
    wheel's version when the URL fixes one); where it came from cannot be told. A URL or path
    whose name the line does not say: never (pip decides)."""
    requirement = item.requirement
    if requirement is not None and not applies(requirement):
        return True  # not for this Python or platform
    if item.name is None:
        return False
    found = installed.get(item.name)
    if found is None:
        return False
    if item.version is not None and not _same_version(found.version, item.version):
        return False
    if requirement is None:
        return True
    if requirement.url is None and not _in_range(found.version, requirement.specifier):
        return False
    return all(_extra_met(found, extra, installed) for extra in requirement.extras)


def _extra_met(found: Distribution, extra: str, installed: Installed) -> bool:
    """Whether every dependency that `extra` adds (`x; extra == "ja"`) is installed in its range."""
    for line in found.requires:
        try:
            dependency = Requirement(line)
        except InvalidRequirement:
            continue
        belongs = applies(dependency, canonicalize_name(extra)) and not applies(dependency, "")
        if belongs:
            present = installed.get(canonicalize_name(dependency.name))
            if present is None or not _in_range(present.version, dependency.specifier):
                return False
    return True


def conflicts(
    items: Sequence[ServerRequirement], protected: Mapping[str, tuple[Requirement, str | None]]
) -> list[str]:
    """One message per pair that cannot hold together; `protected` = the stack's own requirements
    (name -> its requirement and the version installed)."""
    problems: list[str] = []
    by_name: dict[str, list[ServerRequirement]] = {}
    for item in items:
        if item.name is not None and (item.requirement is None or applies(item.requirement)):
            by_name.setdefault(item.name, []).append(item)
    for name, group in sorted(by_name.items()):
        for index, first in enumerate(group):
            for second in group[index + 1 :]:
                if first.server != second.server and _disjoint(first, second):
                    problems.append(
                        f"servers '{first.server}' and '{second.server}' need different versions of "
                        f"{name}: {first.describe()} vs {second.describe()}"
                    )
        if name in protected:
            ours, version = protected[name]
            for item in group:
                if not _allows_installed(item, version):
                    have = f"{version} installed" if version else "not installed"
                    problems.append(
                        f"server '{item.server}' needs a version of {name} the stack itself cannot run "
                        f"with: {item.describe()} vs ng_cli's '{ours}' ({have})"
                    )
    return problems


def protected_requirements(
    own: Iterable[str], installed: Installed
) -> dict[str, tuple[Requirement, str | None]]:
    """ng_cli's own (non-extra) requirements: name -> (requirement, installed version)."""
    protected: dict[str, tuple[Requirement, str | None]] = {}
    for line in own:
        requirement = Requirement(line)
        if requirement.marker is not None and not applies(requirement):
            continue
        name = canonicalize_name(requirement.name)
        found = installed.get(name)
        protected[name] = (requirement, found.version if found else None)
    return protected


def _allows_installed(item: ServerRequirement, version: str | None) -> bool:
    """Whether the line can be met by the version the stack runs on (so pip leaves it alone)."""
    if version is None:
        return True
    if item.version is not None:
        return _same_version(version, item.version)
    if item.requirement is None or item.requirement.url is not None:
        return True
    return _in_range(version, item.requirement.specifier)


def _disjoint(first: ServerRequirement, second: ServerRequirement) -> bool:
    """True when no version can meet both: an exact version of one outside the other's range
    (ranges without a pin are left to pip's resolver, which reports them)."""
    pins = [_pin(first), _pin(second)]
    others = [second, first]
    for pin, other in zip(pins, others, strict=True):
        if pin is None:
            continue
        other_pin = _pin(other)
        if other_pin is not None:
            return not _same_version(pin, other_pin)
        if other.requirement is not None and not _in_range(pin, other.requirement.specifier):
            return True
    return False


def _pin(item: ServerRequirement) -> str | None:
    if item.version is not None:
        return item.version
    if item.requirement is None:
        return None
    exact = [spec.version for spec in item.requirement.specifier if spec.operator in ("==", "===")]
    return exact[0] if len(exact) == 1 and "*" not in exact[0] else None


def _in_range(version: str, specifier: SpecifierSet) -> bool:
    return specifier.contains(version, prereleases=True)


def _same_version(first: str, second: str) -> bool:
    try:
        return Version(first) == Version(second)
    except InvalidVersion:
        return first == second
