"""Validation messages in the reader's language: pydantic's error messages and our validators' through
the gettext catalog (the console's settings form shows them; the admin API keeps English).

pydantic formats its messages in English (``Input should be greater than or equal to 0``). Its error
dicts also carry a ``type`` and a ``ctx`` (pydantic docs, "Customizing error messages": map ``type``
to your own template, format it with ``ctx``), so :data:`MESSAGES` holds, per type, an English
template equal to pydantic's own message for that type (``tests/i18n/test_validation.py`` checks each
against what pydantic says), marked for the catalog; :func:`localized` translates and formats it.
A type not listed keeps pydantic's English text. Our validators raise
:class:`pydantic_core.PydanticCustomError` with a template listed here, so they translate the same way.

Templates use :meth:`str.format` fields named as pydantic's ``ctx`` keys (``{ge}``, ``{max_length}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from switchboard.i18n import DEFAULT_LANGUAGE, N_, gettext

__all__ = ["MESSAGES", "localized", "localized_template"]

MESSAGES: Mapping[str, str] = {
    "missing": N_("Field required"),
    "extra_forbidden": N_("Extra inputs are not permitted"),
    "greater_than": N_("Input should be greater than {gt}"),
    "greater_than_equal": N_("Input should be greater than or equal to {ge}"),
    "less_than": N_("Input should be less than {lt}"),
    "less_than_equal": N_("Input should be less than or equal to {le}"),
    "finite_number": N_("Input should be a finite number"),
    "string_type": N_("Input should be a valid string"),
    "string_pattern_mismatch": N_("String should match pattern '{pattern}'"),
    "bool_type": N_("Input should be a valid boolean"),
    "bool_parsing": N_("Input should be a valid boolean, unable to interpret input"),
    "int_type": N_("Input should be a valid integer"),
    "int_parsing": N_("Input should be a valid integer, unable to parse string as an integer"),
    "int_from_float": N_("Input should be a valid integer, got a number with a fractional part"),
    "float_type": N_("Input should be a valid number"),
    "float_parsing": N_("Input should be a valid number, unable to parse string as a number"),
    "list_type": N_("Input should be a valid list"),
    "dict_type": N_("Input should be a valid dictionary"),
    "model_type": N_("Input should be a valid dictionary or instance of {class_name}"),
    "literal_error": N_("Input should be {expected}"),
    "enum": N_("Input should be {expected}"),
    "url_parsing": N_("Input should be a valid URL, {error}"),
    "value_error": N_("Value error, {error}"),
    # our validators (PydanticCustomError types)
    "unknown_timezone": N_("unknown time zone '{timezone}' (use an IANA name such as Europe/Madrid)"),
    "closes_before_opening": N_(
        "It closes at {closes}, not after it opens at {opens}; split a night shift into two periods at midnight."
    ),
    "clock_time": N_("Write a time as 09:00 (hours 00 to 23, minutes 00 to 59)."),
    "closing_time": N_("Write a time as 18:00 (hours 00 to 23, minutes 00 to 59), or 24:00 for midnight."),
    "no_opening_hours": N_("add at least one opening period, or turn business hours off"),
    "transcription_provider": N_(
        "{name}: this provider cannot write down voice messages; choose OpenAI, Azure OpenAI, "
        "an OpenAI-compatible server or the offline demo model"
    ),
    "channel_team": N_("write a channel and a team's name, as whatsapp = Billing ({channels})"),
}
"""pydantic error ``type`` → English template (a catalog msgid). Types whose English message depends
on a plural (``string_too_long``: "character"/"characters") are in :data:`_PLURAL` instead."""

_PLURAL: Mapping[str, tuple[str, str, str]] = {
    "string_too_short": (
        "min_length",
        N_("String should have at least {min_length} character"),
        N_("String should have at least {min_length} characters"),
    ),
    "string_too_long": (
        "max_length",
        N_("String should have at most {max_length} character"),
        N_("String should have at most {max_length} characters"),
    ),
}
"""type → (the ``ctx`` count, singular template, plural template); both are plain msgids (English and
Spanish share the plural rule ``n != 1``)."""


def localized_template(error_type: str, ctx: Mapping[str, Any] | None) -> str | None:
    """The English template (catalog msgid) of a pydantic error, or ``None`` when it is not listed."""
    if error_type in _PLURAL:
        key, one, many = _PLURAL[error_type]
        return one if str((ctx or {}).get(key)) == "1" else many
    return MESSAGES.get(error_type)


def localized(
    error: Mapping[str, Any], language: str = DEFAULT_LANGUAGE, *, params: Mapping[str, Any] | None = None
) -> str:
    """One pydantic error (an item of ``ValidationError.errors()``) as text in ``language``.

    Args:
        error: ``{"type", "msg", "ctx"?}``.
        language: ``en`` / ``es``; an unknown one gives English.
        params: values for the template instead of ``error["ctx"]`` (stored ones, already made text).

    Returns:
        The translated template formatted with the context, or pydantic's own ``msg`` (English) for
        a type :data:`MESSAGES` does not list or a context the template cannot be formatted with.
    """
    ctx = dict(params if params is not None else error.get("ctx") or {})
    template = localized_template(str(error.get("type")), ctx)
    if template is None:
        return str(error.get("msg"))
    if "error" in ctx:  # a ValueError's own text: translated when it is a msgid itself
        ctx["error"] = gettext(language, str(ctx["error"]))
    try:
        return gettext(language, template).format(**ctx)
    except (KeyError, IndexError, ValueError):
        return str(error.get("msg"))
