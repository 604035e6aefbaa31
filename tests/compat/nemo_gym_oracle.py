"""Fill in `nemo_gym` of every case in tests/compat/cases/ by running NeMo Gym's own code on it.

Not a test: the tests read what this wrote, so they run without NeMo Gym. Run it again when a
case is added or NeMo Gym's release moves (README.md beside this file has the commands):

    python tests/compat/nemo_gym_oracle.py --nemo-gym /tmp/nemo_gym_0.7.0

`--nemo-gym` is NeMo Gym's root: its wheel unpacked (`nemo_gym/`, `resources_servers/`,
`responses_api_models/`). What runs is NeMo Gym's code, called as its servers call it:
* math_with_judge: `LibraryJudgeMathResourcesServer.verify` on a `LibraryJudgeMathVerifyRequest`
  (the judge switched off: `should_use_judge: false`), its math-verify check in its forked child;
* structured_outputs: `StructuredOutputsResourcesServer.verify` on a
  `StructuredOutputsVerifyRequest`;
* vllm_model: `VLLMConverter.responses_to_chat_completion_create_params`, then
  `VLLMModel._preprocess_chat_completion_create_params`: the body `create_chat_completion` posts;
* vllm_model_served: `VLLMModel.chat_completions` or `.responses` whole, under a session, vLLM
  stood in by a client that records the body and answers the case's `upstream`: the body and
  what the caller gets (an error NeMo Gym's exception middleware relays: its status and body);
* validate: `gym env validate` (`nemo_gym.cli.env.validate`) from NeMo Gym's root, one process
  per case (NeMo Gym caches its parsed config), told it runs beside its pinned openai.
The servers' methods are called on a plain object holding their config (no web server, no Ray).
Importing NeMo Gym's modules pulls in packages these paths never call (profiling, plotting,
wandb; `devtools` and `psutil` for its CLI module); they are stubbed, and the run fails if a stub
is ever called. vllm_model needs `anthropic` (NeMo Gym's model base imports its types):

    pip install --no-deps --target /tmp/ng-deps anthropic
    cd /tmp && PYTHONPATH=/tmp/ng-deps python <repo>/tests/compat/nemo_gym_oracle.py \
        --nemo-gym /tmp/nemo_gym_0.7.0 vllm_model_chat vllm_model_served validate
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.abc
import importlib.machinery
import importlib.metadata
import json
import os
import subprocess
import sys
import threading
import types
from pathlib import Path
from typing import Any

from case_files import CASES, response_of  # beside this script

UNUSED_IMPORTS = ("yappi", "pydot", "docstring_parser", "pandas", "scipy", "wandb")
"""Imported at module level by NeMo Gym's server base modules, never called on these paths."""


class _Unused(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)

        def refuse(*_args: Any, **_kwargs: Any) -> Any:
            raise RuntimeError(f"the oracle called {self.__name__}.{name}, which it stubs as unused")

        return type(name, (), {"__init__": refuse, "__call__": refuse})


class _UnusedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name: str, _path: Any, _target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name.split(".")[0] in UNUSED_IMPORTS:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _Unused(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, _module: types.ModuleType) -> None:
        return None


def _with(methods: dict[str, Any], attributes: dict[str, Any]) -> Any:
    """A plain object with a server class's own `methods` (descriptors kept) and `attributes`."""
    holder = type("Holder", (), methods)()
    for key, value in attributes.items():
        setattr(holder, key, value)
    return holder


def math_with_judge(case: dict[str, Any]) -> dict[str, Any]:
    from resources_servers.math_with_judge.app import (
        LibraryJudgeMathResourcesServer,
        LibraryJudgeMathResourcesServerConfig,
        LibraryJudgeMathVerifyRequest,
    )

    server_class = LibraryJudgeMathResourcesServer
    config = LibraryJudgeMathResourcesServerConfig.model_construct(should_use_judge=False)

    async def verify() -> Any:
        server = _with(
            {
                name: server_class.__dict__[name]
                for name in (
                    "verify",
                    "_verify_answer",
                    "_verify_answer_with_library_async",
                    "_wait_for_library_verifier_process",
                    "_mute_output",
                    "_strip_math_delimiters",
                )
            },
            {"config": config, "_library_verifier_semaphore": asyncio.Semaphore(1)},
        )
        body = LibraryJudgeMathVerifyRequest.model_validate(
            {
                "responses_create_params": {"input": [{"role": "user", "content": "Solve it."}]},
                "response": response_of(case["output"]),
                "question": "Solve it.",
                "expected_answer": case["expected_answer"],
            }
        )
        return await server.verify(body)

    answer = asyncio.run(verify())
    return {
        "reward": answer.reward,
        "library_reward": answer.library_reward,
        "extracted_answer": answer.extracted_answer,
    }


def structured_outputs(case: dict[str, Any]) -> dict[str, Any]:
    from resources_servers.structured_outputs.app import (
        StructuredOutputsResourcesServer,
        StructuredOutputsResourcesServerConfig,
        StructuredOutputsVerifyRequest,
    )

    names = tuple(
        name
        for name, value in StructuredOutputsResourcesServer.__dict__.items()
        if callable(value) and not name.startswith("__") and name != "setup_webserver"
    )
    server = _with(
        {name: StructuredOutputsResourcesServer.__dict__[name] for name in names},
        {"config": StructuredOutputsResourcesServerConfig.model_construct(xml_coerce_types=True)},
    )
    body = StructuredOutputsVerifyRequest.model_validate(
        {
            "responses_create_params": {"input": [{"role": "user", "content": "Answer."}]},
            "response": response_of(case["output"]),
            **case["row"],
        }
    )
    answer = asyncio.run(server.verify(body))
    return {"reward": answer.reward, "error_type": answer.error_type, "error_message": answer.error_message}


def vllm_model_chat(case: dict[str, Any]) -> dict[str, Any]:
    from nemo_gym.openai_utils import NeMoGymResponseCreateParamsNonStreaming

    from responses_api_models.vllm_model.app import VLLMConverter, VLLMModel, VLLMModelConfig

    config = VLLMModelConfig.model_construct(
        **{
            "base_url": ["http://127.0.0.1:9/v1"],
            "api_key": "stub-key",
            "model": "stub-model",
            "return_token_id_information": False,
            "uses_reasoning_parser": False,
            **case["config"],
        }
    )
    converter = VLLMConverter(
        return_token_id_information=config.return_token_id_information,
        uses_reasoning_parser=config.uses_reasoning_parser,
    )
    model = _with(
        {
            name: VLLMModel.__dict__[name]
            for name in (
                "_strip_hosted_only_tool_fields",
                "_preprocess_chat_completion_create_params",
                "_warn_request_chat_template_kwargs_dropped",
                "_apply_sampling_overrides",
                "_validate_single_choice_token_request",
                "_apply_prefix_supply",
            )
        },
        {
            "config": config,
            "_converter": converter,
            "_external_capture_handler": None,
            "_prefix_supply_counts": [0, 0, 0],  # read by _apply_prefix_supply when it is on
            "_prefix_supply_lock": threading.Lock(),
        },
    )
    params = NeMoGymResponseCreateParamsNonStreaming.model_validate(case["request"])
    chat = converter.responses_to_chat_completion_create_params(params)
    body = model._preprocess_chat_completion_create_params(None, chat.model_dump(exclude_unset=True))
    return {"body": json.loads(json.dumps(body))}


SESSION_ID = "session-of-the-rollout"
"""The session id the served cases run under (NeMo Gym's `request.session[SESSION_ID_KEY]`)."""


def vllm_model_served(case: dict[str, Any]) -> dict[str, Any]:
    """NeMo Gym's `VLLMModel.chat_completions` (route "chat") or `.responses` (route "responses")
    on the case's request, vLLM stood in by a client that records the body and answers
    `case["upstream"]` (a completion, or `{"status", "body"}` for an HTTP error): the body sent,
    and what the caller gets (the answer, or the status and body NeMo Gym's middleware sends)."""
    from aiohttp import ClientResponseError
    from nemo_gym.openai_utils import (
        NeMoGymChatCompletionCreateParamsNonStreaming,
        NeMoGymResponseCreateParamsNonStreaming,
    )

    from responses_api_models.vllm_model import app as vllm_app

    config = vllm_app.VLLMModelConfig.model_construct(
        **{
            "name": "policy_model",
            "base_url": ["http://127.0.0.1:9/v1"],
            "api_key": "stub-key",
            "model": "stub-model",
            "return_token_id_information": False,
            "uses_reasoning_parser": False,
            **case["config"],
        }
    )
    sent: list[dict[str, Any]] = []
    upstream = case.get("upstream") or {
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}]
    }

    class Client:
        async def create_chat_completion(self, **body: Any) -> Any:
            sent.append(json.loads(json.dumps(body)))
            if "status" in upstream:
                error = ClientResponseError(None, (), status=upstream["status"], message="error")  # type: ignore[arg-type]
                error.response_content = json.dumps(upstream["body"]).encode()  # type: ignore[attr-defined]
                raise error
            return {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": "stub-model",
                **upstream,
            }

    methods = {
        name: value
        for name, value in vllm_app.VLLMModel.__dict__.items()
        if callable(value) or isinstance(value, classmethod)
    }
    methods["_resolve_client"] = lambda _self, _request: Client()
    model = _with(
        methods,
        {
            "config": config,
            "_converter": vllm_app.VLLMConverter(
                return_token_id_information=config.return_token_id_information,
                uses_reasoning_parser=config.uses_reasoning_parser,
            ),
            "_external_capture_handler": None,
            "_transport_call_index": 0,
            "_warned_request_chat_template_kwargs_dropped": False,
        },
    )
    request = types.SimpleNamespace(
        session={"session_id": SESSION_ID}, state=types.SimpleNamespace(), headers={}
    )
    try:
        if case["route"] == "chat":
            body = NeMoGymChatCompletionCreateParamsNonStreaming.model_validate(case["request"])
            answer = asyncio.run(model.chat_completions(request, body))
        else:
            body = NeMoGymResponseCreateParamsNonStreaming.model_validate(case["request"])
            answer = asyncio.run(model.responses(request, body))
    except ClientResponseError as error:
        if not getattr(error, vllm_app._PROPAGATE_CONTEXT_ERROR_ATTRIBUTE, False):
            raise  # only a propagated error reaches the caller as it is (its exception middleware)
        return {"body": sent[-1], "status": error.status, "answer": json.loads(error.response_content)}
    return {"body": sent[-1], "status": 200, "answer": json.loads(answer.model_dump_json(exclude_none=True))}


VALIDATE_IMPORTS = ("devtools", "psutil")
"""Imported by NeMo Gym's CLI module (`nemo_gym/cli/env.py`), never called by its `validate`."""


def validate(case: dict[str, Any]) -> dict[str, Any]:
    """NeMo Gym's `gym env validate` (`nemo_gym.cli.env.validate`) on the case's files, from its root:
    whether it passed, whether it warned that the config will not start as-is, its error.

    One process per case (NeMo Gym caches the parsed config in a global and parses its command
    line with Hydra); the environment variables a config reads (`${oc.env:...}`) are unset."""
    env = {key: value for key, value in os.environ.items() if key not in _READ_BY_CASES}
    answer = subprocess.run(
        [sys.executable, __file__, "--nemo-gym", str(_root), "--validate-one", json.dumps(case)],
        cwd=_root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    said = " ".join((answer.stdout + answer.stderr).split())
    if answer.returncode not in (0, 1) or "Traceback" in said:
        raise RuntimeError(f"NeMo Gym's validate crashed on {case['id']}: {answer.stderr[-2000:]}")
    error = said.partition("Error: ")[2] if answer.returncode else ""
    return {
        "valid": answer.returncode == 0,
        "will_not_start_as_is": "will not start as-is" in said,
        "error": error[:300],
    }


_READ_BY_CASES = ("NVIDIA_API_KEY", "NEMO_GYM_REASONING_FIELD")
_root = Path()


def _validate_one(case: dict[str, Any]) -> None:
    """The child of `validate`: NeMo Gym's validate, exit code 0 (valid) or 1 (its ConfigError)."""
    sys.argv = ["gym", f"+config_paths=[{','.join(case['config_paths'])}]", *case["overrides"]]
    import nemo_gym.global_config as global_config
    from nemo_gym.cli import env

    # NeMo Gym refuses to run beside an openai release other than its pin: the environment, not the
    # config under test; it is told it has its pin.
    global_config.openai_version = str(global_config._nemo_gym_openai_requirement()).partition("==")[2]
    try:
        env.validate()
    except SystemExit as exit_:
        raise SystemExit(1 if exit_.code else 0) from None


ORACLES = {
    "math_with_judge": math_with_judge,
    "structured_outputs": structured_outputs,
    "vllm_model_chat": vllm_model_chat,
    "vllm_model_served": vllm_model_served,
    "validate": validate,
}
PINS = {
    "math_with_judge": ("math-verify",),
    "structured_outputs": ("openapi-schema-validator", "xmltodict"),
    "vllm_model_chat": (),
    "vllm_model_served": (),
    "validate": ("omegaconf", "hydra-core"),
}
"""The libraries each rule ran with, recorded beside NeMo Gym's version."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nemo-gym", type=Path, required=True, help="NeMo Gym's root (its wheel, unpacked)")
    parser.add_argument("names", nargs="*", default=sorted(ORACLES), help="case files to fill (default: all)")
    parser.add_argument("--validate-one", help=argparse.SUPPRESS)  # the child of `validate`
    args = parser.parse_args()
    global UNUSED_IMPORTS, _root
    if args.validate_one:
        UNUSED_IMPORTS = (*UNUSED_IMPORTS, *VALIDATE_IMPORTS)
    sys.meta_path.append(_UnusedFinder())
    root = _root = args.nemo_gym.resolve()
    sys.path.insert(0, str(root))
    for folder in ("resources_servers", "responses_api_models", "responses_api_agents"):
        package = types.ModuleType(folder)  # NeMo Gym's folders, not this project's of the same names
        package.__path__ = [str(root / folder)]
        sys.modules[folder] = package
    if args.validate_one:
        _validate_one(json.loads(args.validate_one))
        return
    from nemo_gym import __version__

    for name in args.names:
        path = CASES / f"{name}.json"
        document = json.loads(path.read_text())
        for case in document["cases"]:
            case["nemo_gym"] = ORACLES[name](case)
        oracle = {"nemo_gym": __version__, **{pin: importlib.metadata.version(pin) for pin in PINS[name]}}
        document = {"oracle": oracle, **{key: value for key, value in document.items() if key != "oracle"}}
        path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
        print(f"{path.name}: {len(document['cases'])} cases")


if __name__ == "__main__":
    main()
