"""The inbox's filters and search, media on the conversation page, the live event stream, and every
service's /docs served from vendored files (no CDN)."""

from __future__ import annotations

import asyncio
import json

import httpx
from switchboard.console.inbox import InboxFilters, Mode, list_inbox
from switchboard.db.models import Conversation, Message, Role
from switchboard.live_updates import publish_conversation_event, tenant_channel

from tests.utils.console import log_in, new_user
from tests.utils.handoff import make_customer_conversation, reload
from tests.utils.whatsapp import connect_whatsapp, new_media_id


async def test_inbox_filters_search_and_unread(console_client, sessions, make_tenant):
    tenant = await make_tenant()
    _, first = await make_customer_conversation(
        sessions, tenant, name="Ana Lima", texts=("my parcel is late",)
    )
    _, second = await make_customer_conversation(
        sessions, tenant, name="Bruno Diaz", texts=("opening hours?",)
    )
    async with sessions() as session, session.begin():
        closed = await session.get(Conversation, second.id)
        closed.status = "closed"
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    async with sessions() as session:
        every = await list_inbox(session, tenant_id=tenant.id, viewer_id=user.id)
        by_text = await list_inbox(session, tenant_id=tenant.id, filters=InboxFilters(q="PARCEL"))
        by_name = await list_inbox(session, tenant_id=tenant.id, filters=InboxFilters(q="bruno"))
        only_closed = await list_inbox(session, tenant_id=tenant.id, filters=InboxFilters(mode=Mode.closed))
        only_ai = await list_inbox(session, tenant_id=tenant.id, filters=InboxFilters(mode=Mode.ai))
        no_gmail = await list_inbox(session, tenant_id=tenant.id, filters=InboxFilters(channel="gmail"))
    assert [r.conversation_id for r in every] == [second.id, first.id]  # newest activity first
    assert all(r.unread for r in every)
    assert [r.conversation_id for r in by_text] == [first.id]
    assert [r.conversation_id for r in by_name] == [second.id]
    assert [r.conversation_id for r in only_closed] == [second.id]
    assert [r.conversation_id for r in only_ai] == [first.id]
    assert no_gmail == []
    async with console_client() as client:
        await log_in(client, user)
        assert (await client.get(f"/t/{tenant.slug}/conversations/{first.id}")).status_code == 200
        unread = await client.get(
            f"/t/{tenant.slug}/inbox", params={"unread": "true"}, headers={"HX-Request": "true"}
        )
        searched = await client.get(f"/t/{tenant.slug}/inbox", params={"q": "hours"})
    assert "Bruno Diaz" in unread.text and "Ana Lima" not in unread.text  # opened: read
    assert "<table" in unread.text and "<html" not in unread.text  # htmx gets only the rows
    assert "Bruno Diaz" in searched.text and "Ana Lima" not in searched.text


async def test_media_is_shown_from_the_channel_and_only_safe_types_inline(
    console_client, sessions, make_tenant, settings, graph_sandbox
):
    tenant = await make_tenant()
    account = await connect_whatsapp(sessions, tenant, settings)
    _, conversation = await make_customer_conversation(sessions, tenant, texts=())
    image_id, pdf_id = new_media_id(), new_media_id()
    async with httpx.AsyncClient() as http:
        await http.put(
            f"{graph_sandbox[0]}/_control/media/{image_id}",
            content=b"\xff\xd8\xffjpeg",
            headers={"content-type": "image/jpeg"},
        )
        await http.put(
            f"{graph_sandbox[0]}/_control/media/{pdf_id}",
            content=b"%PDF-1.4 fake",
            headers={"content-type": "application/pdf"},
        )
    async with sessions() as session, session.begin():
        message = Message(
            tenant_id=tenant.id,
            conversation_id=conversation.id,
            channel="whatsapp",
            channel_account_id=account.id,
            direction="inbound",
            role="user",
            kind="image",
            text="it arrived broken",
            media=[
                {"ref": image_id, "mime": "image/jpeg"},
                {"ref": pdf_id, "mime": "application/pdf", "filename": "invoice.pdf"},
            ],
        )
        session.add(message)
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    async with console_client() as client:
        await log_in(client, user)
        page = await client.get(f"/t/{tenant.slug}/conversations/{conversation.id}")
        base = f"/t/{tenant.slug}/messages/{message.id}/media"
        assert (
            f'<img src="{base}/0"' in page.text
            and f'href="{base}/1"' in page.text
            and "invoice.pdf" in page.text
        )
        image = await client.get(f"{base}/0")
        pdf = await client.get(f"{base}/1")
        missing = await client.get(f"{base}/2")
    assert (image.status_code, image.content, image.headers["content-type"]) == (
        200,
        b"\xff\xd8\xffjpeg",
        "image/jpeg",
    )
    assert image.headers["x-content-type-options"] == "nosniff" and image.headers[
        "content-disposition"
    ].startswith("inline")
    assert pdf.headers["content-type"] == "application/octet-stream"
    assert pdf.headers["content-disposition"] == 'attachment; filename="invoice.pdf"'
    assert missing.status_code == 404


async def test_events_stream_carries_the_tenants_conversation_events(
    console_url, sessions, make_tenant, arq_pool
):
    tenant, other = await make_tenant(), await make_tenant()
    user = await new_user(sessions, role=Role.agent, tenant_id=tenant.id)
    # a real server: httpx's in-process transport would wait for the (endless) stream to end
    async with httpx.AsyncClient(base_url=console_url, headers={"Accept": "text/html"}) as client:
        await log_in(client, user)
        seen: list[str] = []

        async def read() -> None:
            async with client.stream("GET", f"/t/{tenant.slug}/events") as stream:
                async for line in stream.aiter_lines():
                    seen.append(line)
                    if line.startswith("data:") and "conversation_id" in line:
                        return

        reader = asyncio.create_task(read())
        for _ in range(100):  # until the stream is subscribed (the "ready" event)
            if any("ready" in line for line in seen):
                break
            await asyncio.sleep(0.05)
        await publish_conversation_event(arq_pool, tenant_id=other.id, conversation_id=None, kind="message")
        await publish_conversation_event(arq_pool, tenant_id=tenant.id, conversation_id="c-1", kind="reply")
        try:
            await asyncio.wait_for(reader, 10)
        except TimeoutError:
            raise AssertionError(f"no event; the stream said {seen}") from None
    data = [json.loads(line[5:]) for line in seen if line.startswith("data:") and "conversation_id" in line]
    assert data == [{"conversation_id": "c-1", "kind": "reply"}]  # the other tenant's event never arrives
    assert tenant_channel(tenant.id) == f"console:tenant:{tenant.id}"


async def test_docs_pages_load_swagger_ui_from_vendored_files(console_client):
    async with console_client() as client:
        docs = await client.get("/docs")
        assert docs.status_code == 200
        assert (
            "cdn.jsdelivr" not in docs.text and "/_static/swagger-ui-5.35.0/swagger-ui-bundle.js" in docs.text
        )
        bundle = await client.get("/_static/swagger-ui-5.35.0/swagger-ui-bundle.js")
        css = await client.get("/_static/swagger-ui-5.35.0/swagger-ui.css")
        htmx = await client.get("/static/htmx-2.0.11.min.js")
    assert bundle.status_code == 200 and len(bundle.content) > 1_000_000
    assert css.status_code == 200 and htmx.status_code == 200 and b"htmx" in htmx.content[:2000]


async def test_conversation_of_another_tenant_is_not_found(console_client, sessions, make_tenant):
    mine, theirs = await make_tenant(), await make_tenant()
    _, conversation = await make_customer_conversation(sessions, theirs)
    user = await new_user(sessions, role=Role.tenant_admin, tenant_id=mine.id)
    async with console_client() as client:
        me = await log_in(client, user)
        shown = await client.get(f"/t/{mine.slug}/conversations/{conversation.id}")
        taken = await me.post_form(f"/t/{mine.slug}/conversations/{conversation.id}/takeover")
    assert shown.status_code == 404 and taken.status_code == 404
    assert (await reload(sessions, Conversation, conversation.id)).status == "ai"
