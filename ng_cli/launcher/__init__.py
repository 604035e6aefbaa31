"""The launcher: a composed config -> a running stack of server processes, supervised.

    plan_stack(config, run_dir=...) -> StackPlan     pure: what starts, where, with which spec
    Stack.start(plan) -> wait_ready() -> watch() -> stop()
    launch(config, console=...) -> exit code         what `ng_run` does (dry run or supervise)

Names are imported lazily, so `ng_cli.launcher.ports` alone does not load the server framework.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ng_cli.lazy import lazy_exports

if TYPE_CHECKING:
    from ng_cli.launcher.health import probe_all, wait_until_ready
    from ng_cli.launcher.plan import ServerPlan, StackPlan, head_url_from_config, plan_stack
    from ng_cli.launcher.ports import bind_listener
    from ng_cli.launcher.stack import Stack, make_run_dir
    from ng_cli.launcher.supervise import launch, run_stack

_HOMES = {
    "probe_all": "health",
    "wait_until_ready": "health",
    "ServerPlan": "plan",
    "StackPlan": "plan",
    "head_url_from_config": "plan",
    "plan_stack": "plan",
    "bind_listener": "ports",
    "Stack": "stack",
    "make_run_dir": "stack",
    "launch": "supervise",
    "run_stack": "supervise",
}

__all__ = [
    "ServerPlan",
    "Stack",
    "StackPlan",
    "bind_listener",
    "head_url_from_config",
    "launch",
    "make_run_dir",
    "plan_stack",
    "probe_all",
    "run_stack",
    "wait_until_ready",
]

__getattr__ = lazy_exports(__name__, _HOMES)
