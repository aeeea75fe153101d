"""Private notes on a conversation: what a person keeps for the team.

A note is not a message: it has its own table (``conversation_notes``), so nothing that sends or reads
messages sees it: not the outbox, not the model's history (:mod:`~switchboard.conversations.history`),
not the handoff summary, not the customer's memory. Only the console's thread shows it, marked private.
"""

from __future__ import annotations

import uuid

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import Conversation, ConversationNote
from switchboard.validation import check_text

__all__ = ["NOTE_MAX_CHARS", "add_note", "notes_of"]

NOTE_MAX_CHARS = 4096
"""Longest note kept at once."""


def add_note(
    session: AsyncSession,
    *,
    conversation: Conversation,
    text: str,
    author_name: str,
    user_id: uuid.UUID | None = None,
    agent_id: uuid.UUID | None = None,
) -> ConversationNote:
    """Keep a note on ``conversation`` (added to the caller's transaction).

    Args:
        author_name: who wrote it, as the thread shows it.
        user_id: the console user who wrote it; ``agent_id``: the WhatsApp agent (``/note``).

    Raises:
        ValueError: empty, longer than :data:`NOTE_MAX_CHARS`, or holding characters Postgres cannot store
            (the message says which, for the person).
    """
    text = check_text(text, field="The note", max_length=NOTE_MAX_CHARS)
    note = ConversationNote(
        tenant_id=conversation.tenant_id,
        conversation_id=conversation.id,
        text=text,
        author_name=(author_name or "")[:200],
        user_id=user_id,
        agent_id=agent_id,
    )
    session.add(note)
    return note


async def notes_of(
    session: AsyncSession, *, tenant_id: uuid.UUID, conversation_id: uuid.UUID
) -> list[ConversationNote]:
    """The conversation's notes, oldest first."""
    query = (
        select(ConversationNote)
        .where(ConversationNote.tenant_id == tenant_id, ConversationNote.conversation_id == conversation_id)
        .order_by(col(ConversationNote.created_at), col(ConversationNote.id))
    )
    return list((await session.exec(query)).all())
