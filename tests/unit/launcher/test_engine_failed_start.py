"""An engine that logs "EngineCore failed to start" and stays up is stopped, with its cause.

Seen on two H200s: a TP 2 engine's workers crashed in vLLM's profile run (CUDA errors), vLLM logged
that its engine core failed to start, and its API server never exited: ng_run waited out the whole
start-up timeout (20 minutes in that config). A stand-in engine prints the same lines and hangs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ng_cli.engines.engine_log import EngineFacts
from ng_cli.engines.plan import EngineSpec
from ng_cli.errors import LaunchError
from ng_cli.launcher import engines as engines_module
from ng_cli.launcher.engines import EngineFleet
from tests.unit.launcher.test_engines_sharing_a_gpu import _plan, _stop

CAUSE = "RuntimeError: Worker failed with error 'CUDA error: CUBLAS_STATUS_INTERNAL_ERROR'"
LINES = [
    "(EngineCore pid=1) ERROR [core.py:1330] EngineCore failed to start.",
    "(EngineCore pid=1) ERROR [core.py:1330] Traceback (most recent call last):",
    "(EngineCore pid=1) ERROR [core.py:1330]     raise RuntimeError(",
    f"(EngineCore pid=1) ERROR [core.py:1330] {CAUSE}",
    "(Worker_TP0 pid=2) torch.AcceleratorError: CUDA error: an illegal memory access",
]
FAILED_AND_HANGING = f"import time\nfor line in {LINES!r}:\n    print(line, flush=True)\ntime.sleep(3600)\n"


def test_the_facts_keep_the_first_error_after_the_failure() -> None:
    facts = EngineFacts()
    facts.feed("WARNING Found ulimit of 20000 and failed to automatically increase with error current limit")
    facts.feed("RuntimeError: an error before the failure is not its cause")
    assert not facts.start_failed
    assert facts.start_failure is None
    for line in LINES:
        facts.feed(line)
    assert facts.start_failed
    assert facts.start_failure == CAUSE


def test_an_engine_that_failed_to_start_and_hangs_is_stopped_with_its_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(EngineSpec, "argv", lambda _self: [sys.executable, "-c", FAILED_AND_HANGING])
    monkeypatch.setattr(engines_module, "FAILED_START_GRACE_S", 0.5)
    plan = _plan(tmp_path, (), replicas_per_device=1)
    plan = plan.__class__(**{**plan.__dict__, "engines": plan.engines[:1]})
    said: list[str] = []
    fleet = EngineFleet((plan,), sink=lambda _name, line: said.append(line))
    try:
        fleet.start()
        with pytest.raises(LaunchError) as caught:  # before: waited out the start-up timeout
            fleet.wait_ready()
        child = fleet.engines[0].child
        assert child is not None
        assert child.exit_code() is not None
    finally:
        _stop(fleet)
    message = str(caught.value)
    assert "EngineCore failed to start" in message
    assert CAUSE in message
    assert "ng_run stopped it" in message
