"""NeMo Gym 0.7.0's `gym env validate` and our `ng_validate` on every model-server file of its tree.

The files: each YAML under NeMo Gym's root that defines a `vllm_model`, `openai_model` or
`local_vllm_model` block (95 in 0.7.0), validated alone from that root, as a user of NeMo Gym
would, with an empty env.yaml and the variables the files read unset. NeMo Gym's verdict comes
from its own `nemo_gym.cli.env.validate` (`nemo_gym_oracle.py --validate-one`, one process per
file); ours from `python -m ng_cli.commands.validate`. The figure docs/compat.md gives for
ng_validate is this script's count; docs/validate.md says why each refusal that remains is right.

Run it from outside the repo, NeMo Gym's wheel unpacked as tests/compat/README.md says:

    python <repo>/tests/compat/nemo_gym_validate_sweep.py --nemo-gym /tmp/nemo_gym_0.7.0 --out sweep.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ORACLE = Path(__file__).with_name("nemo_gym_oracle.py")
MODEL_BLOCK = re.compile(r"^\s+(vllm_model|openai_model|local_vllm_model):\s*$", re.MULTILINE)
UNSET = ("NVIDIA_API_KEY", "NEMO_GYM_REASONING_FIELD")
"""Variables NeMo Gym's files read (`${oc.env:...}`) that must be unset for both sides."""


def model_files(root: Path) -> list[str]:
    """The YAML files under `root` that define a model server block, relative, sorted."""
    found = [path for path in root.rglob("*.yaml") if MODEL_BLOCK.search(path.read_text(errors="replace"))]
    return sorted(str(path.relative_to(root)) for path in found)


def judge(root: Path, config: str, env: dict[str, str]) -> dict[str, Any]:
    """Both verdicts on one file: exit codes and the tail of what each said."""
    case = {"id": config, "config_paths": [config], "overrides": []}
    theirs = subprocess.run(
        [sys.executable, str(ORACLE), "--nemo-gym", str(root), "--validate-one", json.dumps(case)],
        cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    ours = subprocess.run(
        [sys.executable, "-m", "ng_cli.commands.validate", f"+config_paths=[{config}]"],
        cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    return {
        "config": config,
        "nemo_gym_valid": theirs.returncode == 0,
        "nemo_gym_crashed": "Traceback" in theirs.stderr,
        "nemo_gym_said": (theirs.stdout + theirs.stderr)[-1500:],
        "ours_valid": ours.returncode == 0,
        "ours_said": (ours.stdout + ours.stderr)[-3000:],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nemo-gym", type=Path, required=True, help="NeMo Gym's root (its wheel, unpacked)")
    parser.add_argument("--out", type=Path, help="write every verdict here (JSON)")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    root = args.nemo_gym.resolve()
    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / "env.yaml").write_text("{}\n")
        env = {key: value for key, value in os.environ.items() if key not in UNSET}
        env["NG_ENV_YAML"] = str(Path(scratch) / "env.yaml")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ORACLE.parents[2]), env.get("PYTHONPATH")]))
        with ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(lambda config: judge(root, config, env), model_files(root)))
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    differ = [result for result in results if result["nemo_gym_valid"] != result["ours_valid"]]
    print(f"{len(results) - len(differ)} of {len(results)} verdicts agree")
    for result in differ:
        side = "NeMo Gym passes, ng_validate refuses" if result["nemo_gym_valid"] else "ng_validate passes"
        last = " ".join(result["ours_said"].split())[-300:]
        print(f"  {result['config']}: {side}: {last}")


if __name__ == "__main__":
    main()
