"""Customer satisfaction: one question when a conversation closes, one answer, counted in analytics.

:func:`ask` runs inside :func:`switchboard.conversations.lifecycle.close`, in the caller's transaction,
so every way a conversation closes (the console, ``/close`` on WhatsApp, the AI's ``end_conversation``,
the idle close, the API) asks the same way. A ``csat_answers`` row is unique per conversation: the
question is written to the outbox only by the close that inserted it, so a conversation reopened and
closed again is never asked twice. The question goes out as the channel's own buttons (WhatsApp reply
buttons, Instagram quick replies, the web chat's buttons); each button's id names the conversation
and the rating (``csat:<conversation id>:<1-5>``, :func:`parse_payload`), so the customer's tap is
recognised before any model turn and stored by :func:`record_answer`. An e-mail gets one signed link
per answer (:mod:`switchboard.channels.gmail.csat`), opened in the console, with an optional comment box.

After a tapped rating the customer is invited to add a comment (``csat.comment_question``): their next
text message on the same channel within ``csat.comment_window_s`` belongs to the rated conversation
(:func:`awaiting_comment`) and is kept as the comment (:func:`record_comment`), with no model turn.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import update
from sqlalchemy.dialects.postgresql import insert
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.channels.base import OutboundPart
from switchboard.channels.gmail.csat import KIND as EMAIL_KIND
from switchboard.conversations.history import append_message
from switchboard.db.models import (
    ActorType,
    ConversationEvent,
    ConversationStatus,
    CsatAnswer,
    Customer,
    MessageRole,
    OutboxPurpose,
    utcnow,
)
from switchboard.db.models import Conversation as ConversationRow
from switchboard.i18n import N_, gettext
from switchboard.observability import get_logger
from switchboard.outbox import OutboxItem, reply_items, write_outbox
from switchboard.replies.parts import QuickReplies, ReplyOption
from switchboard.storable import clean_text
from switchboard.tenant_settings import load_tenant_settings

__all__ = [
    "ASKED_CHANNELS",
    "PAYLOAD_PREFIX",
    "RATINGS",
    "Rating",
    "COMMENT_MAX_CHARS",
    "ask",
    "awaiting_comment",
    "parse_payload",
    "record_comment",
    "rated_conversation",
    "record_answer",
]

log = get_logger(__name__)

PAYLOAD_PREFIX = "csat:"
"""Start of every rating button's id: ``csat:<conversation id>:<rating>``."""
ASKED_CHANNELS = frozenset({"whatsapp", "instagram", "web", "gmail"})
"""Channels whose customers are asked: buttons of their own, or (e-mail) a signed link per answer."""

COMMENT_MAX_CHARS = 2_000
"""Longest comment kept (the column's bound); a longer one is cut."""
COMMENT_WINDOW_MAX_S = 86_400
"""The longest ``csat.comment_window_s`` a tenant may set."""

RATINGS: tuple[tuple[int, str], ...] = ((5, N_("Good")), (3, N_("OK")), (1, N_("Bad")))
"""The answers offered, best first: rating (1-5) and the button's title (translated)."""


@dataclass(frozen=True)
class Rating:
    """A tapped rating button: the conversation it rates and the rating (1-5)."""

    conversation_id: uuid.UUID
    rating: int


def parse_payload(payload: object) -> Rating | None:
    """The rating a button id carries (``csat:<uuid>:<1-5>``), or ``None`` for any other payload."""
    if not isinstance(payload, str) or not payload.startswith(PAYLOAD_PREFIX):
        return None
    _, _, rest = payload.partition(PAYLOAD_PREFIX)
    conversation, _, rating = rest.strip().rpartition(":")
    try:
        parsed = Rating(uuid.UUID(conversation), int(rating))
    except ValueError:
        return None
    return parsed if 1 <= parsed.rating <= 5 else None


async def _handled_by(
    session: AsyncSession, conversation: ConversationRow
) -> tuple[str, uuid.UUID | None, uuid.UUID | None]:
    """``(handled_by, agent_id, user_id)``: the last person who had the conversation, or the AI."""
    event = (
        await session.exec(
            select(ConversationEvent)
            .where(
                ConversationEvent.conversation_id == conversation.id,
                ConversationEvent.to_status == ConversationStatus.human.value,
            )
            .where(
                col(ConversationEvent.agent_id).is_not(None)
                | (col(ConversationEvent.actor_type) == ActorType.console_user.value)
            )
            .order_by(col(ConversationEvent.created_at).desc(), col(ConversationEvent.id).desc())
            .limit(1)
        )
    ).first()
    if event is None:
        return "ai", None, None
    if event.agent_id is not None:
        return "agent", event.agent_id, None
    return "console_user", None, uuid.UUID(event.actor_id) if event.actor_id else None


async def ask(session: AsyncSession, conversation: ConversationRow, *, now: datetime | None = None) -> bool:
    """Ask the customer of a conversation closed now how it went, once: insert its ``csat_answers`` row
    and, when this call inserted it, write the question to the outbox (purpose ``notice``) in the
    caller's transaction. The caller (or the outbox sweep) delivers it.

    Not asked: the tenant turned ``csat.enabled`` off, the channel has no buttons (e-mail), an agent's
    own console, a conversation without a channel account.

    Returns:
        Whether the question was written now.
    """
    if (
        conversation.channel not in ASKED_CHANNELS
        or conversation.is_agent_console
        or conversation.channel_account_id is None
    ):
        return False
    settings = await load_tenant_settings(session, conversation.tenant_id)
    if not settings.csat.enabled:
        return False
    customer = await session.get(Customer, conversation.customer_id)
    if customer is None:
        return False
    handled_by, agent_id, user_id = await _handled_by(session, conversation)
    inserted = (
        await session.exec(
            insert(CsatAnswer)
            .values(
                id=uuid.uuid4(),
                tenant_id=conversation.tenant_id,
                conversation_id=conversation.id,
                channel=conversation.channel,
                handled_by=handled_by,
                agent_id=agent_id,
                user_id=user_id,
                asked_at=now or utcnow(),
            )
            .on_conflict_do_nothing(constraint="uq_csat_answers_conversation")
            .returning(col(CsatAnswer.id))
        )
    ).first()
    if inserted is None:
        return False
    language = settings.locale.language
    recipient = customer.phone or customer.external_user_id
    if conversation.channel == "gmail":  # no buttons in a mail: the channel writes a signed link per answer
        options = [{"rating": rating, "title": gettext(language, title)} for rating, title in RATINGS]
        body = {"kind": EMAIL_KIND, "conversation_id": str(conversation.id), "options": options}
        items = [
            OutboxItem(
                conversation_id=conversation.id,
                channel=conversation.channel,
                channel_account_id=conversation.channel_account_id,
                recipient=recipient,
                part=OutboundPart(type="interactive", text=settings.csat.question, interactive=body),
                purpose=OutboxPurpose.notice,
            )
        ]
        await write_outbox(session, tenant_id=conversation.tenant_id, items=items)
        _keep_in_thread(
            session, conversation, settings.csat.question, [o["title"] for o in options], recipient
        )
        log.info("csat_asked", conversation_id=str(conversation.id), handled_by=handled_by)
        return True
    question = QuickReplies(
        prompt=settings.csat.question,
        options=[
            ReplyOption(id=f"{PAYLOAD_PREFIX}{conversation.id}:{rating}", title=gettext(language, title))
            for rating, title in RATINGS
        ],
    )
    items = reply_items(
        "",
        [question],
        conversation_id=conversation.id,
        channel=conversation.channel,
        channel_account_id=conversation.channel_account_id,
        recipient=recipient,
        purpose=OutboxPurpose.notice,
    )
    await write_outbox(session, tenant_id=conversation.tenant_id, items=items)
    _keep_in_thread(
        session, conversation, settings.csat.question, [o.title for o in question.options], recipient
    )
    log.info("csat_asked", conversation_id=str(conversation.id), handled_by=handled_by)
    return True


def _keep_in_thread(
    session: AsyncSession, conversation: ConversationRow, question: str, titles: list[str], to: str
) -> None:
    """Keep the question the customer is sent in the conversation's history, so the team sees it in
    the thread: a ``system`` row (a message of the platform, not of a person nor the AI: never read
    by the model, never counted as a reply in analytics), the answers offered on a line of their own."""
    append_message(
        session,
        conversation=conversation,
        role=MessageRole.system,
        kind="system",
        text=f"{question}\n" + " · ".join(titles),
        proxy_metadata={"event": "csat_asked", "relayed_to": to, "options": titles},
    )


async def record_answer(
    session: AsyncSession, *, tenant_id: uuid.UUID, customer_id: uuid.UUID | None, rating: Rating
) -> bool:
    """Store the rating of a conversation, the first answer only.

    Args:
        customer_id: the customer who tapped it (only their own conversation counts); ``None`` for a
            signed link, which names the conversation itself.

    Returns:
        Whether it was stored now (``False``: answered before, never asked, or not this customer's).
    """
    owned = select(ConversationRow.id).where(
        ConversationRow.id == rating.conversation_id, ConversationRow.tenant_id == tenant_id
    )
    if customer_id is not None:
        owned = owned.where(ConversationRow.customer_id == customer_id)
    result = await session.exec(
        update(CsatAnswer)
        .where(
            col(CsatAnswer.tenant_id) == tenant_id,
            col(CsatAnswer.conversation_id) == rating.conversation_id,
            col(CsatAnswer.conversation_id).in_(owned.scalar_subquery()),
            col(CsatAnswer.rating).is_(None),
        )
        .values(rating=rating.rating, answered_at=utcnow())
    )
    stored = bool(result.rowcount)  # type: ignore[attr-defined]
    log.info(
        "csat_answered", conversation_id=str(rating.conversation_id), rating=rating.rating, stored=stored
    )
    return stored


async def rated_conversation(
    session: AsyncSession, *, customer: Customer, rating: Rating
) -> ConversationRow | None:
    """The conversation a tapped rating names, when it is this customer's (the tap is kept in it, not
    in a new conversation); ``None`` otherwise."""
    return (
        await session.exec(
            select(ConversationRow).where(
                ConversationRow.id == rating.conversation_id,
                ConversationRow.tenant_id == customer.tenant_id,
                ConversationRow.customer_id == customer.id,
            )
        )
    ).first()


async def awaiting_comment(
    session: AsyncSession, *, customer: Customer, channel: str, now: datetime | None = None
) -> ConversationRow | None:
    """The closed conversation whose rating the customer gave on ``channel`` within the tenant's
    ``csat.comment_window_s`` and has not commented yet: their next text message is its comment.
    ``None`` when the tenant asks for no comment (``csat.comment_question`` empty), for e-mail (its
    comment box is on the rating page) and otherwise."""
    if channel == "gmail":
        return None
    now = now or utcnow()
    # the longest window a tenant may set first: most messages find nothing and read no settings
    found = (
        await session.exec(
            select(ConversationRow, CsatAnswer.answered_at)
            .join(CsatAnswer, col(CsatAnswer.conversation_id) == col(ConversationRow.id))
            .where(
                CsatAnswer.tenant_id == customer.tenant_id,
                ConversationRow.customer_id == customer.id,
                ConversationRow.status == ConversationStatus.closed.value,
                CsatAnswer.channel == channel,
                col(CsatAnswer.rating).is_not(None),
                col(CsatAnswer.comment).is_(None),
                col(CsatAnswer.answered_at) >= now - timedelta(seconds=COMMENT_WINDOW_MAX_S),
            )
            .order_by(col(CsatAnswer.answered_at).desc())
            .limit(1)
        )
    ).first()
    if found is None:
        return None
    conversation, answered_at = found
    settings = (await load_tenant_settings(session, customer.tenant_id)).csat
    if not settings.enabled or not settings.comment_question.strip():
        return None
    return conversation if answered_at >= now - timedelta(seconds=settings.comment_window_s) else None


async def record_comment(
    session: AsyncSession, *, tenant_id: uuid.UUID, conversation_id: uuid.UUID, text: str
) -> bool:
    """Keep ``text`` (without NUL, stripped, cut to :data:`COMMENT_MAX_CHARS`) as the comment of a rated conversation,
    the first comment only.

    Returns:
        Whether it was stored now (``False``: empty, not rated, or commented before).
    """
    comment = clean_text(text).strip()[:COMMENT_MAX_CHARS]  # a form's NUL would fail the insert
    if not comment:
        return False
    result = await session.exec(
        update(CsatAnswer)
        .where(
            col(CsatAnswer.tenant_id) == tenant_id,
            col(CsatAnswer.conversation_id) == conversation_id,
            col(CsatAnswer.rating).is_not(None),
            col(CsatAnswer.comment).is_(None),
        )
        .values(comment=comment)
    )
    stored = bool(result.rowcount)  # type: ignore[attr-defined]
    log.info("csat_commented", conversation_id=str(conversation_id), stored=stored, chars=len(comment))
    return stored
