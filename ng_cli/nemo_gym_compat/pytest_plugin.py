"""pytest plugin `ng_test` loads for a NeMo Gym server folder: its tests import `nemo_gym`.

Loaded with `-p ng_cli.nemo_gym_compat.pytest_plugin` before any test module is collected, it
answers `nemo_gym.*` with our stand-ins (unless a real NeMo Gym is installed, see `finder`).
`ng_test` runs it in the server's folder, as NeMo Gym does (`cd <folder> && pytest`), with the
NeMo Gym root in `NG_NEMO_GYM_ROOT`: both go on `sys.path` (`resources_servers.<name>.app`, and
the folder's own helper modules by plain name). The root also goes first on `PYTHONPATH`, so
interpreters the tests start import the same `resources_servers.<name>` modules: Ray's workers
unpickle a server's remote tasks by module name (spider2_lite's `execute_sqlite_remote`), which
an installed NeMo Gym (its root on every interpreter's path) makes importable there.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ng_cli.servers import nemo_gym_finder as finder

_ROOT = Path(os.environ.get("NG_NEMO_GYM_ROOT") or Path.cwd())
for entry in (str(Path.cwd()), str(_ROOT)):
    if entry not in sys.path:
        sys.path.insert(0, entry)
_CHILD_PATH = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
if str(_ROOT) not in _CHILD_PATH:
    os.environ["PYTHONPATH"] = os.pathsep.join([str(_ROOT), *_CHILD_PATH])
finder.install([_ROOT])
