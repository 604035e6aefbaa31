"""`python -m ng_cli.trainer_api SCRIPT [ARGS]` (or `-m MODULE [ARGS]`): run a trainer written for
NeMo Gym with `import nemo_gym` answered by ng_cli, as if it were run with `python SCRIPT`.

A real NeMo Gym, when installed, is what the script imports (a line on stderr says so).
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

from ng_cli.servers.nemo_gym_finder import real_nemo_gym_origin
from ng_cli.trainer_api.imports import install

_USAGE = "usage: python -m ng_cli.trainer_api SCRIPT [ARGS...] | -m MODULE [ARGS...]"


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help") or (argv[0] == "-m" and len(argv) < 2):
        print(_USAGE, file=sys.stderr)
        raise SystemExit(0 if argv and argv[0] in ("-h", "--help") else 2)
    if not install():
        print(
            f"ng_cli: NeMo Gym is installed ({real_nemo_gym_origin()}); the script uses it", file=sys.stderr
        )
    if argv[0] == "-m":
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path.insert(0, str(Path(argv[0]).resolve().parent))  # as `python SCRIPT` does
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
