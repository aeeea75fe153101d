"""Which of a tenant's models read its pictures and voice notes, called through the model gateway at the
HTTP boundary (a recording listener stands in for the tenant's server): the vision rule for an empty
list, the tenant's key, the cheapest group once the budget is spent, and what each failure means."""

from __future__ import annotations

import uuid

import httpx
import pytest
from switchboard.crypto import CredentialCipher
from switchboard.inbound.media import MediaModels, MediaUnavailable, describe_image, transcribe
from switchboard.llm.config import DeploymentSettings, LLMSettings, encrypt_api_key
from switchboard.llm.router import ModelGateway

from tests.utils.key_listener import KeyListener, key_listener

JPEG = b"\xff\xd8\xff\xe0fake-jpeg"
CLOSED = "http://127.0.0.1:9/v1"


@pytest.fixture
async def listener() -> KeyListener:  # type: ignore[misc]
    async with key_listener() as recording:
        yield recording


def _gateway(settings) -> ModelGateway:  # type: ignore[no-untyped-def]
    return ModelGateway(
        settings=settings, cipher=CredentialCipher(settings.secret("encryption_key").encode())
    )


def _deployment(
    gateway: ModelGateway, deployment_id: str, model: str, api_base: str, key: str, **extra
) -> DeploymentSettings:  # type: ignore[no-untyped-def]
    return DeploymentSettings(
        id=deployment_id,
        provider="openai_compatible",
        model=model,
        api_base=api_base,
        api_key_encrypted=encrypt_api_key(gateway.cipher, key),
        **extra,
    )


def test_an_empty_picture_list_uses_the_tenants_own_chat_models_that_take_images(settings):  # type: ignore[no-untyped-def]
    gateway = _gateway(settings)
    sees = DeploymentSettings(id="main", provider="openai", model="gpt-4o-mini")
    blind = DeploymentSettings(id="local", provider="offline", model="offline-demo")
    eyes = DeploymentSettings(id="eyes", provider="anthropic", model="claude-haiku-4-5")
    assert gateway.media_deployments(LLMSettings(deployments=[blind, sees]), "vision") == [sees]
    assert gateway.media_deployments(LLMSettings(deployments=[sees], vision=[eyes]), "vision") == [eyes]
    assert gateway.media_deployments(LLMSettings(deployments=[blind]), "vision") == []  # the platform's
    assert gateway.media_deployments(LLMSettings(), "vision") == []  # no own models: the platform's
    assert gateway.media_deployments(LLMSettings(deployments=[sees]), "transcription") == []


async def test_the_chat_model_that_takes_images_describes_the_picture_with_the_tenants_key(
    settings, listener
):  # type: ignore[no-untyped-def]
    gateway = _gateway(settings)
    main = _deployment(gateway, "main", "gpt-4o-mini", listener.url + "/v1", "sk-tenant-chat")
    models = MediaModels(gateway, uuid.uuid4(), LLMSettings(deployments=[main], num_retries=0))
    async with httpx.AsyncClient() as http:
        text = await describe_image(http, settings, JPEG, "image/jpeg", models)
    assert text == "Listener answer."
    assert [(s.path, s.credentials) for s in listener.seen] == [
        ("/v1/chat/completions", {"authorization": "Bearer sk-tenant-chat"})
    ]
    assert [(c.kind, c.deployment) for c in models.calls] == [("vision", "main")]


async def test_once_the_budget_is_spent_only_the_cheapest_group_is_called(settings, listener):  # type: ignore[no-untyped-def]
    gateway = _gateway(settings)
    dear = _deployment(gateway, "dear", "gpt-4o", listener.url + "/v1", "sk-dear", priority=1)
    cheap = _deployment(gateway, "cheap", "gpt-4o-mini", listener.url + "/v1", "sk-cheap", priority=2)
    llm = LLMSettings(vision=[dear, cheap], num_retries=0)
    async with httpx.AsyncClient() as http:
        await describe_image(http, settings, JPEG, "image/jpeg", MediaModels(gateway, uuid.uuid4(), llm))
        await describe_image(
            http, settings, JPEG, "image/jpeg", MediaModels(gateway, uuid.uuid4(), llm, cheapest_only=True)
        )
    assert listener.credentials() == ["Bearer sk-dear", "Bearer sk-cheap"]


async def test_a_tenant_model_nobody_can_reach_is_a_failure_to_retry_later(settings):  # type: ignore[no-untyped-def]
    gateway = _gateway(settings)
    gone = _deployment(gateway, "gone", "whisper-1", CLOSED, "sk-gone")
    models = MediaModels(gateway, uuid.uuid4(), LLMSettings(transcription=[gone], num_retries=0))
    async with httpx.AsyncClient() as http:
        with pytest.raises(MediaUnavailable) as caught:
            await transcribe(http, settings, b"OggS\x00voice", "audio/ogg", models)
    assert caught.value.is_transient and caught.value.reason is None
    assert models.calls == []
