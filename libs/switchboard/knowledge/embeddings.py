"""Embeddings for chunks and questions: a provider model through LiteLLM, or the offline lexical one.

Which model a tenant uses (:func:`resolve_embedding_config`):

1. The tenant's ``knowledge`` settings (:class:`~switchboard.tenant_settings.KnowledgeSettings`) may
   name ``embedding_model``, ``embedding_api_base`` and ``embedding_api_key_encrypted`` (a
   :class:`~switchboard.crypto.CredentialCipher` token of ``{"api_key": ...}``, given for that base URL
   and provider; set them with :func:`set_tenant_embedding`).
2. Otherwise ``KB_EMBEDDING_MODEL`` (``text-embedding-3-small``).
3. The key: the tenant's stored one, else ``OPENAI_API_KEY`` where :func:`switchboard.llm.keys.choose_key`
   allows it (OpenAI's own endpoint only; ``KB_EMBEDDING_MODEL``, or any model with
   ``TENANTS_MAY_USE_PLATFORM_KEYS``). Without a key: the deterministic offline lexical embedding
   (:data:`~switchboard.llm.lexical.LEXICAL_MODEL_NAME`): no key, no network, no downloaded weights.

Provider calls go through ``litellm.aembedding`` with the SDK's own retries off (``max_retries=0``)
and tenacity retrying transient errors per batch (LiteLLM and tenacity docs). Every vector must have
:data:`~switchboard.db.models.EMBEDDING_DIMS` (1536) floats, the width of the pgvector column.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tenacity import (
    AsyncRetrying,
    before_sleep_log,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

from switchboard.crypto import CredentialCipher
from switchboard.db.models import EMBEDDING_DIMS, Tenant
from switchboard.egress import EgressPolicy, EgressRefused, egress_scope, guarded_client
from switchboard.errors import SwitchboardError
from switchboard.llm import import_litellm
from switchboard.llm.keys import (
    PLATFORM_KEY_SETTING,
    UNKNOWN_PROVIDER,
    check_api_key,
    choose_key,
    embedding_provider,
    platform_key,
)
from switchboard.llm.lexical import LEXICAL_MODEL_NAME, lexical_embedding
from switchboard.llm.lexical_process import embed_lexical
from switchboard.observability import get_logger
from switchboard.settings import Settings
from switchboard.tenant_settings import set_section, tenant_settings_from

__all__ = [
    "EmbeddingConfig",
    "EmbeddingFailed",
    "embed_query",
    "embed_texts",
    "resolve_embedding_config",
    "set_tenant_embedding",
    "EmbeddingKeyMissing",
    "check_model_usable",
    "switch_embedding_model",
]

log = get_logger(__name__)


class EmbeddingFailed(SwitchboardError):
    """The embedding provider failed after all retries (or returned vectors of the wrong shape).

    Attributes:
        model: the model name.
        retryable: whether a later attempt may succeed (timeouts, 5xx, rate limits).
    """

    def __init__(self, model: str, message: str, *, retryable: bool) -> None:
        self.model = model
        self.retryable = retryable
        super().__init__(f"embedding model {model}: {message}")


@dataclass(frozen=True, kw_only=True)
class EmbeddingConfig:
    """How to embed for one tenant."""

    model: str
    """Model name recorded on sources (``text-embedding-3-small`` or the lexical model's name)."""
    api_key: str | None = None
    """Provider key; ``None`` only for the lexical model."""
    api_base: str | None = None
    """OpenAI-compatible base URL (``http://host:port/v1``); ``None`` for the provider default."""
    batch_size: int = 64
    """Texts per request."""
    max_attempts: int = 3
    """Attempts per batch on transient errors."""
    retry_wait_s: float = 1.0
    """Back-off multiplier between attempts (seconds)."""
    timeout_s: float = 30.0
    """Per-request timeout (seconds)."""
    min_similarity: float = 0.3
    """Cosine similarity a chunk needs to match a question with this model."""
    egress: EgressPolicy = field(default_factory=EgressPolicy)
    """Where the provider calls may connect (:mod:`switchboard.egress`): a tenant's ``api_base`` only
    to a public address, checked and pinned at every connection."""

    @property
    def is_lexical(self) -> bool:
        return self.model == LEXICAL_MODEL_NAME

    @property
    def litellm_model(self) -> str:
        """The model string for LiteLLM: ``openai/<model>`` for a custom OpenAI-compatible base."""
        if self.api_base and "/" not in self.model:
            return f"openai/{self.model}"
        return self.model


class EmbeddingKeyMissing(SwitchboardError, ValueError):
    """A provider embedding model was asked for, but it would have no key (the tenant stores none and the
    platform's may not serve it): the model would silently fall back to the offline embedding while
    being recorded as the tenant's."""

    def __init__(self, model: str, *, platform_key_set: bool = False) -> None:
        self.model = model
        if platform_key_set:
            first = (
                f"embedding model {model!r} needs the tenant's own provider key (the platform's key serves only "
                f"the default model at OpenAI's own endpoint, unless {PLATFORM_KEY_SETTING} is on): give "
                "the tenant one"
            )
        else:
            first = (
                f"embedding model {model!r} needs a provider key: set OPENAI_API_KEY, or give the tenant one"
            )
        super().__init__(
            f"{first} with `switchboard kb set-embedding --api-key` (PUT .../knowledge/embedding); nothing was changed"
        )


def check_model_usable(settings: Settings, tenant: Tenant, model: str) -> None:
    """Raises EmbeddingKeyMissing when ``model`` (not the offline one) would have no key for ``tenant``."""
    from switchboard.llm.lexical import LEXICAL_MODEL_NAME

    if (
        model != LEXICAL_MODEL_NAME
        and resolve_embedding_config(settings, tenant, model_override=model).api_key is None
    ):
        raise EmbeddingKeyMissing(model, platform_key_set=platform_key(settings, "openai") is not None)


def resolve_embedding_config(
    settings: Settings,
    tenant: Tenant,
    *,
    model_override: str | None = None,
) -> EmbeddingConfig:
    """The embedding configuration for ``tenant`` (see the module docstring for the order).

    Args:
        settings: process settings (fallback key, model, batch and retry policy, thresholds).
        tenant: the tenant row (its ``knowledge`` settings).
        model_override: use this model instead (a re-index with another model); the lexical
            model's name selects the offline embedding.

    Raises:
        CredentialDecryptError: the tenant's stored key cannot be decrypted with ``ENCRYPTION_KEY``.
    """
    block = tenant_settings_from(tenant.settings_extensions, tenant_id=str(tenant.id)).knowledge
    model = model_override or block.embedding_model or settings.kb_embedding_model
    stored: str | None = None
    # LiteLLM decides the provider (and is imported for it) only when a key could go with the call
    keyed = model != LEXICAL_MODEL_NAME and (
        block.embedding_api_key_encrypted or any(platform_key(settings, p) for p in ("openai", "anthropic"))
    )
    provider = embedding_provider(model, block.embedding_api_base) if keyed else UNKNOWN_PROVIDER
    if (
        keyed
        and block.embedding_api_key_encrypted
        and provider
        == embedding_provider(block.embedding_model or settings.kb_embedding_model, block.embedding_api_base)
    ):  # a key given for another provider's model never goes with this one
        cipher = CredentialCipher(settings.secret("encryption_key").encode())
        stored = cipher.decrypt(block.embedding_api_key_encrypted).get("api_key")
    api_key = choose_key(
        settings,
        provider=provider,
        api_base=block.embedding_api_base,
        stored_key=stored,
        platform_default=_bare(model) == _bare(settings.kb_embedding_model),
        what="embedding",
    )
    if model == LEXICAL_MODEL_NAME or api_key is None:
        model, api_key = LEXICAL_MODEL_NAME, None
    lexical = model == LEXICAL_MODEL_NAME
    default_threshold = settings.kb_min_similarity_lexical if lexical else settings.kb_min_similarity
    return EmbeddingConfig(
        model=model,
        api_key=api_key,
        api_base=None if lexical else block.embedding_api_base,
        batch_size=settings.kb_embedding_batch_size,
        max_attempts=settings.kb_embedding_max_attempts,
        retry_wait_s=settings.kb_embedding_retry_wait_s,
        timeout_s=settings.kb_embedding_timeout_s,
        min_similarity=default_threshold if block.min_similarity is None else block.min_similarity,
        egress=EgressPolicy.for_models(settings),
    )


def _bare(model: str) -> str:
    """``openai/text-embedding-3-small`` -> ``text-embedding-3-small`` (the same OpenAI model)."""
    return model.removeprefix("openai/")


def set_tenant_embedding(
    settings: Settings,
    tenant: Tenant,
    *,
    model: str | None,
    api_key: str | None = None,
    api_base: str | None = None,
) -> None:
    """Store the tenant's embedding model, base URL and key (encrypted) in its ``knowledge`` settings.

    The caller commits. Existing chunks keep their old vectors until re-indexed.

    Args:
        model: model name, or ``None`` to fall back to the process default.
        api_key: provider key (stored encrypted); ``None`` removes a stored key.
        api_base: OpenAI-compatible base URL, or ``None`` for the provider default.

    Raises:
        pydantic.ValidationError: the resulting ``knowledge`` section is invalid (nothing changed).
        EgressRefused: the outbound-address policy refuses ``api_base`` (its form, or a host given as
            an address that is not public; a name is checked again, resolved, at every connection).
        ValueError: ``api_key`` is no API key (:func:`switchboard.llm.keys.check_api_key`).
    """
    if api_base:
        EgressPolicy.for_models(settings).check_syntax(api_base)
    encrypted = None
    if api_key:
        api_key = check_api_key(api_key)
        encrypted = CredentialCipher(settings.secret("encryption_key").encode()).encrypt({"api_key": api_key})
    set_section(
        tenant,
        "knowledge",
        embedding_model=model or None,
        embedding_api_base=api_base or None,
        embedding_api_key_encrypted=encrypted,
    )


def switch_embedding_model(settings: Settings, tenant: Tenant, model: str) -> None:
    """Set the tenant's embedding ``model`` (a re-index with another model), keeping its base URL; its
    stored key is kept only when the new model goes to the same provider (it was given for that one).
    The caller commits.

    Raises:
        pydantic.ValidationError: the resulting ``knowledge`` section is invalid (nothing changed).
    """
    block = tenant_settings_from(tenant.settings_extensions, tenant_id=str(tenant.id)).knowledge
    base = block.embedding_api_base
    before = embedding_provider(block.embedding_model or settings.kb_embedding_model, base)
    if block.embedding_api_key_encrypted and embedding_provider(model, base) != before:
        log.info("embedding_key_dropped", tenant_id=str(tenant.id), reason="provider_changed")
        set_section(tenant, "knowledge", embedding_model=model, embedding_api_key_encrypted=None)
    else:
        set_section(tenant, "knowledge", embedding_model=model)


def _transient_errors() -> tuple[type[BaseException], ...]:
    litellm = import_litellm()
    return (
        litellm.RateLimitError,
        litellm.APIConnectionError,
        litellm.Timeout,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        litellm.BadGatewayError,
    )


def _no_retry_client(config: EmbeddingConfig) -> Any:
    """An ``openai.AsyncOpenAI`` whose ``max_retries`` stays 0.

    LiteLLM 1.110.2's OpenAI embedding path turns ``max_retries=0`` into 2
    (``max_retries = max_retries or litellm.DEFAULT_MAX_RETRIES`` in
    ``litellm/llms/openai/openai.py``) and writes that onto the client, so the SDK would retry
    under tenacity (3 x 3 calls, measured against the loopback fake). This client ignores the write.
    """
    import openai

    class _NoRetryAsyncOpenAI(openai.AsyncOpenAI):
        @property  # type: ignore[override]
        def max_retries(self) -> int:
            return 0

        @max_retries.setter
        def max_retries(self, value: int) -> None:
            pass

    return _NoRetryAsyncOpenAI(
        api_key=config.api_key,
        base_url=config.api_base,
        timeout=config.timeout_s,
        http_client=guarded_client(config.egress, timeout=config.timeout_s),
    )


async def _embed_batch(config: EmbeddingConfig, batch: Sequence[str], client: Any) -> list[list[float]]:
    litellm = import_litellm()
    response = await litellm.aembedding(
        model=config.litellm_model,
        input=list(batch),
        api_key=config.api_key,
        api_base=config.api_base,
        timeout=config.timeout_s,
        max_retries=0,
        client=client,
    )
    items = sorted(
        response.data,
        key=lambda item: item["index"] if isinstance(item, Mapping) else item.index,
    )
    vectors = [list(item["embedding"] if isinstance(item, Mapping) else item.embedding) for item in items]
    if len(vectors) != len(batch):
        raise EmbeddingFailed(
            config.model, f"returned {len(vectors)} vectors for {len(batch)} texts", retryable=False
        )
    for vector in vectors:
        if len(vector) != EMBEDDING_DIMS:
            raise EmbeddingFailed(
                config.model,
                f"returned {len(vector)} dimensions; the knowledge base stores {EMBEDDING_DIMS}",
                retryable=False,
            )
    return vectors


async def embed_texts(
    config: EmbeddingConfig,
    texts: Sequence[str],
    *,
    on_batch: Callable[[int, int], None] | None = None,
) -> list[list[float]]:
    """Embed ``texts`` in batches of ``config.batch_size``; all or nothing.

    Args:
        config: from :func:`resolve_embedding_config`.
        texts: the texts, any number.
        on_batch: called after each batch with ``(texts_done, texts_total)`` (progress bars).

    Returns:
        One 1536-float vector per text, in order.

    Raises:
        EmbeddingFailed: the outbound-address policy refused ``config.api_base``, a batch still
            failed after ``config.max_attempts`` attempts, or the
            provider rejected the request (bad key, bad model, wrong dimensions).
    """
    vectors: list[list[float]] = []
    total = len(texts)
    if config.is_lexical:
        for start in range(0, total, config.batch_size):
            batch = texts[start : start + config.batch_size]
            # in the helper process: off this process's GIL (switchboard.llm.lexical_process)
            vectors.extend(await asyncio.to_thread(embed_lexical, batch))
            if on_batch:
                on_batch(len(vectors), total)
        return vectors
    if config.api_base:  # refused addresses are not retried (and checked again at the connection)
        try:
            await config.egress.resolve(config.api_base)
        except EgressRefused as exc:
            raise EmbeddingFailed(config.model, str(exc), retryable=False) from None
    transient = _transient_errors()
    client = _no_retry_client(config)
    try:
        with egress_scope(config.egress):
            await _embed_all(config, texts, vectors, client, transient, on_batch)
    finally:
        await client.close()
    return vectors


async def _embed_all(
    config: EmbeddingConfig,
    texts: Sequence[str],
    vectors: list[list[float]],
    client: Any,
    transient: tuple[type[BaseException], ...],
    on_batch: Callable[[int, int], None] | None,
) -> None:
    litellm = import_litellm()
    total = len(texts)
    for start in range(0, total, config.batch_size):
        batch = texts[start : start + config.batch_size]
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(config.max_attempts),
                wait=wait_exponential_jitter(
                    multiplier=config.retry_wait_s, max=30, jitter=config.retry_wait_s
                ),
                retry=retry_if_exception_type(transient),
                reraise=True,
                before_sleep=before_sleep_log(logging.getLogger(__name__), logging.WARNING),
            ):
                with attempt:
                    batch_vectors = await _embed_batch(config, batch, client)
        except transient as exc:
            log.warning(
                "embedding_batch_failed", model=config.model, batch_start=start, error=type(exc).__name__
            )
            raise EmbeddingFailed(
                config.model,
                f"provider failed after {config.max_attempts} attempts ({type(exc).__name__})",
                retryable=True,
            ) from exc
        except (litellm.APIError, litellm.AuthenticationError, litellm.BadRequestError) as exc:
            log.warning(
                "embedding_batch_rejected", model=config.model, batch_start=start, error=type(exc).__name__
            )
            raise EmbeddingFailed(
                config.model, f"provider rejected the request ({type(exc).__name__})", retryable=False
            ) from exc
        vectors.extend(batch_vectors)
        if on_batch:
            on_batch(len(vectors), total)


async def embed_query(config: EmbeddingConfig, text: str) -> list[float]:
    """Embed one question (same model as the chunks it is compared with).

    Raises:
        EmbeddingFailed: see :func:`embed_texts`.
    """
    if config.is_lexical:
        return lexical_embedding(text)
    return (await embed_texts(config, [text]))[0]
