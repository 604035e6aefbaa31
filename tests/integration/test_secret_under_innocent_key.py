"""A secret interpolated under a key that does not look secret is masked wherever the config is shown.

`default_headers: {X-Custom-Auth: ${policy_api_key}}`: the header's name says nothing, but its
value is the key. A real `ng_run` serves vllm_model over a stub vLLM (in this process, so its
recorded headers can be read); the head server's `/config`, `ng_dump_config` and
`ng_run +dry_run=true` must not show the key, and the stub must still receive it, unmasked.
"""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

import pytest

from ng_cli.servers.testing import serve_in_thread
from tests.fixtures.commands import ng
from tests.fixtures.real_chain import MODEL, stack_yaml, start_stack, url_of
from tests.fixtures.stack.harness import get_json
from tests.fixtures.stub_vllm import StubVllm

pytestmark = pytest.mark.integration

KEY = "sk-proxy-4b1d9e7a2c5f8e3d"
HEADERS = {"X-Custom-Auth": "${policy_api_key}", "X-Route": "Bearer ${policy_api_key}", "X-Run": "rl-7"}


def run_command(name: str, *args: str, tmp: Path) -> str:
    """A console script on the test's stack config (the key in its private env.yaml); all output."""
    env = {**os.environ, "NG_ENV_YAML": str(tmp / "stack-env.yaml"), "COLUMNS": "200"}
    env.pop("NG_REPO_ROOT", None)
    done = ng(name, "-c", str(tmp / "stack.yaml"), *args, cwd=tmp, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_a_secret_under_an_innocent_key_is_never_shown_but_still_sent(tmp_path: Path) -> None:
    stub = StubVllm(api_key=KEY)
    with serve_in_thread(stub.build_app()) as stub_url:
        run = start_stack(
            tmp_path, stack_yaml(f"{stub_url}/v1", model={"default_headers": HEADERS}), api_key=KEY
        )
        try:
            config = get_json(f"{run.stack['head_url']}/config")
            request = urllib.request.Request(
                f"{url_of(run, MODEL)}/v1/responses",
                data=json.dumps({"input": "hi", "max_output_tokens": 8}).encode(),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=30) as answer:
                assert answer.status == 200
        finally:
            run.kill_everything()
    dump = run_command("ng_dump_config", tmp=tmp_path)
    dry_run = run_command("ng_run", "+dry_run=true", tmp=tmp_path)

    shown = config[MODEL]["responses_api_models"]["vllm_model"]["default_headers"]
    assert shown == {"X-Custom-Auth": "***", "X-Route": "Bearer ***", "X-Run": "rl-7"}
    for where, text in {"/config": json.dumps(config), "ng_dump_config": dump, "dry run": dry_run}.items():
        assert KEY not in text, where
        assert "X-Custom-Auth: '***'" in text or '"X-Custom-Auth": "***"' in text, where
    assert KEY not in run.output, "ng_run log"
    sent = stub.headers[-1]
    assert sent["x-custom-auth"] == KEY
    assert sent["x-route"] == f"Bearer {KEY}"
    assert sent["authorization"] == f"Bearer {KEY}"
