"""Scratch Python environments for bench/nemo_gym_servers.py: each server's packages installed.

    <scratch>/_nemo_gym_deps/   packages NeMo Gym itself brings that the servers import without
                                listing them (scipy, pandas, httpx ...): a NeMo Gym user always
                                has them, since every server's requirements.txt installs nemo-gym[dev]
    <scratch>/<server>/         that server's requirements.txt, installed by ng_run's own step
                                (`ng_cli.launcher.packages.ensure_requirement_files`): one virtual
                                environment per server, as NeMo Gym builds them, so two servers'
                                pins never meet

Each is a virtual environment without pip of its own that also sees the layers below it (the
NeMo Gym layer, then the harness's own site-packages, through a `.pth` file): what the harness
runs on is shared, and only what a server adds is installed, into its own folder. pip (the
harness's, run with the scratch interpreter) never changes a layer below: it does not uninstall
outside the environment it installs into. Which distributions NeMo Gym brings is pip's own
resolution of NeMo Gym's `pyproject.toml` (dependencies and the `dev` extra), cached.
"""

from __future__ import annotations

import ast
import json
import os
import site
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from ng_cli.launcher.packages import RequirementsOutcome, ensure_requirement_files
from ng_cli.packages.requirements import read_requirements, requirements_file

LAYERS_PTH = "_ng_harness_layers.pth"
NEMO_GYM_LAYER = "_nemo_gym_deps"
IMPORT_TO_DISTRIBUTION = {
    "yaml": "pyyaml",
    "bs4": "beautifulsoup4",
    "PIL": "pillow",
    "sklearn": "scikit-learn",
    "dateutil": "python-dateutil",
    "git": "gitpython",
    "jwt": "pyjwt",
    "dotenv": "python-dotenv",
    "google.protobuf": "protobuf",
}
"""Import names whose distribution is named otherwise (the rest: the import name, canonicalised)."""
_LOCAL_PACKAGES = {"nemo_gym", "resources_servers", "responses_api_agents", "responses_api_models", "ng_cli"}


def make_env(path: Path, layers: Iterable[Path]) -> Path:
    """A virtual environment at `path` (made once) that sees `layers` after its own packages;
    returns its interpreter."""
    python = path / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    lines = [f"import site; site.addsitedir({str(layer)!r})" for layer in layers]
    (Path(purelib) / LAYERS_PTH).write_text("\n".join(lines) + "\n")
    return python


def site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    return Path(out)


def own_layers() -> list[Path]:
    """The harness interpreter's own site-packages (what every scratch environment builds on)."""
    return [Path(p) for p in site.getsitepackages()]


def nemo_gym_distributions(root: Path, cache: Path) -> set[str]:
    """Canonical names of every distribution `pip install nemo-gym[dev]` brings, from pip's
    dry-run resolution of NeMo Gym's pyproject.toml (asks the package index once; cached)."""
    report = cache / "nemo_gym_resolution.json"
    if not report.exists():
        project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
        wanted = cache / "nemo_gym_dependencies.txt"
        cache.mkdir(parents=True, exist_ok=True)
        lines = [*project["dependencies"], *project.get("optional-dependencies", {}).get("dev", [])]
        wanted.write_text("\n".join(lines) + "\n")
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
             "--report", str(report), "-r", str(wanted)],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    found = json.loads(report.read_text())
    return {canonicalize_name(item["metadata"]["name"]) for item in found["install"]}


def imported_modules(folder: Path, *, with_tests: bool = False) -> set[str]:
    """Top-level names the folder's own code imports (its tests too with `with_tests`), less the
    standard library, the folder's own modules and NeMo Gym's packages."""
    own = {p.stem for p in folder.rglob("*.py")} | {p.name for p in folder.rglob("*") if p.is_dir()}
    names: set[str] = set()
    for path in folder.rglob("*.py"):
        if (not with_tests and "tests" in path.relative_to(folder).parts) or ".venv" in path.parts:
            continue
        try:
            tree = ast.parse(path.read_text(errors="replace"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return {
        n for n in names if n not in sys.stdlib_module_names and n not in own and n not in _LOCAL_PACKAGES
    }


def missing_modules(python: Path, names: Iterable[str], env: dict[str, str]) -> set[str]:
    """The names `python` cannot find (looked up, not imported)."""
    code = (
        "import importlib.util, json, sys\n"
        "print(json.dumps([n for n in sys.argv[1:] if importlib.util.find_spec(n) is None]))"
    )
    done = subprocess.run([str(python), "-c", code, *sorted(names)], capture_output=True, text=True, env=env)
    return set(json.loads(done.stdout)) if done.returncode == 0 else set(names)


def distribution_of(module: str) -> str:
    return canonicalize_name(IMPORT_TO_DISTRIBUTION.get(module, module))


def listed_distributions(folder: Path) -> set[str]:
    """Canonical names its requirements.txt (or pyproject.toml) lists, NeMo Gym's own left out."""
    path = requirements_file(folder)
    return {item.name for item in (read_requirements(folder.name, path) if path else []) if item.name}


class Scratch:
    """The harness's scratch environments under one folder (see the module's docstring)."""

    def __init__(self, folder: Path, nemo_gym_root: Path, say: Callable[[str], None] = print) -> None:
        self.folder = folder
        self.root = nemo_gym_root
        self.say = say
        self.env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        folder.mkdir(parents=True, exist_ok=True)
        self.base = make_env(folder / NEMO_GYM_LAYER, own_layers())
        self.nemo_gym = nemo_gym_distributions(nemo_gym_root, folder)

    def unlisted(self, name: str, python: Path, *, with_tests: bool = False) -> tuple[list[str], list[str]]:
        """What the server (and its tests, `with_tests`) imports and `python` (its environment,
        requirements installed) still lacks: (distributions NeMo Gym brings, import names nothing
        provides)."""
        folder = self.root / "resources_servers" / name
        absent = missing_modules(python, imported_modules(folder, with_tests=with_tests), self.env)
        ours = sorted({distribution_of(m) for m in absent if distribution_of(m) in self.nemo_gym})
        return ours, sorted(m for m in absent if distribution_of(m) not in self.nemo_gym)

    def prepare(
        self, name: str, *, with_tests: bool = False, agent: str | None = None
    ) -> tuple[Path, dict[str, Any]]:
        """The interpreter to run server `name` with (its requirements.txt installed, and what it
        (and its tests, `with_tests`) imports unlisted that NeMo Gym brings added to the shared
        layer: a NeMo Gym user has them), and what was done:
        {"requirements": "installed" | "met", "unlisted_nemo_gym_deps", "unlisted_other"}.
        With `agent` (one of NeMo Gym's agents that drives it), that agent's requirements.txt is
        installed with the server's, as ng_run installs every server's of a stack.
        Raises NgError when pip fails."""
        python, outcome = self.server_env(name, agent=agent)
        found, other = self.unlisted(name, python, with_tests=with_tests)
        self.add_nemo_gym_packages(found)  # the shared layer: seen by every environment
        notes = {
            "requirements": "installed" if outcome.installed else "met",
            "unlisted_nemo_gym_deps": found,
            "unlisted_other": other,
        }
        return python, notes

    def add_nemo_gym_packages(self, distributions: Iterable[str]) -> None:
        """Install NeMo Gym's own dependencies into the shared layer, through ng_run's step (ng_cli's
        own packages pinned at their installed versions)."""
        wanted = sorted(set(distributions))
        if not wanted:
            return
        requirements = self.folder / NEMO_GYM_LAYER / "requirements.txt"
        requirements.write_text("\n".join(wanted) + "\n")
        self._install(
            self.base, {"nemo_gym (its own dependencies)": requirements}, self.folder / NEMO_GYM_LAYER
        )

    def server_env(self, name: str, *, agent: str | None = None) -> tuple[Path, RequirementsOutcome]:
        """The interpreter to run the server (and `agent`, NeMo Gym's, when given) with: the shared
        one when their requirements are met there, else its own environment with them installed.
        Raises NgError when pip fails."""
        requirements = requirements_file(self.root / "resources_servers" / name)
        files = {name: requirements} if requirements else {}
        agent_requirements = requirements_file(self.root / "responses_api_agents" / agent) if agent else None
        if agent_requirements:
            files[f"{agent} (its agent)"] = agent_requirements
        met = ensure_requirement_files(files, install=False, python=str(self.base), warn=lambda _: None)
        if not met.missing:
            return self.base, met
        env_dir = self.folder / name
        python = make_env(env_dir, [site_packages(self.base), *own_layers()])
        return python, self._install(python, files, env_dir, own_at_installed=False)

    def _install(
        self, python: Path, files: dict[str, Path], log_dir: Path, *, own_at_installed: bool = True
    ) -> RequirementsOutcome:
        """ng_run's step; in a server's own environment ng_cli's packages are held to their
        declared ranges (a version there shadows ours only in that server's process)."""
        log = log_dir / "pip.log"
        with log.open("a") as out:
            return ensure_requirement_files(
                files, install=True, python=str(python), say=lambda line: print(line, file=out, flush=True),
                warn=lambda line: print(line, file=out, flush=True), env=self.env,
                own_at_installed=own_at_installed,
            )  # fmt: skip
