"""Phone numbers and e-mail addresses, checked with the libraries that know the rules.

* Phone numbers: ``phonenumbers`` (Google's libphonenumber metadata). Always international (a
  country code, with or without ``+``), stored as E.164. ``require_valid=True`` asks for a number
  in an assigned range of its country; ``False`` only for one of a possible length for its
  country code, which also admits the fictional +1 555 numbers of examples and tests (human agents'
  numbers are typed by an administrator and checked that way).
* E-mail addresses: ``email-validator`` (RFC 5322 syntax, internationalized domains), without a
  DNS look-up; normalized and lower-cased, as customer references are compared.
"""

from __future__ import annotations

import re

import phonenumbers
from email_validator import EmailNotValidError, validate_email

__all__ = ["normalize_email", "normalize_phone_e164"]

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
