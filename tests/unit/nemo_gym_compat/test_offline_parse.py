"""`GlobalConfigDictParser().parse(...)` with an initial dict: NeMo Gym's offline config load, which
servers' verifier fixtures use to build a server from their benchmark config."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ng_cli.nemo_gym_compat import api
from ng_cli.nemo_gym_compat.api import global_config
from ng_cli.nemo_gym_compat.api.global_config import GlobalConfigDictParser, GlobalConfigDictParserConfig

BENCHMARK = """
config_paths:
- resources_servers/judged/configs/judged.yaml

judged_benchmark:
  _inherit_from: judged
  resources_servers:
    judged: {}
"""
SERVER = """
judged:
  resources_servers:
    judged:
      entrypoint: app.py
      judge_name: ${policy_model_name}-judge
      judge_model_server:
        type: responses_api_models
        name: judge_model
"""


def test_config_paths_are_composed_from_the_root_with_the_initial_values_on_top(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "resources_servers" / "judged" / "configs").mkdir(parents=True)
    (tmp_path / "resources_servers" / "judged" / "configs" / "judged.yaml").write_text(SERVER)
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "config.yaml").write_text(BENCHMARK)
    monkeypatch.setattr(api, "PARENT_DIR", tmp_path)
    initial = OmegaConf.merge(
        GlobalConfigDictParserConfig.NO_MODEL_GLOBAL_CONFIG_DICT,
        {"config_paths": [str(tmp_path / "benchmarks" / "config.yaml")], "policy_model_name": "m"},
    )
    tree = GlobalConfigDictParser().parse(
        GlobalConfigDictParserConfig(
            initial_global_config_dict=initial, skip_load_from_cli=True, offline=True
        )
    )
    block = OmegaConf.to_container(tree.judged_benchmark.resources_servers.judged, resolve=True)
    assert isinstance(block, dict)
    assert (block["judge_name"], block["host"], block["port"]) == ("m-judge", "127.0.0.1", 0)
    assert block["judge_model_server"] == {"type": "responses_api_models", "name": "judge_model"}
    assert "dummy_model" in tree.policy_model.responses_api_models  # their placeholder, unchecked


def test_without_an_initial_dict_it_is_the_config_ng_run_composed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(global_config, "_GLOBAL", None)
    global_config.set_global_config_dict({"stack": {"resources_servers": {"x": {"port": 1}}}})
    assert GlobalConfigDictParser().parse().stack.resources_servers.x.port == 1
    assert GlobalConfigDictParser().parse(GlobalConfigDictParserConfig(offline=True)).stack is not None
