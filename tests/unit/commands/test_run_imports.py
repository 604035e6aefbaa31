"""`ng_run` starts fast: importing its command loads none of the server framework it never runs.

The parent composes config, checks it in a subprocess and spawns the servers; FastAPI, aiohttp,
prometheus_client, the upstream client and the collector are the children's to load (together
they were most of ng_run's 0.8 s import, issue 38).
"""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("fastapi", "aiohttp", "prometheus_client", "ng_cli.upstream.client", "ng_cli.rollouts.collect")


def test_importing_ng_run_loads_no_server_framework() -> None:
    code = f"import sys, ng_cli.commands.run; print([m for m in {HEAVY!r} if m in sys.modules])"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_lazy_packages_still_export_their_names() -> None:
    import ng_cli.rollouts
    import ng_cli.upstream
    from ng_cli.rollouts.collect import run_collection
    from ng_cli.upstream.client import UpstreamClient

    assert ng_cli.upstream.UpstreamClient is UpstreamClient
    assert ng_cli.rollouts.run_collection is run_collection
