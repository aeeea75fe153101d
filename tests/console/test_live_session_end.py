"""An open live-event stream ends with its session: logout, expiry, deactivation, password change."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import update
from switchboard.db.models import ConsoleSession, ConsoleUser, Role, utcnow
from switchboard.live_updates import publish_conversation_event
from switchboard.users import set_password

from services.console.main import create_app
from tests.utils.console import LoggedIn, log_in, new_user
from tests.utils.servers import serve_app


@pytest.fixture
async def console_url(make_settings: Callable[..., Any]) -> AsyncIterator[str]:
    """The console over HTTP, re-checking open streams every 0.3 s."""
    async with serve_app(create_app(make_settings(console_stream_check_s=0.3))) as url:
        yield url


async def _stream_until_end(
    me: LoggedIn, slug: str, end_it: Callable[[], Awaitable[None]], arq_pool: Any, tenant_id: Any
) -> list[str]:
    """Open the tenant's stream, check it delivers, run ``end_it``; the lines seen until the stream
    closed by itself (fails after 10 s)."""
    seen: list[str] = []

    async def read() -> None:
        async with me.client.stream("GET", f"/t/{slug}/events") as stream:
            async for line in stream.aiter_lines():
                seen.append(line)

    reader = asyncio.create_task(read())
    for _ in range(200):
        if any("ready" in line for line in seen):
            break
        await asyncio.sleep(0.05)
    await publish_conversation_event(arq_pool, tenant_id=tenant_id, conversation_id="before", kind="reply")
    for _ in range(100):
        if any("before" in line for line in seen):
            break
        await asyncio.sleep(0.05)
    assert any("before" in line for line in seen), seen
    await end_it()
    try:
        await asyncio.wait_for(reader, 10)
    except TimeoutError:
        reader.cancel()
        raise AssertionError(f"the stream is still open after the session ended: {seen}") from None
    await publish_conversation_event(arq_pool, tenant_id=tenant_id, conversation_id="after", kind="reply")
    return seen


@pytest.mark.parametrize("how", ["logout", "expiry", "deactivation", "password change"])
async def test_the_stream_ends_when_the_session_does(how, console_url, sessions, make_tenant, arq_pool):
    tenant = await make_tenant()
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    async with httpx.AsyncClient(base_url=console_url, headers={"Accept": "text/html"}) as client:
        me = await log_in(client, user)

        async def end_it() -> None:
            if how == "logout":
                assert (await me.post_form("/logout")).status_code == 303
                return
            async with sessions() as session, session.begin():
                if how == "expiry":
                    await session.execute(
                        update(ConsoleSession)
                        .where(ConsoleSession.user_id == user.id)
                        .values(expires_at=utcnow() - timedelta(seconds=1))
                    )
                elif how == "deactivation":
                    await session.execute(
                        update(ConsoleUser).where(ConsoleUser.id == user.id).values(is_active=False)
                    )
                else:
                    await set_password(session, email=user.email, password="a brand new passphrase")

        seen = await _stream_until_end(me, tenant.slug, end_it, arq_pool, tenant.id)
    assert "event: ended" in seen
    assert not any("after" in line for line in seen)
    # the browser cannot open a new one
    async with httpx.AsyncClient(base_url=console_url, cookies=client.cookies) as again:
        reopened = await again.get(f"/t/{tenant.slug}/events")
    assert reopened.status_code in (303, 401)
