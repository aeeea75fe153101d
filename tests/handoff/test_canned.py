"""Canned replies: shortcuts, saving (duplicates and bad input refused in words), filling variables."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from switchboard.db.engine import session_scope
from switchboard.handoff.canned import (
    CannedReplyRefused,
    canned_replies,
    delete_canned,
    fill_canned,
    find_canned,
    normalize_shortcut,
    save_canned,
)

_NAMES = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@given(text=st.text(max_size=200), customer=_NAMES, agent=_NAMES)
def test_fill_replaces_both_variables_and_keeps_everything_else(text, customer, agent):
    template = f"{text}{{customer_name}}|{{agent_name}}|{text}"
    assert fill_canned(template, customer=customer, agent=agent) == (
        f"{fill_canned(text, customer=customer, agent=agent)}{customer}|{agent}|"
        f"{fill_canned(text, customer=customer, agent=agent)}"
    )
    if "{customer_name}" not in text and "{agent_name}" not in text:
        assert fill_canned(text, customer=customer, agent=agent) == text  # other braces kept as typed


@given(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}", fullmatch=True))
def test_valid_shortcuts_are_lower_cased_and_a_slash_is_dropped(shortcut):
    assert normalize_shortcut(f" /{shortcut} ") == shortcut.casefold()


@pytest.mark.parametrize("bad", ["", "/", "two words", "-dash-first", "a" * 33, "émoji", "x!"])
def test_bad_shortcuts_are_refused_in_words(bad):
    with pytest.raises(CannedReplyRefused, match="A shortcut is one word"):
        normalize_shortcut(bad)


async def test_save_change_find_and_delete(sessions, make_tenant):
    tenant, other = await make_tenant(), await make_tenant()
    async with session_scope(sessions) as session:
        thanks = await save_canned(session, tenant_id=tenant.id, shortcut="Thanks", text=" Thank you! ")
        await save_canned(session, tenant_id=other.id, shortcut="thanks", text="other tenant")
    async with session_scope(sessions) as session:
        with pytest.raises(CannedReplyRefused, match="/thanks is taken"):
            await save_canned(session, tenant_id=tenant.id, shortcut="/THANKS", text="again")
        with pytest.raises(CannedReplyRefused, match="The text is empty"):
            await save_canned(session, tenant_id=tenant.id, shortcut="hello", text="   ")
        with pytest.raises(CannedReplyRefused, match="no longer exists"):  # another tenant's id
            await save_canned(session, tenant_id=other.id, shortcut="x", text="y", reply_id=thanks.id)
    async with session_scope(sessions) as session:
        changed = await save_canned(
            session,
            tenant_id=tenant.id,
            shortcut="thank-you",
            text="Thanks, {customer_name}!",
            reply_id=thanks.id,
        )
        assert changed.id == thanks.id
    async with sessions() as session:
        found = await find_canned(session, tenant_id=tenant.id, shortcut="/Thank-You")
        assert found is not None and found.text == "Thanks, {customer_name}!"
        assert await find_canned(session, tenant_id=tenant.id, shortcut="thanks") is None
        assert [r.text for r in await canned_replies(session, tenant_id=other.id)] == ["other tenant"]
    async with session_scope(sessions) as session:
        assert await delete_canned(session, tenant_id=other.id, reply_id=thanks.id) is False
        assert await delete_canned(session, tenant_id=tenant.id, reply_id=thanks.id) is True
    async with sessions() as session:
        assert await canned_replies(session, tenant_id=tenant.id) == []
