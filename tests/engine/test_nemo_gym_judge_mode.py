"""The compat harness's judge mode: a NeMo Gym judge server scored by a real engine as its judge.

bench/nemo_gym_servers.py `--judge engine` runs false_statement_judge (tests/fixtures/nemo_gym_servers,
unchanged: its judge is reached through NeMo Gym's `server_client`) with the tiny model served by a
`local_vllm_model` that ng_run starts on the CPU. A row counts as judged only when its reward came
after judge calls the engine answered, so a stub's text or a swallowed judge failure cannot pass.
This server's judge prompt does not fit the tiny model's context, so the test pins the honest
outcome: the calls reach the engine, and rewards the server gives without a judge answer are not
counted. (A judged run needs the context raised with `hf_overrides`; on two busy cores one such
call of 10,500 prompt tokens took 149 s, past what the suite can spend.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

from tests.fixtures.caps import HANG_CAP_S

REPO = Path(__file__).resolve().parents[2]
NEMO_GYM_ROOT = REPO / "tests" / "fixtures" / "nemo_gym_servers"


def test_a_judge_server_reaches_the_engine_ng_run_starts(vllm_env: None, tmp_path: Path) -> None:  # noqa: ARG001 (the env is built first)
    out = tmp_path / "judge.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "nemo_gym_servers.py"), "--root", str(NEMO_GYM_ROOT),
         "--judge", "engine", "--only", "false_statement_judge", "--rows", "2", "--output", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=HANG_CAP_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    found = orjson.loads(out.read_bytes())
    assert list(found) == ["false_statement_judge"]  # the judge file holds only what it ran
    result = found["false_statement_judge"]
    # Its judge prompt alone is ~5,200 of the tiny model's tokens (a byte-level vocabulary of 1031),
    # over its 4096 context: every call reaches the engine, the model server answers its empty
    # overflow answer, and the harness counts the rewards as scored but not judged.
    assert {k: result[k] for k in ("starts", "rows", "scored", "judged")} == {
        "starts": True,
        "rows": 2,
        "scored": 2,
        "judged": 0,
    }, result
    assert result["judge_calls"] == 2
    assert result["judge_sample"] is None
    assert result["reason"] == "2x scored, not judged: judge call answered 200: (context_length_exceeded) "
    assert "judge mode: 0 of 1 servers judged" in done.stdout
