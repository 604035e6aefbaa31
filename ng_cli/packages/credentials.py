"""Credentials inside URLs hidden from what people see: `https://user:token@host` -> `user:***@host`.

A requirement may carry them (a private git host or index: `name @ git+https://user:token@...`);
pip gets the line as written, and every message, warning and relayed pip line shows it with
this applied. A user without a password is hidden whole (`https://***@github.com/...`), as pip
does: that is how a GitHub token is written into a URL.
"""

from __future__ import annotations

import re

from ng_cli.config.secrets import MASK

__all__ = ["hide_credentials"]

# The userinfo of every `scheme://userinfo@host` in the text: up to the netloc's last '@' (a
# password may hold a raw '@'); the netloc ends at '/', '?', '#' or whitespace.
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#\s]*)@")


def hide_credentials(text: str) -> str:
    """`text` with the password (or the lone user name) of every URL in it replaced by `***`."""
    return _USERINFO.sub(_hidden, text) if "@" in text else text


def _hidden(match: re.Match[str]) -> str:
    user, has_password, _ = match.group("userinfo").partition(":")
    if not match.group("userinfo"):
        return match.group(0)
    shown = f"{user}:{MASK}" if has_password else MASK
    return f"{match.group('scheme')}{shown}@"
