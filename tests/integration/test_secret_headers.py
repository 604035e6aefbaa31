"""The head server's `/config` masks credential headers by name (`Cookie`, `X-Auth`, `X-Session`), as
`ng_dump_config` does: the config ng_run would serve (`plan_stack`'s masked config) over loopback."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ng_cli.config.compose import compose_config
from ng_cli.config.secrets import MASK
from ng_cli.head import build_head_app, fetch_config
from ng_cli.launcher.plan import plan_stack
from ng_cli.servers.testing import serve_in_thread

pytestmark = pytest.mark.integration

HEADERS = {
    "Cookie": "sessionid=c00k1e-value-0001",
    "X-Auth": "x-auth-value-0002",
    "X-Session": "x-session-value-0003",
    "Session-Id": "session-id-value-0004",
    "X-Request-Id": "req-7",
}


def test_the_heads_config_masks_credential_headers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = tmp_path / "env.yaml"
    env.write_text(
        "policy_base_url: http://127.0.0.1:8000/v1\npolicy_api_key: EMPTY\npolicy_model_name: tiny\n"
    )
    config = tmp_path / "headers.yaml"
    config.write_text(
        yaml.safe_dump(
            {"policy_model": {"responses_api_models": {"vllm_model": {"default_headers": HEADERS}}}}
        )
    )
    monkeypatch.setenv("NG_ENV_YAML", str(env))
    monkeypatch.delenv("NG_REPO_ROOT", raising=False)
    composed = compose_config(
        [f"+config_paths=[responses_api_models/vllm_model/configs/vllm_model.yaml,{config}]"], cwd=tmp_path
    )
    plan = plan_stack(composed, run_dir=tmp_path / "run")
    with serve_in_thread(build_head_app(config=plan.masked_config, servers=lambda: [])) as url:
        served = fetch_config(url)
    assert served["policy_model"]["responses_api_models"]["vllm_model"]["default_headers"] == {
        "Cookie": MASK,
        "X-Auth": MASK,
        "X-Session": MASK,
        "Session-Id": MASK,
        "X-Request-Id": "req-7",
    }
    for name, value in HEADERS.items():
        if name != "X-Request-Id":
            assert value not in str(served), name
