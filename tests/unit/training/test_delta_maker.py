"""The delta maker: bit-for-bit compare, only what changed written, whole vs element patch by size,
and its command line's errors (no traceback)."""

from __future__ import annotations

import array
import struct
from pathlib import Path

import pytest

from ng_cli.training.delta import Change, changed_indices, main, make_delta, write_delta
from ng_cli.upstream.delta import Delta, checkpoint_digest
from tests.fixtures import checkpoints
from tests.fixtures.delta_checkpoints import bump, edited, scale, set_to

MODEL = Path(__file__).resolve().parents[3] / "models" / "tiny-weather"
NORM = "model.norm.weight"
EMBEDDINGS = "model.embed_tokens.weight"


def stored(delta: Path) -> dict[str, bytes]:
    header, payload = checkpoints.read(delta / "delta.safetensors")
    return {
        name: payload[entry["data_offsets"][0] : entry["data_offsets"][1]]  # type: ignore[index]
        for name, entry in header.items()
        if name != "__metadata__"
    }


def test_only_what_changed_is_written_whole_or_as_elements(tmp_path: Path) -> None:
    new = edited(
        MODEL,
        tmp_path / "new",
        {NORM: scale(1.5), EMBEDDINGS: bump(range(10, 20), 0.125)},
    )
    summary = make_delta(MODEL, new, tmp_path / "d")
    delta = Delta.read(tmp_path / "d")
    assert {name: tensor.kind for name, tensor in delta.tensors.items()} == {
        NORM: "whole",
        EMBEDDINGS: "elements",
    }
    assert (delta.base, delta.result) == (checkpoint_digest(MODEL), checkpoint_digest(new))
    assert summary["elements_changed"] == 256 + 10
    assert int(str(summary["bytes"])) < 4000  # of a 12 MB checkpoint
    data = stored(tmp_path / "d")
    assert list(array.array("i", data[f"{EMBEDDINGS}:indices"])) == list(range(10, 20))
    new_header, new_payload = checkpoints.read(new / "model.safetensors")
    begin = new_header[EMBEDDINGS]["data_offsets"][0]  # type: ignore[index]
    assert data[f"{EMBEDDINGS}:values"] == new_payload[begin + 40 : begin + 80]
    norm_begin, norm_end = new_header[NORM]["data_offsets"]  # type: ignore[index]
    assert data[NORM] == new_payload[norm_begin:norm_end]


def test_identical_checkpoints_give_an_empty_delta(tmp_path: Path) -> None:
    summary = make_delta(MODEL, checkpoints.copy(MODEL, tmp_path / "same"), tmp_path / "d")
    assert summary["tensors_changed"] == 0
    delta = Delta.read(tmp_path / "d")
    assert delta.tensors == {}
    assert delta.base == delta.result


def test_a_new_nan_goes_whole_since_nan_marks_unchanged_elements(tmp_path: Path) -> None:
    new = edited(MODEL, tmp_path / "new", {NORM: set_to(range(1), float("nan"))})
    make_delta(MODEL, new, tmp_path / "d")
    assert Delta.read(tmp_path / "d").tensors[NORM].kind == "whole"


def test_negative_zero_is_a_change() -> None:
    old, new = struct.pack("<2f", 0.0, 1.0), struct.pack("<2f", -0.0, 1.0)
    assert changed_indices(old, new, 4) == [0]


def test_the_command_line_names_bad_input_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = checkpoints.wrong_shape(MODEL, tmp_path / "wrong")
    assert main(["make", "--base", str(MODEL), "--new", str(wrong), "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert "model.embed_tokens.weight: F32[256, 1031] where the model has F32[1031, 256]" in err
    assert (
        main(["make", "--base", str(MODEL), "--new", str(tmp_path / "nowhere"), "--out", str(tmp_path / "d")])
        == 2
    )
    assert "does not exist" in capsys.readouterr().err
    assert main(["make", "--base", str(MODEL), "--new", str(MODEL), "--out", str(tmp_path / "d")]) == 0
    assert main(["make", "--base", str(MODEL), "--new", str(MODEL), "--out", str(tmp_path / "d")]) == 2
    assert "holds a checkpoint or delta already" in capsys.readouterr().err


def test_every_stored_tensor_starts_at_a_multiple_of_its_element_size(tmp_path: Path) -> None:
    """An odd count of bf16 values before int32 indices would misalign them: the engine views the
    file's bytes in place (`engines/delta_apply.py`), so the widest dtype goes first, with no holes."""
    write_delta(
        tmp_path / "d",
        base="0" * 64,
        result="0" * 64,
        changes=[
            Change(
                "a",
                "BF16",
                (8,),
                indices=array.array("i", [1, 2, 5]).tobytes(),
                values=b"\x01\x02" * 3,
                index_dtype="I32",
            ),
            Change("b", "F16", (1,), whole=b"\x00\x3c"),
            Change("c", "F64", (9,), indices=array.array("q", [4]).tobytes(), values=b"\x00" * 8),
        ],
    )
    header, payload = checkpoints.read(tmp_path / "d" / "delta.safetensors")
    sizes = {"BF16": 2, "F16": 2, "I32": 4, "I64": 8, "F64": 8}
    spans = sorted(
        (entry["data_offsets"][0], entry["data_offsets"][1], sizes[entry["dtype"]])  # type: ignore[index]
        for name, entry in header.items()
        if name != "__metadata__"
    )
    assert all(begin % size == 0 for begin, _, size in spans)
    assert [begin for begin, _, _ in spans[1:]] == [end for _, end, _ in spans[:-1]]  # no holes
    assert spans[-1][1] == len(payload)
