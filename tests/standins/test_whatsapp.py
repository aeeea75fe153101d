"""The Graph sandbox's scripting hooks: per-number sends, scripted answers, loopback-only control."""

from __future__ import annotations

import asyncio

import httpx
from fastapi import FastAPI
from switchboard.standins.whatsapp import sandbox_router


def _client(*, client_host: str = "127.0.0.1") -> tuple[httpx.AsyncClient, object]:
    app = FastAPI()
    router = sandbox_router()
    app.include_router(router)
    transport = httpx.ASGITransport(app=app, client=(client_host, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://sandbox/_sandbox/graph"), router.sandbox  # type: ignore[attr-defined]


def _text(to: str, text: str) -> dict:
    return {
        "messaging_product": "whatsapp",
        "to": to,
        "type": "text",
        "text": {"body": text},
        "biz_opaque_callback_data": "sb:1",
    }


async def test_sends_are_listed_per_number_and_scripts_answer_in_order() -> None:
    client, state = _client()
    auth = {"Authorization": "Bearer t"}
    async with client:
        queued = await client.post(
            "/_control/failures",
            json={"phone_number_id": "111", "code": 130429, "headers": {"Retry-After": "7"}, "times": 1},
        )
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
    assert state.faults.queues == {}


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
    assert send.status_code == 200 and state.faults.queues == {} and state.media == {}


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


# --- fault scripts: admin token, the N-th send, media lookups, status callbacks first ---


def _token_client(token: str, *, status_sender=None) -> tuple[httpx.AsyncClient, object]:  # type: ignore[no-untyped-def]
    app = FastAPI()
    router = sandbox_router(admin_token=token, status_sender=status_sender)
    app.include_router(router)
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://sandbox/_sandbox/graph"), router.sandbox  # type: ignore[attr-defined]


async def test_control_endpoints_need_the_admin_token_when_the_service_has_one() -> None:
    client, _ = _token_client("admin-secret")
    async with client:
        missing = await client.get("/_control/sent")
        wrong = await client.get("/_control/sent", headers={"Authorization": "Bearer nope"})
        right = await client.get("/_control/sent", headers={"Authorization": "Bearer admin-secret"})
        scripted = await client.post("/_control/failures", json={"to": "1"})
    assert [r.status_code for r in (missing, wrong, right, scripted)] == [401, 401, 200, 401]


async def test_the_nth_send_fails_with_the_scripted_code() -> None:
    client, state = _client()
    auth = {"Authorization": "Bearer t"}
    async with client:
        await client.post("/_control/failures", json={"to": "555", "after": 2, "code": 131026})
        answers = [
            await client.post("/v23.0/111/messages", json=_text("555", f"part {i}"), headers=auth)
            for i in range(4)
        ]
    assert [a.status_code for a in answers] == [200, 200, 400, 200]
    assert answers[2].json()["error"]["code"] == 131026
    assert [m["text"] for m in state.sent_by("111")] == ["part 0", "part 1", "part 3"]


async def test_media_lookup_fails_n_times_then_answers() -> None:
    client, state = _client()
    async with client:
        await client.put("/_control/media/m1", content=b"JPEG", headers={"content-type": "image/jpeg"})
        await client.post(
            "/_control/failures",
            json={"operation": "media", "media_id": "m1", "times": 2, "http_status": 500},
        )
        lookups = [await client.get("/v23.0/m1") for _ in range(3)]
        blob = await client.get("/_media/m1", headers={"Authorization": "Bearer t"})
    assert [r.status_code for r in lookups] == [500, 500, 200]
    assert blob.content == b"JPEG" and state.faults.queues == {}


async def test_delayed_send_answer_is_recorded_before_it_is_answered() -> None:
    client, state = _client()
    async with client:
        await client.post("/_control/failures", json={"to": "555", "mode": "delay", "delay_s": 0.3})
        started = asyncio.get_running_loop().time()
        answer = await client.post(
            "/v23.0/111/messages", json=_text("555", "slow"), headers={"Authorization": "Bearer t"}
        )
        elapsed = asyncio.get_running_loop().time() - started
    assert answer.status_code == 200 and elapsed >= 0.3
    assert state.sent_by("111")[0]["id"] == answer.json()["messages"][0]["id"]


async def test_status_callbacks_are_delivered_before_the_send_answer() -> None:
    delivered: list[tuple[str, str]] = []

    async def status_sender(body: dict) -> None:
        (item,) = body["entry"][0]["changes"][0]["value"]["statuses"]
        delivered.append((item["status"], item["id"]))

    client, _ = _token_client("tok", status_sender=status_sender)
    async with client:
        await client.post(
            "/_control/failures",
            json={"to": "555", "mode": "status_first"},
            headers={"Authorization": "Bearer tok"},
        )
        answer = await client.post(
            "/v23.0/111/messages", json=_text("555", "racy"), headers={"Authorization": "Bearer t"}
        )
        # the callbacks were sent while the send was still unanswered
        wamid = answer.json()["messages"][0]["id"]
    assert delivered == [("sent", wamid), ("delivered", wamid)]


async def test_status_first_without_a_status_sender_is_refused() -> None:
    client, _ = _client()
    async with client:
        refused = await client.post("/_control/failures", json={"to": "555", "mode": "status_first"})
        unknown = await client.post("/_control/failures", json={"to": "555", "mode": "explode"})
    assert (refused.status_code, unknown.status_code) == (422, 422)


async def test_auto_statuses_reach_the_webhook_while_the_send_answer_hangs() -> None:
    """Meta posts ``sent`` for an accepted message whatever becomes of the HTTP answer: a worker killed
    while the answer hangs leaves a ``sending`` row that this callback reconciles (``loadtests/faults.py``)."""
    delivered: list[tuple[str, str, str | None]] = []

    async def status_sender(body: dict) -> None:
        (item,) = body["entry"][0]["changes"][0]["value"]["statuses"]
        delivered.append((item["status"], item["id"], item.get("biz_opaque_callback_data")))

    client, state = _token_client("tok", status_sender=status_sender)
    control = {"Authorization": "Bearer tok"}
    async with client:
        quiet = await client.post(
            "/v23.0/111/messages", json=_text("555", "before"), headers={"Authorization": "Bearer t"}
        )
        switched = await client.post(
            "/_control/statuses", json={"statuses": ["sent"], "delay_s": 0.05}, headers=control
        )
        await client.post(
            "/_control/failures", json={"to": "555", "mode": "delay", "delay_s": 1.0}, headers=control
        )
        send = asyncio.create_task(
            client.post(
                "/v23.0/111/messages", json=_text("555", "slow"), headers={"Authorization": "Bearer t"}
            )
        )
        await asyncio.sleep(0.5)
        seen_while_hanging = list(delivered)
        answer = await send
        off = await client.post("/_control/statuses", json={"statuses": []}, headers=control)
        await client.post(
            "/v23.0/111/messages", json=_text("555", "after"), headers={"Authorization": "Bearer t"}
        )
        await asyncio.sleep(0.2)
    wamid = answer.json()["messages"][0]["id"]
    assert quiet.status_code == 200 and switched.json() == {"statuses": ["sent"], "delay_s": 0.05}
    assert seen_while_hanging == [("sent", wamid, "sb:1")]  # before the answer, carrying our correlation id
    assert delivered == seen_while_hanging and off.json()["statuses"] == []  # none before or after
    assert [m["text"] for m in state.sent] == ["before", "slow", "after"]


async def test_auto_statuses_need_a_status_sender() -> None:
    client, _ = _client()
    async with client:
        refused = await client.post("/_control/statuses", json={"statuses": ["sent"]})
        bad = await client.post("/_control/statuses", json={"statuses": ["exploded"]})
    assert (refused.status_code, bad.status_code) == (422, 422)
