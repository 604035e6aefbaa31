"""A server process collects garbage in fewer, larger passes and never scans start-up's objects."""

from __future__ import annotations

import subprocess
import sys


def test_relax_gc_freezes_start_up_and_raises_the_thresholds() -> None:
    code = (
        "import gc; from ng_cli.servers.child import GC_THRESHOLDS, relax_gc; relax_gc(); "
        "print(gc.get_threshold() == GC_THRESHOLDS, gc.get_freeze_count() > 1000)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["True", "True"]
