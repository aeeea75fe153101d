"""Masking phone numbers and e-mail addresses: any of them, anywhere in a line, is masked; ids, times,
versions and counts below eight digits are left as they are (a longer number in a text reads as a phone)."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st
from switchboard.observability.pii import mask_attributes, mask_pii, mask_text

WORDS = st.text(
    alphabet=st.characters(whitelist_categories=("Lu", "Ll"), whitelist_characters=" ,;!¿?"), max_size=30
)
PHONES = st.from_regex(r"\A\+?[1-9][0-9]{7,14}\Z")
EMAILS = st.from_regex(r"\A[a-z][a-z0-9._]{0,20}@[a-z][a-z0-9-]{0,20}\.(org|com|es|net)\Z")


@given(before=WORDS, after=WORDS, phone=PHONES, email=EMAILS)
def test_a_phone_or_address_anywhere_in_a_line_is_masked(
    before: str, after: str, phone: str, email: str
) -> None:
    line = f"{before} {phone} {after} <{email}>"
    masked = mask_text(line)
    assert phone.lstrip("+") not in masked and email not in masked
    assert masked.endswith(f"***{phone[-2:]} {after} <{email[0]}***@{email.split('@')[1]}>")


@given(
    value=st.one_of(
        st.uuids().map(str),
        st.datetimes().map(lambda d: d.isoformat()),
        st.integers(0, 10**7 - 1).map(str),
        st.from_regex(r"\A[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\Z"),
    )
)
def test_ids_times_counts_and_versions_are_left_alone(value: str) -> None:
    assert mask_text(f"id={value} done") == f"id={value} done"


def test_structured_values_and_message_text_are_masked_in_log_lines_and_spans() -> None:
    line = mask_pii(
        None,
        "info",
        {
            "event": "sent to 34611223344",
            "to": {"wa_id": "34611223344"},
            "text": "hola",
            "ids": [str(uuid.UUID(int=1))],
            "count": 34611223344,
        },
    )
    assert line == {
        "event": "sent to ***44",
        "to": {"wa_id": "***44"},
        "text": "[4 chars]",
        "ids": [str(uuid.UUID(int=1))],
        "count": 34611223344,
    }
    assert mask_attributes({"customer.email": "ana@example.org", "message.text": "hola"}) == {
        "customer.email": "a***@example.org",
        "message.text": "[4 chars]",
    }


def test_the_business_accounts_are_named_and_a_customer_under_another_key_is_not() -> None:
    line = mask_pii(
        None,
        "warning",
        {
            "event": "webhook_unknown_account",
            "account_id": "support@shop.example",
            "phone_number_id": "106540352242922",
            "sender": "+34 611 223 344",
        },
    )
    assert line["account_id"] == "support@shop.example"
    assert line["phone_number_id"] == "106540352242922"
    assert line["sender"] == "***44"
