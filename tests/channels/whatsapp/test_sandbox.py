"""The Graph sandbox's scripting hooks: per-number sends, scripted answers, loopback-only control."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from switchboard.channels.whatsapp import sandbox_router


def _client(*, client_host: str = "127.0.0.1") -> tuple[httpx.AsyncClient, object]:
    app = FastAPI()
    router = sandbox_router()
    app.include_router(router)
    transport = httpx.ASGITransport(app=app, client=(client_host, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://sandbox/_sandbox/graph"), router.sandbox  # type: ignore[attr-defined]


def _text(to: str, text: str) -> dict:
    return {"messaging_product": "whatsapp", "to": to, "type": "text", "text": {"body": text},
            "biz_opaque_callback_data": "sb:1"}  # fmt: skip


async def test_sends_are_listed_per_number_and_scripts_answer_in_order() -> None:
    client, state = _client()
    auth = {"Authorization": "Bearer t"}
    async with client:
        queued = await client.post("/_control/failures", json={
            "phone_number_id": "111", "code": 130429, "headers": {"Retry-After": "7"}, "times": 1})  # fmt: skip
        assert queued.json() == {"queued": 1}
        await client.post("/_control/failures", json={"phone_number_id": "111", "mode": "accept_then_500"})
        await client.post(
            "/_control/failures", json={"to": "555", "body": {"weird": True}, "http_status": 502}
        )

        weird = await client.post("/v23.0/111/messages", json=_text("555", "x"), headers=auth)
        throttled = await client.post("/v23.0/111/messages", json=_text("999", "y"), headers=auth)
        lost = await client.post("/v23.0/111/messages", json=_text("999", "kept"), headers=auth)
        other = await client.post("/v23.0/222/messages", json=_text("999", "other number"), headers=auth)
        ok = await client.post("/v23.0/111/messages", json=_text("999", "fine"), headers=auth)

        listed = (await client.get("/_control/sent", params={"phone_number_id": "111"})).json()
        dropped = await client.request("DELETE", "/_control/failures", params={"to": "555"})

    # the script for the recipient ("to") wins over the one for the number
    assert (weird.status_code, weird.json()) == (502, {"weird": True})
    assert (throttled.status_code, throttled.headers["retry-after"], throttled.json()["error"]["code"]) == (
        400,
        "7",
        130429,
    )
    assert (lost.status_code, lost.text) == (500, "upstream connection lost")
    assert other.status_code == 200 and ok.status_code == 200
    assert [(m["text"], m["answer"], m["biz_opaque_callback_data"]) for m in listed["messages"]] == [
        ("kept", "accept_then_500", "sb:1"),
        ("fine", "ok", "sb:1"),
    ]
    assert listed["last_seq"] == 3 and dropped.json() == {"dropped": 0}
    assert state.account_failures == {"111": []} and state.failures == {}


async def test_control_endpoints_answer_loopback_clients_only() -> None:
    client, state = _client(client_host="10.1.2.3")
    async with client:
        responses = [
            await client.get("/_control/sent"),
            await client.post("/_control/failures", json={"to": "1", "code": 131000}),
            await client.put("/_control/media/1", content=b"x"),
            await client.get("/_control/read", params={"phone_number_id": "111"}),
        ]
        send = await client.post(
            "/v23.0/111/messages", json=_text("1", "hi"), headers={"Authorization": "Bearer t"}
        )
    assert [r.status_code for r in responses] == [403, 403, 403, 403]
    assert send.status_code == 200 and state.failures == {} and state.media == {}


async def test_read_marks_are_listed_per_number() -> None:
    client, state = _client()
    auth = {"Authorization": "Bearer t"}
    async with client:
        for number, message_id in (("111", "wamid.A"), ("222", "wamid.B"), ("111", "wamid.C")):
            read = {"messaging_product": "whatsapp", "status": "read", "message_id": message_id}
            assert (await client.post(f"/v23.0/{number}/messages", json=read, headers=auth)).json() == {
                "success": True
            }
        listed = (await client.get("/_control/read", params={"phone_number_id": "111"})).json()
    assert listed == {"message_ids": ["wamid.A", "wamid.C"]}
    assert (state.read_marks_of("222"), state.read_marks_of("333")) == (["wamid.B"], [])
