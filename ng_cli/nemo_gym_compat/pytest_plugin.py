"""pytest plugin `ng_test` loads for a NeMo Gym server folder: its tests import `nemo_gym`.

Loaded with `-p ng_cli.nemo_gym_compat.pytest_plugin` before any test module is collected, it
answers `nemo_gym.*` with our stand-ins (unless a real NeMo Gym is installed, see `finder`), with
the working directory (the NeMo Gym root) on `sys.path` for `resources_servers.<name>.app`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ng_cli.nemo_gym_compat import finder

_ROOT = Path.cwd()
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))
finder.install([_ROOT])
