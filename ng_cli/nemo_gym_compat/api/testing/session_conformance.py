"""`nemo_gym.testing.session_conformance`: a server's session routes held to NeMo Gym's contract.

Servers' own tests (example_single_tool_call's) call `check_resources_session_contract(app, seed,
keeps_state=...)` on the app their `setup_webserver()` builds. As NeMo Gym's, it goes through the
routes in process (so a route another registration shadows is caught): seed, seed again, close,
close again, close a never-seeded id; with `keeps_state`, a seed after a close (of that id or of
the never-seeded one) must be refused (HTTP >= 400). A broken step is an `AssertionError` saying
which step.
"""

from __future__ import annotations

from fastapi import FastAPI

from ng_cli.nemo_gym_compat.api.base_resources_server import (
    ResourcesCloseSessionRequest,
    ResourcesCloseSessionResponse,
    ResourcesSeedSessionRequest,
    ResourcesSeedSessionResponse,
)

__all__ = ["check_resources_session_contract"]


def check_resources_session_contract(
    app: FastAPI, seed: ResourcesSeedSessionRequest, *, keeps_state: bool
) -> None:
    """Seed, re-seed and close `seed`'s session through `app`; AssertionError on a violation.

    `seed.resources_session_id` must be one the app has not seen."""
    from fastapi.testclient import TestClient  # httpx: a test-time need, as in NeMo Gym

    client = TestClient(app, raise_server_exceptions=False)
    session = seed.resources_session_id
    for step in ("seed", "repeated seed"):
        answer = client.post("/seed_session", json=seed.model_dump(mode="json"))
        assert answer.status_code == 200, f"{step} failed: {answer.status_code} {answer.text}"
        seeded = ResourcesSeedSessionResponse.model_validate(answer.json())
        assert seeded.resources_session_id == session, f"{step} returned another session"
    close = ResourcesCloseSessionRequest(resources_session_id=session, episode_id=seed.episode_id)
    for step in ("close", "repeated close"):
        answer = client.post("/close_session", json=close.model_dump(mode="json"))
        assert answer.status_code == 200, f"{step} failed: {answer.status_code} {answer.text}"
        closed = ResourcesCloseSessionResponse.model_validate(answer.json())
        assert closed.resources_session_id == session, f"{step} named another session"
    never_seeded = seed.model_copy(update={"resources_session_id": f"{session}-never-seeded"})
    unseen = close.model_copy(update={"resources_session_id": never_seeded.resources_session_id})
    answer = client.post("/close_session", json=unseen.model_dump(mode="json"))
    assert answer.status_code == 200, f"close of a never-seeded session failed: {answer.status_code}"
    if keeps_state:
        for late in (seed, never_seeded):
            answer = client.post("/seed_session", json=late.model_dump(mode="json"))
            assert answer.status_code >= 400, (
                f"seed after close recreated {late.resources_session_id}: {answer.status_code}"
            )
