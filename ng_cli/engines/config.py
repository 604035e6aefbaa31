"""`LocalVllmModelConfig`: vllm_model's config plus the vLLM engines ng_run starts for it.

It reads NeMo Gym's `local_vllm_model` blocks unchanged (`model`, `vllm_serve_kwargs`,
`vllm_serve_env_vars`, `hf_home`, `debug`, and every vllm_model key), with `base_url` and
`api_key` optional: a `base_url` means "use this server, launch nothing" (NeMo Gym's meaning);
without one, ng_run starts the engines and fills both in (a random key per run when none is
given). The keys after `hf_home` are ours: what people running engines need and NeMo Gym lacks.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator

from ng_cli.upstream.config import VllmModelConfig, WeightUpdateDeadlines

__all__ = ["DataParallelMode", "LocalVllmModelConfig", "WeightTransfer"]

DataParallelMode = Literal["replicas", "internal_lb", "external_lb"]
WeightTransfer = Literal["none", "nccl", "ipc"]


class LocalVllmModelConfig(VllmModelConfig):
    """`responses_api_models/local_vllm_model`: vllm_model over engines that ng_run starts."""

    base_url: str | list[str] | None = None  # type: ignore[assignment]
    """Set: use this vLLM server and start no engine. Unset: ng_run starts them and fills this in."""
    api_key: SecretStr = SecretStr("")
    """The engines' key (`VLLM_API_KEY`, never argv); unset or empty: a random key per run."""
    vllm_serve_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Any `vllm serve` option by its name: `true` -> `--flag`, `false` -> `--no-flag`, a list ->
    `--flag a b`, a mapping -> JSON. Parallelism (`tensor_parallel_size`, `pipeline_parallel_size`,
    `data_parallel_size`, `enable_expert_parallel`) is read here, as NeMo Gym writes it."""
    vllm_serve_env_vars: dict[str, str] = Field(default_factory=dict)
    """Extra environment of every engine process (e.g. `VLLM_ATTENTION_BACKEND`)."""
    hf_home: str | None = None
    """Where a hub-style model cache lives (`HF_HOME`); a `model` that is not a directory is
    looked up there, offline: nothing is ever downloaded."""
    debug: bool = False
    """NeMo Gym's switch for verbose logs: sets `VLLM_LOGGING_LEVEL=DEBUG` on the engines."""
    engine_python: str | None = None
    """The interpreter that has vLLM. Unset: the built engine venv (`NG_VLLM_VENV`, else
    ~/.cache/ng_cli/vllm-cpu-venv) when it exists, else the interpreter running ng_run."""
    engine_host: str = "127.0.0.1"
    """The address engines listen on (`0.0.0.0` to reach them from other machines)."""
    engine_ports: list[int] | None = None
    """One HTTP port per engine endpoint, in plan order; unset: free ports picked at start."""
    engine_ready_timeout_s: float = Field(default=900.0, gt=0)
    """How long an engine may take to answer `/health` and list the model (GPU starts take minutes)."""
    max_restarts: int = Field(default=3, ge=0)
    """Restarts of a crashed engine (with backoff) before ng_run gives up and stops the stack."""
    expert_parallel_size: int | None = Field(default=None, ge=1)
    """Experts sharded over this many ranks. vLLM derives EP = DP x TP inside one data-parallel
    group, so this sets the group's DP size to EP / TP. Unset with `enable_expert_parallel`:
    one group spans every data-parallel rank."""
    data_parallel_mode: DataParallelMode | None = None
    """How data-parallel ranks are served: `replicas` (independent engines, our pool balances
    sessions; dense models only), `internal_lb` (one vLLM DP group per expert group, one endpoint
    each) or `external_lb` (one endpoint per rank of a group, sharing its coordinator).
    Unset: `replicas` for dense models, `internal_lb` with expert parallelism."""
    replicas_per_device: int = Field(default=1, ge=1)
    """Independent replicas that share each TP*PP bundle of GPUs (set each one's
    `gpu_memory_utilization` below 1 / this): more engines than GPUs for a small model."""
    num_gpus: int | None = Field(default=None, ge=0)
    """GPUs to plan for when `CUDA_VISIBLE_DEVICES` is unset (0 or unset there: CPU engines)."""
    gpu_ids: list[int] | None = None
    """The GPUs this instance's engines take, by their machine-wide ids (as nvidia-smi numbers
    them), whatever the starting process sees: `[1]` when the trainer that starts the stack
    (`RunHelper`) holds GPU 0 with `CUDA_VISIBLE_DEVICES=0`. Unset: the GPUs visible here
    (`CUDA_VISIBLE_DEVICES`, else `num_gpus`), taken in order across instances. Not with `ray`."""

    weight_updates: bool = False
    """Engines that take new weights mid-run (`ng_update_weights`, docs/training.md): vLLM's admin
    routes on, behind the engines' key on every route; reached on a network address (a Ray
    node's), they take the engine's own admin key, which only the model server can derive."""
    weight_transfer: WeightTransfer = "none"
    """Also let a trainer push tensors itself (vLLM's `--weight-transfer-config` backend):
    `nccl` or `ipc`. With it, `load_format: dummy` is allowed (disk reloads are then refused)."""
    weight_update_deadlines: WeightUpdateDeadlines = WeightUpdateDeadlines()
    """Per-phase deadlines of an update, per engine."""
    engine_admin_secret: SecretStr = SecretStr("")
    """Set by ng_run (never by hand): what each engine's admin key is derived from (docs/ray.md,
    "Weight updates on a cluster"); empty: the engines' key."""

    @field_validator("engine_ports")
    @classmethod
    def _check_ports(cls, value: list[int] | None) -> list[int] | None:
        if value is None:
            return None
        bad = [port for port in value if not 1 <= port <= 65535]
        if bad:
            raise ValueError(f"engine_ports must be port numbers 1-65535, got {bad}")
        if len(set(value)) != len(value):
            raise ValueError(f"engine_ports lists a port twice: {value}")
        return value

    @field_validator("gpu_ids")
    @classmethod
    def _check_gpu_ids(cls, value: list[int] | None) -> list[int] | None:
        if value is None:
            return None
        if not value or any(gpu < 0 for gpu in value) or len(set(value)) != len(value):
            raise ValueError(f"gpu_ids must list distinct GPU ids >= 0, got {value}")
        return value

    def value_warnings(self) -> list[tuple[str, str]]:
        warnings = super().value_warnings()
        if self.weight_updates and self.return_token_id_information and self.token_exact is False:
            warnings.append(
                (
                    "token_exact",
                    "false with weight_updates and token ids: each turn's prompt_token_ids is vLLM's "
                    "re-rendering of the history, which need not extend the last turn's ids; a trainer "
                    "that concatenates turns (TRL's NeMo Gym script asserts it) then fails or learns "
                    "from tokens the policy never produced: set token_exact: auto (docs/conversion.md)",
                )
            )
        return warnings

    @property
    def launches_engines(self) -> bool:
        """True unless a `base_url` says the server is already running elsewhere."""
        return self.base_url is None
