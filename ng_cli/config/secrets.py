"""Keeping secrets out of dumps, logs and reprs: which keys are secret, masking, `Secret`, `Redactor`.

The rule is about the key's last word, not a substring: `hf_token`, `policy_api_key`,
`db_password`, `apiKey` are secret; `max_tokens`, `return_token_id_information`, `tokenizer`,
`keyword` are not. Words are split on `_`, `-`, `.`, spaces and camelCase. Masking errs on the
side of hiding (`sort_key` is masked too): a hidden value costs a look at the file, a leaked one
costs a rotated key. Cookies are secret too (`Cookie`, `Set-Cookie`, `session_cookie`), and so are
header-shaped names that start with `X-Auth` or `X-Session` (`X-Auth`, `X-Auth-User`, `X-Session-Id`).

HTTP headers carry credentials under names no key rule would guess, so inside a headers mapping
(a key whose last word is `headers`: `headers`, `default_headers`, `extra_headers`) a header is
secret by `is_secret_header`: any of its words is a credential word (`Cookie`, `Authorization`,
`Proxy-Authorization`, `X-Auth-*`, `Session-Id`, `*-Token`, `X-Api-Key`, `X-Amz-Signature`), while
`Content-Type`, `X-Request-Id` or `X-Max-Tokens` stay shown. Headers given as a list are read as
`"Name: value"` strings, `[name, value]` pairs or `{name, value}` objects.

Masking hides values by their key, and also by their value (a secret interpolated under a key
that does not look secret); `Redactor` hides them by their value, in text of any origin (an
upstream that echoes our Authorization header in its error message, a log line, a failure row).
Servers, ng_run and the collector each build one from the config they hold. Values shorter than
8 characters are placeholders (`EMPTY`), never looked for by value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson
from pydantic import BaseModel, SecretStr

__all__ = [
    "MASK",
    "Redactor",
    "Secret",
    "is_secret_header",
    "is_secret_key",
    "mask",
    "mask_url",
    "secret_values",
]

MASK = "***"
"""What a secret value is replaced with."""

_SECRET_LAST_WORDS = frozenset(
    {
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "credential",
        "credentials",
        "authorization",
        "cookie",
        "cookies",
    }
)
_SECRET_SUFFIXES = ("apikey", "api_key", "api-key", "password", "passwd", "secret", "token")
_WORD_SPLIT = re.compile(r"[_\-.\s]+|(?<=[a-z0-9])(?=[A-Z])")
_HEADER_SECRET_WORDS = _SECRET_LAST_WORDS | {"signature", "jwt", "bearer"}
"""A header with any of these words in its name is secret (`X-Api-Key-Id`, `X-Amz-Signature`)."""
_HEADER_SECRET_PREFIXES = ("auth", "session")
"""...or with a word starting so (`Authentication`, `X-Authenticated-User`, `Session-Id`); as the
second word after `X` (`X-Auth`, `X-Session-Id`), any key is secret."""
_HEADERS_LAST_WORD = "headers"


def _words(key: str) -> list[str]:
    return [word.lower() for word in _WORD_SPLIT.split(key) if word]


def is_secret_key(key: str) -> bool:
    """Whether a value under this key must never be shown."""
    words = _words(key)
    if not words:
        return False
    if words[0] == "x" and len(words) > 1 and words[1].startswith(_HEADER_SECRET_PREFIXES):
        return True
    return words[-1] in _SECRET_LAST_WORDS or key.lower().endswith(_SECRET_SUFFIXES)


def is_secret_header(name: str) -> bool:
    """Whether an HTTP header's value must never be shown: a secret key, or any credential word."""
    if is_secret_key(name):
        return True
    return any(
        word in _HEADER_SECRET_WORDS or word.startswith(_HEADER_SECRET_PREFIXES) for word in _words(name)
    )


def _is_headers_key(key: str) -> bool:
    words = _words(key)
    return bool(words) and words[-1] == _HEADERS_LAST_WORD


def mask(tree: Any, *, redactor: Redactor | None = None) -> Any:
    """A deep copy with every value under a secret key replaced by `***` (also inside lists).

    A secret interpolated under a key that says nothing (`X-Custom-Auth: ${policy_api_key}`) is
    hidden too: every string holding a secret value (those of `redactor`; by default the tree's
    own, `secret_values(tree)`) has it replaced, so `Bearer <key>` shows as `Bearer ***`. Pass
    the whole config's redactor when masking a part of it. Passwords embedded in URLs
    (`http://user:pw@host`) are masked wherever they appear.
    """
    return _mask(tree, Redactor.of(tree) if redactor is None else redactor)


def _mask(tree: Any, redactor: Redactor, *, headers: bool = False) -> Any:
    """`headers`: `tree` is the value of a headers key (its entries are header names)."""
    if isinstance(tree, dict):
        return {
            key: _mask_all(value)
            if _is_secret_entry(str(key), headers=headers)
            else _mask(value, redactor, headers=_is_headers_key(str(key)))
            for key, value in tree.items()
        }
    if isinstance(tree, list | tuple):
        if headers:
            return [_mask_header_item(item, redactor) for item in tree]
        return [_mask(item, redactor) for item in tree]
    if isinstance(tree, str):
        return redactor.text(mask_url(tree))
    return tree


def _is_secret_entry(key: str, *, headers: bool) -> bool:
    return is_secret_header(key) if headers else is_secret_key(key)


def _header_item(item: Any) -> tuple[str, Any] | None:
    """(name, value) of one header of a list: `"Name: value"`, `[name, value]` or `{name, value}`."""
    if isinstance(item, str) and ":" in item:
        name, _, value = item.partition(":")
        return name.strip(), value.strip()
    if isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str):
        return item[0], item[1]
    if isinstance(item, dict) and isinstance(item.get("name"), str) and "value" in item:
        return item["name"], item["value"]
    return None


def _mask_header_item(item: Any, redactor: Redactor) -> Any:
    header = _header_item(item)
    if header is None or not is_secret_header(header[0]):
        return _mask(item, redactor)
    if isinstance(item, str):
        return f"{item.partition(':')[0]}: {MASK}"
    if isinstance(item, dict):
        return {**_mask(item, redactor), "value": _mask_all(item["value"])}
    return [item[0], _mask_all(item[1])]


def mask_url(text: str) -> str:
    """Replace the password of a `scheme://user:password@host` URL; other strings unchanged."""
    if "://" not in text or "@" not in text:
        return text
    try:
        parts = urlsplit(text)
    except ValueError:
        return text
    if not parts.password:
        return text
    host = parts.netloc.rpartition("@")[2]  # as written: `<host>:<port>` placeholders have no number
    return urlunsplit(parts._replace(netloc=f"{parts.username}:{MASK}@{host}"))


def _mask_all(value: Any) -> Any:
    """Mask every leaf, keeping the shape (a list of three keys stays a list of three)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return {key: _mask_all(child) for key, child in value.items()}
    if isinstance(value, list | tuple):
        return [_mask_all(child) for child in value]
    return MASK


class Secret:
    """A string whose repr is `Secret('***')`, also inside containers; `.reveal()` gets it back.

    `str(secret)` returns the value (it is passed to HTTP headers); `repr` never does, so a
    secret inside a dataclass, a log record or a traceback's locals stays hidden.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret value."""
        return self._value

    def __str__(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret('{MASK}')"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Secret):
            return self._value == other._value
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)


_MIN_REDACTED_CHARS = 8
"""Shorter values are not redacted: placeholders such as `EMPTY` or `dummy` (a local vLLM's key)
would be cut out of every answer that uses the word, and no real key is that short."""


def secret_values(tree: Any) -> set[str]:
    """Every value of a config tree that `mask` would hide: leaves under secret keys, URL passwords."""
    return set(_secret_leaves(tree, secret=False))


def _secret_leaves(node: Any, *, secret: bool, headers: bool = False) -> Iterator[str]:
    if isinstance(node, BaseModel):
        node = dict(node)
    if isinstance(node, dict):
        for key, value in node.items():
            hidden = secret or _is_secret_entry(str(key), headers=headers)
            yield from _secret_leaves(value, secret=hidden, headers=_is_headers_key(str(key)))
    elif isinstance(node, list | tuple):
        for item in node:
            header = _header_item(item) if headers and not secret else None
            if header is not None and is_secret_header(header[0]):
                yield from _secret_leaves(header[1], secret=True)
            else:
                yield from _secret_leaves(item, secret=secret)
    elif isinstance(node, Secret | SecretStr):
        yield node.reveal() if isinstance(node, Secret) else node.get_secret_value()
    elif node is not None and not isinstance(node, bool):
        text = str(node)
        if secret:
            yield text
        elif isinstance(node, str) and "://" in text and "@" in text:
            try:
                password = urlsplit(text).password
            except ValueError:
                password = None
            if password:
                yield password


class Redactor:
    """Replaces every occurrence of known secret values with `***`, in str or bytes.

    A value is also looked for as it appears inside a JSON string (escaped), since most text
    we pass on is JSON. An empty redactor (no secrets) returns its input unchanged.
    """

    def __init__(self, values: Iterable[str]) -> None:
        forms: set[str] = set()
        for value in values:
            if len(value) < _MIN_REDACTED_CHARS:
                continue
            forms.add(value)
            forms.add(orjson.dumps(value).decode()[1:-1])
        self._values = sorted(forms, key=len, reverse=True)  # longest first: no partial leftovers
        self._encoded = [value.encode() for value in self._values]

    @classmethod
    def of(cls, tree: Any) -> Redactor:
        """A redactor for every secret of a config tree."""
        return cls(secret_values(tree))

    def __bool__(self) -> bool:
        return bool(self._values)

    def text(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, MASK)
        return text

    def bytes(self, data: bytes) -> bytes:
        for value in self._encoded:
            if value in data:
                data = data.replace(value, MASK.encode())
        return data
