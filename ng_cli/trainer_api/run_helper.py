"""NeMo Gym's `RunHelper`: a trainer starts a stack from a config dict, and stops it, in its own process.

    RunHelper().start(global_config_dict_parser_config=GlobalConfigDictParserConfig(
        initial_global_config_dict={...}, skip_load_from_cli=True))
        compose (files < env.yaml < the dict < sys.argv unless skipped), check ng_run's options,
        check every instance, plan, Stack.start -> wait_ready (ng_run's launcher, in this process)
    poll()        raises the LaunchError of a server that died (a watcher checks every second)
    shutdown()    Stack.stop(): every child and the head server gone, ports released

It is ng_run's body without the signal handling (the trainer owns its signals): the same
launcher, the same checks and errors (a ConfigError names the key, a LaunchError the server that
died and its last lines). A failed `start()` has stopped everything it started before it raises.
Children die with this process (`PR_SET_PDEATHSIG`, which Linux ties to the thread that spawned
them): call `start()` from a thread that lives as long as the stack, such as the main thread.
"""

from __future__ import annotations

import atexit
import copy
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from rich.console import Console

from ng_cli.config.command_options import command_options
from ng_cli.config.compose import ComposedConfig, compose_config
from ng_cli.config.run_options import RunOptions
from ng_cli.errors import ConfigError, LaunchError, NgError
from ng_cli.launcher.check import check_instances, print_warnings
from ng_cli.launcher.render import ready_table
from ng_cli.launcher.stack import Stack
from ng_cli.launcher.supervise import plan_and_connect
from ng_cli.nemo_gym_compat.api.global_config import (
    HEAD_SERVER_KEY_NAME,
    GlobalConfigDictParserConfig,
    set_global_config_dict,
)
from ng_cli.rollouts.config import STACK_FILE_COMMANDS

__all__ = ["DROPPED_KEYS", "RunHelper", "compose_for_trainer"]

_COMMAND = "RunHelper.start"
_WATCH_S = 1.0
_PARSER_OPTIONS = frozenset(
    {
        "initial_global_config_dict",
        "skip_load_from_cli",
        "dotenv_path",
        "skip_load_from_dotenv",
        "hide_secrets",
        "offline",
    }
)
"""`GlobalConfigDictParserConfig`'s fields in NeMo Gym 0.7.0."""

DROPPED_KEYS = {
    "hf_token": "nothing is downloaded here; put models and data on disk and name their paths",
    "port_range_low": "every server gets a free port from the OS, bound before it starts",
    "port_range_high": "every server gets a free port from the OS, bound before it starts",
    "ray_head_node_address": "the servers run as processes of this one; a `ray` block puts them on a cluster",
    "default_host": "each server listens on its block's host (default 127.0.0.1: this machine only)",
}
"""NeMo Gym keys trainers put in their dict (TRL: hf_token; NeMo RL's actor: the others) that mean
nothing to this stack: dropped with a warning saying so, instead of refusing the trainer's start."""


def compose_for_trainer(parser_config: GlobalConfigDictParserConfig | None) -> ComposedConfig:
    """NeMo Gym's parse order: files < env.yaml < the initial dict < the command line.

    `dotenv_path` names another env.yaml (one that does not exist is skipped, as NeMo Gym does);
    `skip_load_from_dotenv` leaves it out; without `skip_load_from_cli`, `sys.argv[1:]` are Hydra
    overrides on top, as for `ng_run`."""
    options = dict(parser_config.options) if parser_config is not None else {}
    unknown = sorted(set(options) - _PARSER_OPTIONS)
    if unknown:
        raise ConfigError(
            f"GlobalConfigDictParserConfig: unknown option(s) {', '.join(unknown)}",
            hint=f"its options: {', '.join(sorted(_PARSER_OPTIONS))}",
        )
    values = _plain(options.get("initial_global_config_dict"))
    for key in [key for key in DROPPED_KEYS if key in values]:
        values.pop(key)
        print_warnings([f"{key} (initial_global_config_dict) is not used: {DROPPED_KEYS[key]}"])
    overrides = [] if options.get("skip_load_from_cli") else list(sys.argv[1:])
    dotenv = options.get("dotenv_path")
    read_env_yaml = not options.get("skip_load_from_dotenv")
    if dotenv is not None and read_env_yaml:
        if Path(dotenv).is_file():
            overrides.insert(0, f"+dotenv_path={dotenv}")
        else:
            read_env_yaml = False
    return compose_config(overrides, values=values, read_env_yaml=read_env_yaml)


def _plain(initial: Any) -> dict[str, Any]:
    """The initial dict as plain values (an OmegaConf DictConfig, interpolations unresolved)."""
    if initial is None:
        return {}
    if isinstance(initial, DictConfig):
        container = OmegaConf.to_container(initial, resolve=False)
    elif isinstance(initial, Mapping):
        container = OmegaConf.to_container(OmegaConf.create(dict(initial)), resolve=False)
    else:
        raise ConfigError(
            f"initial_global_config_dict: expected a mapping of config keys, got {type(initial).__name__}"
        )
    assert isinstance(container, dict)
    return {str(key): value for key, value in container.items()}


class RunHelper:
    """NeMo Gym's `nemo_gym.cli.RunHelper` over ng_run's launcher (one stack per helper)."""

    def __init__(self) -> None:
        self._stack: Stack | None = None
        self._stopped_at: float | None = None
        self._failure: LaunchError | None = None
        self._done = threading.Event()
        self._watcher: threading.Thread | None = None

    @property
    def stack(self) -> Stack:
        """The running stack (its plan: `stack.plan`; its head: `stack.plan.head.url`)."""
        if self._stack is None:
            raise NgError("RunHelper: no stack is running; call start() first")
        return self._stack

    def start(self, global_config_dict_parser_config: GlobalConfigDictParserConfig | None = None) -> None:
        """Start every server of the config and wait until each answers; on failure, stop what started."""
        if self._stack is not None or self._stopped_at is not None:
            raise NgError(
                "RunHelper.start: this helper has already started a stack",
                hint="one stack per RunHelper: make a new RunHelper() for another",
            )
        composed = compose_for_trainer(global_config_dict_parser_config)
        options = command_options(composed, RunOptions, command=_COMMAND, shared=STACK_FILE_COMMANDS)
        if options.dry_run or options.install_requirements or options.ready_file is not None:
            raise ConfigError(
                f"{_COMMAND}: dry_run, install_requirements and ready_file are ng_run's command-line options",
                hint="show the plan or install the servers' packages with ng_run itself, then start",
            )
        print_warnings(check_instances(composed))
        plan, backend = plan_and_connect(composed)
        stack = Stack.start(plan, backend=backend)
        try:
            ready_s = stack.wait_ready()
            set_global_config_dict(_live_tree(composed, stack))
        except BaseException:
            stack.stop()
            raise
        self._stack = stack
        atexit.register(self._stop_at_exit)
        self._watcher = threading.Thread(target=self._watch, name="run-helper-watch", daemon=True)
        self._watcher.start()
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            f"ng_cli: {len(plan.servers)} servers ready in {max(ready_s.values(), default=0.0):.1f} s; "
            f"head server {stack.plan.head.url}"
        )

    def poll(self) -> None:
        """Raise the LaunchError of a server that died since start (naming it and its last lines)."""
        self.stack  # noqa: B018 - raises when nothing runs
        if self._failure is not None:
            raise self._failure

    def shutdown(self) -> None:
        """Stop every process of the stack (SIGTERM, SIGKILL after the grace period) and the head."""
        if self._stopped_at is not None:
            raise NgError(
                "RunHelper.shutdown: the stack was already shut down "
                f"{time.monotonic() - self._stopped_at:.1f} s ago; nothing of it is running",
                hint="call shutdown() once per start()",
            )
        stack = self.stack
        self._done.set()
        if self._watcher is not None:
            self._watcher.join()
        stack.stop()
        self._stopped_at = time.monotonic()
        atexit.unregister(self._stop_at_exit)
        set_global_config_dict({})  # run_examples without a head_server_config: "no head server"

    def run_forever(self) -> None:
        """Supervise until Ctrl-C or a server's death, then shut down (what `ng_run` does)."""
        try:
            while not self._done.wait(_WATCH_S):
                pass
            self.poll()
        except KeyboardInterrupt:
            pass
        finally:
            self.shutdown()

    def display_server_instance_info(self) -> None:
        stack = self.stack
        table = ready_table(stack.plan, stack.servers_status(), stack.ready_s, stack.engines.rows())
        Console(stderr=True).print(table)

    def _watch(self) -> None:
        """`Stack.check_alive` every second (what ng_run's watch does: engine restarts included)."""
        stack = self.stack
        while not self._done.wait(_WATCH_S):
            try:
                stack.check_alive()
            except LaunchError as error:
                self._failure = error
                self._done.set()

    def _stop_at_exit(self) -> None:
        if self._stack is not None and self._stopped_at is None:
            self._done.set()
            self._stack.stop()


def _live_tree(composed: ComposedConfig, stack: Stack) -> dict[str, Any]:
    """The global config NeMo Gym's helpers read in this process: the composed tree with every
    server's bound host and port and the head server's."""
    tree = copy.deepcopy(composed.tree)
    for server in stack.plan.servers:
        block = tree.get(server.name, {}).get(server.server_type, {}).get(server.implementation)
        if isinstance(block, dict):
            block.update(host=server.host, port=server.port)
    tree[HEAD_SERVER_KEY_NAME] = {"host": stack.plan.head.host, "port": stack.plan.head.port}
    return tree
