"""`user:password@` in an upstream URL: taken out of the endpoint's name, turned into basic auth."""

from __future__ import annotations

import base64

import pytest

from ng_cli.upstream.userinfo import basic_authorizations, without_userinfo


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("http://u:pw@proxy:8000/v1", "http://proxy:8000/v1"),
        ("https://u@proxy/v1", "https://proxy/v1"),
        ("http://u:p%40ss@[::1]:8000/v1", "http://[::1]:8000/v1"),
        ("http://proxy:8000/v1", "http://proxy:8000/v1"),
    ],
)
def test_without_userinfo_keeps_everything_else(url: str, name: str) -> None:
    assert without_userinfo(url) == name


def test_basic_authorizations_decode_percent_escapes_and_skip_plain_urls() -> None:
    found = basic_authorizations(["http://u%20x:p%40ss@a/v1", "http://b/v1", "http://only-user@c/v1"])

    assert found == {
        "http://a/v1": "Basic " + base64.b64encode(b"u x:p@ss").decode(),
        "http://c/v1": "Basic " + base64.b64encode(b"only-user:").decode(),
    }
