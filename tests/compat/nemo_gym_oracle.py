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
  `VLLMModel._preprocess_chat_completion_create_params`: the body `create_chat_completion` posts.
The servers' methods are called on a plain object holding their config (no web server, no Ray).
Importing NeMo Gym's modules pulls in packages these paths never call (profiling, plotting,
wandb); they are stubbed, and the run fails if a stub is ever called.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.abc
import importlib.machinery
import importlib.metadata
import json
import sys
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
        {"config": config, "_converter": converter, "_external_capture_handler": None},
    )
    params = NeMoGymResponseCreateParamsNonStreaming.model_validate(case["request"])
    chat = converter.responses_to_chat_completion_create_params(params)
    body = model._preprocess_chat_completion_create_params(None, chat.model_dump(exclude_unset=True))
    return {"body": json.loads(json.dumps(body))}


ORACLES = {
    "math_with_judge": math_with_judge,
    "structured_outputs": structured_outputs,
    "vllm_model_chat": vllm_model_chat,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nemo-gym", type=Path, required=True, help="NeMo Gym's root (its wheel, unpacked)")
    parser.add_argument("names", nargs="*", default=sorted(ORACLES), help="case files to fill (default: all)")
    args = parser.parse_args()
    sys.meta_path.append(_UnusedFinder())
    root = args.nemo_gym.resolve()
    sys.path.insert(0, str(root))
    for folder in ("resources_servers", "responses_api_models", "responses_api_agents"):
        package = types.ModuleType(folder)  # NeMo Gym's folders, not this project's of the same names
        package.__path__ = [str(root / folder)]
        sys.modules[folder] = package
    from nemo_gym import __version__

    oracle = {
        "nemo_gym": __version__,
        **{
            name: importlib.metadata.version(name)
            for name in ("math-verify", "openapi-schema-validator", "xmltodict")
        },
    }
    for name in args.names:
        path = CASES / f"{name}.json"
        document = json.loads(path.read_text())
        for case in document["cases"]:
            case["nemo_gym"] = ORACLES[name](case)
        document = {"oracle": oracle, **{key: value for key, value in document.items() if key != "oracle"}}
        path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
        print(f"{path.name}: {len(document['cases'])} cases")


if __name__ == "__main__":
    main()
