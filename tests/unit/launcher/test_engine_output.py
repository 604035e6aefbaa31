"""Engine output passes the stack's redactor before it is shown or kept for a death report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ng_cli.config.secrets import Redactor
from ng_cli.engines.config import LocalVllmModelConfig
from ng_cli.engines.plan import EngineSpec, plan_engines
from ng_cli.errors import LaunchError
from ng_cli.launcher.engines import EngineFleet

KEY = "engine-key-that-must-not-show-0123456789"


def test_an_engine_that_prints_its_key_shows_it_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2", "hidden_size": 64}))
    config = LocalVllmModelConfig.model_validate(
        {"model": str(model), "return_token_id_information": False, "uses_reasoning_parser": False}
    )
    engines = plan_engines(
        "policy", config, env={}, devices=(), python=sys.executable, source="conf/m.yaml:3", api_key=KEY
    )
    engines = engines.with_ports(range(18000, 18000 + engines.ports_needed()[0]), range(0))
    # A stand-in engine that echoes the key vLLM gets in its environment, then dies.
    printing = [sys.executable, "-c", "import os; print('key is', os.environ['VLLM_API_KEY'], flush=True)"]
    monkeypatch.setattr(EngineSpec, "argv", lambda _self: printing)
    shown: list[str] = []
    fleet = EngineFleet((engines,), sink=lambda _name, line: shown.append(line), redact=Redactor([KEY]).text)
    fleet.start()
    with pytest.raises(LaunchError) as died:  # the stand-in exits at once: a death before ready
        fleet.wait_ready()
    assert any("key is ***" in line for line in shown), shown
    assert KEY not in "\n".join(shown)
    assert "key is ***" in died.value.message
    assert KEY not in died.value.message
