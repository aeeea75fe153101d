"""A rating's comment, whatever the customer typed: kept without NUL, stripped and cut to its bound,
the first comment only, and only for an answered rating."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlmodel import select
from switchboard.conversations.csat import COMMENT_MAX_CHARS, record_comment
from switchboard.db.models import CsatAnswer, utcnow
from switchboard.storable import clean_text

from tests.utils.handoff import make_customer_conversation


async def _answer(sessions, tenant, *, rating: int | None):  # type: ignore[no-untyped-def]
    _, conversation = await make_customer_conversation(sessions, tenant)
    async with sessions() as session, session.begin():
        session.add(
            CsatAnswer(
                tenant_id=tenant.id,
                conversation_id=conversation.id,
                channel="whatsapp",
                handled_by="ai",
                rating=rating,
                asked_at=utcnow(),
                answered_at=utcnow() if rating else None,
            )
        )
    return conversation


async def _comment(sessions, conversation):  # type: ignore[no-untyped-def]
    async with sessions() as session:
        return (
            await session.exec(
                select(CsatAnswer.comment).where(CsatAnswer.conversation_id == conversation.id)
            )
        ).one()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=2_600))
async def test_any_text_is_kept_clean_stripped_and_bounded(text: str, sessions, make_tenant) -> None:
    tenant = await make_tenant()
    conversation = await _answer(sessions, tenant, rating=4)
    async with sessions() as session, session.begin():
        stored = await record_comment(
            session, tenant_id=tenant.id, conversation_id=conversation.id, text=text
        )
    expected = clean_text(text).strip()[:COMMENT_MAX_CHARS]
    assert stored == bool(expected)
    assert await _comment(sessions, conversation) == (expected or None)


async def test_only_the_first_comment_of_an_answered_rating_is_kept(sessions, make_tenant) -> None:
    tenant = await make_tenant()
    unanswered = await _answer(sessions, tenant, rating=None)
    rated = await _answer(sessions, tenant, rating=5)
    async with sessions() as session, session.begin():
        assert not await record_comment(
            session, tenant_id=tenant.id, conversation_id=unanswered.id, text="hi"
        )
        assert await record_comment(session, tenant_id=tenant.id, conversation_id=rated.id, text=" first ")
        assert not await record_comment(session, tenant_id=tenant.id, conversation_id=rated.id, text="second")
    assert await _comment(sessions, unanswered) is None
    assert await _comment(sessions, rated) == "first"
