"""Property tests of the edge cleaning every channel's webhook goes through, and of the WhatsApp
normalizer over anything a signed body may hold (hypothesis; the ``ci`` profile is derandomized)."""

from __future__ import annotations

import json
import random

from hypothesis import given
from hypothesis import strategies as st
from switchboard.channels.sanitize import clean_text, clean_tree, parse_clean_json_body, parse_json_body
from switchboard.channels.whatsapp.normalize import normalize_delivery
from switchboard.storable import MAX_DEPTH, TOO_DEEP

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


@given(junk)
def test_the_webhook_shortcut_gives_exactly_what_the_full_walk_gives(value: object) -> None:
    """``parse_clean_json_body`` skips the walk only when the bytes show it would change nothing."""
    raw = encode_hostile({"object": "x", "v": value})
    parsed, reason = parse_json_body(raw)
    shortcut, shortcut_reason = parse_clean_json_body(raw)
    assert shortcut_reason == reason
    if reason is None:
        assert shortcut == clean_tree(parsed)
        assert _storable(shortcut) and _depth(shortcut) <= MAX_DEPTH


def test_the_webhook_shortcut_still_cleans_nul_surrogates_and_deep_nesting() -> None:
    assert parse_clean_json_body(b'{"a": "x\\u0000y", "b\\u0000": 1}') == ({"a": "xy", "b": 1}, None)
    assert parse_clean_json_body(b'{"a": "\\ud800!"}') == ({"a": "\ufffd!"}, None)
    assert parse_clean_json_body(b'{"a": "\\uDFFF"}') == ({"a": "\ufffd"}, None)
    assert parse_clean_json_body(b'{"a": "x\x00y"}')[1] is not None  # a raw control character: not JSON
    deep, _ = parse_clean_json_body(b"[" * (MAX_DEPTH + 5) + b"]" * (MAX_DEPTH + 5))
    assert _depth(deep) <= MAX_DEPTH and TOO_DEEP in json.dumps(deep)
    clean = load_payload("text.json")
    assert parse_clean_json_body(json.dumps(clean).encode()) == (clean, None)


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
