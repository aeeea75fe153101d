"""The one password rule of console users (NIST SP 800-63B, section 5.1.1.2), wherever a password is set.

A password is refused when it is:

* shorter than :data:`MIN_PASSWORD_CHARS` characters;
* one of the common passwords shipped in ``common_passwords.txt`` (30,000 passwords from breach corpora,
  the zxcvbn list), compared in a normal form (Unicode NFKC, so full-width ``ｐａｓｓｗｏｒｄ`` is
  ``password``; zero-width and other format characters and all spaces dropped; case-folded), also
  once leading and trailing digits and punctuation are taken off (``password12``, ``Dragon2024!``,
  ``!!monkey1234``, ``pass word12`` and ``password\u200b12`` are refused), and also when it is one
  common password repeated (``passwordpassword``, ``monkeymonkey1``);
* the user's own e-mail address, its part before the ``@``, or the product's name.

:func:`check_password` raises :class:`WeakPassword` (a :class:`ValueError`) with a message that says which
rule and how to fix it; the console forms and the CLI show that message as it is.
"""

from __future__ import annotations

import functools
import string
import unicodedata
from pathlib import Path

__all__ = [
    "MIN_PASSWORD_CHARS",
    "COMMON_PASSWORDS_FILE",
    "WeakPassword",
    "check_password",
    "common_passwords",
    "normalized",
]

MIN_PASSWORD_CHARS = 10
"""Shortest password accepted (NIST SP 800-63B asks for at least 8; we ask a little more)."""
COMMON_PASSWORDS_FILE = Path(__file__).with_name("common_passwords.txt")
"""One common password a line, lower case; ``#`` lines are comments (source and licence)."""
_MIN_STEM_CHARS = 4
"""A common word is only looked for in what is left after trimming when that has this many characters:
shorter stems (``abc``, ``x``) are in the list too and would refuse random passwords."""
_TRIM = string.digits + string.punctuation + " "
_CONTEXT_WORDS = frozenset({"switchboard"})


class WeakPassword(ValueError):
    """The password breaks the policy; the message says which rule, in plain words."""


@functools.cache
def common_passwords() -> frozenset[str]:
    """The shipped common passwords, lower case (read once per process, ~30,000 entries)."""
    lines = COMMON_PASSWORDS_FILE.read_text(encoding="utf-8").splitlines()
    return frozenset(line.strip().lower() for line in lines if line.strip() and not line.startswith("#"))


def normalized(password: str) -> str:
    """``password`` as it is compared with the list: Unicode NFKC, without format characters (category
    ``Cf``: zero-width spaces and joiners, direction marks, soft hyphens) and whitespace, case-folded."""
    text = unicodedata.normalize("NFKC", password)
    return "".join(ch for ch in text if not ch.isspace() and unicodedata.category(ch) != "Cf").casefold()


def _unrepeated(text: str) -> str:
    """``text``'s shortest unit when it is that unit repeated (``abcabc`` -> ``abc``), else ``text``."""
    size = len(text)
    for unit in range(1, size // 2 + 1):
        if size % unit == 0 and text[:unit] * (size // unit) == text:
            return text[:unit]
    return text


def _is_common(candidate: str, common: frozenset[str]) -> bool:
    stem = candidate.strip(_TRIM)
    return candidate in common or (len(stem) >= _MIN_STEM_CHARS and stem in common)


def check_password(password: str, *, email: str | None = None) -> None:
    """Accept ``password`` or raise :class:`WeakPassword`.

    Args:
        password: the new password as typed (not stripped: spaces count towards the length).
        email: the user's e-mail address, when known; the password may not be it or its local part.

    Raises:
        WeakPassword: too short, common (in its normal form, :func:`normalized`, or as a common one
            repeated), or the user's own address.
    """
    if len(password) < MIN_PASSWORD_CHARS:
        raise WeakPassword(f"the password needs at least {MIN_PASSWORD_CHARS} characters")
    folded = normalized(password)
    stem = folded.strip(_TRIM)
    common = common_passwords()
    candidates = {password.lower(), password.lower().strip(), folded, _unrepeated(folded), _unrepeated(stem)}
    if any(_is_common(candidate, common) for candidate in candidates):
        raise WeakPassword(
            "this password is on the list of commonly used passwords: choose a longer, less common one "
            "(a few unrelated words work well)"
        )
    context = set(_CONTEXT_WORDS)
    if email:
        address = normalized(email.strip())
        context |= {address, address.partition("@")[0]}
    if folded in context or stem in context or _unrepeated(stem) in context:
        raise WeakPassword("the password may not be your e-mail address or the product's name")
