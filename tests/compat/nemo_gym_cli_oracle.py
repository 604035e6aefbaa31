"""Fill in `cases/gym_cli.json` by running NeMo Gym 0.7.0's own `gym` CLI (`nemo_gym/cli/main.py`).

Not a test: `test_gym_cli.py` reads what this wrote, so it runs without NeMo Gym. Run it again when
a case is added or NeMo Gym's release moves (README.md beside this file has the commands):

    python tests/compat/nemo_gym_cli_oracle.py --nemo-gym /tmp/nemo_gym_0.7.0

What it records, all from NeMo Gym's code:
* `commands`: every `gym` subcommand its `build_parser()` answers (`cli/main.py` COMMANDS), with the
  options and positionals each one's parser declares;
* `legacy`: `cli/legacy.py` LEGACY (an `ng_*`/`nemo_gym_*` name -> its `gym` tokens), and
  `console_scripts`, its wheel's entry points;
* `cases`: `gym <argv>` run by `nemo_gym.cli.main.main()` over `catalog_tree/` (copied to a temporary
  folder): `install/` stands for NeMo Gym's own root (its `PARENT_DIR`, set to it), `user/` is the
  working directory, `extra/` a `--search-dir` root; each case's exit code and what it printed
  (JSON parsed, the temporary folder written `<tree>`);
* `cases/manifests.json`: whether `environment.manifest.load_manifest` accepts each manifest
  (written as YAML);
* `real_tree`: the names `gym list benchmarks --json` lists run from NeMo Gym's own root, and the
  shape of its `benchmarks/` that decides them, as NeMo Gym's code sees it (its files are not
  copied here): every `**/*.yaml` its glob finds and whether `benchmarks._is_benchmark_config`
  takes it; every `manifest.yaml`, whether `environment.manifest.load_manifest` accepts it, and
  its name, kind, `config_path` and `experimental`.
Each case runs in a fresh interpreter (NeMo Gym caches its config per process). Packages its
modules import at load time and these paths never call (profiling, plotting, wandb, psutil,
devtools) are stubbed when missing; NeMo Gym's check that the running openai meets its own pin
(`global_config._openai_version_matches_nemo_gym_constraint`, made when `gym list agents`, `models`
and `resources-servers` read its global config) is answered yes: listing never calls openai.
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CASES_FILE = HERE / "cases" / "gym_cli.json"
MANIFESTS_FILE = HERE / "cases" / "manifests.json"
TREE = HERE / "catalog_tree"
STUBBED = ("yappi", "pydot", "docstring_parser", "pandas", "scipy", "wandb", "psutil", "devtools")


class _Unused(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)

        def refuse(*_args: Any, **_kwargs: Any) -> Any:
            raise RuntimeError(f"the oracle called {self.__name__}.{name}, which it stubs as unused")

        return type(name, (), {"__init__": refuse, "__call__": refuse})


class _UnusedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name: str, _path: Any, _target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _Unused(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, _module: types.ModuleType) -> None:
        return None


def _load_nemo_gym(root: Path, parent_dir: Path | None) -> types.ModuleType:
    missing = [name for name in STUBBED if importlib.util.find_spec(name) is None]
    sys.meta_path.append(_UnusedFinder())
    STUBBED_NOW.extend(missing)
    sys.path.insert(0, str(root))
    import nemo_gym

    if parent_dir is not None:
        nemo_gym.PARENT_DIR = parent_dir  # read at call time by component_search_roots
    from nemo_gym import global_config

    global_config._openai_version_matches_nemo_gym_constraint = lambda _version: True
    from nemo_gym.cli import main as cli_main

    return cli_main


STUBBED_NOW: list[str] = []


def run_one(root: Path, parent_dir: Path | None, argv: list[str], result: Path) -> None:
    """In this (fresh) interpreter: `gym <argv>`; writes {exit, stdout, stderr} to `result`."""
    import contextlib
    import io

    cli_main = _load_nemo_gym(root, parent_dir)
    stdout, stderr = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    sys.argv = ["gym", *argv]
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            cli_main.main()
        except SystemExit as exited:
            code = exited.code
    printed = {"exit": code or 0, "stdout": stdout.getvalue(), "stderr": stderr.getvalue()}
    result.write_text(json.dumps(printed))


def _run(root: Path, cwd: Path, parent_dir: Path | None, argv: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        result = Path(folder) / "result.json"
        subprocess.run(
            [
                sys.executable,
                __file__,
                "--nemo-gym",
                str(root),
                "--run-one",
                json.dumps(argv),
                "--result",
                str(result),
            ]
            + (["--parent-dir", str(parent_dir)] if parent_dir else []),
            cwd=cwd,
            env={key: value for key, value in os.environ.items() if key != "NEMO_GYM_EXTRA_ROOTS"},
            check=True,
        )
        return dict(json.loads(result.read_text()))


def _printed(result: dict[str, Any], tree: Path) -> dict[str, Any]:
    stdout = result["stdout"].replace(str(tree), "<tree>")
    try:
        printed: Any = {"json": json.loads(stdout)}
    except json.JSONDecodeError:
        printed = {"text": stdout}
    return {"exit": result["exit"], **printed, "stderr": result["stderr"].replace(str(tree), "<tree>")}


def _shape(root: Path) -> dict[str, Any]:
    """What of NeMo Gym's benchmarks/ decides the names it lists, as its own functions judge it."""
    import glob

    from nemo_gym.benchmarks import _is_benchmark_config
    from nemo_gym.environment.manifest import ManifestError, load_manifest

    tree = root / "benchmarks"
    configs = sorted(glob.glob("**/*.yaml", root_dir=tree, recursive=True))
    manifests: list[dict[str, Any]] = []
    for path in sorted(tree.rglob("manifest.yaml")):
        try:
            manifest = load_manifest(path)
        except ManifestError:
            manifests.append({"path": path.relative_to(tree).as_posix(), "valid": False})
            continue
        fields = ("name", "config_path", "experimental")
        manifests.append(
            {"path": path.relative_to(tree).as_posix(), "valid": True, "kind": manifest.kind.value}
            | {field: getattr(manifest, field) for field in fields}
        )
    return {
        "configs": [[config, _is_benchmark_config(tree / config)] for config in configs],
        "manifests": manifests,
    }


def _fill_manifests() -> None:
    import yaml
    from nemo_gym.environment.manifest import ManifestError, load_manifest

    document = json.loads(MANIFESTS_FILE.read_text())
    with tempfile.TemporaryDirectory() as folder:
        for case in document["cases"]:
            path = Path(folder) / case["id"] / "manifest.yaml"
            path.parent.mkdir()
            path.write_text(yaml.safe_dump(case["manifest"]))
            try:
                load_manifest(path)
                case["nemo_gym"] = {"valid": True}
            except ManifestError:
                case["nemo_gym"] = {"valid": False}
    MANIFESTS_FILE.write_text(json.dumps(document, indent=1) + "\n")


def _commands(cli_main: types.ModuleType) -> dict[str, Any]:
    parser = cli_main.build_parser()
    answered: dict[str, Any] = {}
    for name, command in cli_main.COMMANDS.items():
        leaf = parser
        for token in name.split():
            leaf = next(a for a in leaf._actions if isinstance(a, argparse._SubParsersAction)).choices[token]
        target = command.target if isinstance(command.target, str) else command.target.__name__
        answered[name] = {
            "target": target,
            "options": sorted(
                option for action in leaf._actions for option in action.option_strings if option != "--help"
            ),
            "positionals": [action.dest for action in leaf._actions if not action.option_strings],
        }
    return answered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nemo-gym", type=Path, required=True, help="NeMo Gym's root (its wheel, unpacked)")
    parser.add_argument("--run-one", help=argparse.SUPPRESS)
    parser.add_argument("--parent-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    root = args.nemo_gym.resolve()
    if args.run_one:
        run_one(root, args.parent_dir, json.loads(args.run_one), args.result)
        return

    document = json.loads(CASES_FILE.read_text())
    with tempfile.TemporaryDirectory() as folder:
        tree = Path(folder).resolve() / "tree"
        shutil.copytree(TREE, tree)
        for case in document["cases"]:
            argv = [token.replace("<tree>", str(tree)) for token in case["argv"]]
            case["nemo_gym"] = _printed(_run(root, tree / "user", tree / "install", argv), tree)
            print(case["id"], case["nemo_gym"]["exit"])
    real = _run(root, root, None, ["list", "benchmarks", "--json"])
    cli_main = _load_nemo_gym(root, None)
    document["real_tree"] = {"names": [entry["name"] for entry in json.loads(real["stdout"])], **_shape(root)}

    from nemo_gym import __version__
    from nemo_gym.cli.legacy import LEGACY

    _fill_manifests()
    document["commands"] = _commands(cli_main)
    document["legacy"] = LEGACY
    entry_points = next(root.glob("nemo_gym-*.dist-info")) / "entry_points.txt"
    document["console_scripts"] = sorted(
        line.split("=")[0].strip() for line in entry_points.read_text().splitlines() if " = " in line
    )
    pydantic = importlib.metadata.version("pydantic")  # the JSON Schema `gym env schema` prints is its
    document["oracle"] = {"nemo_gym": __version__, "pydantic": pydantic, "stubbed": sorted(STUBBED_NOW)}
    ordered = {key: document[key] for key in ("oracle", "commands", "legacy", "console_scripts", "real_tree")}
    CASES_FILE.write_text(json.dumps({**ordered, "cases": document["cases"]}, indent=1) + "\n")
    print(f"{CASES_FILE.name}: {len(document['cases'])} cases, {len(document['commands'])} commands")


if __name__ == "__main__":
    main()
