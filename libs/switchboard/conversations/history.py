"""A conversation's history, read and appended in one place.

* :func:`read_history` is the one reader: a conversation's ``messages`` rows of the given roles,
  oldest first (``created_at``, then id), bounded to the newest ``limit``. Two shapes on top:
  :func:`model_messages` (OpenAI chat messages for the orchestrator) and :func:`transcript_lines`
  (``Customer: ...`` lines for handoff summaries and memory); :func:`transcript` reads and shapes.
* :func:`append_message` is the one writer of history rows (replies, tool calls and results, relayed
  agent replies, hand-back notes); :func:`append_model_messages` stores a turn's OpenAI-shaped messages.
  Inbound rows are written by the channel services (they double as the durable queue), not here.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import tuple_
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import Conversation, Message, MessageDirection, MessageRole
from switchboard.llm.trimming import repair_tool_pairs
from switchboard.replies.parts import CHOICE_KINDS, chosen_option_text

__all__ = [
    "HISTORY_MAX_MESSAGES",
    "MODEL_ROLES",
    "TRANSCRIPT_ROLES",
    "append_message",
    "append_model_messages",
    "model_messages",
    "read_history",
    "transcript",
    "transcript_lines",
]

MODEL_ROLES = ("user", "assistant", "tool", "human_agent")
"""Roles the model sees as history."""
TRANSCRIPT_ROLES = ("user", "assistant", "human_agent")
"""Roles of a plain transcript (no tool traffic)."""
HISTORY_MAX_MESSAGES = 500
"""Upper bound of rows :func:`read_history` returns by default (the newest are kept)."""
_SPEAKERS = {"user": "Customer", "assistant": "Assistant", "human_agent": "Team"}


async def read_history(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    conversation_id: uuid.UUID,
    roles: Sequence[str] = MODEL_ROLES,
    after_message_id: uuid.UUID | None = None,
    exclude_message_id: uuid.UUID | None = None,
    limit: int | None = HISTORY_MAX_MESSAGES,
) -> list[Message]:
    """The conversation's rows with ``roles``, oldest first, at most the newest ``limit``.

    Args:
        after_message_id: only rows after this one (e.g. the last row a stored summary covers); when it
            is not a row of this conversation, rows are read from the start.
        exclude_message_id: leave this row out (the inbound message being answered).
        limit: keep the newest this many (``None``: all).
    """
    query = select(Message).where(
        Message.tenant_id == tenant_id,
        Message.conversation_id == conversation_id,
        col(Message.role).in_(tuple(roles)),
    )
    if exclude_message_id is not None:
        query = query.where(Message.id != exclude_message_id)
    if after_message_id is not None:
        anchor = await session.get(Message, after_message_id)
        if anchor is not None and anchor.conversation_id == conversation_id and anchor.tenant_id == tenant_id:
            query = query.where(
                tuple_(col(Message.created_at), col(Message.id)) > tuple_(anchor.created_at, anchor.id)
            )
    query = query.order_by(col(Message.created_at).desc(), col(Message.id).desc())
    if limit is not None:
        query = query.limit(limit)
    return list(reversed((await session.exec(query)).all()))


def model_messages(rows: Sequence[Message]) -> list[dict[str, Any]]:
    """Stored rows → OpenAI chat messages (a human agent's lines become marked assistant lines; tool
    calls and results stay paired, see :func:`~switchboard.llm.trimming.repair_tool_pairs`)."""
    out: list[dict[str, Any]] = []
    for row in rows:
        text = row.text or ""
        if row.role == MessageRole.user:
            payload = ((row.raw or {}).get("normalized") or {}).get("payload")
            if row.kind in CHOICE_KINDS and isinstance(payload, str):
                text = chosen_option_text(text, payload)  # the chosen id stays in what the model reads
            out.append({"role": "user", "content": text or f"[{row.kind}]"})
        elif row.role == MessageRole.human_agent:
            out.append({"role": "assistant", "content": f"(a person from the team wrote) {text}"})
        elif row.role == MessageRole.assistant:
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if row.tool_calls:
                message["tool_calls"] = row.tool_calls
            out.append(message)
        elif row.role == MessageRole.tool:
            out.append({"role": "tool", "tool_call_id": row.tool_call_id or "", "content": text})
    return repair_tool_pairs(out)


def transcript_lines(rows: Sequence[Message], *, max_chars: int = 200) -> list[str]:
    """``Customer: ...`` / ``Assistant: ...`` / ``Team: ...`` lines (rows without text skipped), each
    message cut to ``max_chars``."""
    out = []
    for row in rows:
        text = (row.text or "").strip()
        if row.role in _SPEAKERS and text:
            out.append(f"{_SPEAKERS[row.role]}: {text[:max_chars]}")
    return out


async def transcript(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    conversation_id: uuid.UUID,
    limit: int,
    max_chars: int = 200,
) -> list[str]:
    """The newest ``limit`` customer/assistant/team messages as :func:`transcript_lines`."""
    rows = await read_history(
        session, tenant_id=tenant_id, conversation_id=conversation_id, roles=TRANSCRIPT_ROLES, limit=limit
    )
    return transcript_lines(rows, max_chars=max_chars)


def append_message(
    session: AsyncSession,
    *,
    conversation: Conversation,
    role: MessageRole | str,
    text: str | None,
    direction: MessageDirection | str = MessageDirection.outbound,
    kind: str = "text",
    media: Sequence[dict[str, Any]] = (),
    tool_calls: list[dict[str, Any]] | None = None,
    tool_call_id: str | None = None,
    proxy_metadata: dict[str, Any] | None = None,
    trace_id: str | None = None,
    created_at: datetime | None = None,
) -> Message:
    """Stage one history row of ``conversation`` (its tenant, channel and channel account) in ``session``.

    Args:
        role: ``assistant``, ``tool``, ``human_agent``... (a :class:`~switchboard.db.models.MessageRole`).
        kind: ``text``, ``tool_call``, ``tool_result``, ``system``, a media kind...
        media: media references ``{ref, mime, ...}`` (relayed media).
        proxy_metadata: set on relayed messages (who sent it, relayed from/to, original message id).
        created_at: default now; a turn's rows pass increasing times to keep their order.
    """
    row = Message(
        tenant_id=conversation.tenant_id,
        conversation_id=conversation.id,
        channel=conversation.channel,
        channel_account_id=conversation.channel_account_id,
        direction=str(direction),
        role=str(role),
        kind=kind,
        text=text,
        media=[dict(m) for m in media],
        tool_calls=tool_calls,
        tool_call_id=tool_call_id,
        proxy_metadata=proxy_metadata,
        trace_id=trace_id,
    )
    if created_at is not None:
        row.created_at = created_at
    session.add(row)
    return row


def append_model_messages(
    session: AsyncSession,
    *,
    conversation: Conversation,
    messages: Sequence[dict[str, Any]],
    trace_id: str,
    at: datetime,
) -> list[Message]:
    """Stage a turn's OpenAI-shaped messages (assistant tool calls, tool results, the reply) in order,
    one microsecond apart from ``at``, so the next turn reads them back in the same order."""
    rows = []
    for index, message in enumerate(messages):
        is_tool = message["role"] == MessageRole.tool
        rows.append(
            append_message(
                session,
                conversation=conversation,
                role=message["role"],
                text=message.get("content") or None,
                kind="tool_result" if is_tool else ("tool_call" if message.get("tool_calls") else "text"),
                tool_calls=message.get("tool_calls"),
                tool_call_id=message.get("tool_call_id"),
                trace_id=trace_id,
                created_at=at + timedelta(microseconds=index + 1),
            )
        )
    return rows
