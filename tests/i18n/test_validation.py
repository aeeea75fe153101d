"""Validation messages through the catalog (:mod:`switchboard.i18n.validation`): each English template
is pydantic's own message for its type, so English stays what pydantic says; Spanish translates it."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field, ValidationError
from pydantic_core._pydantic_core import list_all_errors  # pydantic-core's table of message templates
from switchboard.i18n.validation import MESSAGES, localized
from switchboard.tenant_settings import LocaleSettings


def test_every_template_is_pydantics_own_message_for_its_type():
    theirs = {e["type"]: e["message_template_python"] for e in list_all_errors()}
    ours = {t: m for t, m in MESSAGES.items() if t in theirs}
    # our validators' own types
    assert set(MESSAGES) - set(ours) == {
        "unknown_timezone",
        "closes_before_opening",
        "no_opening_hours",
        "clock_time",
        "closing_time",
        "channel_team",
        "transcription_provider",
    }
    assert ours == {t: theirs[t] for t in ours}


class _Form(BaseModel):
    count: int = Field(ge=1, le=10)
    name: str = Field(max_length=3)
    slug: str = Field(min_length=1)


@pytest.mark.parametrize(
    ("data", "english", "spanish"),
    [
        ({"count": 11}, "Input should be less than or equal to 10", "Debe ser menor o igual que 10"),
        (
            {"count": "x"},
            "Input should be a valid integer, unable to parse string as an integer",
            "Debe ser un número entero válido; el texto no se puede leer como entero",
        ),
        (
            {"name": "long"},
            "String should have at most 3 characters",
            "El texto debe tener como máximo 3 caracteres",
        ),
        ({"slug": ""}, "String should have at least 1 character", "El texto debe tener al menos 1 carácter"),
    ],
)
def test_a_pydantic_error_in_english_and_spanish(data, english, spanish):
    valid = {"count": 1, "name": "abc", "slug": "s"}
    with pytest.raises(ValidationError) as caught:
        _Form.model_validate({**valid, **data})
    (error,) = caught.value.errors()
    assert (error["msg"], localized(error), localized(error, "es")) == (english, english, spanish)


def test_our_validator_and_an_unlisted_type():
    with pytest.raises(ValidationError) as caught:
        LocaleSettings.model_validate({"timezone": "Mars/Base"})
    (error,) = caught.value.errors()
    assert error["msg"] == "unknown time zone 'Mars/Base' (use an IANA name such as Europe/Madrid)"
    assert (
        localized(error, "es")
        == "zona horaria desconocida 'Mars/Base' (use un nombre IANA como Europe/Madrid)"
    )
    assert (
        localized({"type": "date_past", "msg": "Date should be in the past"}, "es")
        == "Date should be in the past"
    )
