"""`user:password@` in an upstream URL: sent as basic auth, never part of the endpoint's name.

A reverse proxy with basic auth in front of vLLM is written `http://user:pw@proxy/v1`, in
`base_url` or in an `endpoint_file`. The credentials are taken out where a URL enters the model
server (`Upstream`): the URL without them names the endpoint everywhere (logs, `/metrics`
labels, errors, failure rows), and the endpoint's requests carry `Authorization: Basic ...`
instead of the api_key's Bearer header. A request has one Authorization header, so the URL's
credentials win, as with curl and the OpenAI SDK (httpx); aiohttp itself refuses a request that
has both.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit, urlunsplit

__all__ = ["basic_authorizations", "without_userinfo"]


def without_userinfo(url: str) -> str:
    """`url` with its `user:password@` removed (unchanged when it has none)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def basic_authorizations(urls: Iterable[str]) -> dict[str, str]:
    """URL without userinfo -> the `Authorization: Basic ...` value its userinfo asks for."""
    found: dict[str, str] = {}
    for url in urls:
        parts = urlsplit(url)
        if parts.username is None:
            continue
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        found[without_userinfo(url)] = "Basic " + base64.b64encode(pair.encode()).decode()
    return found
