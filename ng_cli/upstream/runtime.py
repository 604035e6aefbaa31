"""`Upstream`: the pool, client, prober and metrics of one model server, built from its config.

A model server owns one `Upstream`; it calls `start()` in `on_startup` (checks every endpoint,
then starts the health probes) and `stop()` in `on_shutdown`. With `endpoint_file`, the URLs
come from that file when it exists, and `rebind` follows it while running.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from ng_cli.servers.http import HttpClient
from ng_cli.upstream.client import UpstreamClient
from ng_cli.upstream.config import UpstreamConfig, checked_url, root_url_of
from ng_cli.upstream.endpoint_file import EndpointFile
from ng_cli.upstream.metrics import UpstreamMetrics
from ng_cli.upstream.pool import Endpoint, EndpointPool
from ng_cli.upstream.preflight import check_endpoints
from ng_cli.upstream.prober import HealthProber
from ng_cli.upstream.userinfo import basic_authorizations, without_userinfo

__all__ = ["Upstream", "models_probe", "root_health_probe"]

_FIRST_COOLDOWN_S = 0.25
logger = logging.getLogger("ng_cli.upstream")


def root_health_probe(endpoint: Endpoint) -> str:
    """vLLM's liveness route, at the server root (not under /v1)."""
    return f"{endpoint.root_url}/health"


def models_probe(endpoint: Endpoint) -> str:
    """For OpenAI-compatible servers without `/health`: the model list."""
    return f"{endpoint.base_url}/models"


class Upstream:
    """Everything a model server needs to reach its upstream endpoints."""

    def __init__(
        self,
        config: UpstreamConfig,
        http: HttpClient,
        *,
        server: str,
        probe_url: Callable[[Endpoint], str] = root_health_probe,
        require_model: bool = True,
    ) -> None:
        self.config = config
        self.server = server
        self.require_model = require_model
        self.http = http
        interval_s = config.health_probe_interval_s
        base_urls = [without_userinfo(url) for url in config.base_urls]
        self.pool = EndpointPool(
            base_urls,
            root_urls=[root_url_of(url) for url in base_urls],
            cooldown_s=min(_FIRST_COOLDOWN_S, interval_s),
            max_cooldown_s=interval_s,
        )
        self.metrics = UpstreamMetrics(self.pool)
        self.client = UpstreamClient(
            http,
            self.pool,
            self.metrics,
            api_key=config.api_key.get_secret_value(),
            default_headers=config.default_headers,
            timeouts=config.timeouts(),
            retry=config.retry_policy(),
            deadline_s=config.request_deadline_s,
            down_grace_s=config.upstream_down_grace_s,
            on_endpoint_down=self._endpoint_down,
            authorizations=basic_authorizations(config.base_urls),
        )
        self.prober = HealthProber(
            self.pool,
            http,
            probe_url=probe_url,
            headers=self.client.headers_for,
            interval_s=interval_s,
            timeouts=config.probe_timeouts(),
            on_rejoin=self._endpoint_rejoined,
        )
        self.endpoint_file = (
            EndpointFile(
                config.endpoint_file,
                check_interval_s=config.endpoint_check_interval_s,
                stale_grace_s=config.endpoint_stale_grace_s,
                check_url=checked_url,
                on_urls=self.rebind,
                on_stale=self._give_up_endpoints,
            )
            if config.endpoint_file
            else None
        )

    def rebind(self, urls: Sequence[str], *, reason: str | None = None) -> None:
        """Serve these URLs from now on; requests in flight on dropped ones finish there (drain).
        A URL's `user:password@` becomes its endpoint's basic auth (`userinfo`)."""
        self.client.authorizations = basic_authorizations(urls)
        base_urls = [without_userinfo(url) for url in urls]
        before = [endpoint.base_url for endpoint in self.pool.endpoints]
        if list(base_urls) == before:
            return
        added, retired = self.pool.replace(
            base_urls, root_urls=[root_url_of(url) for url in base_urls], reason=reason
        )
        for endpoint in added:
            self.metrics.track(endpoint.base_url)
            if self.prober.before_rejoin is not None:  # it loads the current weights before it serves
                endpoint.is_healthy = False
                endpoint.last_error = "new: not checked yet"
        self.prober.sync()
        if added:
            self.client.notify_rejoined()  # calls waiting for an endpoint can use the new ones
        logger.warning(
            "%s: upstream endpoints changed %s -> %s (%d request(s) still draining on the old ones)",
            self.server,
            before,
            list(base_urls),
            sum(endpoint.in_flight for endpoint in retired),
        )

    async def start(self) -> None:
        """Check every endpoint (ConfigError/LaunchError when unusable), then start probing."""
        if self.endpoint_file is not None:
            self.endpoint_file.check()  # the published URLs, when the file exists, win over base_url
        await check_endpoints(
            self.http,
            self.pool,
            server=self.server,
            model=self.config.model,
            headers=self.client.headers_for,
            timeouts=self.config.probe_timeouts(),
            wait_s=self.config.startup_wait_s,
            require_model=self.require_model,
        )
        self.prober.start()
        if self.endpoint_file is not None:
            self.endpoint_file.start()

    async def stop(self) -> None:
        if self.endpoint_file is not None:
            await self.endpoint_file.stop()
        await self.prober.stop()

    def _give_up_endpoints(self, reason: str) -> None:
        logger.error("%s: %s; requests answer 503 until the file lists endpoints again", self.server, reason)
        self.rebind([], reason=reason)

    def _endpoint_down(self, endpoint: Endpoint) -> None:
        self.prober.kick(endpoint)

    def _endpoint_rejoined(self, _endpoint: Endpoint) -> None:
        self.client.notify_rejoined()
