"""local_vllm_model: vllm_model over vLLM engines that ng_run starts from this instance's config.

ng_run plans and starts the engines (`ng_cli.engines`, `ng_cli.launcher.engines`) before this
server, then hands it every engine's URL and the run's key in its spec: from here on it is
vllm_model (same routes, conversion, token ids, routing, failover and metrics). With a
`base_url` in the config nothing is started and it is exactly vllm_model (NeMo Gym's meaning).
Two differences: the wait for one sample is `NRL_VLLM_ASYNC_TIMEOUT_SECONDS` when set, and a
timeout says so, with the export line that doubles it; and with `weight_updates: true` its engines
take new weights (`/admin/weights/...`, `ng_update_weights`; docs/training.md). See
docs/local_vllm_model.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import ClassVar

from typing_extensions import override

from ng_cli.engines.config import LocalVllmModelConfig
from ng_cli.engines.model_info import resolve_model_dir
from ng_cli.engines.quirks import ASYNC_TIMEOUT_ENV, SampleTimeoutError, sample_timeout_s
from ng_cli.engines.weight_routes import engine_admin_key
from ng_cli.errors import ConfigError, NgError, UpstreamTimeoutError
from ng_cli.model_server.vllm_server import VllmModelServer
from ng_cli.upstream import VllmModelConfig
from ng_cli.upstream.engine_admin import EXPERT_CHECK_BYTES
from ng_cli.upstream.weights import WeightUpdater


class LocalVllmModel(VllmModelServer[LocalVllmModelConfig]):
    """`POST /v1/responses`, `POST /v1/chat/completions`, `GET /metrics` over its own engines."""

    config_class: ClassVar[type[VllmModelConfig]] = LocalVllmModelConfig
    sample_timeout_s: float
    """The longest wait for one sample (an attempt), as a timeout's message states it."""

    def upstream_config(self) -> VllmModelConfig:
        if self.config.base_url is None:
            raise ConfigError(
                f"'{self.name}': no base_url and no engines: local_vllm_model is started by ng_run, "
                "which starts its engines first and passes their URLs"
            )
        self.sample_timeout_s = self.config.read_timeout_s
        if ASYNC_TIMEOUT_ENV not in os.environ:
            return self.config
        try:
            self.sample_timeout_s = sample_timeout_s(os.environ)
        except ValueError as error:
            raise ConfigError(f"'{self.name}': {error}") from None
        seconds = self.sample_timeout_s
        return self.config.model_copy(
            update={"read_timeout_s": seconds, "total_timeout_s": max(seconds, self.config.connect_timeout_s)}
        )

    def weight_updater(self) -> WeightUpdater | None:
        config = self.config
        if not config.weight_updates:
            return None
        dummy = config.vllm_serve_kwargs.get("load_format") == "dummy"
        boot = (
            None
            if dummy
            else str(resolve_model_dir(config.model, hf_home=config.hf_home, where=f"{self.name}."))
        )
        return WeightUpdater(
            pool=self.upstream.pool,
            http=self.http,
            headers=self.upstream.client.headers,
            versions=self.versions,
            deadlines=config.weight_update_deadlines,
            boot_path=boot,
            # external LB over one expert-parallel group: one endpoint per rank, each with its own experts
            engine_headers=self._engine_headers(),
            # expert parallelism: each rank's experts compared with what the files hold for it
            expert_check_bytes=EXPERT_CHECK_BYTES
            if (config.expert_parallel_size or 1) > 1
            or config.vllm_serve_kwargs.get("enable_expert_parallel") is True
            else None,
            ranks_are_shards=config.data_parallel_mode == "external_lb"
            and (
                (config.expert_parallel_size or 1) > 1
                or config.vllm_serve_kwargs.get("enable_expert_parallel") is True
            ),
            disk_reason=(
                "these engines started with load_format: dummy, which vLLM cannot reload from disk; "
                "their weights come from a tensor push (begin / push / commit)"
                if dummy
                else None
            ),
            push_reason=(
                f"'{self.name}' takes no tensor push: its engines have no weight transfer backend "
                "(weight_transfer: none), so vLLM would fail /start_weight_update; set weight_transfer: nccl "
                "or ipc (ng_run starts its engines with it; for engines at a base_url, the backend they "
                "were started with) and restart ng_run, or update from a checkpoint directory (ng_update_weights)"
                if config.weight_transfer == "none"
                else None
            ),
        )

    def _engine_headers(self) -> Callable[[str], Mapping[str, str]] | None:
        """Each engine's admin headers: its own admin key, from ng_run's secret (none: the engines' key)."""
        secret = self.config.engine_admin_secret.get_secret_value()
        if not secret:
            return None
        headers = dict(self.upstream.client.headers)

        def of(root_url: str) -> Mapping[str, str]:
            return {**headers, "Authorization": f"Bearer {engine_admin_key(secret, root_url)}"}

        return of

    @override
    def timeout_error(self, error: UpstreamTimeoutError) -> NgError:
        return SampleTimeoutError(self.sample_timeout_s)
