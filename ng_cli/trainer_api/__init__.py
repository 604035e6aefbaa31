"""NeMo Gym's trainer-facing API over ng_cli's stack: what TRL's and NeMo RL's NeMo Gym clients call.

    RunHelper (`run_helper`)                     start / poll / shutdown a stack from a config dict,
                                                 on ng_run's launcher, in the trainer's process
    RolloutCollectionHelper (`collection`)       run_examples / run_from_config on the collector
    install() (`imports`)                        opt-in: `import nemo_gym.cli` etc. give these when
                                                 NeMo Gym is not installed (`python -m ng_cli.trainer_api`)

`cli` and `rollout_collection` are the modules `nemo_gym.cli` and `nemo_gym.rollout_collection`
resolve to in a trainer's process; the rest of `nemo_gym.*` are the servers' stand-ins
(`ng_cli.nemo_gym_compat.api`). See docs/training.md, "With TRL" and "With NeMo RL".
"""

from __future__ import annotations

from ng_cli.trainer_api.imports import install, installed, uninstall

__all__ = ["install", "installed", "uninstall"]
