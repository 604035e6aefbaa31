"""`import nemo_gym` in a trainer's process: ng_cli's stand-ins, opt-in, never over a real NeMo Gym.

A trainer written for NeMo Gym (TRL's `grpo_nemo_gym.py`, NeMo RL's NemoGym actor) imports
`nemo_gym.cli`, `nemo_gym.rollout_collection` and `nemo_gym.server_utils`. When NeMo Gym is not
installed, `install()` answers those names with ng_cli's: NeMo Gym's trainer-facing API
(`RunHelper`, `RolloutCollectionHelper`, here in `ng_cli.trainer_api`) and the stand-ins its
servers use (`ng_cli.nemo_gym_compat.api`). Nothing happens unless asked for:

    python -m ng_cli.trainer_api grpo_nemo_gym.py ...      the script, with the names installed
    accelerate launch -m ng_cli.trainer_api grpo_nemo_gym.py ...
    import ng_cli.trainer_api; ng_cli.trainer_api.install()   in a process we do not start

A real NeMo Gym is never shadowed: asked for `nemo_gym`, the finder first asks every other finder
of `sys.meta_path` (Python's path finder: installed packages and source trees on `sys.path`;
editable installs' finders) and answers only when none can; it answers `nemo_gym.X` only under
its own `nemo_gym`. `install()` says so (`False`) when NeMo Gym is installed.
"""

from __future__ import annotations

import importlib.machinery
import sys
from types import ModuleType

from ng_cli.servers.nemo_gym_finder import PACKAGE, NemoGymFinder, real_nemo_gym_origin

__all__ = ["TRAINER_MODULES", "install", "installed", "uninstall"]

TRAINER_MODULES = {
    "cli": "ng_cli.trainer_api.cli",
    "rollout_collection": "ng_cli.trainer_api.rollout_collection",
}
"""NeMo Gym modules a trainer imports whose trainer-facing parts live here (the rest of
`rollout_collection`, its record keys, is the servers' stand-in's, re-exported)."""

_OURS = ("ng_cli.nemo_gym_compat.api", "ng_cli.trainer_api")


class _TrainerFinder(NemoGymFinder):
    """NemoGymFinder that steps aside for any other `nemo_gym` (see the module's docstring)."""

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == PACKAGE:
            others = [finder for finder in sys.meta_path if finder is not self]
            if any(getattr(f, "find_spec", lambda *_: None)(PACKAGE, None) is not None for f in others):
                return None
        elif fullname.startswith(PACKAGE + "."):
            parent = sys.modules.get(PACKAGE)
            if parent is None or not parent.__name__.startswith(_OURS):
                return None  # a real NeMo Gym's submodule
        return super().find_spec(fullname, path, target)


_FINDER = _TrainerFinder(TRAINER_MODULES)


def installed() -> bool:
    return _FINDER in sys.meta_path


def install() -> bool:
    """Let `import nemo_gym...` find ng_cli's API when no real NeMo Gym is importable.

    Returns whether ng_cli's names answer (False: a real NeMo Gym is installed and is what
    `import nemo_gym` gives; nothing was changed)."""
    if installed():
        return True
    if real_nemo_gym_origin() is not None:
        return False
    sys.meta_path.insert(0, _FINDER)  # before the path finder, which would load nemo_gym.X from
    return True  # the stand-ins' folder under a second name


def uninstall() -> None:
    """Take the finder out and forget the modules it answered (tests)."""
    if installed():
        sys.meta_path.remove(_FINDER)
    for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
        if sys.modules[name].__name__.startswith(_OURS):
            del sys.modules[name]
