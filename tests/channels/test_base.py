"""The channel-neutral pieces of ``channels/base.py``: splitting to a provider's limit, service windows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st
from switchboard.channels.base import Capabilities, graphemes, split_text, text_length, within_window
from switchboard.channels.whatsapp.channel import CAPABILITIES
from switchboard.channels.whatsapp.send import TEXT_LIMIT_CHARS


def test_split_text_keeps_order_and_limit() -> None:
    paragraph = ("Sentence number one is here. " * 60).strip()
    text = "\n\n".join(f"{i}: {paragraph}" for i in range(5))
    parts = split_text(text, TEXT_LIMIT_CHARS)
    assert all(len(p) <= TEXT_LIMIT_CHARS for p in parts) and len(parts) == 3
    assert " ".join(p.replace("\n\n", " ") for p in parts).split() == text.replace("\n\n", " ").split()
    assert parts[0].startswith("0: ") and parts[1].startswith("2: ")
    no_breaks = "word " * 2000
    parts = split_text(no_breaks.strip(), TEXT_LIMIT_CHARS)
    assert all(len(p) <= TEXT_LIMIT_CHARS and not p.endswith(" ") for p in parts)
    assert "".join(p + " " for p in parts).split() == no_breaks.split()
    assert split_text("x" * 5000, TEXT_LIMIT_CHARS) == ["x" * 4096, "x" * 904]
    assert split_text("short, 🌵 עברית", TEXT_LIMIT_CHARS) == ["short, 🌵 עברית"]


def test_service_window() -> None:
    now = datetime.now(UTC)
    assert within_window(CAPABILITIES, now - timedelta(hours=23, minutes=59), now)
    assert not within_window(CAPABILITIES, now - timedelta(hours=24, seconds=1), now)
    assert not within_window(CAPABILITIES, None, now)


def test_split_never_cuts_inside_a_grapheme() -> None:
    family = "👩\u200d👩\u200d👧"
    assert split_text(family * 3, 8) == [family, family, family]  # each is 8 code points
    accented = "e\u0301" * 5  # é as e + combining acute
    assert split_text(accented, 4) == ["e\u0301e\u0301", "e\u0301e\u0301", "e\u0301"]
    flags = "🇪🇸🇧🇷"
    assert split_text(flags, 2) == ["🇪🇸", "🇧🇷"]


def test_split_counts_in_the_providers_unit() -> None:
    text = "🌵" * 600  # 600 code points, 1,200 UTF-16 units
    parts = split_text(text, 1000, "utf16")
    assert [text_length(p, "utf16") for p in parts] == [1000, 200]
    assert split_text("ñ" * 6, 4, "bytes") == ["ññ", "ññ", "ññ"]


@given(
    st.text(min_size=0, max_size=600),
    st.integers(min_value=4, max_value=50),
    st.sampled_from(["chars", "utf16", "bytes"]),
)
def test_split_is_lossless_bounded_and_ordered(text: str, limit: int, unit: str) -> None:
    parts = split_text(text, limit, unit)  # type: ignore[arg-type]
    for part in parts:
        assert part and part == part.strip()
        assert text_length(part, unit) <= limit  # type: ignore[arg-type]
    assert "".join("".join(p.split()) for p in parts) == "".join(text.split())
    if all(len(g) <= limit for g in graphemes(text)):  # no cluster wider than a part: none is cut
        whole = set(graphemes(text))
        assert all(set(graphemes(p)) <= whole for p in parts)


def test_split_uses_unicode_grapheme_clusters() -> None:
    # a Devanagari conjunct (spacing vowel sign) and a Hangul syllable in jamo are one cluster each
    assert graphemes("क्षि") == ["क्षि"] and graphemes("\u1100\u1161\u11a8") == ["\u1100\u1161\u11a8"]
    assert graphemes("👩🏽‍🚀🏴󠁧󠁢󠁳󠁣󠁴󠁿") == ["👩🏽‍🚀", "🏴󠁧󠁢󠁳󠁣󠁴󠁿"]
    # emoji-heavy text under WhatsApp's 4,096 counted in UTF-16 units: no part is over in either count
    emoji = "👩‍👩‍👧" * 700  # 5 code points, 8 UTF-16 units each
    parts = split_text(emoji, 4096, "utf16")
    assert all(text_length(p, "utf16") <= 4096 for p in parts) and "".join(parts) == emoji
    assert all(len(p) % 5 == 0 for p in parts)  # whole families only


def test_a_grapheme_wider_than_the_limit_is_cut_between_code_points() -> None:
    zalgo = "a" + "\u0301" * 5000  # one cluster of 5,001 code points
    parts = split_text(zalgo, 4096)
    assert [len(p) for p in parts] == [4096, 905] and "".join(parts) == zalgo


def test_channels_without_a_window_always_allow() -> None:
    now = datetime.now(UTC)
    assert within_window(Capabilities(text_limit=10), None, now)
    assert not within_window(CAPABILITIES, now - timedelta(days=2), now)
