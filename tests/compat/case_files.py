"""The differential cases: inputs, and what NeMo Gym's own code made of them (`nemo_gym`).

Each file in `cases/` holds `oracle` (the NeMo Gym release and the versions of the libraries its
rule ran with) and `cases` (`id`, the inputs, `nemo_gym`). `nemo_gym_oracle.py` wrote the
`nemo_gym` fields by running NeMo Gym's code; the tests run ours on the same inputs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["load_cases", "response_of"]

CASES = Path(__file__).resolve().parent / "cases"


def load_cases(name: str) -> list[dict[str, Any]]:
    """The cases of `cases/<name>.json`, each with NeMo Gym's result under `nemo_gym`."""
    document = json.loads((CASES / f"{name}.json").read_text())
    cases: list[dict[str, Any]] = document["cases"]
    missing = [case["id"] for case in cases if "nemo_gym" not in case]
    assert not missing, f"run nemo_gym_oracle.py: cases without NeMo Gym's result: {missing}"
    return cases


def response_of(output: list[dict[str, Any]]) -> dict[str, Any]:
    """A whole Response around `output`, as a model server returns it."""
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0.0,
        "model": "stub-model",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "status": "completed",
    }
