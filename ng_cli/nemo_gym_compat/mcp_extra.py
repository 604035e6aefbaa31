"""Whether the optional `mcp` extra is installed, asked without importing it.

NeMo Gym's `expose_tools_over_mcp` needs the MCP SDK (`mcp` on PyPI). It is an optional extra
here, imported only by a server that opts in, so a config that opts in without it must be refused
before the server starts (the config check runs this), with the command that installs it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

__all__ = ["MCP_REQUIREMENT", "install_hint", "mcp_problem"]

MCP_REQUIREMENT = ">=2.3,<3"
"""The SDK versions our MCP exposure is written against (pyproject's `mcp` extra says the same)."""


def install_hint() -> str:
    return "install the `mcp` extra: pip install 'ng-cli[mcp]'"


def mcp_problem() -> str | None:
    """Why MCP exposure cannot run in this environment, or None when it can."""
    if importlib.util.find_spec("mcp") is None:
        return "it needs the MCP SDK (the `mcp` package), which is not installed"
    try:
        found = Version(importlib.metadata.version("mcp"))
    except (importlib.metadata.PackageNotFoundError, InvalidVersion):
        return None  # a source checkout of the SDK: let its import say whether it fits
    if found not in SpecifierSet(MCP_REQUIREMENT):
        return f"it needs the MCP SDK mcp{MCP_REQUIREMENT}, and mcp {found} is installed"
    return None
