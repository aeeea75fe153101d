"""``jinja2.ext.i18n`` for the console templates, in the language of the request being rendered.

:func:`install_i18n` adds the extension to an environment and installs gettext callables that
read :data:`current_language` (a context variable), so one shared environment renders each request
in its own language: set it with :func:`use_language` (the console does it per request from the
user's choice, then the tenant's ``locale.language``, then ``Accept-Language``). Templates write
``{% trans %}Inbox{% endtrans %}`` or ``{{ _("Inbox") }}``; newstyle gettext autoescapes and
formats (``_("%(n)s files", n=3)``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from jinja2 import Environment

from switchboard.i18n import DEFAULT_LANGUAGE, normalize_language, translations

__all__ = ["current_language", "install_i18n", "use_language"]

current_language: ContextVar[str] = ContextVar("switchboard_language", default=DEFAULT_LANGUAGE)
"""Language of what is being rendered now (``en`` / ``es``)."""


def _gettext(message: str) -> str:
    return translations(current_language.get()).gettext(message)


def _ngettext(singular: str, plural: str, n: int) -> str:
    return translations(current_language.get()).ngettext(singular, plural, n)


def _pgettext(context: str, message: str) -> str:
    return translations(current_language.get()).pgettext(context, message)


def _npgettext(context: str, singular: str, plural: str, n: int) -> str:
    return translations(current_language.get()).npgettext(context, singular, plural, n)


def install_i18n(env: Environment) -> Environment:
    """Add ``jinja2.ext.i18n`` to ``env`` with gettext following :data:`current_language`."""
    env.add_extension("jinja2.ext.i18n")
    env.install_gettext_callables(  # type: ignore[attr-defined]  # added by the extension
        _gettext, _ngettext, newstyle=True, pgettext=_pgettext, npgettext=_npgettext
    )
    env.globals["current_language"] = lambda: current_language.get()
    return env


@contextmanager
def use_language(language: str | None) -> Iterator[str]:
    """Render in ``language`` inside the block (unsupported or ``None``: the default)."""
    chosen = normalize_language(language) or DEFAULT_LANGUAGE
    token = current_language.set(chosen)
    try:
        yield chosen
    finally:
        current_language.reset(token)
