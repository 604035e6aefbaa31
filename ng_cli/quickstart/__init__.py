"""The README's first command: the example environment end to end on the embedded tiny model.

    plan        what runs, where it writes, the config overrides (pure)
    run         the phases (the stack and the collector in this process, as
                ng_e2e_collect_rollouts runs them), their timings, the clean-up
    report      what the rollouts show, and what the embedded model is

`scripts/quickstart.sh` installs what is needed, then runs `python -m ng_cli.commands.quickstart`.
"""

from __future__ import annotations

from ng_cli.quickstart.plan import QuickstartPlan
from ng_cli.quickstart.run import run_quickstart

__all__ = ["QuickstartPlan", "run_quickstart"]
