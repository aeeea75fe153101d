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
