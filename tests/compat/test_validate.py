"""`ng_validate` agrees with NeMo Gym 0.7.0's `gym env validate` on its own config files, except
where a refusal here is documented as right (docs/validate.md, "Where it differs from NeMo Gym").

`cases/validate.json` holds NeMo Gym's verdicts, made by its own `nemo_gym.cli.env.validate` from
its root (`nemo_gym_oracle.py validate`); the files are unchanged copies under
tests/fixtures/nemo_gym_validate/ (origin and licence in its README). Ours runs from that folder
as NeMo Gym's ran from its root, with no env.yaml and the variables the files read unset.

Held here: a placeholder (`http://<host_url>:<port>/v1`), a base_url without /v1, a null
`${oc.env:KEY,null}` key, a Hub model name and a model server defined in another file pass with
"will not start as-is" (they were refused: "the port must be a number", "must end with /v1",
`got '***'`, "not a local model directory", "no responses_api_models instance named
'policy_model'"), and so does an override fragment loaded alone (it was refused: "missing required
key 'entrypoint'"; its keys are now checked and what the file it overrides gives waits); prefix
supply starts unchanged; the refusals that stay say why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ng_cli.commands.validate import app
from tests.compat.case_files import load_cases

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "nemo_gym_validate"
CASES = load_cases("validate")
REFUSED_HERE = {
    "completions-api": "NeMo Gym's 'use_completions_api' set to True is not supported here",
    "responses-native": "NeMo Gym's 'is_responses_native' set to True is not supported here",
    "placeholder-strict": "is still a placeholder ('http://<host_url>:<port>/v1')",
}
"""Cases NeMo Gym passes and we refuse on purpose, with the refusal's text (docs/validate.md says
why each is right: features this project does not have are refused by name, not ignored;
+strict=true makes "will not start as-is" an error)."""
WARNED = {
    "placeholder-url-and-key": (
        "safety_judge_model.responses_api_models.vllm_model.base_url is still a placeholder "
        "('http://<host_url>:<port>/v1')",
        "safety_judge_model.responses_api_models.vllm_model.api_key is still a placeholder ('<api_key>')",
    ),
    "base-url-without-v1": (
        "'http://127.0.0.1:8000' does not end with /v1: calls go to http://127.0.0.1:8000/chat/completions",
    ),
    "api-key-null-from-unset-env": (
        "judge_model.responses_api_models.openai_model.api_key is not set (null)",
    ),
    "api-key-null-judge": ("judge_model.responses_api_models.openai_model.api_key is not set (null)",),
    "hub-model-name": ("'Qwen/Qwen3-30B-A3B-Instruct-2507' is not a local model directory",),
    "model-server-in-another-file": ("no 'policy_model' instance",),
    "supply-prefix-for-training": ("supply_prefix_token_ids: true changes nothing here",),
    "override-fragment-alone": (
        "no entrypoint in policy_model.responses_api_models.vllm_model (an override of a block that "
        "another file defines; NeMo Gym does not count it as a server)",
        "policy_model.responses_api_models.vllm_model.base_url: missing required key 'base_url'",
    ),
    "override-fragment-of-the-policy-model": (
        "no entrypoint in policy_model.responses_api_models.vllm_model",
        "policy_model.responses_api_models.vllm_model.model: missing required key 'model'",
    ),
    "delete-key-of-a-key-another-file-gives": (
        "'Qwen/Qwen3-235B-A22B-Instruct-2507-FP8' is not a local model directory",
    ),
}
"""What our warnings say where both pass (NeMo Gym says nothing of most: it reads a server's
block only when that server starts)."""


INCLUDED = {"responses_api_models/local_vllm_model/configs/Qwen/Qwen3-235B-A22B-Instruct-2507-FP8.yaml"}
"""Files a case's file lists in its own config_paths (judge_local_endpoints.yaml's)."""


@pytest.fixture(autouse=True)
def in_nemo_gym_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "env.yaml").write_text("{}\n")
    monkeypatch.setenv("NG_ENV_YAML", str(tmp_path / "env.yaml"))
    for name in ("NVIDIA_API_KEY", "NEMO_GYM_REASONING_FIELD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(ROOT)


def _ours(case: dict[str, Any]) -> tuple[int, str]:
    args = [f"+config_paths=[{','.join(case['config_paths'])}]", *case["overrides"]]
    result = CliRunner().invoke(app, args)
    return result.exit_code, " ".join(result.output.split())


AGREEING = [case for case in CASES if case["id"] not in REFUSED_HERE]


@pytest.mark.parametrize("case", AGREEING, ids=[case["id"] for case in AGREEING])
def test_ng_validate_agrees_with_nemo_gyms(case: dict[str, Any]) -> None:
    theirs = case["nemo_gym"]
    code, said = _ours(case)
    assert (code == 0) == theirs["valid"], said
    assert "'***'" not in said
    if theirs["will_not_start_as_is"]:
        assert "will not start as-is" in said
    for text in WARNED.get(case["id"], ()):
        assert text in said


@pytest.mark.parametrize("case_id", sorted(REFUSED_HERE))
def test_the_documented_refusals_say_why(case_id: str) -> None:
    (case,) = [case for case in CASES if case["id"] == case_id]
    assert case["nemo_gym"]["valid"]
    code, said = _ours(case)
    assert code == 2
    assert REFUSED_HERE[case_id] in said


def test_the_fixture_folder_holds_exactly_the_cases_files() -> None:
    used = {path for case in CASES for path in case["config_paths"]} | INCLUDED
    shipped = {str(path.relative_to(ROOT)) for path in ROOT.rglob("*.yaml")}
    assert used == shipped
