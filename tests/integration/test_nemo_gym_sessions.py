"""Whose rollout a call to a NeMo Gym server lands in (issue 43, point 15): our signed `ng_session`.

NeMo Gym signs its session cookie with its class and instance names, which anyone can read, and
an MCP token's payload shows the rollout's session id. Served unchanged by our child process:

* a second client that forges NeMo Gym's cookie for the victim's session id (with no session of
  ours, or with the signed one the server hands any caller) is served in a session of its own:
  its /seed_session's MCP token is not for the victim's rollout, and neither its MCP call nor
  its plain tool call writes the victim's state, so the victim's /verify pays 0.0;
* a genuine NeMo Gym cookie of one rollout sent with another rollout's signed session reads the
  signed rollout's state, not the cookie's.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from itsdangerous import TimestampSigner, URLSafeSerializer

from ng_cli.servers.session import SESSION_COOKIE, SessionSigner
from ng_cli.servers.testing import assistant_message, serve_in_child
from tests.fixtures.mcp_required import require_mcp

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "nemo_gym_servers" / "resources_servers"
WEATHER = ROOT / "example_mcp_weather"
COUNTER = ROOT / "example_session_state_mgmt"
TOKEN_HEADER = "X-NeMo-Gym-Session-Token"
SENTENCE = "The weather in Tokyo is sunny and 72 F."
WEATHER_BLOCK = {"entrypoint": "app.py", "domain": "agent", "verified": False, "expose_tools_over_mcp": True}
COUNTER_BLOCK = {"entrypoint": "app.py", "domain": "agent", "verified": False, "description": "counter"}


def _session_in(token: str) -> str:
    """The session id an MCP token carries: its payload is signed, not hidden."""
    _, payload = URLSafeSerializer("any key at all").loads_unsafe(token)
    return str(payload["sid"])


def _forged_cookie(key: str, session_id: str) -> str:
    """NeMo Gym's session cookie naming `session_id`, made as Starlette's SessionMiddleware makes it
    with NeMo Gym's key (`<class>___<instance name>`), which is no secret."""
    data = base64.b64encode(json.dumps({"session_id": session_id}).encode())
    return TimestampSigner(key).sign(data).decode()


def _cookie_header(cookies: dict[str, str]) -> dict[str, str]:
    return {"cookie": "; ".join(f"{name}={value}" for name, value in cookies.items())}


def _verify_body() -> dict[str, Any]:
    """The victim's rollout: it says the weather sentence without calling the tool (worth 0.0)."""
    response = {
        "id": "r",
        "created_at": 0,
        "model": "m",
        "object": "response",
        "output": [assistant_message(SENTENCE)],
    }
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "Weather in Tokyo?"}], "tools": []},
        "response": response,
        "verifier_metadata": {"expected_city": "Tokyo"},
    }


async def _attack(url: str, secret: str, *, attacker_signed: bool) -> dict[str, Any]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    found: dict[str, Any] = {}
    _, victim_cookie = SessionSigner(secret).new()  # as our agent starts a rollout
    async with httpx.AsyncClient(base_url=url, cookies={SESSION_COOKIE: victim_cookie}, timeout=60) as victim:
        seed = await victim.post("/seed_session", json={"verifier_metadata": {"expected_city": "Tokyo"}})
        assert seed.status_code == 200, seed.text
        found["victim"] = _session_in(seed.json()["mcp"]["headers"][TOKEN_HEADER])

        async with httpx.AsyncClient(base_url=url, timeout=60) as attacker:
            cookies = {"ExampleMCPWeatherResourcesServer___weather": _forged_cookie(
                "ExampleMCPWeatherResourcesServer___weather", found["victim"]
            )}  # fmt: skip
            if attacker_signed:  # any caller is handed a signed session of its own
                cookies[SESSION_COOKIE] = (await attacker.get("/health")).cookies[SESSION_COOKIE]
            headers = _cookie_header(cookies)
            seeded = await attacker.post(
                "/seed_session", json={"verifier_metadata": {"expected_city": "Tokyo"}}, headers=headers
            )
            assert seeded.status_code == 200, seeded.text
            mcp = seeded.json()["mcp"]
            found["attacker"] = _session_in(mcp["headers"][TOKEN_HEADER])
            transport = streamable_http_client(
                url + mcp["url_path"], http_client=httpx.AsyncClient(headers=mcp["headers"], timeout=60)
            )
            async with Client(transport, mode="legacy") as client:
                found["mcp_call"] = await client.call_tool("get_weather", {"city": "Tokyo"})
            written = await attacker.post("/get_weather", json={"city": "Tokyo"}, headers=headers)
            assert written.status_code == 200, written.text

        found["verified"] = (await victim.post("/verify", json=_verify_body())).json()
    return found


@pytest.mark.parametrize("attacker_signed", [False, True], ids=["forged_cookie_only", "with_own_ng_session"])
def test_a_known_session_id_buys_no_token_and_no_write(tmp_path: Path, attacker_signed: bool) -> None:
    require_mcp()
    with serve_in_child(WEATHER / "app.py", WEATHER_BLOCK, name="weather", spec_dir=tmp_path) as child:
        found = asyncio.run(_attack(child.url, child.session_secret, attacker_signed=attacker_signed))

    assert not found["mcp_call"].is_error, found["mcp_call"]  # served, in the attacker's own session
    verified = found["verified"]
    assert {
        "attacker_in_victims_session": found["attacker"] == found["victim"],
        "tool_call_seen": verified["tool_call_seen"],
        "reward": verified["reward"],
    } == {"attacker_in_victims_session": False, "tool_call_seen": False, "reward": 0.0}


def test_their_cookie_never_selects_another_session_than_the_signed_one(tmp_path: Path) -> None:
    with serve_in_child(COUNTER / "app.py", COUNTER_BLOCK, name="counter", spec_dir=tmp_path) as child:
        signer = SessionSigner(child.session_secret)
        first, second = (signer.new()[1] for _ in range(2))
        added = httpx.post(
            f"{child.url}/increment_counter",
            json={"count": 5},
            headers=_cookie_header({SESSION_COOKIE: first}),
            timeout=60,
        )
        assert added.json() == {"success": True}
        theirs = {name: value for name, value in added.cookies.items() if name != SESSION_COOKIE}
        assert list(theirs) == ["StatefulCounterResourcesServer___counter"]  # a genuine cookie of theirs

        def count(cookies: dict[str, str]) -> int:
            answer = httpx.post(f"{child.url}/get_counter_value", headers=_cookie_header(cookies), timeout=60)
            return int(answer.json()["count"])

        assert count({SESSION_COOKIE: second, **theirs}) == 0
        assert count({SESSION_COOKIE: first, **theirs}) == 5


def test_a_rollout_that_sends_on_only_the_last_answers_cookies_stays_one_session(tmp_path: Path) -> None:
    """NeMo Gym's agents (conversational_tool_use/simulation, toolsandbox_agent) send each call the
    cookies the previous answer set (`response.cookies`), nothing older. Our `ng_session` must be
    among them on every answer, or the third call gets a fresh session that /verify then reads."""
    with serve_in_child(COUNTER / "app.py", COUNTER_BLOCK, name="counter", spec_dir=tmp_path) as child:
        cookies: dict[str, str] = {}
        calls = [
            ("/seed_session", {"initial_count": 1}),
            ("/increment_counter", {"count": 2}),
            ("/increment_counter", {"count": 3}),
            ("/increment_counter", {"count": 4}),
        ]
        for path, body in calls:
            answer = httpx.post(f"{child.url}{path}", json=body, headers=_cookie_header(cookies), timeout=60)
            assert answer.status_code == 200, answer.text
            cookies = dict(answer.cookies.items())  # the last answer's, as aiohttp's response.cookies
            assert SESSION_COOKIE in cookies, path
        verified = httpx.post(
            f"{child.url}/verify",
            json={**_verify_body(), "expected_count": 10},
            headers=_cookie_header(cookies),
            timeout=60,
        )
    assert verified.status_code == 200, verified.text
    assert verified.json()["reward"] == 1.0
