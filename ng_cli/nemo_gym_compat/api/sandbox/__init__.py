"""`nemo_gym.sandbox`: NeMo Gym's provider-neutral sandbox, over `ng_cli.sandbox`.

One provider is offered: `local`, served by our `PythonSandbox` (new namespaces, no network, a
fresh tmpfs root, no descriptor of the server, cgroup limits), not NeMo Gym's host subprocess.
It runs Python programs: `python3 <file>`, `python3 -c <code>`, where `<file>` is one the spec's
`files` or `upload` put in the sandbox. Each `exec` is a fresh program; the sandbox's files are
written again before it (under `/tmp` or `/sandbox`, the only writable places), its `env` and
`workdir` applied. A spec's `image` is not used (NeMo Gym's local provider ignores it too).

Every other NeMo Gym provider is refused by name (`UnavailableProviderError`): the container
ones need a container runtime and images, the remote ones a sandbox service, an account and the
network. `unavailable_provider(block)` says so without starting anything, so a server block
naming one is refused before the server starts (`adapter`).

NeMo Gym's provider capabilities are its protocols here (`SupportsSandboxEndpoint`,
`ConnectableProvider`), so an agent that asks `isinstance(provider, ...)` gets an honest no: the
local sandbox has no network, so no service inside it can be reached (`SandboxEndpoint`, NeMo
Gym's route to one, is offered for its type and checks), and its sandboxes live in one process.
"""

from __future__ import annotations

import asyncio
import base64
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from ng_cli.nemo_gym_compat.api.sandbox.config import resolve_provider_config, resolve_provider_metadata
from ng_cli.nemo_gym_compat.api.sandbox.utils import rewrite_image
from ng_cli.sandbox import PythonSandbox, SandboxConfig

__all__ = [
    "AsyncSandbox",
    "AsyncSandboxCompose",
    "ConnectableProvider",
    "ExecResult",
    "SandboxCreateError",
    "SandboxEndpoint",
    "SandboxExecResult",
    "SandboxResources",
    "SandboxSpec",
    "SupportsSandboxEndpoint",
    "UnavailableProviderError",
    "create_provider",
    "list_providers",
    "resolve_provider_config",
    "resolve_provider_metadata",
    "rewrite_image",
    "unavailable_provider",
]

_CONTAINER = "a container runtime and its images"
_REMOTE = "a remote sandbox service: an account, its API key and the network"
UNAVAILABLE = {
    "docker": _CONTAINER, "apptainer": _CONTAINER, "enroot": _CONTAINER,
    "e2b": _REMOTE, "daytona": _REMOTE, "opensandbox": _REMOTE, "openshell": _REMOTE,
    "ecs_fargate": _REMOTE, "remote": _REMOTE,
}  # fmt: skip
"""NeMo Gym's providers we cannot have, and what each needs."""
_WRITABLE = ("/tmp/", "/sandbox/")
_LOCAL_KEYS = {"workspace_root", "shell", "default_timeout_s", "concurrency"}


class SandboxCreateError(RuntimeError):
    """The sandbox could not be created (NeMo Gym's name)."""


class UnavailableProviderError(SandboxCreateError, ValueError):
    """A provider this machine cannot have; the message names it and what it needs."""


@dataclass(frozen=True)
class SandboxResources:
    cpu: float | None = None
    memory_mib: int | None = None
    disk_gib: int | None = None
    gpu: int | None = None
    gpu_type: str | None = None

    @classmethod
    def from_mapping(cls, resources: Mapping[str, Any] | None) -> SandboxResources:
        unknown = set(resources or {}) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"Unknown sandbox resource keys: {', '.join(sorted(unknown))}")
        return cls(**dict(resources or {}))


@dataclass(frozen=True)
class SandboxSpec:
    image: str | None = None
    ttl_s: float | None = None
    ready_timeout_s: float | None = None
    workdir: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)
    resources: SandboxResources | Mapping[str, Any] = field(default_factory=SandboxResources)
    entrypoint: list[str] | None = None
    provider_options: dict[str, Any] = field(default_factory=dict)
    ports: tuple[int, ...] | list[int] = field(default_factory=tuple)


@dataclass(frozen=True)
class SandboxExecResult:
    stdout: str | None
    stderr: str | None
    return_code: int
    error_type: str | None = None
    """Why the program was ended, when we ended it (`timeout`, `memory_limit`, ...)."""


ExecResult = SandboxExecResult


@dataclass(frozen=True)
class SandboxEndpoint:
    """NeMo Gym's route to a service inside a sandbox: an absolute URL and the headers it needs."""

    endpoint: str
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        endpoint = self.endpoint.strip() if isinstance(self.endpoint, str) else ""
        parsed = urlsplit(endpoint)
        if not parsed.scheme or not parsed.netloc:
            raise ValueError("Sandbox endpoint must be a non-empty absolute URL")
        if not isinstance(self.headers, Mapping):
            raise TypeError("Sandbox endpoint headers must be a mapping")
        object.__setattr__(self, "endpoint", endpoint)
        object.__setattr__(self, "headers", {str(k): str(v) for k, v in self.headers.items()})


@runtime_checkable
class SupportsSandboxEndpoint(Protocol):
    """A provider that can route to a declared service port (the local one cannot: no network)."""

    async def endpoint(self, handle: Any, port: int) -> SandboxEndpoint: ...


@runtime_checkable
class ConnectableProvider(Protocol):
    """A provider whose sandboxes another process can reattach to (the local one's cannot)."""

    async def serialize_handle(self, handle: Any, *, scope: str | None = None) -> dict[str, Any]: ...

    async def connect(self, descriptor: Mapping[str, Any]) -> Any: ...


def list_providers() -> list[str]:
    return ["local"]


def unavailable_provider(block: Any) -> str | None:
    """Why a server block's `sandbox_provider` cannot run here (None: it can, or it names none)."""
    if not isinstance(block, Mapping):
        return None
    name = next((key for key in block if key != "default_metadata"), None)
    if name is None or name == "local":
        return None
    needs = UNAVAILABLE.get(str(name), "a provider NeMo Gym registers outside its own tree")
    return (
        f"NeMo Gym's sandbox provider {name!r} is not available here: it needs {needs}; "
        "set sandbox_provider to {local: {}} to run the code in ng_cli's own sandbox"
    )


class _LocalProvider:
    """NeMo Gym's `local` provider, as our isolated `PythonSandbox`."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        unknown = set(options) - _LOCAL_KEYS - set(SandboxConfig.model_fields)
        if unknown:
            raise ValueError(f"unknown keys for the local sandbox provider: {', '.join(sorted(unknown))}")
        limits = {key: value for key, value in options.items() if key in SandboxConfig.model_fields}
        if "concurrency" in options:
            limits.setdefault("max_concurrency", int(options["concurrency"]))
        if "default_timeout_s" in options:
            limits.setdefault("wall_time_s", float(options["default_timeout_s"]))
        self.config = SandboxConfig.model_validate(limits)
        self.sandbox = PythonSandbox(self.config)


_PROVIDERS: dict[str, _LocalProvider] = {}
"""One `PythonSandbox` per set of options in a server process, however many sandboxes its
sessions start: its uid slots are what keep concurrent runs apart (two would hand out the same
uids), and its `max_concurrency` bounds the process's runs as a whole."""


def create_provider(config: Mapping[str, Any]) -> _LocalProvider:
    """The provider a `{name: {...}}` mapping names; only `local` exists here."""
    ((name, options),) = resolve_provider_config(config).items()
    problem = unavailable_provider({name: options})
    if problem is not None:
        raise UnavailableProviderError(problem)
    key = repr(sorted(dict(options or {}).items()))
    found = _PROVIDERS.get(key)
    if found is None:
        found = _PROVIDERS[key] = _LocalProvider(dict(options or {}))
    return found


class AsyncSandbox:
    """NeMo Gym's `AsyncSandbox`: `start`, `exec`, `upload`, `stop`, over one `_LocalProvider`."""

    def __init__(
        self,
        provider: Mapping[str, Any] | _LocalProvider,
        spec: SandboxSpec | None = None,
        *,
        owns_provider: bool = True,
    ) -> None:
        self._provider = provider if isinstance(provider, _LocalProvider) else create_provider(provider)
        self._spec = spec or SandboxSpec()
        self._files: dict[str, bytes] = {}
        self._started = False

    async def start(self, spec: SandboxSpec | None = None) -> AsyncSandbox:
        self._spec = spec or self._spec
        for path, content in self._spec.files.items():
            self._put(path, content.encode())
        self._started = True
        return self

    async def __aenter__(self) -> AsyncSandbox:
        return await self.start()

    async def __aexit__(self, *_exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        self._files.clear()
        self._started = False

    async def endpoint(self, port: int) -> SandboxEndpoint:
        """NeMo Gym's checks, then its refusal for a provider without service endpoints."""
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise ValueError(f"Sandbox endpoint port must be an integer between 1 and 65535, got {port!r}")
        if port not in self._spec.ports:
            raise ValueError(
                f"Sandbox port {port} was not declared in SandboxSpec.ports; "
                f"declared ports: {list(self._spec.ports)!r}"
            )
        raise NotImplementedError(
            "Sandbox provider 'local' does not support service endpoints "
            "(ng_cli's local sandbox has no network: nothing inside it can be reached)"
        )

    async def upload(self, local_path: Path | str, remote_path: str) -> None:
        self._put(remote_path, await asyncio.to_thread(Path(local_path).read_bytes))

    async def write_file(self, remote_path: str, content: str | bytes) -> None:
        self._put(remote_path, content.encode() if isinstance(content, str) else content)

    def _put(self, path: str, content: bytes) -> None:
        if not path.startswith(_WRITABLE):
            raise ValueError(f"sandbox file {path!r}: only paths under /tmp/ and /sandbox/ exist here")
        self._files[path] = content

    async def exec(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_s: float | None = 180,
        user: str | None = None,
        **_options: Any,
    ) -> SandboxExecResult:
        """Run one Python program; the program's own faults are a result, never an exception."""
        if not self._started:
            raise RuntimeError("Sandbox has not been started")
        program = self._program(command, cwd or self._spec.workdir, {**self._spec.env, **(env or {})})
        result = await self._provider.sandbox.run(program)
        code = result.exit_code if result.exit_code is not None else 128 + (result.signal or 9)
        error = None if result.outcome in ("ok", "runtime_error") else result.outcome
        return SandboxExecResult(
            stdout=result.stdout, stderr=result.stderr, return_code=code, error_type=error
        )

    def _program(self, command: str, cwd: str | None, env: dict[str, str]) -> str:
        """The sandboxed program: our preamble (files, env, cwd, argv), then the command's code."""
        argv = shlex.split(command)
        if len(argv) < 2 or Path(argv[0]).name not in ("python", "python3"):
            raise ValueError(
                f"sandbox command {command!r}: ng_cli's local sandbox runs Python programs only "
                "('python3 <file> [args]' or 'python3 -c <code>')"
            )
        if argv[1] == "-c":
            source, filename, args = argv[2] if len(argv) > 2 else "", "<string>", ["-c", *argv[3:]]
        elif argv[1] in {path for path in self._files}:
            source, filename, args = self._files[argv[1]].decode(), argv[1], argv[1:]
        else:
            raise ValueError(f"sandbox command {command!r}: no file {argv[1]!r} was put in the sandbox")
        files = {path: base64.b64encode(content).decode() for path, content in self._files.items()}
        return _PREAMBLE.format(
            files=repr(files), env=repr(env), cwd=repr(cwd),
            argv=repr(args), source=repr(source), filename=repr(filename),
        )  # fmt: skip


_PREAMBLE = """\
import base64 as _b, os as _os, sys as _sys
for _path, _data in {files}.items():
    _os.makedirs(_os.path.dirname(_path), exist_ok=True)
    with open(_path, "wb") as _f:
        _f.write(_b.b64decode(_data))
_os.environ.update({env})
if {cwd} and _os.path.isdir({cwd}):
    _os.chdir({cwd})
_sys.argv = {argv}
_code = compile({source}, {filename}, "exec")
exec(_code, {{"__name__": "__main__", "__file__": {filename}, "__builtins__": __builtins__}})
"""


class AsyncSandboxCompose:
    """NeMo Gym's Docker Compose adapter: a Compose project's services, each a sandbox of its
    image. No provider here runs images, so it is refused when built (the provider by name)."""

    def __init__(
        self, provider: Mapping[str, Any] | _LocalProvider, compose_file: Any, **_options: Any
    ) -> None:
        if isinstance(provider, Mapping):
            create_provider(provider)  # an unavailable provider is refused by name
        raise UnavailableProviderError(
            f"NeMo Gym's Docker Compose sandbox ({compose_file}) runs each service in its image: it needs "
            "a container runtime and the services' images; ng_cli's local sandbox runs Python programs only"
        )
