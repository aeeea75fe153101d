"""Invitations in the library: one use even when two tabs submit at once, and the password policy's
refusals said in both languages."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlmodel import select
from switchboard.console.people_pages import weak_password_reason
from switchboard.db.models import ConsoleUser, Role
from switchboard.password_policy import WeakPassword, check_password, common_passwords
from switchboard.users import (
    InviteProblem,
    InviteRefused,
    UserExists,
    accept_invite,
    create_invite,
    invite_for_token,
    resend_invite,
)

GOOD = "maple window thirteen"
COMMON = sorted(w for w in common_passwords() if len(w) >= 10 and w.isalpha())[:200]


async def test_two_tabs_using_one_link_at_once_make_one_account(sessions, make_tenant):
    tenant = await make_tenant()
    email = f"twin-{uuid.uuid4().hex[:6]}@example.com"
    async with sessions() as session, session.begin():
        issued = await create_invite(session, tenant_id=tenant.id, email=email, role=Role.agent, ttl_s=3600)

    async def use() -> str:
        async with sessions() as session:
            try:
                async with session.begin():
                    await accept_invite(session, token=issued.token, password=GOOD)
            except InviteRefused as exc:
                return exc.problem.value
            return "accepted"

    outcomes = sorted(await asyncio.gather(use(), use()))
    assert outcomes == ["accepted", "used"]
    async with sessions() as session:
        assert len((await session.exec(select(ConsoleUser).where(ConsoleUser.email == email))).all()) == 1
        with pytest.raises(InviteRefused) as refused:
            await invite_for_token(session, issued.token)
        assert refused.value.problem is InviteProblem.used
        with pytest.raises(InviteRefused):  # an accepted invitation gets no new link
            await resend_invite(session, tenant_id=tenant.id, invite_id=issued.invite.id, ttl_s=3600)
        with pytest.raises(UserExists):
            await create_invite(session, tenant_id=tenant.id, email=email.upper(), role="agent", ttl_s=3600)


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(
        st.text(max_size=9),
        st.sampled_from(COMMON),
        st.builds(lambda w, n: f"{w.title()}{n}!", st.sampled_from(COMMON), st.integers(0, 9999)),
        st.just("pat@example.com"),
    )
)
def test_every_password_refusal_is_said_in_spanish(password):
    try:
        check_password(password, email="pat@example.com")
    except WeakPassword as exc:
        english, spanish = weak_password_reason(exc, "en"), weak_password_reason(exc, "es")
        assert english == str(exc)
        assert spanish != english and spanish.strip()
    else:
        pytest.fail(f"{password!r} was accepted")
