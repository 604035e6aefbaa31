"""Engine tests: a real CPU vLLM serving the offline tiny Qwen2 model.

Run them with `pytest tests/engine` or `pytest -m engine`. They skip when the vLLM venv is not
built (`bash scripts/build_vllm_cpu_env.sh`), unless NG_REQUIRE_ENGINE is set to a true value,
which turns the skip into a failure: CI sets it so that real-engine tests cannot silently skip.
Every test in this folder is marked `engine` here, so no module has to remember to.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from ng_cli.toolchain.local_vllm import build_tiny_model
from tests.fixtures.engine_env import require_vllm_env
from tests.fixtures.vllm_engine import VllmServer

HERE = Path(__file__).parent
EMBEDDED_MODEL_DIR = HERE.parents[1] / "models" / "tiny-weather"
SERVED_MODEL_NAME = "tiny-qwen2"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests of this folder `engine`; the hook sees the whole session, hence the filter."""
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.engine)


def _tiny_model_dir() -> Path:
    """Cache the model across runs: it is deterministic and the build script skips a complete one."""
    return Path.home() / ".cache" / "ng_cli" / "tiny-model"


@pytest.fixture(scope="session")
def vllm_env() -> None:
    """Skip the test when the CPU vLLM env is not built; fail instead when NG_REQUIRE_ENGINE is set."""
    require_vllm_env()


@pytest.fixture(scope="session")
def vllm_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """Serve the tiny model with the CPU vLLM for the whole session (start-up takes ~15-25 s)."""
    model_dir = build_tiny_model(_tiny_model_dir())
    with VllmServer.start(
        model_dir,
        api_key=secrets.token_urlsafe(16),
        served_model_name=SERVED_MODEL_NAME,
        log_dir=tmp_path_factory.mktemp("vllm"),
    ) as server:
        yield server


@pytest.fixture(scope="session")
def weather_engine(vllm_env: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:  # noqa: ARG001 (vllm_env: the env is built first)
    """Serve the embedded model (models/tiny-weather) for the whole session: one start shared by
    the tests that drive it directly (seeded e2e collection, token_exact on the embedded model)."""
    with VllmServer.start(
        EMBEDDED_MODEL_DIR,
        api_key=secrets.token_urlsafe(16),
        served_model_name="tiny-weather",
        log_dir=tmp_path_factory.mktemp("vllm-weather"),
    ) as server:
        yield server


@pytest.fixture
async def sdk() -> AsyncIterator[Any]:
    """An `openai.AsyncOpenAI` factory (`sdk(url)`); every client made is closed after the test."""
    made: list[openai.AsyncOpenAI] = []

    def make(url: str) -> openai.AsyncOpenAI:
        made.append(openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=180))
        return made[-1]

    yield make
    for client in made:
        await client.close()
