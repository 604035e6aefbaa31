"""The machine's own Chromium where Playwright looks for its build, for bench/nemo_gym_servers.py.

Playwright's wheel ships its driver but not the browsers: `playwright install chromium` downloads
a build of its own from Playwright's CDN, outside the package registries (interactive_browser's
local backend runs that install when no build is found, and fails here). Playwright finds its
builds under `PLAYWRIGHT_BROWSERS_PATH`, at paths fixed by the driver's `browsers.json` (a
revision per browser). `os_chromium_for_playwright()` makes such a folder in which each Chromium
path the installed driver would launch is a link to the OS package's Chromium, and sets the
variable: the server's code and config are unchanged, and the browser it drives is the OS's
(its version, not the one Playwright pins; `browser_version` says which).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["os_chromium_for_playwright"]

_EXECUTABLES = {
    "chromium": ("chrome-linux64", "chrome"),
    "chromium-headless-shell": ("chrome-headless-shell-linux64", "chrome-headless-shell"),
}
"""Playwright's folder and file names for a Chromium build on linux64 (its `registry/index.ts`)."""
_OS_CHROMIUM = ("/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser")


def os_chromium_for_playwright(folder: Path) -> str | None:
    """Link the OS's Chromium into `folder` as the installed Playwright's Chromium builds and point
    `PLAYWRIGHT_BROWSERS_PATH` there; return the OS browser's version. None (nothing changed)
    when Playwright is not importable, the variable is already set, or there is no OS Chromium."""
    if os.environ.get("PLAYWRIGHT_BROWSERS_PATH"):
        return None
    try:
        import playwright
    except ImportError:
        return None
    binary = next((path for path in _OS_CHROMIUM if Path(path).is_file()), None) or shutil.which("chromium")
    manifest = Path(playwright.__file__).parent / "driver" / "package" / "browsers.json"
    if binary is None or not manifest.is_file():
        return None
    for browser in json.loads(manifest.read_text())["browsers"]:
        found = _EXECUTABLES.get(browser["name"])
        if found is None:
            continue
        subfolder, executable = found
        target = (
            folder / f"{browser['name'].replace('-', '_')}-{browser['revision']}" / subfolder / executable
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            target.symlink_to(binary)
    os.environ["PLAYWRIGHT_BROWSERS_PATH"] = str(folder)
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, check=False)
    return version.stdout.strip() or binary
