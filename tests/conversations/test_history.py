"""History: one reader (ordered, bounded, shaped for the model or for transcripts) and one appender."""

from __future__ import annotations

import uuid
from datetime import timedelta

from switchboard.conversations import (
    append_message,
    append_model_messages,
    model_messages,
    read_history,
    transcript,
)
from switchboard.db.models import ChannelAccount, Conversation, utcnow

from tests.utils.handoff import make_customer_conversation

TOOL_CALL = {"id": "call-1", "type": "function", "function": {"name": "get_order_status", "arguments": "{}"}}


async def _conversation_with_history(sessions, make_tenant):  # type: ignore[no-untyped-def]
    """A conversation with one of each kind of row, one second apart, written through the appender."""
    tenant = await make_tenant()
    _, conversation = await make_customer_conversation(sessions, tenant, texts=())
    start = utcnow() - timedelta(minutes=10)
    rows = [
        dict(role="user", direction="inbound", text="Where is my order A-1?"),
        dict(role="assistant", text=None, kind="tool_call", tool_calls=[TOOL_CALL]),
        dict(role="tool", text='{"status": "shipped"}', kind="tool_result", tool_call_id="call-1"),
        dict(role="assistant", text="It shipped yesterday."),
        dict(role="system", text="internal note", kind="system"),
        dict(role="user", direction="inbound", text=None, kind="sticker"),
        dict(role="human_agent", text="Hi, Nia here."),
    ]
    ids = []
    async with sessions() as session, session.begin():
        for index, fields in enumerate(rows):
            row = append_message(
                session, conversation=conversation, created_at=start + timedelta(seconds=index), **fields
            )
            ids.append(row.id)
    return tenant, conversation, ids


async def test_read_history_is_ordered_filtered_and_bounded(sessions, make_tenant) -> None:  # type: ignore[no-untyped-def]
    tenant, conversation, ids = await _conversation_with_history(sessions, make_tenant)
    async with sessions() as session:
        every = await read_history(session, tenant_id=tenant.id, conversation_id=conversation.id)
        newest_two = await read_history(
            session, tenant_id=tenant.id, conversation_id=conversation.id, limit=2
        )
        after = await read_history(
            session,
            tenant_id=tenant.id,
            conversation_id=conversation.id,
            after_message_id=ids[3],
            exclude_message_id=ids[6],
        )
        unknown_anchor = await read_history(
            session, tenant_id=tenant.id, conversation_id=conversation.id, after_message_id=uuid.uuid4()
        )
        other_tenant = await read_history(session, tenant_id=uuid.uuid4(), conversation_id=conversation.id)
    assert [r.id for r in every] == [ids[0], ids[1], ids[2], ids[3], ids[5], ids[6]]  # no system row
    assert [r.id for r in newest_two] == [ids[5], ids[6]]
    assert [r.id for r in after] == [ids[5]]
    assert [r.id for r in unknown_anchor] == [r.id for r in every]
    assert other_tenant == []


async def test_shapes_for_the_model_and_for_transcripts(sessions, make_tenant) -> None:  # type: ignore[no-untyped-def]
    tenant, conversation, _ = await _conversation_with_history(sessions, make_tenant)
    async with sessions() as session:
        rows = await read_history(session, tenant_id=tenant.id, conversation_id=conversation.id)
        lines = await transcript(
            session, tenant_id=tenant.id, conversation_id=conversation.id, limit=10, max_chars=12
        )
    assert model_messages(rows) == [
        {"role": "user", "content": "Where is my order A-1?"},
        {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
        {"role": "tool", "tool_call_id": "call-1", "content": '{"status": "shipped"}'},
        {"role": "assistant", "content": "It shipped yesterday."},
        {"role": "user", "content": "[sticker]"},
        {"role": "assistant", "content": "(a person from the team wrote) Hi, Nia here."},
    ]
    assert lines == [
        "Customer: Where is my ",
        "Assistant: It shipped y",
        "Team: Hi, Nia here",
    ]  # 12 chars each


async def test_appended_rows_carry_the_conversations_tenant_channel_and_number(sessions, make_tenant) -> None:  # type: ignore[no-untyped-def]
    tenant = await make_tenant()
    _, conversation = await make_customer_conversation(sessions, tenant, texts=())
    async with sessions() as session, session.begin():
        account = ChannelAccount(
            tenant_id=tenant.id, channel="whatsapp", external_account_id=uuid.uuid4().hex
        )
        session.add(account)
        stored = await session.get(Conversation, conversation.id)
        stored.channel_account_id = account.id
        await session.flush()
        at = utcnow()
        rows = append_model_messages(
            session,
            conversation=stored,
            messages=[
                {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
                {"role": "tool", "tool_call_id": "call-1", "content": "ok"},
                {"role": "assistant", "content": "Done."},
            ],
            trace_id="trace-1",
            at=at,
        )
    assert [
        (r.tenant_id, r.channel, r.channel_account_id, r.direction, r.role, r.kind, r.text, r.trace_id)
        for r in rows
    ] == [
        (tenant.id, "whatsapp", account.id, "outbound", "assistant", "tool_call", None, "trace-1"),
        (tenant.id, "whatsapp", account.id, "outbound", "tool", "tool_result", "ok", "trace-1"),
        (tenant.id, "whatsapp", account.id, "outbound", "assistant", "text", "Done.", "trace-1"),
    ]
    assert [r.created_at - at for r in rows] == [timedelta(microseconds=n) for n in (1, 2, 3)]
    async with sessions() as session:
        back = await read_history(session, tenant_id=tenant.id, conversation_id=conversation.id)
    assert [r.id for r in back] == [r.id for r in rows]
