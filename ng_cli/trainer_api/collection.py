"""NeMo Gym's `RolloutCollectionHelper`: rollouts for a trainer, one awaitable per row.

    run_examples(examples, head_server_config=...)   an iterator of awaitables, in the order
        rows finish, each giving `(row, result)`: the row as given (the same dict) and the
        agent's `/run` answer unchanged (NeMo Gym's result: `response` with the token ids on
        its output items, `reward` from the environment's `/verify`, the row's other keys)
    run_from_config(config)                           ng_collect_rollouts' collector on a config
        (the same options), the scored rows read back in (task, rollout) order

Before anything is sent, every row must name an agent of the stack (`agent_ref.name`): a row
without one, or an agent the head server does not list, is an `ExamplesError` naming the rows and
the stack's agents (NeMo Gym 0.7.0 refuses unknown agents up front too; a missing `agent_ref`
was a KeyError there). Each row's `/run` is the collector's call (`rollouts.agent_call`): under
`rollout_timeout_s`, retried with backoff while the failure is retryable (a connection lost, a
5xx) up to `max_attempts`; a final failure is raised from the row's awaitable as the typed error
(`UpstreamHTTPError` keeps `status` and `body`), with a note naming the row and the agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson
from pydantic import BaseModel

from ng_cli.config.http_client_options import read_http_client_options
from ng_cli.config.schema import validate_block
from ng_cli.config.sources import Sources
from ng_cli.errors import ConfigError, DataError, InvalidOutputError
from ng_cli.head import fetch_config, fetch_servers
from ng_cli.nemo_gym_compat.api.global_config import (
    AGENT_REF_KEY_NAME,
    HEAD_SERVER_KEY_NAME,
    maybe_get_global_config_dict,
)
from ng_cli.rollouts.agent_call import http_timeouts, post_run
from ng_cli.rollouts.collect import collect_rollouts
from ng_cli.rollouts.config import NOT_OFFERED, CollectConfig
from ng_cli.rollouts.failures import classify
from ng_cli.rollouts.inputs import AGENT_SERVER_TYPE
from ng_cli.rollouts.progress import NullView
from ng_cli.rollouts.results import ROLLOUT_KEY, TASK_KEY
from ng_cli.servers.http import HttpClient, RetryPolicy

__all__ = ["ExamplesError", "RolloutCollectionHelper", "head_url_of"]

Row = dict[str, Any]
_SHOWN = 10
_NOT_OFFERED_HERE = (
    "route_failures_to_sidecar",
    "environment_server_name",
    "max_resident_tasks",
    "dispatch_budget_s",
    "drain_margin_s",
    "latency_tracker",
)
"""`run_examples` options of NeMo Gym 0.7.0 not offered here (each refused when set)."""


class ExamplesError(DataError, ValueError):
    """`run_examples` was given rows it cannot send (a ValueError, as NeMo Gym raises)."""


def head_url_of(head_server_config: BaseModel | Mapping[str, Any] | None) -> str:
    """`http://host:port` of the head server: the given config, else the one RunHelper started here."""
    if head_server_config is None:
        tree = maybe_get_global_config_dict()
        block = tree.get(HEAD_SERVER_KEY_NAME) if tree is not None else None
        if block is None:
            raise ConfigError(
                "run_examples: no head server: none was given and no RunHelper started one in this process",
                hint="pass head_server_config=BaseServerConfig(host=..., port=...) (the head_server of the stack)",
            )
        head_server_config = dict(block)
    values = (
        head_server_config.model_dump() if isinstance(head_server_config, BaseModel) else head_server_config
    )
    host = str(values.get("host") or "127.0.0.1")
    host = "127.0.0.1" if host in ("0.0.0.0", "::") else host  # where it listens is not where to connect
    return f"http://{host}:{values.get('port')}"


class RolloutCollectionHelper:
    """NeMo Gym's `nemo_gym.rollout_collection.RolloutCollectionHelper` over ng_cli's collector."""

    def __init__(
        self,
        *,
        rollout_timeout_s: float = 900.0,
        max_attempts: int = 3,
        retry_backoff_s: float = 1.0,
        retry_max_backoff_s: float = 30.0,
    ) -> None:
        self.rollout_timeout_s = rollout_timeout_s
        """Deadline of one attempt of one rollout (the agent's whole `/run`)."""
        self.retry = RetryPolicy(max_attempts, retry_backoff_s, retry_max_backoff_s)

    def run_examples(
        self,
        examples: Sequence[Row],
        head_server_config: BaseModel | Mapping[str, Any] | None = None,
        semaphore: asyncio.Semaphore | None = None,
        **options: Any,
    ) -> Iterator[asyncio.Future[tuple[Row, Row]]]:
        """One awaitable per row, yielded as rows finish; each gives `(row, the agent's /run answer)`.

        Rows are checked and the stack's agents looked up now; they start when the iterator is
        first advanced (inside the caller's event loop), in the order given."""
        asked = sorted(key for key, value in options.items() if value not in (None, False))
        unknown = sorted(set(options) - set(_NOT_OFFERED_HERE))
        if unknown or asked:
            raise ConfigError(
                f"run_examples: {', '.join(unknown or asked)}: not offered here",
                hint="every row is sent as given; a failure is raised from its awaitable",
            )
        rows = list(examples)
        head_url = head_url_of(head_server_config)
        urls = self._agent_urls(rows, head_url)
        limits = read_http_client_options(fetch_config(head_url, timeout_s=10.0), Sources())
        http = HttpClient(
            timeouts=http_timeouts(self.rollout_timeout_s),
            max_connections=limits.global_aiohttp_connector_limit or len(rows) + 16,
            max_connections_per_host=limits.global_aiohttp_connector_limit_per_host or 0,
        )
        return self._dispatch(rows, urls, http, semaphore)

    async def run_from_config(self, config: BaseModel | Mapping[str, Any]) -> list[Row]:
        """`ng_collect_rollouts` with these options (`CollectConfig`'s, NeMo Gym's names); the
        scored rows of the output, in (task, rollout) order (failures are in `_failures.jsonl`); none
        with `retain_results_in_memory: false`, as NeMo Gym."""
        values = config.model_dump(exclude_unset=True) if isinstance(config, BaseModel) else dict(config)
        refused = [key for key in values if key in NOT_OFFERED]
        if refused:
            reasons = "; ".join(f"{key} {NOT_OFFERED[key].why}" for key in refused)
            raise ConfigError(f"run_from_config: not offered here: {reasons}")
        if "head_server_url" not in values and "agent_urls" not in values:
            values["head_server_url"] = head_url_of(None)
        settings = validate_block(CollectConfig, values, instance="run_from_config")
        await collect_rollouts(settings, view=NullView())
        if not settings.retain_results_in_memory:  # NeMo Gym's: the rows are in the file only
            return []
        text = settings.output_jsonl_fpath.read_bytes()
        rows = [orjson.loads(line) for line in text.split(b"\n") if line.strip()]
        return sorted(rows, key=lambda row: (row[TASK_KEY], row[ROLLOUT_KEY]))

    def _agent_urls(self, rows: list[Row], head_url: str) -> dict[str, str]:
        """Agent name -> URL for every row's agent; ExamplesError for a row that names none or an
        agent the stack does not have."""
        listed = fetch_servers(head_url, timeout_s=10.0)
        agents = {
            str(entry["name"]): str(entry["url"]).rstrip("/")
            for entry in listed
            if entry.get("server_type") == AGENT_SERVER_TYPE or entry.get("relays_to")
        }
        names = [_agent_name(row) for row in rows]
        missing = [index for index, name in enumerate(names) if name is None]
        known = ", ".join(sorted(agents)) or "none"
        if missing:
            raise ExamplesError(
                f"run_examples: row(s) {_indices(missing)} have no {AGENT_REF_KEY_NAME}: each row names "
                f"the agent that runs it",
                hint=f'add "{AGENT_REF_KEY_NAME}": {{"name": <agent>}} to every row; the agents of the '
                f"stack at {head_url}: {known}",
            )
        unknown = sorted({name for name in names if name is not None and name not in agents})
        if unknown:
            close = [difflib.get_close_matches(name, list(agents), n=1) for name in unknown]
            said = ", ".join(
                f"'{name}'" + (f" (did you mean '{match[0]}'?)" if match else "")
                for name, match in zip(unknown, close, strict=True)
            )
            raise ExamplesError(
                f"run_examples: rows name agents the stack at {head_url} does not have: {said}",
                hint=f"its agents: {known}",
            )
        return agents

    def _dispatch(
        self,
        rows: list[Row],
        urls: dict[str, str],
        http: HttpClient,
        semaphore: asyncio.Semaphore | None,
    ) -> Iterator[asyncio.Future[tuple[Row, Row]]]:
        left = len(rows)

        async def one(index: int, row: Row) -> tuple[Row, Row]:
            nonlocal left
            try:
                async with semaphore if semaphore is not None else contextlib.nullcontext():
                    return row, await self._run_row(http, urls, index, row)
            finally:
                left -= 1
                if left == 0:  # the last row to finish closes the connections
                    await http.close()

        tasks = [asyncio.ensure_future(one(index, row)) for index, row in enumerate(rows)]
        yield from asyncio.as_completed(tasks)

    async def _run_row(self, http: HttpClient, urls: dict[str, str], index: int, row: Row) -> Row:
        agent = _agent_name(row)
        assert agent is not None
        url = f"{urls[agent]}/run"
        for attempt in range(1, self.retry.max_attempts + 1):
            try:
                answer = await post_run(http, url, row, timeout_s=self.rollout_timeout_s)
                if not isinstance(answer, dict):
                    raise InvalidOutputError(f"{url} answered {type(answer).__name__}, not a JSON object")
                return answer
            except Exception as error:  # typed at the source; cancellation is not caught
                failure = classify(error, attempt=attempt, task_index=index, rollout_index=0)
                if failure.is_retryable and attempt < self.retry.max_attempts:
                    await asyncio.sleep(self.retry.delay_s(attempt))
                    continue
                error.add_note(
                    f"run_examples: row {index} (agent '{agent}') failed on attempt {attempt} of "
                    f"{self.retry.max_attempts}: {failure.kind.value}"
                )
                raise
        raise AssertionError("unreachable")


def _agent_name(row: Row) -> str | None:
    ref = row.get(AGENT_REF_KEY_NAME) if isinstance(row, dict) else None
    name = ref.get("name") if isinstance(ref, dict) else None
    return name if isinstance(name, str) and name else None


def _indices(indices: list[int]) -> str:
    shown = ", ".join(str(index) for index in indices[:_SHOWN])
    return shown + (f" and {len(indices) - _SHOWN} more" if len(indices) > _SHOWN else "")
