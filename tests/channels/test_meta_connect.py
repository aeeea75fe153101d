"""What the person connecting an account is told for each Graph error (the console shows it)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from switchboard.channels.meta_connect import refusal_words


def _said(channel: str, code: int | None, message: str = "boom", account: str = "42") -> str:
    words, params = refusal_words(channel, code, message, account_id=account)
    return words % params


def test_each_known_error_in_plain_words() -> None:
    assert _said("whatsapp", 190).startswith("Meta refused the access token: it is invalid or has expired.")
    assert "(whatsapp_business_management and whatsapp_business_messaging)" in _said("whatsapp", 200)
    assert "(instagram_business_basic and instagram_business_manage_messages)" in _said("instagram", 10)
    assert _said("whatsapp", 100, account="106").startswith("Meta does not know the account 106,")
    assert _said("whatsapp", 2200).startswith("Meta could not verify the callback URL")


@given(
    code=st.integers(min_value=-5, max_value=10**6).filter(
        lambda c: c not in (190, 10, 100, 2200) and not 200 <= c <= 299
    ),
    message=st.text(max_size=500),
)
def test_any_other_error_keeps_metas_message_short_with_its_code(code, message) -> None:  # type: ignore[no-untyped-def]
    said = _said("whatsapp", code, message)
    assert said == f"Meta refused the request: {message[:200]} (error {code})."
