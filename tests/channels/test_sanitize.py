"""Property tests of the edge cleaning every channel's webhook goes through, and of the WhatsApp
normalizer over anything a signed body may hold (hypothesis; the ``ci`` profile is derandomized)."""

from __future__ import annotations

import json
import random

from hypothesis import given
from hypothesis import strategies as st
from switchboard.channels.sanitize import clean_text, clean_tree, parse_json_body
from switchboard.channels.whatsapp.normalize import normalize_delivery
from switchboard.storable import MAX_DEPTH

from tests.channels.hostile import encode_hostile, hostile_text, junk, mutate, sprinkle
from tests.utils.whatsapp import PAYLOAD_DIR, load_payload

PAYLOADS = sorted(p.name for p in PAYLOAD_DIR.glob("*.json"))


def _storable(value: object) -> bool:
    """What Postgres jsonb takes: strict JSON, UTF-8-encodable, no NUL."""
    data = json.dumps(value, allow_nan=False)
    data.encode("utf-8")
    return "\\u0000" not in data


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


@given(hostile_text)
def test_clean_text_leaves_no_nul_or_lone_surrogate_and_keeps_everything_else(text: str) -> None:
    cleaned = clean_text(text)
    cleaned.encode("utf-8")  # no lone surrogate left
    assert "\x00" not in cleaned
    assert len(cleaned) == len(text) - text.count("\x00")


@given(junk)
def test_any_signed_json_parses_and_cleans_into_storable_json(value: object) -> None:
    parsed, reason = parse_json_body(encode_hostile({"object": "x", "v": value}))
    if reason is not None:  # only a body nested past the parser's recursion limit
        assert reason == "nested past the parser's recursion limit"
        return
    cleaned = clean_tree(parsed)
    assert _storable(cleaned) and _depth(cleaned) <= MAX_DEPTH


@given(
    st.sampled_from(PAYLOADS), st.lists(junk, min_size=1, max_size=6), st.integers(0, 2**32), st.booleans()
)
def test_the_whatsapp_normalizer_never_raises_and_every_message_has_ids(
    name: str, junk_values: list[object], seed: int, replace: bool
) -> None:
    body = load_payload(name, refresh=False)
    odd = (mutate if replace else sprinkle)(body, random.Random(seed), junk_values)
    parsed, reason = parse_json_body(encode_hostile(odd))
    if reason is not None:
        return
    delivery = normalize_delivery(clean_tree(parsed))
    for message in delivery.messages:
        assert message.external_id and message.sender_id and message.account_id
        assert _storable(message.stored_view()) and _storable(message.raw)
    if not replace:  # junk only added: every message of the real payload is still there
        original = normalize_delivery(load_payload(name, refresh=False))
        assert {m.external_id for m in original.messages} <= {m.external_id for m in delivery.messages}
