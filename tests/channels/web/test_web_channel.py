"""The website chat at its HTTP boundary: the web service on a real port, real Postgres and Redis, the real
worker and orchestrator; only the model is the scripted offline server."""

from __future__ import annotations

import asyncio
import gzip
import json
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlmodel import select
from switchboard.channels.base import ChannelDeps, OutboundPart, build_channels
from switchboard.channels.web.widgets import user_hash, verified_user
from switchboard.crypto import CredentialCipher
from switchboard.db.models import Conversation, CustomerIdentity, Message, Tenant
from switchboard.handoff import hours
from switchboard.standins.offline_server import ScriptedResponse
from switchboard.tenant_settings import set_section

from tests.utils.agent import answer_with_script
from tests.utils.servers import serve_app
from tests.utils.web import ORIGIN, connect_web, new_visitor
from tests.utils.workers import run_worker_burst

WIDGET = Path(__file__).parents[3] / "libs/switchboard/channels/web/static/widget.js"


def web_app(settings):  # type: ignore[no-untyped-def]
    from services.web.main import create_app

    return serve_app(create_app(settings))


async def read_stream(
    url: str,
    params: dict[str, Any],
    *,
    count: int,
    headers: dict[str, str] | None = None,
    timeout_s: float = 15.0,
) -> list[dict[str, Any]]:
    """The first ``count`` persisted events (those with an ``id:``) of a stream, as ``{"seq", **data}``."""
    found: list[dict[str, Any]] = []

    async def read() -> None:
        async with (
            httpx.AsyncClient(timeout=None) as client,
            client.stream(
                "GET", url + "/web/v1/stream", params=params, headers={"Origin": ORIGIN, **(headers or {})}
            ) as response,
        ):
            assert response.status_code == 200, await response.aread()
            assert response.headers["access-control-allow-origin"] == ORIGIN
            event_id, data = None, None
            async for line in response.aiter_lines():
                if line.startswith("id: "):
                    event_id = int(line[4:])
                elif line.startswith("data: "):
                    data = json.loads(line[6:])
                elif line == "":
                    if event_id is not None and data is not None:
                        found.append({"seq": event_id, **data})
                        if len(found) >= count:
                            return
                    event_id, data = None, None

    await asyncio.wait_for(read(), timeout_s)
    return found


async def post(url: str, body: dict[str, Any], origin: str | None = ORIGIN) -> httpx.Response:
    headers = {"Origin": origin} if origin else {}
    async with httpx.AsyncClient() as client:
        return await client.post(url + "/web/v1/messages", json=body, headers=headers)


def message(text: str, **extra: Any) -> dict[str, Any]:
    return {"id": secrets.token_urlsafe(16), "text": text, **extra}


@pytest.fixture
async def answering(make_tenant, sessions, model, offline_model):  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    await answer_with_script(sessions, tenant.id, offline_model, name=model[1])
    return tenant


async def test_a_visitor_writes_and_the_answer_arrives_on_their_stream_after_their_own_message(
    e2e_settings, answering, model, sessions
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    state.script(name).default = ScriptedResponse(content="We open at nine.")
    settings = e2e_settings()
    account, _ = await connect_web(sessions, answering, settings)
    visitor = new_visitor()
    async with web_app(settings) as url:
        sent = await post(
            url,
            {
                "key": account.external_account_id,
                "visitor": visitor,
                "messages": [message("When do you open?")],
            },
        )
        assert sent.status_code == 200 and sent.json()["stored"] == 1
        assert sent.headers["access-control-allow-origin"] == ORIGIN
        await run_worker_burst(settings)
        events = await read_stream(url, {"key": account.external_account_id, "visitor": visitor}, count=2)
    assert [(e["seq"], e["type"], e["text"]) for e in events] == [
        (1, "visitor", "When do you open?"),
        (2, "reply", "We open at nine."),
    ]
    async with sessions() as session:
        conversation = (
            await session.exec(select(Conversation).where(Conversation.tenant_id == answering.id))
        ).one()
        identities = (
            await session.exec(select(CustomerIdentity).where(CustomerIdentity.tenant_id == answering.id))
        ).all()
    assert conversation.channel == "web"
    assert [(i.kind, i.value) for i in identities] == [("visitor", visitor)]


async def _channel(settings, sessions):  # type: ignore[no-untyped-def]
    deps = ChannelDeps(
        settings=settings,
        cipher=CredentialCipher.from_settings(settings),
        http=httpx.AsyncClient(),
        sessions=sessions,
    )
    return build_channels(deps)["web"]


async def test_the_stream_resumes_after_last_event_id_with_nothing_lost_or_doubled(
    make_settings, make_tenant, sessions
) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    tenant = await make_tenant()
    account, _ = await connect_web(sessions, tenant, settings)
    visitor = new_visitor()
    channel = await _channel(settings, sessions)
    params = {"key": account.external_account_id, "visitor": visitor}
    async with web_app(settings) as url:
        for i in range(3):
            await channel.send(account, visitor, OutboundPart(text=f"reply {i}"), correlation_id=f"c{i}")
        first = await read_stream(url, params, count=2)
        # the connection dropped after event 2; meanwhile two more replies, one of them sent twice
        await channel.send(account, visitor, OutboundPart(text="reply 3"), correlation_id="c3")
        again = await channel.send(account, visitor, OutboundPart(text="reply 3"), correlation_id="c3")
        resumed = await read_stream(url, params, count=2, headers={"Last-Event-ID": str(first[-1]["seq"])})
        live = asyncio.create_task(read_stream(url, {**params, "after": "4"}, count=1))
        await asyncio.sleep(0.5)
        await channel.send(account, visitor, OutboundPart(text="reply 4"), correlation_id="c4")
        pushed = await live
    await channel.aclose()
    assert [e["text"] for e in first] == ["reply 0", "reply 1"]
    assert [(e["seq"], e["text"]) for e in resumed] == [(3, "reply 2"), (4, "reply 3")]
    assert again == resumed[-1]["id"]
    assert [(e["seq"], e["text"]) for e in pushed] == [(5, "reply 4")]


async def test_only_the_tenants_websites_may_use_the_widget(make_settings, make_tenant, sessions) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    tenant = await make_tenant()
    account, _ = await connect_web(sessions, tenant, settings)
    body = {"key": account.external_account_id, "visitor": new_visitor(), "messages": [message("hi")]}
    async with web_app(settings) as url, httpx.AsyncClient() as client:
        missing = await post(url, body, origin=None)
        other = await post(url, body, origin="https://evil.example.test")
        ok_preflight = await client.options(
            url + "/web/v1/messages", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"}
        )
        bad_preflight = await client.options(
            url + "/web/v1/messages",
            headers={"Origin": "https://evil.example.test", "Access-Control-Request-Method": "POST"},
        )
        stream = await client.get(
            url + "/web/v1/stream",
            params={"key": account.external_account_id, "visitor": new_visitor()},
            headers={"Origin": "https://evil.example.test"},
        )
        config = await client.get(
            url + "/web/v1/config", params={"key": account.external_account_id}, headers={"Origin": ORIGIN}
        )
    assert (missing.status_code, other.status_code, stream.status_code) == (401, 403, 403)
    assert "access-control-allow-origin" not in other.headers
    assert ok_preflight.status_code == 204 and ok_preflight.headers["access-control-allow-origin"] == ORIGIN
    assert bad_preflight.status_code == 403 and "access-control-allow-origin" not in bad_preflight.headers
    assert config.status_code == 200 and config.json()["colour"] == "#1f6feb"
    async with sessions() as session:
        assert (await session.exec(select(Message).where(Message.tenant_id == tenant.id))).all() == []


async def test_too_long_too_many_and_the_wrong_files_are_refused(
    make_settings, make_tenant, sessions, stops_at_the_queue
) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings(
        web_visitor_messages_per_minute=2, web_max_text_chars=50, web_max_file_bytes=2048
    )
    tenant = await make_tenant()
    account, _ = await connect_web(sessions, tenant, settings)
    key, visitor = account.external_account_id, new_visitor()
    png = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000") + b"\0" * 40
    async with web_app(settings) as url, httpx.AsyncClient() as client:
        long = await post(url, {"key": key, "visitor": visitor, "messages": [message("x" * 51)]})
        ok = [
            await post(url, {"key": key, "visitor": visitor, "messages": [message(f"m{i}")]})
            for i in range(2)
        ]
        third = await post(url, {"key": key, "visitor": visitor, "messages": [message("m3")]})
        other_visitor = await post(url, {"key": key, "visitor": new_visitor(), "messages": [message("hi")]})

        async def upload(data: bytes, name: str, mime: str) -> httpx.Response:
            form = {"key": key, "visitor": new_visitor(), "id": secrets.token_urlsafe(16)}
            return await client.post(
                url + "/web/v1/files",
                data=form,
                files={"file": (name, data, mime)},
                headers={"Origin": ORIGIN},
            )

        image = await upload(png, "dot.png", "image/png")
        disguised = await upload(b"<html><script>alert(1)</script></html>", "dot.png", "image/png")
        huge = await upload(png + b"\0" * 4096, "big.png", "image/png")
    assert long.status_code == 200 and (long.json()["stored"], len(long.json()["too_long"])) == (0, 1)
    assert [r.status_code for r in ok] == [200, 200]
    assert third.status_code == 429 and third.headers["retry-after"] == "60"
    assert other_visitor.status_code == 200
    assert (image.status_code, disguised.status_code, huge.status_code) == (200, 415, 413)
    async with sessions() as session:
        rows = (
            await session.exec(select(Message).where(Message.tenant_id == tenant.id, Message.kind == "image"))
        ).all()
    assert [(r.media[0]["mime"], r.media[0]["filename"]) for r in rows] == [("image/png", "dot.png")]


async def test_a_signed_user_links_to_their_customer_and_a_forged_one_never_does(
    e2e_settings, answering, model, sessions
) -> None:  # type: ignore[no-untyped-def]
    state, name, _ = model
    state.script(name).default = ScriptedResponse(content="Noted.")
    settings = e2e_settings()
    tenant = answering
    account, secret = await connect_web(sessions, tenant, settings)
    key = account.external_account_id
    async with web_app(settings) as url:
        first = await post(
            url,
            {
                "key": key,
                "visitor": new_visitor(),
                "user_id": "42",
                "user_hash": user_hash(secret, "42"),
                "name": "Ana",
                "messages": [message("a")],
            },
        )
        second_browser = await post(
            url,
            {
                "key": key,
                "visitor": new_visitor(),
                "user_id": "42",
                "user_hash": user_hash(secret, "42"),
                "messages": [message("b")],
            },
        )
        forged = await post(
            url,
            {
                "key": key,
                "visitor": new_visitor(),
                "user_id": "42",
                "user_hash": user_hash("not-the-secret", "42"),
                "messages": [message("c")],
            },
        )
    assert [r.json()["verified"] for r in (first, second_browser, forged)] == [True, True, False]
    await run_worker_burst(settings)
    async with sessions() as session:
        rows = (await session.exec(select(Message).where(Message.tenant_id == tenant.id))).all()
        by_text = {}
        for row in rows:
            if row.direction == "inbound":
                conversation = await session.get(Conversation, row.conversation_id)
                by_text[row.text] = conversation.customer_id if conversation else None
        users = (
            await session.exec(
                select(CustomerIdentity).where(
                    CustomerIdentity.tenant_id == tenant.id, CustomerIdentity.kind == "web_user"
                )
            )
        ).all()
    assert by_text["a"] == by_text["b"] != by_text["c"] and by_text["c"] is not None
    assert [(u.value, u.customer_id) for u in users] == [("42", by_text["a"])]


@hypothesis_settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    user_id=st.text(min_size=1, max_size=60),
    claimed=st.one_of(st.none(), st.text(max_size=80)),
    secret=st.text(min_size=1, max_size=40),
)
def test_no_hash_but_the_secrets_own_ever_verifies(user_id: str, claimed: str | None, secret: str) -> None:
    right = user_hash(secret, user_id)
    expect = (
        user_id
        if claimed is not None and claimed.strip().lower() == right and user_id.isprintable()
        else None
    )
    assert verified_user(secret, user_id, claimed) == expect
    assert verified_user(None, user_id, right) is None
    assert verified_user(secret + "x", user_id, right) is None


def test_the_widget_stays_within_its_size_budget() -> None:
    assert len(gzip.compress(WIDGET.read_bytes(), 9)) <= 40 * 1024
    script = WIDGET.read_text()
    assert "innerHTML" not in script and "eval(" not in script


async def test_the_service_serves_the_widget(make_settings) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    async with web_app(settings) as url, httpx.AsyncClient() as client:
        response = await client.get(url + "/web/widget.js")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/javascript")
    assert response.content == WIDGET.read_bytes()


SATURDAY_NOON = datetime(2026, 12, 12, 11, 0, tzinfo=UTC)  # 12:00 in Madrid
WEEKDAYS_9_TO_6 = {
    "enabled": True,
    "timezone": "Europe/Madrid",
    "schedule": [
        {"day": d, "opens": "09:00", "closes": "18:00"} for d in ("mon", "tue", "wed", "thu", "fri")
    ],
}


async def _set_hours(sessions, tenant, **section: Any) -> None:  # type: ignore[no-untyped-def]
    async with sessions() as session, session.begin():
        row = await session.get(Tenant, tenant.id)
        set_section(row, "hours", **section)
        session.add(row)


@pytest.mark.parametrize(
    ("at", "section", "expected"),
    [
        (
            SATURDAY_NOON,
            WEEKDAYS_9_TO_6,
            {
                "open": False,
                "opens_at": "2026-12-14T08:00:00+00:00",
                "opens": {
                    "en": "on Monday 14 December at 09:00",
                    "es": "el lunes 14 de diciembre a las 09:00",
                },
            },
        ),
        (
            datetime(2026, 12, 13, 20, 0, tzinfo=UTC),  # Sunday 21:00 in Madrid
            WEEKDAYS_9_TO_6,
            {
                "open": False,
                "opens_at": "2026-12-14T08:00:00+00:00",
                "opens": {"en": "tomorrow at 09:00", "es": "mañana a las 09:00"},
            },
        ),
        (datetime(2026, 12, 14, 9, 0, tzinfo=UTC), WEEKDAYS_9_TO_6, {"open": True}),  # Monday 10:00
        (SATURDAY_NOON, {"enabled": False}, {"open": True}),  # hours off: always open
    ],
)
async def test_the_config_says_whether_the_team_answers_now_and_when_it_opens(
    make_settings, make_tenant, sessions, monkeypatch, at, section, expected
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(hours, "utcnow", lambda: at)
    settings = make_settings()
    tenant = await make_tenant()
    account, _ = await connect_web(sessions, tenant, settings)
    await _set_hours(sessions, tenant, **section)
    async with web_app(settings) as url, httpx.AsyncClient() as client:
        config = await client.get(
            url + "/web/v1/config", params={"key": account.external_account_id}, headers={"Origin": ORIGIN}
        )
    assert config.status_code == 200
    assert config.json()["availability"] == expected
