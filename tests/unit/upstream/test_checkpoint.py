"""`Checkpoint`: what a trainer's directory holds, read from its safetensors headers alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from ng_cli.upstream.checkpoint import Checkpoint, CheckpointError
from tests.fixtures import checkpoints

MODEL = Path(__file__).resolve().parents[3] / "models" / "tiny-weather"


def test_the_embedded_model_reads_and_fits_itself() -> None:
    model = Checkpoint.read(MODEL)
    assert "model.embed_tokens.weight" in model.tensors
    assert model.tensors["model.embed_tokens.weight"].shape == (1031, 256)
    assert model.differences(model) == []


def test_a_swapped_copy_fits(tmp_path: Path) -> None:
    swapped = Checkpoint.read(checkpoints.swapped(MODEL, tmp_path / "b", "Ġdegrees", "ĠElacas"))
    assert swapped.differences(Checkpoint.read(MODEL)) == []


def test_a_wrong_shape_is_named(tmp_path: Path) -> None:
    wrong = Checkpoint.read(checkpoints.wrong_shape(MODEL, tmp_path / "w"))
    assert wrong.differences(Checkpoint.read(MODEL)) == [
        "model.embed_tokens.weight: F32[256, 1031] where the model has F32[1031, 256]"
    ]


def test_missing_and_extra_tensors_are_named(tmp_path: Path) -> None:
    header, payload = checkpoints.read(MODEL / "model.safetensors")
    header["lm_head.weight"] = header.pop("model.norm.weight")
    checkpoints.write(tmp_path / "x" / "model.safetensors", header, payload)
    problems = Checkpoint.read(tmp_path / "x").differences(Checkpoint.read(MODEL))
    assert problems[0] == "1 tensor(s) missing, e.g. model.norm.weight"
    assert problems[1] == "1 tensor(s) the model does not have, e.g. lm_head.weight"


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda tmp: checkpoints.garbage(tmp / "g"), "not a safetensors file"),
        (lambda tmp: checkpoints.no_weights(tmp / "n"), "holds no *.safetensors file"),
        (lambda tmp: tmp / "nowhere", "does not exist"),
    ],
)
def test_unusable_directories_are_refused_with_the_reason(tmp_path: Path, make: object, reason: str) -> None:
    with pytest.raises(CheckpointError, match=reason.replace("*", r"\*")):
        Checkpoint.read(make(tmp_path))  # type: ignore[operator]


def test_a_truncated_file_is_refused(tmp_path: Path) -> None:
    data = (MODEL / "model.safetensors").read_bytes()
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated"):
        Checkpoint.read(tmp_path / "t")


def test_a_relative_path_is_refused() -> None:
    with pytest.raises(CheckpointError, match="not absolute"):
        Checkpoint.read("models/tiny-weather")
