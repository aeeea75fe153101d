"""A long conversation's history folded into a summary, off the turn: the reply is sent first.

A turn whose history after the last summary is longer than ``llm.summarize_after_messages`` answers
with the messages verbatim (trimming bounds the prompt) and asks for a summary:
:func:`summarize_history` folds the older ones (all but the newest ``keep_verbatim_messages``) into
one text by a model call and stores it on that turn's row (``turns.summary_text``,
``summary_through_message_id``), where the next turn reads it. It runs as the background job
``summarize_history`` (:mod:`switchboard.queue.jobs`), or after the turn is written in a process
without a queue. ``ctx`` holds ``resources`` and ``model_gateway`` (the worker's ``on_startup``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import update
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.agent.prompt import SUMMARY_MAX_CHARS, summary_messages
from switchboard.conversations import model_messages, read_history
from switchboard.crypto import CredentialDecryptError
from switchboard.db.models import Message, MessageRole, Tenant, Turn
from switchboard.llm.config import LLMSettings
from switchboard.llm.router import ModelCallFailed, ModelGateway
from switchboard.llm.trimming import strip_reasoning
from switchboard.memory.notes import NotesRejected, check_notes, evidence_from_notes
from switchboard.observability import get_logger
from switchboard.tenant_settings import cached_tenant_settings

__all__ = ["split_for_summary", "summarize_history", "summarize_history_job"]

log = get_logger(__name__)


def split_for_summary(rows: Sequence[Message], llm: LLMSettings) -> tuple[list[Message], list[Message]]:
    """``(older, verbatim)``: the rows a summary folds and the newest ``keep_verbatim_messages`` (a tool
    result never starts the verbatim part: it joins its call in the older ones)."""
    older, verbatim = list(rows[: -llm.keep_verbatim_messages]), list(rows[-llm.keep_verbatim_messages :])
    while verbatim and verbatim[0].role == MessageRole.tool:
        older.append(verbatim.pop(0))
    return older, verbatim


async def _last_summary(
    session: AsyncSession, conversation_id: uuid.UUID
) -> tuple[str | None, uuid.UUID | None]:
    found = (
        await session.exec(
            select(Turn.summary_text, Turn.summary_through_message_id)
            .where(Turn.conversation_id == conversation_id, col(Turn.summary_through_message_id).is_not(None))
            .order_by(col(Turn.created_at).desc(), col(Turn.id).desc())
            .limit(1)
        )
    ).first()
    return (found[0], found[1]) if found else (None, None)


async def summarize_history(
    sessions: async_sessionmaker[AsyncSession],
    gateway: ModelGateway,
    *,
    tenant_id: uuid.UUID,
    conversation_id: uuid.UUID,
    turn_id: uuid.UUID,
    trace_id: str,
) -> str | None:
    """Fold the conversation's older messages into a summary stored on turn ``turn_id``; never raises.

    Returns:
        The summary stored, or ``None``: the history is short enough again (summarized meanwhile), the
        tenant is gone, the model failed (``history_summary_failed``) or its text was rejected
        (``history_summary_rejected``): the next long turn asks again.
    """
    async with sessions() as session:
        tenant = await session.get(Tenant, tenant_id)
        if tenant is None:
            return None
        settings = cached_tenant_settings(tenant.settings_extensions, tenant_id=str(tenant_id))
        previous, through = await _last_summary(session, conversation_id)
        rows = await read_history(
            session, tenant_id=tenant_id, conversation_id=conversation_id, after_message_id=through
        )
    llm = settings.llm
    if len(rows) <= llm.summarize_after_messages:
        return None
    older, _ = split_for_summary(rows, llm)
    if not older:
        return None
    try:
        router = gateway.router_for(tenant_id, llm)
        reply = await gateway.complete(
            router,
            summary_messages(previous, model_messages(older)),
            tools=None,
            llm=llm,
            trace_id=trace_id,
            deadline=time.monotonic() + settings.loop.turn_timeout_s,
        )
    except (ModelCallFailed, CredentialDecryptError) as exc:
        log.warning("history_summary_failed", trace_id=trace_id, error=str(exc)[:300])
        return None
    said = [
        r.text or ""
        for r in older
        if r.role in (MessageRole.assistant, MessageRole.human_agent, MessageRole.tool)
    ]
    try:
        text = check_notes(
            strip_reasoning(reply.content) or "",
            max_chars=SUMMARY_MAX_CHARS,
            evidence=[*said, *evidence_from_notes(previous)],
        )
    except NotesRejected as exc:
        log.warning("history_summary_rejected", trace_id=trace_id, reason=exc.reason, detail=exc.detail)
        return None
    async with sessions() as session, session.begin():
        await session.exec(
            update(Turn)
            .where(col(Turn.id) == turn_id, col(Turn.summary_through_message_id).is_(None))
            .values(summary_text=text, summary_through_message_id=older[-1].id)
        )
    log.info("history_summarized", trace_id=trace_id, summarized_messages=len(older))
    return text


async def summarize_history_job(
    ctx: dict[str, Any], tenant_id: str, conversation_id: str, turn_id: str, trace_id: str
) -> str:
    """Job: :func:`summarize_history` after a long turn. Returns ``summarized`` or ``unchanged``."""
    text = await summarize_history(
        ctx["resources"].sessions,
        ctx["model_gateway"],
        tenant_id=uuid.UUID(tenant_id),
        conversation_id=uuid.UUID(conversation_id),
        turn_id=uuid.UUID(turn_id),
        trace_id=trace_id,
    )
    return "summarized" if text is not None else "unchanged"
