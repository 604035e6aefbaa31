"""Prometheus metrics of a model server, in a registry of its own (never the process-global one).

Counters and histograms are updated on the hot path through label children resolved once per
endpoint at start, so a request costs a few dict-free increments. Gauges that describe the pool
(in flight, health, sessions, failovers) are read from the `EndpointPool` at scrape time and cost
the hot path nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import FastAPI
from fastapi.responses import Response
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ng_cli.upstream.pool import EndpointPool

__all__ = ["CONTENT_TYPE", "OUTCOMES", "EndpointMetrics", "UpstreamMetrics", "install_metrics_route"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

OUTCOMES = (
    "ok",
    "client_error",
    "context_overflow",
    "server_error",
    "timeout",
    "unavailable",
    "invalid",
    "aborted",
)
"""Outcome label of `ng_model_upstream_requests_total`: one per attempt."""

_LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class EndpointMetrics:
    """The label children of one endpoint, resolved once."""

    __slots__ = ("latency", "outcomes", "retries")

    def __init__(self, metrics: UpstreamMetrics, endpoint: str) -> None:
        self.latency = metrics.latency.labels(endpoint=endpoint)
        self.outcomes = {
            outcome: metrics.attempts.labels(endpoint=endpoint, outcome=outcome) for outcome in OUTCOMES
        }
        self.retries = metrics.retries.labels(endpoint=endpoint)


class UpstreamMetrics:
    """All metrics of one model server instance."""

    def __init__(self, pool: EndpointPool) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.attempts = Counter(
            "ng_model_upstream_requests",
            "Attempts sent to an upstream endpoint, by outcome.",
            ["endpoint", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "ng_model_upstream_request_seconds",
            "Upstream attempt latency (send to last byte), by endpoint.",
            ["endpoint"],
            buckets=_LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.retries = Counter(
            "ng_model_retries",
            "Attempts retried after a failure on this endpoint.",
            ["endpoint"],
            registry=self.registry,
        )
        self.unavailable = Counter(
            "ng_model_unavailable",
            "Calls answered 503: no healthy endpoint within the deadline.",
            registry=self.registry,
        )
        self.context_overflows = Counter(
            "ng_model_context_overflows",
            "Calls whose prompt exceeded the model's context (answered with an empty, incomplete response).",
            registry=self.registry,
        )
        self.aborted = Counter(
            "ng_model_aborted_requests",
            "Requests whose client went away (disconnect, timeout) before the answer; their "
            "upstream generation was aborted, not left running.",
            registry=self.registry,
        )
        self.retried_after_update = Counter(
            "ng_model_calls_retried_after_weight_update",
            "Calls that a weight update in `abort` mode cut short, sent again under the new weights.",
            registry=self.registry,
        )
        self.weight_version = Gauge(
            "ng_model_weight_version", "The weight version the engines serve now.", registry=self.registry
        )
        self.prompt_tokens = Counter(
            "ng_model_prompt_tokens", "Prompt tokens (usage.prompt_tokens).", registry=self.registry
        )
        self.completion_tokens = Counter(
            "ng_model_completion_tokens",
            "Generated tokens (usage.completion_tokens).",
            registry=self.registry,
        )
        self.registry.register(_PoolCollector(pool))
        self.endpoints = {
            endpoint.base_url: EndpointMetrics(self, endpoint.base_url) for endpoint in pool.endpoints
        }

    def track(self, base_url: str) -> None:
        """Per-endpoint series for an endpoint added while running (`endpoint_file`)."""
        if base_url not in self.endpoints:
            self.endpoints[base_url] = EndpointMetrics(self, base_url)

    def record_usage(self, usage: object) -> None:
        """Count tokens from a chat `usage` object (a dict); anything else is ignored."""
        if not isinstance(usage, dict):
            return
        prompt = usage.get("prompt_tokens")
        completion = usage.get("completion_tokens")
        if isinstance(prompt, int) and prompt > 0:
            self.prompt_tokens.inc(prompt)
        if isinstance(completion, int) and completion > 0:
            self.completion_tokens.inc(completion)

    def render(self) -> bytes:
        """The Prometheus text exposition of this registry."""
        return generate_latest(self.registry)


class _PoolCollector(Collector):
    """In-flight, health, failovers and sessions, read from the pool when scraped."""

    def __init__(self, pool: EndpointPool) -> None:
        self._pool = pool

    def collect(self) -> Iterator[Metric]:
        in_flight = GaugeMetricFamily(
            "ng_model_in_flight", "Requests in flight per endpoint.", labels=["endpoint"]
        )
        healthy = GaugeMetricFamily(
            "ng_model_endpoint_healthy",
            "1 if the endpoint is in the pool, 0 while it is down.",
            labels=["endpoint"],
        )
        for endpoint in self._pool.endpoints:
            in_flight.add_metric([endpoint.base_url], endpoint.in_flight)
            healthy.add_metric([endpoint.base_url], 1.0 if endpoint.is_healthy else 0.0)
        yield in_flight
        yield healthy
        failovers = CounterMetricFamily("ng_model_failovers", "Sessions moved off a down endpoint.")
        failovers.add_metric([], self._pool.failovers)
        yield failovers
        sessions = GaugeMetricFamily(
            "ng_model_sessions", "Sessions with a remembered endpoint (affinity table size)."
        )
        sessions.add_metric([], self._pool.session_count)
        yield sessions


def install_metrics_route(app: FastAPI, metrics: UpstreamMetrics) -> None:
    """`GET /metrics`: this server's registry in the Prometheus text format."""

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)
