"""Voice message models: only providers with a speech-to-text endpoint may be saved, and a refusal
names the row and the providers to choose from, in the reader's language."""

from __future__ import annotations

from typing import get_args

import pytest
from pydantic import ValidationError
from switchboard.i18n.validation import localized
from switchboard.llm.config import TRANSCRIPTION_PROVIDERS, DeploymentSettings, LLMSettings, Provider

CANNOT_TRANSCRIBE = [p for p in get_args(Provider) if p not in TRANSCRIPTION_PROVIDERS]


def test_the_providers_that_transcribe_are_openai_azure_openai_compatible_and_the_offline_server():
    assert TRANSCRIPTION_PROVIDERS == ("openai", "azure", "openai_compatible", "offline")
    assert CANNOT_TRANSCRIBE == ["anthropic", "gemini", "ollama"]


@pytest.mark.parametrize("provider", TRANSCRIPTION_PROVIDERS)
def test_a_voice_row_with_a_provider_that_transcribes_is_kept(provider: str) -> None:
    row = DeploymentSettings(id="ears", provider=provider, model="whisper-1")  # type: ignore[arg-type]
    assert LLMSettings(transcription=[row]).transcription == [row]


@pytest.mark.parametrize("provider", CANNOT_TRANSCRIBE)
def test_a_voice_row_with_a_provider_that_cannot_transcribe_is_refused_in_words(provider: str) -> None:
    row = {"id": "spare", "provider": "openai", "model": "whisper-1"}
    wrong = {"id": "chat-ears", "provider": provider, "model": "some-model"}
    with pytest.raises(ValidationError) as refused:
        LLMSettings.model_validate({"transcription": [row, wrong]})
    (error,) = refused.value.errors()
    assert error["loc"] == ("transcription",)
    assert localized(error, "en") == (
        "chat-ears: this provider cannot write down voice messages; choose OpenAI, Azure OpenAI, "
        "an OpenAI-compatible server or the offline demo model"
    )
    assert localized(error, "es") == (
        "chat-ears: este proveedor no puede transcribir mensajes de voz; elija OpenAI, Azure OpenAI, "
        "un servidor compatible con OpenAI o el modelo de demostración sin conexión"
    )


@pytest.mark.parametrize("provider", get_args(Provider))
def test_a_picture_row_may_use_any_provider(provider: str) -> None:
    row = DeploymentSettings(id="eyes", provider=provider, model="gpt-4o-mini")  # type: ignore[arg-type]
    assert LLMSettings(vision=[row]).vision == [row]
