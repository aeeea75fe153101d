"""The password rule: length, the shipped common-password list (any case, digits and punctuation around
it), the user's own address."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from switchboard.password_policy import (
    COMMON_PASSWORDS_FILE,
    MIN_PASSWORD_CHARS,
    WeakPassword,
    check_password,
    common_passwords,
)
from switchboard.users import generate_password

COMMON = sorted(word for word in common_passwords() if len(word) >= 4 and word.isalpha())


def test_the_list_is_shipped_with_its_source_and_licence():
    header = [line for line in COMMON_PASSWORDS_FILE.read_text().splitlines() if line.startswith("#")]
    assert any("zxcvbn" in line for line in header) and any("MIT License" in line for line in header)
    words = common_passwords()
    assert len(words) >= 29_000 and {"password", "123456", "qwerty", "password12"} <= words


@pytest.mark.parametrize(
    "password", ["password12", "PASSWORD12", "Password123!", "qwertyuiop", "1234567890", "!!monkey2024"]
)
def test_common_passwords_are_refused(password):
    with pytest.raises(WeakPassword, match="commonly used"):
        check_password(password)


def test_short_and_personal_passwords_are_refused():
    with pytest.raises(WeakPassword, match=f"at least {MIN_PASSWORD_CHARS}"):
        check_password("Xk3#pq9")
    with pytest.raises(WeakPassword, match="e-mail address"):
        check_password("pat.smith.works", email="Pat.Smith.Works@example.com")
    with pytest.raises(WeakPassword, match="e-mail address"):
        check_password("pat.smith.works2024", email="pat.smith.works@example.com")


@pytest.mark.parametrize("password", ["correct horse battery", "tangerine orbit ladder", "Vq8!tz0#Lm2w"])
def test_uncommon_passwords_pass(password):
    check_password(password, email="someone@example.com")


@settings(max_examples=200, deadline=None)
@given(
    word=st.sampled_from(COMMON),
    prefix=st.text(alphabet=string.digits + string.punctuation + " ", max_size=4),
    suffix=st.text(alphabet=string.digits + string.punctuation + " ", min_size=0, max_size=8),
    upper=st.lists(st.booleans(), min_size=40, max_size=40),
)
def test_a_common_word_with_digits_or_symbols_around_it_is_refused(word, prefix, suffix, upper):
    cased = "".join(c.upper() if up else c for c, up in zip(word, upper + [False] * len(word), strict=False))
    password = prefix + cased + suffix
    if len(password) < MIN_PASSWORD_CHARS:
        password += "1" * (MIN_PASSWORD_CHARS - len(password))
    with pytest.raises(WeakPassword):
        check_password(password)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=10**6))
def test_generated_passwords_always_pass(_seed):
    check_password(generate_password())


_INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u200e"]
"""Zero-width space, non-joiner, joiner, word joiner, BOM, soft hyphen, left-to-right mark."""


def _full_width(text: str) -> str:
    """``text`` in full-width forms (``a`` -> ``ａ``, ``1`` -> ``１``), which NFKC folds back."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


@pytest.mark.parametrize(
    "password",
    [
        "passwordpassword",
        "password\u200b12",
        "ｐａｓｓｗｏｒｄ１２",
        "pass word12",
        "PassWord\u00adPassWord",
        "dragondragon1",
    ],
)
def test_spelling_variants_and_repeats_of_a_common_password_are_refused(password):
    with pytest.raises(WeakPassword):
        check_password(password, email="admin@example.com")


@settings(max_examples=300, deadline=None)
@given(
    word=st.sampled_from(COMMON),
    repeats=st.integers(1, 3),
    full_width=st.booleans(),
    inserts=st.lists(st.tuples(st.integers(0, 60), st.sampled_from([*_INVISIBLE, " "])), max_size=4),
    upper=st.booleans(),
    suffix=st.text(alphabet=string.digits + "!", max_size=4),
)
def test_a_common_word_spelt_otherwise_or_repeated_is_refused(
    word, repeats, full_width, inserts, upper, suffix
):
    text = (word.upper() if upper else word) * repeats + suffix
    if full_width:
        text = _full_width(text)
    for position, char in inserts:
        position %= len(text) + 1
        text = text[:position] + char + text[position:]
    if len(text) < MIN_PASSWORD_CHARS:
        text += "1" * (MIN_PASSWORD_CHARS - len(text))
    with pytest.raises(WeakPassword):
        check_password(text)
