"""`WeightsClient`: a running stack's weight admin routes, from a trainer or `ng_update_weights`.

It finds the model server through the head server (the one whose `/servers` entry lists `admin`
routes, or the one named), and its key in ng_run's key file (`launcher/admin_keys.py`) or in
`NG_WEIGHTS_KEY`. Standard library HTTP only, so a trainer's process pays for nothing else.

    client = WeightsClient.connect("http://127.0.0.1:11000")
    client.update("/ckpt/step-3", version=3)                  # mode keep: nothing in flight is lost
    client.begin(version=4); client.push("update_weights", {...}); client.commit()   # tensor push
    client.status()["version"]
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from ng_cli.errors import ConfigError, UpstreamHTTPError, UpstreamTimeoutError, UpstreamUnavailableError
from ng_cli.head import fetch_servers
from ng_cli.launcher.admin_keys import KEY_ENV, stored_key
from ng_cli.model_server.admin_paths import ADMIN_ROUTES
from ng_cli.protocol.errors import parse_error_body
from ng_cli.upstream.weights import WeightUpdateError

__all__ = ["WeightsClient"]


@dataclass(frozen=True)
class WeightsClient:
    """The admin routes of one model server whose engines take weight updates."""

    server: str
    url: str
    key: str = field(repr=False)
    timeout_s: float = 3600.0

    @classmethod
    def connect(
        cls, head_url: str, *, model_server: str | None = None, timeout_s: float = 3600.0
    ) -> WeightsClient:
        """The model server of a running stack; ConfigError naming what is missing."""
        servers = fetch_servers(head_url)
        updatable = [entry for entry in servers if isinstance(entry.get("admin"), dict)]
        if model_server is not None:
            chosen = [entry for entry in servers if entry.get("name") == model_server]
            if not chosen:
                names = ", ".join(str(entry.get("name")) for entry in servers)
                raise ConfigError(
                    f"model_server: the stack at {head_url} has no server {model_server!r} (it has {names})"
                )
            if chosen[0] not in updatable:
                raise ConfigError(
                    f"model_server: {model_server!r} takes no weight updates",
                    hint="set weight_updates: true on its local_vllm_model block and restart ng_run",
                )
        elif len(updatable) != 1:
            names = ", ".join(str(entry["name"]) for entry in updatable)
            raise ConfigError(
                f"the stack at {head_url} has {len(updatable)} model servers that take weight updates"
                + (f" ({names}): say which with +model_server=NAME" if updatable else ""),
                hint="set weight_updates: true on a local_vllm_model block" if not updatable else None,
            )
        else:
            chosen = updatable
        name = str(chosen[0]["name"])
        listed = str(chosen[0]["url"]).rstrip("/")
        stored = stored_key(head_url, name)
        if stored is None:
            raise ConfigError(
                f"no key for {name!r}: no running ng_run on this machine left a key file for {head_url} "
                "(it runs as another user, on another machine, or it was killed)",
                hint="run this as the user and on the machine that started ng_run; a remote trainer sets "
                f"api_key on the instance and exports {KEY_ENV} with it",
            )
        if stored.url is not None and stored.url.rstrip("/") != listed:
            raise ConfigError(
                f"the head at {head_url} lists {name!r} at {listed}, but the ng_run that holds its key "
                f"serves it at {stored.url}: the key is not sent",
                hint="is another stack's head on this port? pass the head_server_url of your ng_run",
            )
        return cls(server=name, url=listed, key=stored.key, timeout_s=timeout_s)

    def status(self) -> dict[str, Any]:
        return self._call("GET", ADMIN_ROUTES["weights"])

    def update(self, path: str, *, version: int, mode: str = "keep") -> dict[str, Any]:
        return self._call("POST", ADMIN_ROUTES["update"], {"path": path, "version": version, "mode": mode})

    def begin(self, *, version: int, mode: str = "keep") -> dict[str, Any]:
        return self._call("POST", ADMIN_ROUTES["begin"], {"version": version, "mode": mode})

    def push(self, route: str, body: Any) -> dict[str, Any]:
        return self._call("POST", ADMIN_ROUTES["push"].format(route=route), body)

    def commit(self) -> dict[str, Any]:
        return self._call("POST", ADMIN_ROUTES["commit"])

    def abort(self) -> dict[str, Any]:
        return self._call("POST", ADMIN_ROUTES["abort"])

    def sleep(self, level: int = 1) -> dict[str, Any]:
        return self._call("POST", ADMIN_ROUTES["sleep"], {"level": level})

    def wake_up(self) -> dict[str, Any]:
        return self._call("POST", ADMIN_ROUTES["wake_up"])

    def _call(self, method: str, route: str, body: Any = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + route,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                answer = json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            raise _error_of(exc, self.server) from None
        except TimeoutError:
            raise UpstreamTimeoutError(
                f"{self.server}: no answer to {method} {route} within {self.timeout_s:g} s",
                endpoint=self.url,
                hint="the operation goes on at the model server, to its end or its rollback, whether or not "
                "anyone waits: ng_status (or GET /admin/weights, `last_outcome`) tells how it ended",
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            if isinstance(getattr(exc, "reason", None), TimeoutError):
                raise UpstreamTimeoutError(
                    f"{self.server}: no answer to {method} {route} within {self.timeout_s:g} s",
                    endpoint=self.url,
                ) from None
            raise UpstreamUnavailableError(
                f"model server {self.server!r} at {self.url} is unreachable: {getattr(exc, 'reason', exc)}",
                endpoint=self.url,
            ) from None
        if not isinstance(answer, dict):
            raise UpstreamHTTPError(f"{self.server}: {route} answered {answer!r:.200}", status=502)
        return answer


def _error_of(exc: urllib.error.HTTPError, server: str) -> Exception:
    """The model server's error envelope (`protocol.errors`) as the error it stands for."""
    text = exc.read().decode("utf-8", "replace")
    detail = parse_error_body(text)
    extra = (detail.model_extra or {}) if detail is not None else {}
    if detail is not None and "phase" in extra:
        return WeightUpdateError(
            detail.message,
            phase=str(extra["phase"]),
            engine=extra.get("engine"),
            rolled_back=bool(extra.get("rolled_back")),
            version=extra.get("version"),
            rollback_failed=extra.get("rollback_failed") or {},
            hint=extra.get("hint"),
            timings=extra.get("timings") or {},
        )
    message = detail.message if detail is not None else text[:300]
    return UpstreamHTTPError(f"{server}: {message}", status=exc.code, body=text)
