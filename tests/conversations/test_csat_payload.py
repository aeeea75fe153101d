"""A tapped button's id is a rating only when it is ``csat:<conversation id>:<1-5>``: any other id a
customer's tap or a forged webhook carries is an ordinary button (never an error)."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st
from switchboard.conversations.csat import Rating, parse_payload


@given(st.uuids(), st.integers(min_value=1, max_value=5))
def test_every_rating_button_id_reads_back(conversation_id: uuid.UUID, rating: int) -> None:
    assert parse_payload(f"csat:{conversation_id}:{rating}") == Rating(conversation_id, rating)


@given(st.one_of(st.text(max_size=300), st.none(), st.integers(), st.binary(max_size=50)))
def test_anything_else_is_no_rating_and_never_an_error(payload: object) -> None:
    parsed = parse_payload(payload)
    assert parsed is None or (isinstance(payload, str) and payload.startswith("csat:"))


@given(st.uuids(), st.integers().filter(lambda n: not 1 <= n <= 5))
def test_a_rating_outside_one_to_five_is_refused(conversation_id: uuid.UUID, rating: int) -> None:
    assert parse_payload(f"csat:{conversation_id}:{rating}") is None


def test_malformed_ids_are_refused() -> None:
    cid = uuid.uuid4()
    for payload in (
        f"csat:{cid}",
        f"csat:{cid}:",
        "csat:not-a-uuid:5",
        f"CSAT:{cid}:5",
        f"csat:{cid}:5.0",
        "csat:",
    ):
        assert parse_payload(payload) is None, payload
