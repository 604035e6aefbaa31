"""`nemo_gym.sandbox.utils`: NeMo Gym's CPU-cap environment and image rewrites, as its own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["CPU_CAP_ENV_VARS", "cpu_cap_env", "rewrite_image"]

CPU_CAP_ENV_VARS: tuple[str, ...] = (
    "OMP_NUM_THREADS",
    "OMP_THREAD_LIMIT",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "BLIS_NUM_THREADS",
    "PYTHON_CPU_COUNT",
    "NUMBA_NUM_THREADS",
    "LOKY_MAX_CPU_COUNT",
    "POLARS_MAX_THREADS",
    "PYTEST_XDIST_AUTO_NUM_WORKERS",
    "DJANGO_TEST_PROCESSES",
    "GOMAXPROCS",
    "CARGO_BUILD_JOBS",
    "RAYON_NUM_THREADS",
    "RUST_TEST_THREADS",
    "UV_THREADPOOL_SIZE",
    "CMAKE_BUILD_PARALLEL_LEVEL",
)
"""The thread-count variables NeMo Gym sets from a sandbox's CPU limit."""


def cpu_cap_env(cpu: float | None) -> dict[str, str]:
    """Each of CPU_CAP_ENV_VARS set to the whole cores of `cpu` (at least 1); empty when unset."""
    if cpu is None:
        return {}
    cores = str(max(1, int(cpu)))
    return {name: cores for name in CPU_CAP_ENV_VARS}


def rewrite_image(image: str | None, rewrites: Sequence[Mapping[str, str]]) -> str | None:
    """The first rewrite whose `from` prefixes `image` replaces that prefix by its `to`."""
    if image is None:
        return None
    for rewrite in rewrites:
        if image.startswith(rewrite["from"]):
            return rewrite["to"] + image[len(rewrite["from"]) :]
    return image
