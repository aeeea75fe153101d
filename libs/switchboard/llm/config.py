"""Per-tenant model configuration: deployments and the Router policy (docs/decisions/model-router.md).

Stored in ``tenants.settings_extensions["llm"]``; a field's default applies where the tenant sets none. API keys
are stored encrypted (:class:`~switchboard.crypto.CredentialCipher`, ``{"api_key": ...}``) in
``api_key_encrypted``, bound to the deployment's provider and ``api_base`` (changing either drops it).
Whether a deployment without one may use the platform's key (``OPENAI_API_KEY`` /
``ANTHROPIC_API_KEY``) is decided in :mod:`switchboard.llm.keys`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

if TYPE_CHECKING:  # a leaf at import time: tenant settings import this module
    from switchboard.crypto import CredentialCipher
    from switchboard.settings import Settings

__all__ = [
    "MODEL_NAME_MAX_CHARS",
    "ModelName",
    "Provider",
    "DeploymentSettings",
    "LLMSettings",
    "default_deployments",
    "encrypt_api_key",
    "has_provider_key",
    "is_platform_default",
    "OFFLINE_DEMO_MODEL",
    "MEDIA_KINDS",
    "MediaKind",
    "MAX_MEDIA_DEPLOYMENTS",
    "TRANSCRIPTION_PROVIDERS",
]

Provider = Literal["openai", "anthropic", "azure", "gemini", "openai_compatible", "ollama", "offline"]
"""``azure``: Azure OpenAI (``model`` is the Azure deployment's name, ``api_base`` the resource's
address); ``gemini``: Google's Gemini API; ``openai_compatible``: any server speaking the OpenAI API
(vLLM, LM Studio, ...)."""

MODEL_NAME_MAX_CHARS = 200
"""Longest model name a tenant may save (provider names are far shorter; Hugging Face paths fit)."""
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]*")


def _check_model_name(value: str) -> str:
    if not _MODEL_NAME.fullmatch(value):
        raise PydanticCustomError(
            "model_name",
            "a model name holds letters, digits and . _ : / @ + - only, starting with a letter or digit "
            "(e.g. gpt-4o-mini, llama3.1:8b, meta-llama/Llama-3.1-8B-Instruct)",
        )
    return value


ModelName = Annotated[
    str, Field(min_length=1, max_length=MODEL_NAME_MAX_CHARS), AfterValidator(_check_model_name)
]
"""A provider's model name as a tenant saves it: 1-200 characters of ``A-Z a-z 0-9 . _ : / @ + -``
(no spaces, quotes or control characters), refused at save with a message saying so."""

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_ANTHROPIC_MODEL = "claude-haiku-4-5"
OFFLINE_DEMO_MODEL = "offline-demo"
"""Model name of the offline server's demo deployment (``openai/offline-demo`` in LiteLLM terms)."""


class DeploymentSettings(BaseModel):
    """One model deployment a tenant may use.

    ``priority``: lower answers first; deployments with the same priority form one group (LiteLLM
    load-balances and fails over inside it), and groups are tried in priority order (fallbacks).
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._:-]+$")
    """Readable ``model_info.id`` (``openai-primary``): logs and turns say which deployment answered."""
    provider: Provider = "openai"
    model: ModelName
    """Provider's model name without prefix (``gpt-4o-mini``, ``claude-haiku-4-5``, ``llama3.1``): see
    :data:`ModelName`."""
    api_base: str | None = Field(None, min_length=1, max_length=2_000)
    """Endpoint for ``azure`` / ``ollama`` / ``openai_compatible`` (e.g. ``https://llama.shop.example``); an ``offline``
    deployment without one uses the platform's offline model server (``MODEL_SERVER_URL``)."""
    priority: int = Field(1, ge=0, le=100)
    api_key_encrypted: str | None = None
    """Fernet token of ``{"api_key": "..."}`` (see :func:`encrypt_api_key`); never the plain key. Given
    for this ``provider`` and ``api_base``: a save that changes either drops it unless a new key comes."""
    max_input_tokens: int | None = Field(None, gt=0)
    """Context window when LiteLLM's model table does not know the model, or when the provider's real
    window is smaller than the table says. A later group with a larger window is the context-window
    fallback of an earlier one."""
    timeout_s: float | None = Field(None, gt=0)
    """Per-request timeout overriding the tenant's ``request_timeout_s``."""

    @classmethod
    def key_address(cls, values: Mapping[str, Any]) -> tuple[str, str | None]:
        """``(provider, normalized api_base)`` of a deployment in stored or public shape: where its
        stored key may go (:func:`switchboard.llm.keys.key_address`)."""
        from switchboard.llm.keys import key_address  # here: this module stays a leaf at import time

        provider = values.get("provider") or cls.model_fields["provider"].default
        return key_address(values, provider=str(provider), base_field="api_base")

    def litellm_model(self) -> str:
        """LiteLLM's ``provider/model`` string."""
        if self.provider in ("openai", "openai_compatible", "offline"):
            return f"openai/{self.model}"
        if self.provider == "ollama":
            return f"ollama_chat/{self.model}"
        if self.provider in ("azure", "gemini"):
            return f"{self.provider}/{self.model}"
        return f"anthropic/{self.model}"


MediaKind = Literal["transcription", "vision"]
"""What a media deployment does: speech to text (``/audio/transcriptions``), or an image described by a
chat model that takes images."""
MEDIA_KINDS: tuple[MediaKind, ...] = ("transcription", "vision")
MAX_MEDIA_DEPLOYMENTS = 10
"""Longest transcription or vision list a tenant may save."""
TRANSCRIPTION_PROVIDERS: tuple[Provider, ...] = ("openai", "azure", "openai_compatible", "offline")
"""Providers that transcribe speech (an OpenAI-shaped ``/audio/transcriptions``): the only choices of a
voice message model. Anthropic, Gemini and Ollama have no such endpoint."""
TRANSCRIPTION_PROVIDER_REFUSED = (
    "{name}: this provider cannot write down voice messages; choose OpenAI, Azure OpenAI, "
    "an OpenAI-compatible server or the offline demo model"
)
"""Why a voice message model with another provider is refused (``{name}``: the row's name)."""


class LLMSettings(BaseModel):
    """A tenant's deployments and Router policy (defaults: docs/architecture.md#the-model-layer)."""

    model_config = ConfigDict(extra="forbid")

    deployments: list[DeploymentSettings] = Field(default_factory=list, max_length=20)
    """Empty: the process default (OpenAI/Anthropic with process keys, else the offline model)."""
    transcription: list[DeploymentSettings] = Field(default_factory=list, max_length=MAX_MEDIA_DEPLOYMENTS)
    """Speech-to-text deployments for voice messages (``whisper-1``, ``gpt-4o-mini-transcribe``), in the
    same shape as ``deployments`` (priority order = fallback order, a key of their own). Empty: the
    platform's transcription endpoint (``TRANSCRIPTION_BASE_URL``)."""
    vision: list[DeploymentSettings] = Field(default_factory=list, max_length=MAX_MEDIA_DEPLOYMENTS)
    """Chat models that take images, used to describe a customer's pictures. Empty: the tenant's own chat
    deployments that LiteLLM's model table says take images, else the platform's vision endpoint
    (``VISION_BASE_URL``)."""

    @field_validator("transcription")
    @classmethod
    def _only_providers_that_transcribe(cls, rows: list[DeploymentSettings]) -> list[DeploymentSettings]:
        """Refuses (``transcription_provider``) a voice message model whose provider has no speech-to-text
        endpoint: its test and every voice note would fail."""
        for row in rows:
            if row.provider not in TRANSCRIPTION_PROVIDERS:
                raise PydanticCustomError(
                    "transcription_provider", TRANSCRIPTION_PROVIDER_REFUSED, {"name": row.id}
                )
        return rows

    allowed_fails: int = Field(2, ge=0)
    """Failures of one deployment (per minute, LiteLLM's window) before it cools down."""
    cooldown_s: float = Field(30.0, gt=0)
    request_timeout_s: float = Field(45.0, gt=0)
    connect_timeout_s: float = Field(3.0, gt=0, le=60)
    """Longest wait to open a connection to a deployment, seconds (default 3): a provider that cannot be
    reached fails over at once instead of holding the turn for ``request_timeout_s``."""
    num_retries: int = Field(2, ge=0, le=5)
    """Retries of transient errors inside a group (>= 1 needed for in-group failover, LiteLLM Router docs)."""
    max_retry_wait_s: float = Field(1.0, ge=0, le=10)
    """Longest wait before retrying a deployment. A provider's ``Retry-After`` beyond it is not waited
    out: the deployment cools down for that long and the next group answers at once."""
    max_retry_after_cooldown_s: float = Field(300.0, gt=0)
    """Upper bound on a cooldown taken from a provider's ``Retry-After`` (seconds)."""
    fallback_reserve_s: float = Field(15.0, ge=0)
    """Seconds of the turn budget kept for the next group: a group that is not the last gets at most
    the remaining budget minus this (so a hanging primary cannot use up the fallback's time)."""
    trim_ratio: float = Field(0.8, gt=0, le=1)
    """Messages are trimmed to this share of the smallest context window of the deployments."""
    default_context_window_tokens: int = Field(8192, gt=256)
    """Context window assumed for models LiteLLM's table does not know (and no ``max_input_tokens``)."""
    max_output_tokens: int | None = Field(None, gt=0)
    summarize_after_messages: int = Field(70, ge=4)
    """When the unsummarized history passes this many messages, the oldest part is summarized."""
    keep_verbatim_messages: int = Field(50, ge=2)
    """Newest messages kept verbatim when summarizing."""


def has_provider_key(settings: Settings) -> bool:
    """Whether a process-wide provider key (OpenAI or Anthropic) is configured."""
    return any(
        key is not None and key.get_secret_value()
        for key in (settings.openai_api_key, settings.anthropic_api_key)
    )


def is_platform_default(settings: Settings, deployment: DeploymentSettings) -> bool:
    """Whether ``deployment`` runs one of the platform's default models (same provider and model as a
    deployment of :func:`default_deployments`): the operator's choice, which the platform's key serves
    at the official endpoint whatever the tenant stored (guardrails and budgets copy the defaults)."""
    return any(
        (default.provider, default.model) == (deployment.provider, deployment.model)
        for default in default_deployments(settings)
        if default.provider != "offline"
    )


def default_deployments(settings: Settings) -> list[DeploymentSettings]:
    """Deployments for a tenant that configured none.

    OpenAI ``gpt-4o-mini`` (priority 1) and/or Anthropic ``claude-haiku-4-5`` (priority 2) when their
    process keys are set; otherwise the offline model server (``MODEL_SERVER_URL``, default
    ``http://HOST:MODEL_SERVER_PORT``).
    """
    chosen: list[DeploymentSettings] = []
    if settings.openai_api_key is not None and settings.openai_api_key.get_secret_value():
        chosen.append(DeploymentSettings(id="openai-default", provider="openai", model=DEFAULT_OPENAI_MODEL))
    if settings.anthropic_api_key is not None and settings.anthropic_api_key.get_secret_value():
        chosen.append(
            DeploymentSettings(
                id="anthropic-default", provider="anthropic", model=DEFAULT_ANTHROPIC_MODEL, priority=2
            )
        )
    if chosen:
        return chosen
    return [
        DeploymentSettings(
            id="offline-demo",
            provider="offline",
            model=OFFLINE_DEMO_MODEL,
            api_base=settings.model_server_url + "/v1",
        )
    ]


def encrypt_api_key(cipher: CredentialCipher, api_key: str) -> str:
    """The value to store in :attr:`DeploymentSettings.api_key_encrypted`."""
    return cipher.encrypt({"api_key": api_key})
