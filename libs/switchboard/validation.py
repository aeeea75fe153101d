"""Phone numbers and e-mail addresses, checked with the libraries that know the rules.

* Phone numbers: ``phonenumbers`` (Google's libphonenumber metadata). Always international (a
  country code, with or without ``+``), stored as E.164. ``require_valid=True`` asks for a number
  in an assigned range of its country; ``False`` only for one of a possible length for its
  country code, which also admits the fictional +1 555 numbers of examples and tests (human agents'
  numbers are typed by an administrator and checked that way).
* Free text typed by an administrator (names, slugs, file names): :func:`check_text` refuses what
  Postgres cannot store (NUL, unpaired surrogates) and what is longer than its column, with a message
  that names the field, so an API answers 4xx and a command one line with exit status 2, never a 500.
* E-mail addresses: ``email-validator`` (RFC 5322 syntax, internationalized domains), without a
  DNS look-up; normalized and lower-cased, as customer references are compared.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import phonenumbers
from email_validator import EmailNotValidError, validate_email
from pydantic_core import PydanticCustomError

__all__ = [
    "INT4_MAX",
    "check_datetime_range",
    "check_text",
    "has_unstorable_chars",
    "normalize_email",
    "normalize_phone_e164",
]

INT4_MAX = 2**31 - 1
"""Largest value of a Postgres ``integer`` column."""

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def has_unstorable_chars(value: str) -> bool:
    """Whether ``value`` holds a NUL or an unpaired surrogate (Postgres text cannot hold either)."""
    return _UNSTORABLE.search(value) is not None


def check_text(value: str, *, field: str, max_length: int, allow_empty: bool = False) -> str:
    """``value`` stripped, if Postgres can store it in a column of ``max_length`` characters.

    Raises:
        ValueError: empty (unless ``allow_empty``), longer than ``max_length`` characters, or holding a
            NUL / an unpaired surrogate; the message names ``field``.
    """
    text = (value or "").strip()
    if has_unstorable_chars(text):
        raise ValueError(f"{field} contains a NUL or an invalid character")
    if len(text) > max_length:
        raise ValueError(f"{field} is too long: {len(text)} characters (at most {max_length})")
    if not text and not allow_empty:
        raise ValueError(f"{field} is empty")
    return text


def check_datetime_range(value: datetime) -> datetime:
    """``value`` unchanged, if its UTC time (a naive value taken as UTC) falls in the years 1 to 9999.

    Python cannot represent a UTC time outside them (``9999-12-31T23:00:00-14:00`` is in year 10000),
    so the driver would fail on it at the query: such a value is refused here.

    Raises:
        pydantic_core.PydanticCustomError: out of range (in a pydantic validator: an error on the
            field, its message without pydantic's "Value error," prefix).
    """
    try:
        (value if value.tzinfo is not None else value.replace(tzinfo=UTC)).astimezone(UTC)
    except OverflowError:
        raise PydanticCustomError(
            "datetime_range", "is out of range: its UTC time falls outside the years 1 to 9999"
        ) from None
    return value


_SEPARATORS = re.compile(r"[\s().-]")


def normalize_phone_e164(value: str, *, require_valid: bool = True) -> str:
    """``"+1 (212) 555-0123"`` → ``"+12125550123"``.

    Raises:
        ValueError: not an international number (``+`` and country code), impossible for its
            country, or (``require_valid``) not in an assigned range.
    """
    compact = _SEPARATORS.sub("", value or "")
    digits = compact.removeprefix("+")
    if not digits.isdigit():
        raise ValueError("not a phone number: use the international format, e.g. +351 912 345 678")
    try:
        number = phonenumbers.parse("+" + digits, None)
    except phonenumbers.NumberParseException:
        raise ValueError("not a phone number: start with the country code, e.g. +351 912 345 678") from None
    checks = phonenumbers.is_valid_number if require_valid else phonenumbers.is_possible_number
    if not checks(number):
        raise ValueError("not a valid phone number for its country code")
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


def normalize_email(value: str) -> str:
    """``"Ana@Example.com"`` → ``"ana@example.com"``.

    Raises:
        ValueError: not an e-mail address (the message says what is wrong with it).
    """
    try:
        checked = validate_email(value, check_deliverability=False)
    except EmailNotValidError as exc:
        raise ValueError(f"not an e-mail address: {exc}") from None
    return checked.normalized.lower()
