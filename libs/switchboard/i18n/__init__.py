"""Languages: English and Spanish gettext catalogs (Babel) for the console and customer-facing texts.

* The catalogs are ``locale/<lang>/LC_MESSAGES/messages.po`` next to this file (committed). They are
  compiled in memory the first time a language is used (Babel's ``read_po`` + ``write_mo``), so a clean
  clone needs no build step and no ``.mo`` file is committed or can go stale. Fuzzy entries are
  skipped, as ``msgfmt`` does: an untranslated or fuzzy message shows in English.
* ``make i18n`` re-extracts ``locale/messages.pot`` from the Python code (``_``, ``gettext``, ``N_``)
  and the console templates (``{% trans %}``, ``_()``; ``babel.cfg``) and updates both catalogs;
  ``tests/i18n/test_catalogs.py`` fails while a Spanish message is missing or fuzzy.
* :func:`N_` marks a string for extraction without translating it (field defaults that are
  translated later, per tenant: :func:`switchboard.tenant_settings.localized_defaults`).
* :func:`gettext` translates for one language; :func:`negotiate_language` picks a language from an
  ``Accept-Language`` header; :mod:`switchboard.i18n.jinja` wires ``jinja2.ext.i18n``.

This module is a leaf at import time (Babel is imported on first use).
"""

from __future__ import annotations

import gettext as _gettext
from functools import cache
from io import BytesIO
from pathlib import Path
from typing import Literal, get_args

__all__ = [
    "DEFAULT_LANGUAGE",
    "LOCALE_DIR",
    "Language",
    "SUPPORTED_LANGUAGES",
    "N_",
    "gettext",
    "ngettext",
    "negotiate_language",
    "normalize_language",
    "translations",
]

Language = Literal["en", "es"]
SUPPORTED_LANGUAGES: tuple[str, ...] = get_args(Language)
"""Languages with a catalog; the first is the default (the msgids are English)."""
DEFAULT_LANGUAGE: Language = "en"
LOCALE_DIR = Path(__file__).parent / "locale"
DOMAIN = "messages"


def N_(message: str) -> str:  # noqa: N802 - the gettext convention Babel extracts (`-k N_`)
    """Mark ``message`` for extraction; return it untranslated."""
    return message


def normalize_language(value: str | None) -> Language | None:
    """``"es-MX"``, ``"ES"``, ``"es_ES"`` → ``"es"``; a language without a catalog → ``None``."""
    if not value:
        return None
    primary = value.strip().replace("_", "-").split("-")[0].lower()
    return primary if primary in SUPPORTED_LANGUAGES else None  # type: ignore[return-value]


def translations(language: str | None) -> _gettext.NullTranslations:
    """The compiled catalog of ``language`` (``"es-MX"`` → ``es``; cached per process); unknown: no-op.

    Raises:
        OSError: the ``.po`` file of a supported language cannot be read.
        babel.messages.pofile.PoFileError: the ``.po`` file is malformed.
    """
    lang = normalize_language(language)
    return _NULL if lang is None else _compiled(lang)


_NULL = _gettext.NullTranslations()


@cache
def _compiled(lang: str) -> _gettext.NullTranslations:
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po
    from babel.support import Translations

    po = LOCALE_DIR / lang / "LC_MESSAGES" / f"{DOMAIN}.po"
    with po.open("rb") as handle:
        catalog = read_po(handle, locale=lang, domain=DOMAIN)
    compiled = BytesIO()
    write_mo(compiled, catalog, use_fuzzy=False)
    compiled.seek(0)
    return Translations(fp=compiled, domain=DOMAIN)


def gettext(language: str, message: str) -> str:
    """``message`` (an English msgid) in ``language``; itself when there is no translation."""
    return translations(language).gettext(message)


def ngettext(language: str, singular: str, plural: str, n: int) -> str:
    """Plural-aware :func:`gettext` (``n`` picks the form by the language's plural rule)."""
    return translations(language).ngettext(singular, plural, n)


def negotiate_language(accept_language: str | None, default: str = DEFAULT_LANGUAGE) -> str:
    """The best supported language of an ``Accept-Language`` header (RFC 9110 §12.5.4), else ``default``.

    ``"es-ES,es;q=0.9,en;q=0.8"`` → ``"es"``; ``q=0`` means "not this one".
    """
    best: tuple[float, str] | None = None
    for part in (accept_language or "").split(","):
        tag, _, params = part.strip().partition(";")
        quality = 1.0
        if params.strip().startswith("q="):
            try:
                quality = float(params.strip()[2:])
            except ValueError:
                continue
        lang = normalize_language(tag)
        if lang is not None and quality > 0 and (best is None or quality > best[0]):
            best = (quality, lang)
    return best[1] if best else default
