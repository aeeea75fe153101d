"""Which API key goes with a model call: the one place that decides (chat, embeddings, transcription, vision).

The rule (docs/security.md, "Model providers and keys"):

* a key stored for a deployment (or for the tenant's embedding) is sent with it: it was given for that
  deployment's ``api_base`` and provider, and changing either drops it (:func:`key_address`, applied
  by every save path);
* otherwise a **platform key** (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``) may be sent, and only when
  both hold:

  1. the call goes to that provider's **official endpoint**: no ``api_base``, or one equal to the
     official one after normalizing (:func:`is_official_endpoint`); a tenant-set address never
     receives it;
  2. the model is one of the **platform's defaults** (the deployments of a tenant that configured
     none, ``KB_EMBEDDING_MODEL``, transcription and vision, all set by the operator), or the operator
     lets tenants spend the platform's credit on models of their own
     (``TENANTS_MAY_USE_PLATFORM_KEYS``, off by default);

* otherwise no key: the call goes out without one (a keyless local server answers; a provider says
  401), and "Test this deployment" says why in plain words (:func:`missing_key_reason`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from switchboard.observability import get_logger

if TYPE_CHECKING:
    from switchboard.settings import Settings

__all__ = [
    "API_KEY_MAX_CHARS",
    "OFFICIAL_ENDPOINTS",
    "PLATFORM_KEY_SETTING",
    "UNKNOWN_PROVIDER",
    "check_api_key",
    "choose_key",
    "deployment_key_provider",
    "embedding_provider",
    "is_official_endpoint",
    "missing_key_reason",
    "normalize_base",
    "platform_key",
    "routed_provider",
]

log = get_logger(__name__)

OFFICIAL_ENDPOINTS: Mapping[str, frozenset[str]] = {
    "openai": frozenset({"https://api.openai.com", "https://api.openai.com/v1"}),
    "anthropic": frozenset({"https://api.anthropic.com", "https://api.anthropic.com/v1"}),
}
"""Provider -> its official base URLs in :func:`normalize_base` form (root, or with ``/v1``)."""
_PLATFORM_KEY_FIELDS = {"openai": "openai_api_key", "anthropic": "anthropic_api_key"}
"""Provider -> the :class:`~switchboard.settings.Settings` field holding the platform's key."""
PLATFORM_KEY_SETTING = "TENANTS_MAY_USE_PLATFORM_KEYS"
"""The environment variable of ``Settings.tenants_may_use_platform_keys`` (named in messages)."""


def normalize_base(api_base: str | None) -> str | None:
    """A base URL in comparable form: scheme and host lower-case, the host without a trailing dot, the
    default port and trailing slashes dropped (``HTTPS://API.OpenAI.com.:443/v1/`` ->
    ``https://api.openai.com/v1``). ``None`` or blank: ``None`` (the provider's default endpoint).

    A URL that does not parse comes back stripped but otherwise as written (it then equals no official
    endpoint, and two such spellings compare as written).
    """
    if api_base is None or not api_base.strip():
        return None
    text = api_base.strip()
    try:
        parts = urlsplit(text)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return text
    if not parts.scheme or not host:
        return text
    scheme = parts.scheme.lower()
    host = host.rstrip(".")
    if ":" in host:  # IPv6 literal: keep its brackets
        host = f"[{host}]"
    default_port = {"https": 443, "http": 80}.get(scheme)
    netloc = host if port is None or port == default_port else f"{host}:{port}"
    if parts.username is not None or parts.password is not None:
        netloc = f"{parts.netloc.rsplit('@', 1)[0]}@{netloc}"  # kept: it never equals an official one
    path = parts.path.rstrip("/")
    tail = (f"?{parts.query}" if parts.query else "") + (f"#{parts.fragment}" if parts.fragment else "")
    return f"{scheme}://{netloc}{path}{tail}"


def is_official_endpoint(provider: str, api_base: str | None) -> bool:
    """Whether a call of ``provider`` with ``api_base`` goes to the provider's own API.

    True for no ``api_base`` (LiteLLM and the SDKs use the official one) and for an ``api_base`` that
    normalizes to one of :data:`OFFICIAL_ENDPOINTS`: https, the exact host, no user info, no port other
    than 443, path empty or ``/v1``, no query or fragment, and no whitespace, control or non-ASCII
    character anywhere. False for every other provider (``openai_compatible``, ``ollama``, ``offline``).
    """
    official = OFFICIAL_ENDPOINTS.get(provider)
    if official is None:
        return False
    if api_base is None or api_base == "":
        return True
    if not api_base.isascii() or any(ch <= " " or ch == "\x7f" or ch == "\\" for ch in api_base):
        return False
    return normalize_base(api_base) in official


def platform_key(settings: Settings, provider: str) -> str | None:
    """The platform's (process) key of ``provider``, or ``None`` (no such provider key, or unset)."""
    field = _PLATFORM_KEY_FIELDS.get(provider)
    value = getattr(settings, field, None) if field else None
    if value is None:
        return None
    secret = value.get_secret_value()
    return secret or None


def choose_key(
    settings: Settings,
    *,
    provider: str,
    api_base: str | None,
    stored_key: str | None,
    platform_default: bool,
    what: str,
) -> str | None:
    """The key to send with one model call, or ``None`` (send none). See the module docstring.

    Args:
        settings: process settings (the platform keys and ``tenants_may_use_platform_keys``).
        provider: ``openai`` | ``anthropic`` | any other provider name (which never gets a platform key).
        api_base: the base URL the call goes to (``None``: the provider's default endpoint).
        stored_key: the decrypted key stored with this deployment or embedding (given for ``api_base``).
        platform_default: the model is one the operator configured (a default deployment, the default
            embedding model, transcription or vision), not one a tenant chose.
        what: names the call in the log line (``deployment openai-primary``, ``embedding``).
    """
    if stored_key:
        return stored_key
    key = platform_key(settings, provider)
    if key is None:
        return None
    if not is_official_endpoint(provider, api_base):
        # info, not warning: a knowledge search resolves the embedding key each time
        log.info("platform_key_withheld", reason="not_official_endpoint", provider=provider, call=what)
        return None
    if not (platform_default or settings.tenants_may_use_platform_keys):
        log.info("platform_key_withheld", reason="tenant_model", provider=provider, call=what)
        return None
    return key


def missing_key_reason(
    settings: Settings, *, provider: str, api_base: str | None, platform_default: bool
) -> str | None:
    """Why a call of ``provider`` without a key of its own goes out with none, in plain words for a
    tenant admin; ``None`` when the platform's key is used, or when the provider takes no key."""
    if provider not in _PLATFORM_KEY_FIELDS:
        return None
    if platform_key(settings, provider) is None:
        return "no API key: give this deployment its provider's key"
    if not is_official_endpoint(provider, api_base):
        return (
            "no API key: the platform's key is only sent to the provider's official endpoint, "
            "never to an address set here; give this deployment a key for its address"
        )
    if not (platform_default or settings.tenants_may_use_platform_keys):
        return (
            "no API key: the platform's key serves only the platform's default models; "
            "give this deployment its own key"
        )
    return None


API_KEY_MAX_CHARS = 4_096
"""Longest API key a tenant may store (providers' keys are under 200 characters)."""


def check_api_key(value: str, *, field: str = "api_key") -> str:
    """``value`` stripped, if it can be an API key: 1 to :data:`API_KEY_MAX_CHARS` visible ASCII
    characters (letters, digits, punctuation), as every provider's keys are, and as an HTTP header
    carries them.

    Raises:
        ValueError: empty, too long, or holding a space, a control character (NUL included) or a
            non-ASCII character; the message names ``field`` and never repeats the key.
    """
    key = value.strip()
    if not key:
        raise ValueError(f"{field} is empty")
    if len(key) > API_KEY_MAX_CHARS:
        raise ValueError(f"{field} is too long: {len(key):,} characters (at most {API_KEY_MAX_CHARS:,})")
    if not all("!" <= ch <= "~" for ch in key):
        raise ValueError(
            f"{field} may hold only letters, digits and punctuation (no spaces, control or non-ASCII characters)"
        )
    return key


UNKNOWN_PROVIDER = "unknown"
"""What :func:`routed_provider` says of a model LiteLLM cannot route: a provider no platform key serves."""


@functools.lru_cache(maxsize=1024)
def routed_provider(litellm_model: str) -> str:
    """The provider LiteLLM sends ``litellm_model`` to, as LiteLLM itself decides it
    (``litellm.get_llm_provider``): the prefix when there is one (``cohere/embed-english-v3.0`` ->
    ``cohere``), else LiteLLM's own tables (``embed-english-v3.0`` -> ``cohere``,
    ``text-embedding-004`` -> ``vertex_ai``, ``text-embedding-3-small`` -> ``openai``).
    :data:`UNKNOWN_PROVIDER` for a name LiteLLM cannot route.

    Imports LiteLLM on first call (:func:`switchboard.llm.import_litellm`): call it only where a key is
    chosen or a stored key's address compared, never at a process's start-up.
    """
    from switchboard.llm import import_litellm

    litellm = import_litellm()
    try:
        _, provider, _, _ = litellm.get_llm_provider(model=litellm_model)
    except Exception:  # litellm.BadRequestError: "LLM Provider NOT provided"
        return UNKNOWN_PROVIDER
    return str(provider or UNKNOWN_PROVIDER)


def embedding_provider(model: str | None, api_base: str | None = None) -> str:
    """The provider LiteLLM sends an embedding ``model`` to (:func:`routed_provider`), with the model
    string the call uses: a bare name with an ``api_base`` goes as ``openai/<model>`` (an
    OpenAI-compatible server, :attr:`switchboard.knowledge.embeddings.EmbeddingConfig.litellm_model`).
    No model: ``openai`` (the default ``KB_EMBEDDING_MODEL``, ``text-embedding-3-small``)."""
    if not model:
        return "openai"
    if api_base and api_base.strip() and "/" not in model:
        return "openai"
    return routed_provider(model)


def deployment_key_provider(provider: str, litellm_model: str) -> str:
    """The provider whose platform key a chat deployment may get: its ``provider`` when LiteLLM routes
    its model string (``openai/<model>``, ``anthropic/<model>``) to that provider, else
    :data:`UNKNOWN_PROVIDER` (the two disagree: no platform key goes where LiteLLM would send it)."""
    if provider not in _PLATFORM_KEY_FIELDS:
        return provider
    return provider if routed_provider(litellm_model) == provider else UNKNOWN_PROVIDER


def key_address(values: Mapping[str, Any], *, provider: str, base_field: str) -> tuple[str, str | None]:
    """``(provider, normalized api_base)``: where a stored key was given to go. A save that changes it
    drops the stored key unless a new key comes with it (:mod:`switchboard.tenant_config.document`)."""
    base = values.get(base_field)
    return provider, normalize_base(base if isinstance(base, str) else None)
