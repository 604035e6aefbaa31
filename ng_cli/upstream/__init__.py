"""Model servers' upstreams: config, endpoint pool (health, affinity, failover), client, metrics, weights.

Upstream(config, http, server=name)     pool + client + prober + metrics; start()/stop()
UpstreamClient.post(path, payload, session_id=...)
WeightUpdater                            one weight update fanned out to every engine

The routes that use them (vllm_model's `/v1/responses`, openai_model's relay) are in
`ng_cli.model_server`.
"""

from __future__ import annotations

from ng_cli.upstream.client import UpstreamClient
from ng_cli.upstream.config import OpenAIModelConfig, UpstreamConfig, VllmModelConfig, root_url_of
from ng_cli.upstream.metrics import UpstreamMetrics, install_metrics_route
from ng_cli.upstream.pool import Endpoint, EndpointPool
from ng_cli.upstream.runtime import Upstream, models_probe, root_health_probe

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
