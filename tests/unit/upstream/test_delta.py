"""`Delta`: a weights delta directory read and checked from its manifest and headers, and the
content digest that names the weights a delta applies onto."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ng_cli.training.delta import Change, make_delta, write_delta
from ng_cli.upstream.checkpoint import Checkpoint
from ng_cli.upstream.delta import Delta, DeltaError, checkpoint_digest, is_delta
from tests.fixtures import checkpoints
from tests.fixtures.delta_checkpoints import bump, edited, rewrite_manifest

MODEL = Path(__file__).resolve().parents[3] / "models" / "tiny-weather"
NORM = "model.norm.weight"
DIGEST = "a" * 64


@pytest.fixture
def delta(tmp_path: Path) -> Path:
    """A good delta of the embedded model: one element patch."""
    new = edited(MODEL, tmp_path / "new", {NORM: bump(range(4), 0.5)})
    make_delta(MODEL, new, tmp_path / "delta")
    return tmp_path / "delta"


def test_a_made_delta_reads_and_fits_the_model(delta: Path) -> None:
    read = Delta.read(delta)
    assert is_delta(delta)
    assert not is_delta(MODEL)
    assert read.base == checkpoint_digest(MODEL)
    assert read.tensors[NORM].kind == "elements"
    assert read.tensors[NORM].count == 4
    assert read.differences(Checkpoint.read(MODEL)) == []


def test_the_digest_is_content_not_files(tmp_path: Path) -> None:
    header, payload = checkpoints.read(MODEL / "model.safetensors")
    checkpoints.write(tmp_path / "renamed" / "model-00001-of-00001.safetensors", header, payload)
    assert checkpoint_digest(tmp_path / "renamed") == checkpoint_digest(MODEL)
    changed = edited(MODEL, tmp_path / "changed", {NORM: bump(range(1), 1e-3)})
    assert checkpoint_digest(changed) != checkpoint_digest(MODEL)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda body: body.update(format="safetensors"), "format is 'safetensors'"),
        (lambda body: body.update(format_version=2), "format_version 2 is not supported"),
        (lambda body: body.update(base={"sha256": "abc"}), "base.sha256 must be 64 lowercase hex"),
        (lambda body: body.pop("result"), "result.sha256 must be"),
        (lambda body: body.update(tensors=[]), "tensors must be an object"),
        (lambda body: body["tensors"][NORM].update(kind="sparse"), f"tensors.{NORM}.kind: 'sparse'"),
        (lambda body: body["tensors"][NORM].update(count=10**6), f"tensors.{NORM}.count: 1000000"),
        (
            lambda body: body["tensors"][NORM].update(count=3),
            f"{NORM}:values' is F32[4], ng_delta.json says F32[3]",
        ),
        (
            lambda body: body["tensors"].update(
                {"model.layers.0.mlp.up_proj.weight": {"kind": "whole", "dtype": "F32", "shape": [640, 256]}}
            ),
            "lists 'model.layers.0.mlp.up_proj.weight' but no *.safetensors file holds",
        ),
        (lambda body: body["tensors"].pop(NORM), f"ng_delta.json does not list, e.g. {NORM}:indices"),
    ],
    ids=[
        "format",
        "version",
        "base",
        "result",
        "tensors",
        "kind",
        "count",
        "shape",
        "missing tensor",
        "unlisted",
    ],
)
def test_a_bad_manifest_is_named(delta: Path, change: object, message: str) -> None:
    rewrite_manifest(delta, change)  # type: ignore[arg-type]
    with pytest.raises(DeltaError, match=re.escape(message)) as refused:
        Delta.read(delta)
    assert "ng_delta.json" in refused.value.message or str(delta) in refused.value.message


def test_a_manifest_that_is_not_json_is_named(delta: Path) -> None:
    (delta / "ng_delta.json").write_text("{not json")
    with pytest.raises(DeltaError, match=r"ng_delta.json: not JSON"):
        Delta.read(delta)


def test_an_element_patch_of_an_integer_tensor_is_refused(tmp_path: Path) -> None:
    delta = write_delta(
        tmp_path / "d",
        base=DIGEST,
        result=DIGEST,
        changes=[
            Change("steps", "I64", (8,), indices=b"\x01\x00\x00\x00", values=b"\x00" * 8, index_dtype="I32")
        ],
    )
    with pytest.raises(
        DeltaError,
        match=r"tensors.steps: an element patch of a I64 tensor: element patches need a floating dtype",
    ):
        Delta.read(delta)


def test_a_delta_of_another_shape_or_tensor_does_not_fit_the_model(tmp_path: Path) -> None:
    delta = write_delta(
        tmp_path / "d",
        base=DIGEST,
        result=DIGEST,
        changes=[
            Change(NORM, "F32", (128,), whole=b"\x00" * 512),
            Change("lm_head.bias", "F32", (4,), whole=b"\x00" * 16),
        ],
    )
    problems = Delta.read(delta).differences(Checkpoint.read(MODEL))
    assert problems == [
        "lm_head.bias: the model has no such tensor",
        f"{NORM}: F32[128] where the model has F32[256]",
    ]


def test_a_relative_path_is_refused() -> None:
    with pytest.raises(DeltaError, match="is not absolute"):
        Delta.read("relative/delta")
