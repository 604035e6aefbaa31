"""Model servers' upstreams: config, endpoint pool (health, affinity, failover), client, metrics, weights.

Upstream(config, http, server=name)     pool + client + prober + metrics; start()/stop()
UpstreamClient.post(path, payload, session_id=...)
WeightUpdater                            one weight update fanned out to every engine

The routes that use them (vllm_model's `/v1/responses`, openai_model's relay) are in
`ng_cli.model_server`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ng_cli.lazy import lazy_exports

if TYPE_CHECKING:
    from ng_cli.upstream.client import UpstreamClient
    from ng_cli.upstream.config import OpenAIModelConfig, UpstreamConfig, VllmModelConfig, root_url_of
    from ng_cli.upstream.metrics import UpstreamMetrics, install_metrics_route
    from ng_cli.upstream.pool import Endpoint, EndpointPool
    from ng_cli.upstream.runtime import Upstream, models_probe, root_health_probe

# Lazy: ng_run reads the config classes (`upstream.config`) and needs neither the client nor the
# metrics route, which bring aiohttp, FastAPI and prometheus_client (~0.3 s of its start-up).
_HOMES = {
    "UpstreamClient": "client",
    "OpenAIModelConfig": "config",
    "UpstreamConfig": "config",
    "VllmModelConfig": "config",
    "root_url_of": "config",
    "UpstreamMetrics": "metrics",
    "install_metrics_route": "metrics",
    "Endpoint": "pool",
    "EndpointPool": "pool",
    "Upstream": "runtime",
    "models_probe": "runtime",
    "root_health_probe": "runtime",
}

__all__ = [
    "Endpoint",
    "EndpointPool",
    "OpenAIModelConfig",
    "Upstream",
    "UpstreamClient",
    "UpstreamConfig",
    "UpstreamMetrics",
    "VllmModelConfig",
    "install_metrics_route",
    "models_probe",
    "root_health_probe",
    "root_url_of",
]

__getattr__ = lazy_exports(__name__, _HOMES)
