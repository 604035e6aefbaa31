"""NeMo Gym's `manifest.yaml` of an environment or benchmark: read and checked, as its catalog does.

NeMo Gym 0.7.0 (`nemo_gym/environment/manifest.py`) lists a workload under its manifest only when
the manifest is valid; an invalid one is passed over and the folder's configs are listed by their
paths instead. `load_manifest` is that check: the same fields, kinds and rules (a benchmark needs
a `canonical_split` and a benchmark dataset with a `prepare_script`, each integration profile its
servers, template prompts a `standard_prompt_config`, unique authors and dataset names, an SPDX
`licensing`). Nothing here runs a workload: ng_cli has no manifest-backed workloads to run.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FiniteFloat,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from ng_cli.datasets.discovery import read_yaml

__all__ = ["Manifest", "load_manifest"]

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Kind = Literal["environment", "benchmark"]
Profile = Literal[
    "custom-gym-verifier", "custom-gym-agent-loop", "external-agent-loop", "external-rollout-driver"
]
Domain = Literal[
    "math",
    "coding",
    "agent",
    "knowledge",
    "instruction_following",
    "long_context",
    "safety",
    "games",
    "translation",
    "e2e",
    "rlhf",
    "other",
]
_PRIVATE_LICENSES = frozenset({"internal", "proprietary", "unknown"})
_SOURCE = r"^(?:(?:https?|ssh|git|file)://\S+|[^@\s]+@[^:\s]+:\S+)$"
_CALLABLE = r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
_PROFILE_NEEDS = {
    "custom-gym-verifier": ("model_server", "resources_server"),
    "custom-gym-agent-loop": ("model_server",),
    "external-agent-loop": (),
    "external-rollout-driver": ("rollout_driver",),
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, validate_default=True)


class Reward(_Strict):
    range: tuple[FiniteFloat, FiniteFloat]
    higher_is_better: bool

    @model_validator(mode="after")
    def _ordered(self) -> Reward:
        if self.range[0] > self.range[1]:
            raise ValueError("reward.range must be ordered with lower <= upper")
        return self


class ManifestDataset(_Strict):
    name: Text
    type: Literal["train", "validation", "example", "benchmark"]
    jsonl_fpath: Text
    prepare_script: Text | None = None
    prompt_config: Text | None = None
    num_repeats: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _benchmark_prepared(self) -> ManifestDataset:
        if self.type == "benchmark" and self.prepare_script is None:
            raise ValueError("a benchmark dataset requires: prepare_script")
        return self


class AdoptedFrom(_Strict):
    source: Annotated[str, StringConstraints(strip_whitespace=True, pattern=_SOURCE)]
    ref: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, pattern=r"^[^\s]+$")]
    reconciled: date


class Manifest(_Strict):
    """What NeMo Gym's `EnvironmentManifest` accepts (its JSON-schema extras aside)."""

    name: Text
    version: Text
    experimental: bool = True
    kind: Kind
    integration_profile: Profile
    domain: Domain
    description: Text
    modality: Text
    licensing: Text = "unknown"
    authors: list[Text] = Field(min_length=1)
    reward: Reward
    determinism: Literal["seeded", "stochastic", "unknown"] = "unknown"
    config_path: Text = "config.yaml"
    dataset_owner: Text | None = None
    resources_server: Text | None
    agent_server: Text
    datasets: list[ManifestDataset] = Field(min_length=1)
    model_server: Text | None = None
    rollout_driver: Annotated[str, StringConstraints(strip_whitespace=True, pattern=_CALLABLE)] | None = None
    grading_mode: Text | None = None
    session_model: Literal["episode", "step"] | None = None
    state: Literal["none", "per_session"] | None = None
    sandbox: Text | None = None
    canonical_split: Text | None = None
    prompt_source: Literal["template", "prepared", "agent"] = "template"
    standard_prompt_config: Text | None = None
    adopted_from: AdoptedFrom | None = None
    lifecycle: Literal["active", "deprecated"] = "active"

    @field_validator("authors")
    @classmethod
    def _unique_authors(cls, value: list[str]) -> list[str]:
        if len(value) != len(set(value)):
            raise ValueError("authors must be unique")
        return value

    @field_validator("licensing")
    @classmethod
    def _spdx(cls, value: str) -> str:
        if value in _PRIVATE_LICENSES:
            return value
        from packaging.licenses import InvalidLicenseExpression, canonicalize_license_expression

        try:
            return str(canonicalize_license_expression(value))
        except InvalidLicenseExpression as error:
            raise ValueError(
                "licensing must be an SPDX license expression, internal, proprietary, or unknown"
            ) from error

    @model_validator(mode="after")
    def _contract(self) -> Manifest:
        missing = [name for name in _PROFILE_NEEDS[self.integration_profile] if getattr(self, name) is None]
        if self.kind == "benchmark":
            missing.extend(["canonical_split"] if self.canonical_split is None else [])
            if self.prompt_source == "template" and self.standard_prompt_config is None:
                missing.append("standard_prompt_config")
        if missing:
            raise ValueError("manifest requires: " + ", ".join(dict.fromkeys(missing)))
        if self.prompt_source == "prepared" and self.standard_prompt_config is not None:
            raise ValueError("standard_prompt_config is forbidden for prepared prompts")
        if self.prompt_source != "template" and any(d.prompt_config is not None for d in self.datasets):
            raise ValueError("dataset.prompt_config is only valid for template prompts")
        if self.integration_profile != "external-rollout-driver" and self.rollout_driver is not None:
            raise ValueError("rollout_driver is only valid for the external-rollout-driver profile")
        names = [dataset.name for dataset in self.datasets]
        if len(names) != len(set(names)):
            raise ValueError("dataset names must be unique")
        if self.kind == "benchmark" and not any(d.type == "benchmark" for d in self.datasets):
            raise ValueError("a benchmark manifest requires a benchmark dataset")
        return self


def load_manifest(path: Path) -> Manifest | None:
    """The manifest, or None where NeMo Gym's catalog passes it over (unreadable or invalid)."""
    data: Any = read_yaml(path)
    if not isinstance(data, dict):
        return None
    try:
        return Manifest.model_validate(data)
    except ValidationError:
        return None
