"""The model server's control hook under ``switchboard run`` (MODEL_SERVER_CONTROL): off by default,
refused next to a provider key or on a non-loopback HOST, behind the admin token, scripted errors
with status, headers and body, empty answers, bounded recording."""

from __future__ import annotations

import httpx
import pytest
from pydantic import SecretStr
from switchboard.standins.offline_server import ControlRefused, OfflineModelState, create_offline_app

from services.model_server.main import create_app
from tests.utils.servers import serve_app


def _chat(model: str) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}]}


async def test_control_is_off_by_default(make_settings):
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(make_settings())), base_url="http://m"
    ) as c:
        assert (await c.post("/control/x", json={})).status_code == 404


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [({"openai_api_key": SecretStr("sk-real")}, "provider key"), ({"host": "0.0.0.0"}, "loopback only")],
    ids=["provider-key", "public-host"],
)
def test_control_is_refused_next_to_a_provider_key_or_off_loopback(make_settings, overrides, reason):
    with pytest.raises(ControlRefused, match=reason):
        create_app(make_settings(model_server_control=True, **overrides))


async def test_control_scripts_errors_with_headers_and_body_and_empty_answers_behind_the_admin_token(
    make_settings,
):
    settings = make_settings(model_server_control=True)
    token = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
    async with serve_app(create_app(settings)) as url, httpx.AsyncClient(base_url=url) as http:
        script = {
            "responses": [
                {
                    "kind": "error",
                    "status": 429,
                    "headers": {"Retry-After": "47"},
                    "body": {"error": {"message": "slow down"}},
                },
                {"kind": "empty", "content": "  "},
                {"kind": "text", "content": "ok", "latency_s": 0.2},
            ]
        }
        assert (await http.post("/control/m1", json=script)).status_code == 401
        assert (await http.post("/control/m1", json=script, headers=token)).json() == {
            "model": "m1",
            "queued": 3,
        }
        limited = await http.post("/v1/chat/completions", json=_chat("m1"))
        empty = await http.post("/v1/chat/completions", json=_chat("m1"))
        slow = await http.post("/v1/chat/completions", json=_chat("m1"))
        recorded = (await http.get("/control/m1", headers=token)).json()
    assert (limited.status_code, limited.headers["retry-after"], limited.json()) == (
        429,
        "47",
        {"error": {"message": "slow down"}},
    )
    assert empty.json()["choices"][0]["message"]["content"] == "  "
    assert slow.json()["choices"][0]["message"]["content"] == "ok"
    assert (recorded["received"], len(recorded["requests"]), recorded["queued"]) == (3, 3, 0)


async def test_request_recording_is_bounded():
    state = OfflineModelState(max_recorded=5, max_scripts=3)
    async with serve_app(create_offline_app(state)) as url, httpx.AsyncClient(base_url=url) as http:
        for index in range(12):
            body = _chat("m") | {"n": index}
            await http.post("/v1/chat/completions", json=body)
        for name in ("a", "b", "c"):
            await http.post("/v1/chat/completions", json=_chat(name))
    script = state.script("c")
    assert len(state.names()) == 3 and "m" not in state.names()  # the oldest deployment was forgotten
    assert script.received == 1


def test_recorded_requests_keep_only_the_newest():
    state = OfflineModelState(max_recorded=5)
    script = state.script("m")
    for index in range(12):
        script.record({"n": index}, "")
    assert (script.received, [r["n"] for r in script.requests]) == (12, [7, 8, 9, 10, 11])
