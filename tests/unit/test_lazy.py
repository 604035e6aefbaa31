"""`lazy_exports`: a package's names load their module on first use, and only names it offers."""

from __future__ import annotations

import subprocess
import sys

import pytest

import ng_cli.config


def test_a_name_comes_from_its_home_module() -> None:
    from ng_cli.config.compose import compose_config

    assert ng_cli.config.compose_config is compose_config


def test_an_unknown_name_is_an_attribute_error_naming_the_package() -> None:
    with pytest.raises(AttributeError, match=r"module 'ng_cli\.config' has no attribute 'nope'"):
        _ = ng_cli.config.nope


def test_importing_the_package_loads_none_of_its_homes() -> None:
    code = "import sys, ng_cli.config; print('ng_cli.config.compose' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
