"""Process settings, read once from the environment and ``.env``.

Every service calls :func:`load_settings` once at start-up and hands values down; library code
never reads the environment itself. A missing or malformed value raises
:class:`~switchboard.errors.SettingsError` naming the environment variable, so a service fails at
start-up with a message an operator can act on.

The fields are grouped by concern, one class each (:class:`StateSettings`, :class:`NetworkSettings`,
:class:`LogSettings`, :class:`ModelProviderSettings`, :class:`SecretSettings`,
:class:`WhatsAppChannelSettings`, :class:`GmailChannelSettings`, :class:`InboundSettings`, :class:`MediaSettings`,
:class:`McpClientSettings`, :class:`KnowledgeBaseSettings`); :class:`Settings` is all of them at
once. Every field keeps its flat environment name (``WHATSAPP_PORT``, ``KB_CHUNK_SIZE_CHARS``) and
its keyword (``Settings(whatsapp_port=...)``); a function that needs one concern may say so in its
signature (``settings: KnowledgeBaseSettings``).

Secrets have one resolver, :meth:`Settings.secret`: the setting when set, else a value generated once
into ``DATA_DIR/secrets/`` (mode 0600) and reused.

Per-tenant overrides (loop limits, models, prompts) live in ``tenants.settings_extensions`` in
Postgres (:mod:`switchboard.tenant_settings`), not here.
"""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Literal
from urllib.parse import urlsplit

from cryptography.fernet import Fernet
from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from switchboard.errors import SettingsError

__all__ = [
    "Settings",
    "load_settings",
    "SecretName",
    "GENERATED_SECRETS",
    "StateSettings",
    "NetworkSettings",
    "LogSettings",
    "ModelProviderSettings",
    "SecretSettings",
    "WhatsAppChannelSettings",
    "GmailChannelSettings",
    "InboundSettings",
    "MediaSettings",
    "McpClientSettings",
    "KnowledgeBaseSettings",
    "ConsoleSettings",
    "SmtpSettings",
    "PrivacySettings",
    "LogFormat",
    "LogLevel",
    "REAL_WHATSAPP_GRAPH_BASE_URL",
    "REAL_INSTAGRAM_GRAPH_BASE_URL",
    "SANDBOX_API_BASE",
]

LogFormat = Literal["auto", "json", "console"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]

REAL_WHATSAPP_GRAPH_BASE_URL = "https://graph.facebook.com"
"""Meta's Graph API root (WhatsApp Cloud API), without version."""
REAL_INSTAGRAM_GRAPH_BASE_URL = "https://graph.instagram.com"
"""The Instagram API with Instagram Login root, without version."""
SANDBOX_API_BASE = "sandbox"
"""``channel_accounts.api_base_url`` value meaning "this deployment's sandbox of the channel"."""

_POSTGRES_SCHEMES = {"postgres", "postgresql", "postgresql+asyncpg", "postgresql+psycopg"}
_REDIS_SCHEMES = {"redis", "rediss", "unix"}


def _url_with_scheme(value: str | None, schemes: set[str], expected: str) -> str | None:
    """``value`` (``None`` when empty) if its scheme is one of ``schemes``; else ``ValueError``."""
    if value in (None, ""):
        return None
    scheme = urlsplit(value).scheme
    if scheme not in schemes:
        raise ValueError(f"expected {expected}, got scheme {scheme!r}")
    return value


class StateSettings(BaseSettings):
    """Where state lives: the database, Redis and ``DATA_DIR``."""

    database_url: str | None = None
    """PostgreSQL (with pgvector >= 0.8) URL; unset starts the embedded server."""
    redis_url: str | None = None
    """Redis URL (``redis://``, ``rediss://`` or ``unix://``); unset starts the embedded server."""
    data_dir: Path = Path("./.switchboard")
    """Folder for embedded servers' data, generated secrets and the run state file."""
    gmail_sandbox_state_file: Path | None = None
    """Where the local Gmail sandbox keeps its state across restarts (default ``DATA_DIR/gmail_sandbox.json``)."""

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: str | None) -> str | None:
        return _url_with_scheme(value, _POSTGRES_SCHEMES, "a postgresql:// URL")

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, value: str | None) -> str | None:
        return _url_with_scheme(value, _REDIS_SCHEMES, "a redis://, rediss:// or unix:// URL")

    @property
    def secrets_dir(self) -> Path:
        """``DATA_DIR/secrets``: where generated secrets are kept (see :meth:`Settings.secret`)."""
        return self.data_dir / "secrets"

    @property
    def run_state_path(self) -> Path:
        """JSON file ``switchboard run`` writes with the URLs and pids of what it started."""
        return self.data_dir / "run.json"

    @property
    def gmail_sandbox_state_path(self) -> Path:
        """JSON file the local Gmail sandbox keeps its mailboxes, tokens and id counter in across restarts."""
        return self.gmail_sandbox_state_file or self.data_dir / "gmail_sandbox.json"


class NetworkSettings(BaseSettings):
    """Where the services listen and how they reach each other."""

    host: str = "127.0.0.1"
    """Interface every HTTP service binds to."""
    orchestrator_port: int = Field(8100, ge=1, le=65535)
    whatsapp_port: int = Field(8101, ge=1, le=65535)
    instagram_port: int = Field(8102, ge=1, le=65535)
    gmail_port: int = Field(8103, ge=1, le=65535)
    mcp_tools_port: int = Field(8104, ge=1, le=65535)
    model_server_port: int = Field(8105, ge=1, le=65535)
    """Port of the offline OpenAI-compatible model server (used when no provider key is set)."""
    worker_metrics_port: int = Field(8106, ge=0, le=65535)
    """Port of the chat worker's Prometheus ``/metrics`` (the HTTP services answer it on their own port); 0: off."""
    worker_background_metrics_port: int = Field(8107, ge=0, le=65535)
    """Port of the background worker's Prometheus ``/metrics``; 0: off."""
    console_port: int = Field(8108, ge=1, le=65535)
    """Port of the web console (inbox, conversation view, takeover)."""
    web_port: int = Field(8109, ge=1, le=65535)
    """Port of the website chat service (the widget's script, visitor messages, the reply stream)."""
    embedded_redis_port: int = Field(6380, ge=1, le=65535)
    """TCP port of the embedded Redis on ``host`` (only when ``REDIS_URL`` is unset)."""
    orchestrator_url_override: str | None = Field(None, validation_alias="ORCHESTRATOR_URL")
    """Where other services reach the orchestrator when it is not on this machine (containers)."""
    model_server_url_override: str | None = Field(None, validation_alias="MODEL_SERVER_URL")
    """Where the orchestrator reaches the offline model server when it is not on this machine."""
    whatsapp_url_override: str | None = Field(None, validation_alias="WHATSAPP_URL")
    """Where other services reach the WhatsApp service (its Graph sandbox) in containers
    (``http://whatsapp:8101``); unset: this machine's ``WHATSAPP_PORT``."""
    instagram_url_override: str | None = Field(None, validation_alias="INSTAGRAM_URL")
    """Where other services reach the Instagram service (its sandbox) in containers."""
    public_base_url: str | None = None
    """``PUBLIC_BASE_URL``: the public ``https://`` root where Meta and Google reach this deployment
    (the ``SWITCHBOARD_DOMAIN`` site of ``infra/Caddyfile``, e.g. ``https://support.example.com``);
    the console's Channels page shows the webhook callback URLs under it and hands them to Meta when
    an account is connected. Unset: this machine's service URLs (the sandboxes, a local tunnel)."""

    def callback_url(self, channel: str) -> str:
        """The webhook callback URL of ``channel`` (``whatsapp``, ``instagram``): under
        ``PUBLIC_BASE_URL``, else the channel service on this machine."""
        if self.public_base_url:
            return f"{self.public_base_url.rstrip('/')}/webhooks/{channel}"
        port = self.whatsapp_port if channel == "whatsapp" else self.instagram_port
        return f"{self.service_url(port)}/webhooks/{channel}"

    mcp_tools_url_override: str | None = Field(None, validation_alias="MCP_TOOLS_URL")
    """MCP endpoint when the tool server is not on this machine (``http://mcp_tools:8104/mcp``)."""
    max_body_bytes: int = Field(1024 * 1024, ge=1024)
    """Largest request body (bytes, default 1 MiB) any HTTP service reads for a route that sets no
    limit of its own; counted while the body arrives (chunked too), 413 past it. Knowledge uploads
    (``KB_MAX_UPLOAD_BYTES``), CSV imports and channel webhooks (their ``*_MAX_BODY_BYTES``) have
    their own, applied only once the caller is known (:mod:`switchboard.body_limit`)."""

    def service_url(self, port: int) -> str:
        """``http://HOST:port`` of a service on this machine (``0.0.0.0`` binds are reached on loopback)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{port}"

    @property
    def orchestrator_url(self) -> str:
        """Base URL the worker calls for ``POST /v1/turns`` (``ORCHESTRATOR_URL`` or this machine's port)."""
        return self.orchestrator_url_override or self.service_url(self.orchestrator_port)

    @property
    def model_server_url(self) -> str:
        """Base URL of the offline model server (``MODEL_SERVER_URL`` or this machine's port), no ``/v1``."""
        return self.model_server_url_override or self.service_url(self.model_server_port)

    @property
    def mcp_tools_url(self) -> str:
        """The MCP endpoint the orchestrator calls (``MCP_TOOLS_URL`` or this machine's ``/mcp``)."""
        return self.mcp_tools_url_override or f"{self.service_url(self.mcp_tools_port)}/mcp"


class LogSettings(BaseSettings):
    """Logs (structlog)."""

    log_format: LogFormat = "auto"
    """``json``, ``console`` or ``auto`` (console on a terminal, JSON otherwise)."""
    log_level: LogLevel = "INFO"
    log_unmask_pii: bool = False
    """Log phone numbers and e-mail addresses as they are (bool, default false: they are masked in every
    log line and trace attribute, and message text is never logged). For debugging only; every service
    says so in a warning when it starts."""


class ModelProviderSettings(BaseSettings):
    """Model providers: process-wide fallbacks for per-tenant keys, and the call bound."""

    openai_api_key: SecretStr | None = None
    """OpenAI key; empty (``OPENAI_API_KEY=`` in a compose ``.env``) is the same as unset."""
    anthropic_api_key: SecretStr | None = None
    """Anthropic key; empty is the same as unset."""
    tenants_may_use_platform_keys: bool = False
    """Whether a model a tenant chose itself (a deployment, or an embedding model other than
    ``KB_EMBEDDING_MODEL``) that has no key of its own may use the platform's key (``OPENAI_API_KEY``,
    ``ANTHROPIC_API_KEY``), spending the platform's credit. Off (the default): such a model needs the
    tenant's own key. Either way a platform key is only ever sent to its provider's official endpoint
    (``api.openai.com``, ``api.anthropic.com``), never to an ``api_base`` a tenant set; the platform's
    default models (a tenant that chose none, ``KB_EMBEDDING_MODEL``, transcription and vision) use it
    there (:mod:`switchboard.llm.keys`, docs/security.md "Model providers and keys")."""
    model_call_concurrency: int = Field(50, ge=1, le=10_000)
    """Process-wide bound on concurrent model calls (``asyncio.Semaphore``)."""
    run_fork_server: bool = True
    """``switchboard run`` forks the services from one process that imported their shared modules
    once (``runtime/forkserver.py``; false: each service is a fresh ``python -m``)."""
    model_server_control: bool = False
    """Test hook: expose the offline model server's ``/control/...`` endpoints (scripted errors with
    status, headers and body, delays, empty answers) under ``switchboard run``, behind the admin token.
    Refused when a provider key is set or ``HOST`` is not loopback (docs/contributing.md#fault-hooks)."""

    @field_validator("openai_api_key", "anthropic_api_key")
    @classmethod
    def _empty_key_is_unset(cls, value: SecretStr | None) -> SecretStr | None:
        # compose passes `OPENAI_API_KEY: ${OPENAI_API_KEY:-}`: an empty key must not count as a key
        return value if value is not None and value.get_secret_value().strip() else None


class LangfuseSettings(BaseSettings):
    """Langfuse export of feedback scores (optional: the ``langfuse`` package is not a dependency)."""

    langfuse_public_key: SecretStr | None = None
    langfuse_secret_key: SecretStr | None = None
    langfuse_host: str | None = None
    """Langfuse server (``https://cloud.langfuse.com`` when unset: the SDK's default)."""

    @property
    def langfuse_enabled(self) -> bool:
        """Both Langfuse keys are set (export is attempted; the SDK must be installed)."""
        return all(
            key is not None and key.get_secret_value()
            for key in (self.langfuse_public_key, self.langfuse_secret_key)
        )


class SecretSettings(BaseSettings):
    """Secrets; unset (or empty) ones are generated into ``DATA_DIR/secrets`` (:meth:`Settings.secret`)."""

    encryption_key: SecretStr | None = None
    """Fernet key (urlsafe base64, 32 bytes) for credentials encrypted at rest; several separated by
    commas, newest first, while rotating (the first encrypts, all decrypt; ``switchboard keys rotate``).
    The generated ``DATA_DIR/secrets/encryption.key`` may hold several the same way."""
    service_token: SecretStr | None = None
    """Bearer token services use to call the orchestrator's API."""
    mcp_service_token: SecretStr | None = None
    """Bearer token the orchestrator uses to call the MCP tool server."""
    tool_capability_key: SecretStr | None = None
    """Key the orchestrator signs each turn's tool capability with and the MCP tool server verifies it
    with (:mod:`switchboard.tools.capability`); both processes need the same value."""
    admin_token: SecretStr | None = None
    """Bearer token for the admin API (``/v1/admin/...``) and remote CLI use."""
    meta_app_secret: SecretStr | None = None
    """App secret used to verify ``X-Hub-Signature-256`` on Meta webhooks."""
    meta_verify_token: SecretStr | None = None
    """Token Meta echoes in the ``hub.verify_token`` handshake."""
    instagram_app_secret: SecretStr | None = None
    """App secret that signs Instagram webhooks (``X-Hub-Signature-256``): the Instagram app's own
    (an Instagram-Login app has a secret of its own, apart from the WhatsApp app's ``META_APP_SECRET``)."""
    gmail_push_secret: SecretStr | None = None
    """The ``?token=`` a Gmail push URL carries when pushes are not verified by OIDC."""
    generate_secrets: bool = True
    """Whether an unset secret is generated into ``DATA_DIR/secrets`` (one machine: ``switchboard run``).
    Containers set ``GENERATE_SECRETS=false`` (compose, Terraform): each container has its own
    ``DATA_DIR``, so a generated value would differ per container (a webhook signed with one app secret,
    checked with another, answers 403). Then every secret must be set and a service refuses to start,
    naming the variable, when one is not (:meth:`Settings.require_secrets`)."""

    @field_validator("encryption_key")
    @classmethod
    def _check_encryption_key(cls, value: SecretStr | None) -> SecretStr | None:
        from switchboard.crypto import split_keys  # here: settings stays a leaf module at import time

        if value is None or not value.get_secret_value().strip(" ,"):
            return None
        for number, key in enumerate(split_keys(value.get_secret_value()), start=1):
            try:
                Fernet(key)
            except (ValueError, TypeError) as exc:
                raise ValueError(
                    f"key {number} is not a Fernet key: 32 bytes, urlsafe base64 (Fernet.generate_key()); "
                    "separate several keys with commas, newest first"
                ) from exc
        return value


class WhatsAppChannelSettings(BaseSettings):
    """The WhatsApp channel: Graph API and webhook limits (per-tenant behaviour: tenant settings)."""

    whatsapp_graph_base_url: str | None = None
    """Graph API base URL without version for numbers connected without one of their own; unset: the
    real API (``https://graph.facebook.com``). Each number may name its own
    (``channel_accounts.api_base_url``: a URL, or ``sandbox`` for the Graph sandbox mounted in the
    WhatsApp service, as the demo tenant's number does), so one real number and the sandbox live side by side."""
    whatsapp_api_version: str = "v23.0"
    """Graph API version segment of send and media URLs."""
    whatsapp_sandbox_enabled: bool = True
    """Mount the Graph API sandbox (records sends, answers like Meta) in the WhatsApp service."""
    whatsapp_max_body_bytes: int = Field(1_000_000, ge=1024)
    """Webhook bodies larger than this get 413 (Meta's deliveries are a few KB)."""
    whatsapp_throttle_backoff_s: float = Field(30.0, gt=0)
    """After Meta reports a throughput limit (130429, 131056...) for a number, its sends wait about
    this long (seconds): the first hold lies between half of it and all of it, and each further limit
    within the hold doubles it, up to ``WHATSAPP_THROTTLE_BACKOFF_MAX_S``. A ``Retry-After`` is a lower
    bound."""
    whatsapp_throttle_backoff_max_s: float = Field(300.0, gt=0)
    """Longest hold of a number's sends after repeated throughput limits (seconds)."""
    delivery_throttle_spread_s: float = Field(15.0, ge=0)
    """When a number's throughput hold ends, the parts that waited for it are released at random over
    this many seconds after it (seconds; 0: all at once), so they do not hit the limit again together."""
    whatsapp_send_timeout_s: float = Field(15.0, gt=0)
    """Timeout of one Graph API call (send, mark-read, media)."""


class InstagramChannelSettings(BaseSettings):
    """The Instagram channel: Graph API and webhook limits (per-tenant behaviour: tenant settings)."""

    instagram_graph_base_url: str | None = None
    """Graph API base URL without version for accounts connected without one of their own:
    ``https://graph.instagram.com`` (Instagram Login, the default when unset) or
    ``https://graph.facebook.com`` (a Page-linked account). Each account may name its own
    (``channel_accounts.api_base_url``: a URL, or ``sandbox`` for the sandbox in the Instagram service)."""
    instagram_api_version: str = "v23.0"
    """Graph API version segment of send and profile URLs."""
    instagram_sandbox_enabled: bool = True
    """Mount the Instagram Graph sandbox (records sends, answers like Meta) in the Instagram service."""
    instagram_max_body_bytes: int = Field(1_000_000, ge=1024)
    """Webhook bodies larger than this get 413."""
    instagram_send_timeout_s: float = Field(15.0, gt=0)
    """Timeout of one Graph API call (send, profile) and of one CDN media download."""
    instagram_profile_cache_s: float = Field(86_400.0, ge=0)
    """How long a customer's name and username from ``GET /{igsid}`` are reused (0: never asked)."""


class WebChannelSettings(BaseSettings):
    """The website chat channel: what one visitor and one address may send (per-tenant look and
    allowed origins: tenant settings, section ``web``)."""

    web_public_url: str | None = None
    """Public root of the website chat service as visitors' browsers reach it, its ``/web`` path included
    (``https://support.example.com/web``); the console's snippet and the links to files point there.
    Unset: ``PUBLIC_BASE_URL/web`` when that is set, else ``/web`` on this machine's ``WEB_PORT``."""
    web_max_text_chars: int = Field(4000, ge=1, le=100_000)
    """Longest text a visitor may send in one message (characters); longer is refused with 413."""
    web_max_file_bytes: int = Field(5 * 1024 * 1024, ge=1024)
    """Largest image or document a visitor may attach (bytes, default 5 MiB); larger is refused with 413."""
    web_visitor_messages_per_minute: int = Field(20, ge=1)
    """Messages one visitor may send per minute; more are refused with 429."""
    web_address_messages_per_minute: int = Field(60, ge=1)
    """Messages one network address may send per minute, all its visitors together; more get 429."""
    web_stream_poll_s: float = Field(15.0, gt=0)
    """How often an open reply stream looks for new events without a notification, and sends a
    keep-alive comment (seconds)."""


class MediaStoreSettings(BaseSettings):
    """Our own copies of customers' media (:mod:`switchboard.media`), for channels whose links expire."""

    media_store_url: str | None = None
    """Where copies go: unset is the folder ``DATA_DIR/media``; ``s3://bucket/prefix`` an S3-compatible
    bucket (credentials and endpoint from ``MEDIA_STORE_OPTIONS`` or the usual ``AWS_*`` variables);
    ``memory:///`` keeps them in the process (tests)."""
    media_store_options: Annotated[dict[str, str], NoDecode] = Field(default_factory=dict)
    """Options of the store as JSON, e.g. ``{"endpoint": "http://minio:9000", "region": "auto",
    "access_key_id": "...", "secret_access_key": "..."}`` (obstore's S3 config keys); empty: none
    (compose passes ``MEDIA_STORE_OPTIONS=`` through when it is unset)."""

    @field_validator("media_store_options", mode="before")
    @classmethod
    def _options_json(cls, value: object) -> object:
        if isinstance(value, str):
            return json.loads(value) if value.strip() else {}
        return value

    media_public_base_url: str | None = None
    """Public URL of the Instagram service, where Meta fetches the media we send (signed ``/media/...``
    links, :mod:`switchboard.media.links`); unset: this machine's ``INSTAGRAM_PORT`` (the sandbox)."""
    media_max_bytes: int = Field(25_000_000, ge=1024)
    """Largest file copied; a bigger one is recorded as too large and never downloaded past the limit
    (25 MB: OpenAI's transcription upload limit, Instagram's attachment limit)."""


class GmailChannelSettings(BaseSettings):
    """The Gmail channel: API and OAuth endpoints, push verification, sync limits (docs/channels/gmail.md)."""

    gmail_api_base_url: str | None = None
    """Gmail API root (``https://gmail.googleapis.com``); unset uses the local sandbox mounted in the
    Gmail service (``http://HOST:GMAIL_PORT/_sandbox/gmail``)."""
    gmail_oauth_auth_url: str | None = None
    """Consent page (``https://accounts.google.com/o/oauth2/v2/auth``); unset: the sandbox's, or the
    ``auth_uri`` of the client secrets file when the API is Google's."""
    gmail_oauth_token_url: str | None = None
    """Token endpoint (``https://oauth2.googleapis.com/token``); unset as above (``token_uri``)."""
    gmail_oauth_scopes: str = (
        "https://www.googleapis.com/auth/gmail.modify https://www.googleapis.com/auth/gmail.send"
    )
    """Scopes asked for at consent (read, label and send), space-separated."""
    gmail_sandbox_enabled: bool = True
    """Mount the Gmail API sandbox (OAuth, history, messages, send, Pub/Sub push sender) in the Gmail
    service while ``GMAIL_API_BASE_URL`` is unset."""
    gmail_pubsub_topic: str | None = None
    """``projects/P/topics/T`` for ``users.watch``; unset: no push, mailboxes are polled."""
    gmail_push_audience: str | None = None
    """The ``aud`` the Pub/Sub push subscription's OIDC token carries; set it to verify pushes by their
    Google-signed token. Unset: pushes must carry ``?token=`` with the push secret
    (``GMAIL_PUSH_SECRET``, generated when unset)."""
    gmail_push_service_account: str | None = None
    """The ``email`` claim the push OIDC token must carry (the subscription's service account)."""
    gmail_oidc_certs_url: str | None = None
    """Where Google's token signing certificates are (``https://www.googleapis.com/oauth2/v1/certs``);
    unset: Google's when the API is Google's, else the sandbox's."""
    gmail_max_body_bytes: int = Field(65_536, ge=1024)
    """Push bodies larger than this get 413 (a Pub/Sub push is a few hundred bytes)."""
    gmail_timeout_s: float = Field(20.0, gt=0)
    """Timeout of one Gmail API or token call."""
    gmail_poll_interval_s: float = Field(60.0, gt=0)
    """How often every active mailbox is synced by polling (``history.list``), push or not."""
    gmail_watch_renew_before_s: float = Field(86_400.0, gt=0)
    """A ``users.watch`` registration (7 days) is renewed once it ends within this long."""
    gmail_token_refresh_margin_s: float = Field(300.0, ge=0)
    """An access token is refreshed when it expires within this long."""
    gmail_resync_max_messages: int = Field(200, ge=1)
    """Most mails one resync after a stale cursor reads (``messages.list`` after the last mail)."""
    gmail_max_attachment_bytes: int = Field(10_000_000, ge=1)
    """Attachments larger than this are named to the agent but not read."""


class InboundSettings(BaseSettings):
    """The chat worker's handling of inbound messages: rate limits, bursts, retries, the sweeper."""

    customer_rate_limit: int = Field(10, ge=1)
    """Messages one customer may send per ``customer_rate_window_s`` before the polite slow-down."""
    customer_rate_window_s: float = Field(60.0, gt=0)
    tenant_rate_limit: int = Field(600, ge=1)
    """Messages one tenant's worker jobs may process per ``tenant_rate_window_s`` (over: deferred)."""
    tenant_rate_window_s: float = Field(60.0, gt=0)
    tenant_rate_defer_s: float = Field(10.0, gt=0)
    """How long a job over the tenant limit waits at least before trying again, seconds (jittered up to
    twice it, and longer on each further try, at most 8 times it)."""
    inbound_debounce_s: float = Field(2.0, ge=0)
    """Messages of one customer arriving within this window are answered together in one turn."""
    inbound_max_wait_s: float = Field(10.0, ge=0)
    """A burst is answered at the latest this long after its first message, even if more keep coming."""
    inbound_max_tries: int = Field(8, ge=1)
    """ARQ tries of one inbound job (retries on orchestrator/Graph/DB trouble) before it is dead."""
    inbound_retry_defer_s: float = Field(5.0, gt=0)
    """Base delay before an inbound job that hit a transient failure runs again (doubles per failure up to
    60 s, jittered)."""
    inbound_sweep_after_s: float = Field(20.0, gt=0)
    """A stored inbound row not done after this long, with no queued, deferred or running job, is
    re-enqueued by the sweeper (seconds; the sweeper runs every 15 s). Rows acknowledged while Redis was
    down are answered through it, so it bounds how soon (within 45 s of the outage's end:
    20 + 15 + the turn); a row with a live job is never touched, so a long turn or a
    debounce is not cut short. At 120 s a Redis restart would leave those customers ~130 s unanswered."""
    inbound_max_sweeps: int = Field(5, ge=1)
    """Processing attempts after which the sweeper moves a row to the dead-letter state."""
    inbound_job_timeout_s: float = Field(200.0, gt=0)
    """ARQ timeout of one ``process_inbound`` run (above the orchestrator's 120 s turn budget). A killed
    worker's job runs again about 30 s later, and its per-conversation turn lock is gone by then: both
    are leases renewed while the worker lives (:mod:`switchboard.queue.lease`)."""
    orchestrator_timeout_s: float = Field(130.0, gt=0)
    """Worker's HTTP timeout for ``POST /v1/turns`` (above the orchestrator's 120 s turn budget)."""


class DeliverySettings(BaseSettings):
    """The outbox delivery loop, for every channel (:mod:`switchboard.outbox.delivery`)."""

    delivery_backoff_base_s: float = Field(2.0, gt=0)
    """First back-off after a transient send error; doubles per attempt (full jitter: a random wait
    between 0 and the doubled value)."""
    delivery_backoff_max_s: float = Field(300.0, gt=0)
    """Cap of the back-off between two attempts of one outbox part."""
    delivery_max_attempts: int = Field(8, ge=1)
    """Provider calls for one part before it is dead-lettered (``failed`` / ``dead_letter``)."""
    delivery_reconcile_after_s: float = Field(120.0, gt=0)
    """A part left ``sending`` (the worker died, or the provider's answer was lost) waits this long
    for a status callback carrying its correlation id before it is sent again (at-least-once)."""


class WebhookSettings(BaseSettings):
    """Event webhooks to the tenants' own systems (:mod:`switchboard.events`)."""

    webhooks_allow_loopback_http: bool = False
    """Former name of ``EGRESS_ALLOW_LOOPBACK`` (still honoured: either one allows loopback)."""
    webhook_timeout_s: float = Field(10.0, gt=0)
    """Timeout of one delivery attempt (connect + answer)."""
    webhook_backoff_base_s: float = Field(10.0, gt=0)
    """First wait after a failed attempt; doubles per attempt (full jitter), capped below."""
    webhook_backoff_max_s: float = Field(3_600.0, gt=0)
    webhook_max_attempts: int = Field(12, ge=1)
    """Attempts of one delivery before it is ``failed``."""
    webhook_disable_after_failures: int = Field(20, ge=1)
    """Consecutive failed attempts (any event) after which the endpoint is disabled, with an alert."""
    event_retention_delivered_days: int = Field(14, ge=1)
    """Days an event whose every delivery went out (or that no endpoint wanted) is kept, with its
    delivery log, before ``prune_events`` deletes it (counted from the event's ``created_at``)."""
    event_retention_failed_days: int = Field(60, ge=1)
    """Days an event with a ``failed`` delivery is kept (longer: the tenant may still look into it).
    An event with a delivery still ``pending`` (e.g. its endpoint is disabled) is never pruned."""


class EgressSettings(BaseSettings):
    """The outbound-address policy for URLs a tenant or a provider chose (:mod:`switchboard.egress`)."""

    egress_allow_loopback: bool = False
    """Also allow loopback addresses (``127.0.0.0/8``, ``::1``, ``localhost``), over ``http://`` too, for
    tenant model and embedding bases, event webhooks and provider media links (bool, default false):
    local sandboxes and tests only. Everything else stays public ``https://`` addresses only."""
    egress_model_networks: str = ""
    """Private networks of the operator's own model servers that tenant model and embedding bases may
    reach, over ``http://`` too (string, default empty): comma-separated networks such as
    ``10.0.5.0/24,fd00:5::/64``, e.g. a vLLM or Ollama box on the company network. Only model and
    embedding calls: event webhooks and media links never reach them. Unset: none."""

    @field_validator("egress_model_networks")
    @classmethod
    def _model_networks(cls, value: str) -> str:
        for part in filter(None, (item.strip() for item in value.split(","))):
            try:
                ipaddress.ip_network(part, strict=False)
            except ValueError:
                raise ValueError(f"{part!r} is not a network (write it like 10.0.5.0/24)") from None
        return value

    @property
    def model_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        """:attr:`egress_model_networks` parsed."""
        return tuple(
            ipaddress.ip_network(part, strict=False)
            for part in filter(None, (item.strip() for item in self.egress_model_networks.split(",")))
        )


class MediaSettings(BaseSettings):
    """Media to text: transcription of voice notes, descriptions of images."""

    transcription_base_url: str | None = None
    """OpenAI-compatible root for ``/v1/audio/transcriptions``; unset: OpenAI when ``OPENAI_API_KEY`` is
    set, else the offline model server. ``OPENAI_API_KEY`` is sent only when this is OpenAI's own
    endpoint (``https://api.openai.com``), never to another address. Serves the tenants whose
    ``llm.transcription`` list is empty."""
    transcription_model: str = "gpt-transcribe"
    vision_base_url: str | None = None
    """OpenAI-compatible root for image descriptions (``/v1/chat/completions``); unset as above. Serves
    the tenants whose ``llm.vision`` list is empty and whose own chat models take no images."""
    vision_model: str = "gpt-4o-mini"
    media_timeout_s: float = Field(60.0, gt=0)
    """Timeout of one transcription / vision call."""


class McpClientSettings(BaseSettings):
    """The orchestrator's side of MCP (the endpoint itself: ``MCP_TOOLS_URL``, :class:`NetworkSettings`),
    and the tool server's database role."""

    tools_db_role: str = Field("switchboard_tools", pattern=r"^([a-z_][a-z0-9_]{0,62})?$")
    """Role the MCP tool server runs each tool call as (``SET LOCAL ROLE``, with ``app.tenant_id`` set):
    Postgres row-level security then shows it only the call's tenant (migration
    ``0012_tool_server_rls``). Empty: no role switch (the services' own user, checks in code only)."""

    mcp_discovery_refresh_s: float = Field(60.0, gt=0)
    """How long a ``list_tools()`` answer is reused before the tool server is asked again."""
    mcp_discovery_timeout_s: float = Field(5.0, gt=0)
    """Budget of one discovery; a slower or absent server leaves turns with the built-in tools only."""


class KnowledgeBaseSettings(BaseSettings):
    """Knowledge base (docs/knowledge-base.md; per-tenant overrides in ``settings_extensions.knowledge``)."""

    kb_chunk_size_chars: int = Field(1000, ge=100, le=20_000)
    """Recursive splitter: longest chunk, in characters."""
    kb_chunk_overlap_chars: int = Field(200, ge=0, le=5_000)
    """Recursive splitter: characters repeated from the end of one chunk at the start of the next."""
    kb_max_upload_bytes: int = Field(20 * 1024 * 1024, ge=1)
    """Largest file the admin API and ``switchboard kb add`` accept (bytes)."""
    kb_parse_timeout_s: float = Field(30.0, gt=0, le=3600)
    """Wall-clock time one upload's parse may take in its child process before it is killed and
    the file refused as too complex (``switchboard.knowledge.isolation``)."""
    kb_parse_memory_limit_mb: int = Field(512, ge=16, le=65_536)
    """Memory (MiB of address space) one upload's parse may add in its child process; also the
    largest total unpacked size of a DOCX/XLSX's parts (ZIP bombs)."""
    kb_parse_concurrency: int = Field(2, ge=1, le=64)
    """Parses (child processes) one service process runs at once; more uploads wait for a slot."""
    kb_embedding_model: str = "text-embedding-3-small"
    """Embedding model used when a provider key is configured (1536 dimensions)."""
    kb_embedding_batch_size: int = Field(64, ge=1, le=2048)
    """Texts per embedding request."""
    kb_embedding_max_attempts: int = Field(3, ge=1, le=10)
    """Attempts per embedding batch (tenacity) on transient provider errors."""
    kb_embedding_retry_wait_s: float = Field(1.0, ge=0.0)
    """Multiplier of the exponential back-off between embedding attempts (seconds)."""
    kb_embedding_timeout_s: float = Field(30.0, gt=0)
    """Timeout of one embedding request (seconds)."""
    kb_min_similarity: float = Field(0.30, ge=-1.0, le=1.0)
    """Cosine similarity a chunk needs to count as a match with a provider embedding model."""
    kb_min_similarity_lexical: float = Field(0.14, ge=-1.0, le=1.0)
    """Same threshold for the offline lexical embedding (calibrated: docs/knowledge-base.md#embedding-model)."""
    kb_min_keyword_coverage: float = Field(0.6, ge=0.0, le=1.0)
    """Hybrid mode: share of the question's keywords a chunk must contain to match on words alone."""
    kb_hnsw_ef_search: int = Field(400, ge=1, le=1000)
    """``hnsw.ef_search`` for vector and hybrid queries on the HNSW index (pgvector default 40; 400
    measured by ``loadtests/kb_benchmark.py``, docs/knowledge-base.md#sizing)."""
    kb_exact_scan_max_chunks: int = Field(20_000, ge=0)
    """Vector search scans a tenant's chunks exactly (no HNSW) while its active chunk count is at most
    this; above it the HNSW index answers (docs/knowledge-base.md#sizing, measured by ``loadtests/kb_benchmark.py``)."""
    kb_graph_hops: int = Field(2, ge=1, le=3)
    """Relations the graph walk follows from the entities a question names (``graph`` and ``hybrid``
    modes; ``neighborhood`` walks one). Measured by ``loadtests/kb_graph_benchmark.py``."""
    kb_hybrid_graph: bool = True
    """Fuse the graph walk into ``hybrid`` search (off: vector and full-text only)."""


SecretName = Literal[
    "encryption_key",
    "service_token",
    "mcp_service_token",
    "tool_capability_key",
    "admin_token",
    "meta_app_secret",
    "meta_verify_token",
    "instagram_app_secret",
    "gmail_push_secret",
]


@dataclass(frozen=True)
class GeneratedSecret:
    """How an unset secret is made: the file under ``DATA_DIR/secrets`` and a generator."""

    filename: str
    make: Callable[[], str]


GENERATED_SECRETS: Mapping[SecretName, GeneratedSecret] = MappingProxyType(
    {
        "encryption_key": GeneratedSecret("encryption.key", lambda: Fernet.generate_key().decode()),
        "service_token": GeneratedSecret("service.token", lambda: secrets.token_urlsafe(32)),
        "mcp_service_token": GeneratedSecret("mcp.token", lambda: secrets.token_urlsafe(32)),
        "tool_capability_key": GeneratedSecret("tool_capability.key", lambda: secrets.token_urlsafe(32)),
        "admin_token": GeneratedSecret("admin.token", lambda: secrets.token_urlsafe(32)),
        "meta_app_secret": GeneratedSecret("meta_app.secret", lambda: secrets.token_hex(16)),
        "meta_verify_token": GeneratedSecret("meta_verify.token", lambda: secrets.token_urlsafe(24)),
        "instagram_app_secret": GeneratedSecret("instagram_app.secret", lambda: secrets.token_hex(16)),
        "gmail_push_secret": GeneratedSecret("gmail_push.secret", lambda: secrets.token_urlsafe(24)),
    }
)
"""Every secret :meth:`Settings.secret` resolves; ``switchboard run`` creates all of them at start-up."""


class ConsoleSettings(BaseSettings):
    """The web console's sessions and login limits (``switchboard.console``)."""

    console_session_ttl_s: int = Field(12 * 3600, ge=60)
    """A console session ends this long after login (seconds); logging in again starts a new one."""
    console_cookie_secure: bool = False
    """Send the session cookie only over HTTPS (set true behind the HTTPS proxy in production)."""
    console_login_max_attempts: int = Field(5, ge=1)
    """Login attempts allowed per e-mail within ``console_login_window_s`` (counted before the password
    is checked; a correct password clears the count). Further attempts are refused unchecked."""
    console_login_max_attempts_per_ip: int = Field(20, ge=1)
    """Failed logins per client address within ``console_login_window_s`` (any e-mails) after which
    that address gets only two attempts per e-mail; it never refuses an e-mail with no attempts."""
    console_login_window_s: int = Field(900, ge=1)
    """Window of the login rate limit (seconds); the limit clears by itself when it ends."""
    forwarded_allow_ips: str = "127.0.0.1"
    """Proxies whose ``X-Forwarded-For`` / ``X-Forwarded-Proto`` the console believes (string, default
    ``127.0.0.1``): comma-separated addresses or networks (``10.0.0.0/8``), or ``*`` for any peer.
    The same variable (``FORWARDED_ALLOW_IPS``) uvicorn reads. A request from any other peer is taken
    at its connection's address, whatever headers it sends; set it to the reverse proxy's addresses
    (the compose network behind Caddy, the load balancer's subnets on AWS) so that login limits count
    each browser's own address."""
    console_stream_check_s: float = Field(5.0, gt=0, le=300)
    """How often an open live-event stream of the console re-checks its session (seconds, default 5):
    after logout, session expiry, deactivation or a password change the stream ends within this time."""
    api_key_requests_per_minute: int = Field(600, ge=1)
    """Requests one tenant API key may make to the public API (``/api/v1``) per minute (integer, default
    600); past it the API answers 429 with ``Retry-After`` until the minute ends."""
    console_invite_ttl_s: int = Field(72 * 3600, ge=300)
    """How long an invitation link to the console works (seconds, default 259200: 72 hours); resending
    makes a new link and the old one stops working at once."""
    console_public_url: str | None = None
    """The console's address as people open it (``https://console.example.com``), the start of the
    invitation links it makes (string, default unset: the address the inviting admin's browser used)
    and of the rating links in the satisfaction question of an e-mail (unset: that question is not sent)."""

    console_docs_url: str | None = None
    """Where this deployment's documentation site is published (``https://docs.example.com``; string,
    default unset). The home page's "Go live" links to its going-live guide (``<url>/going-live/``);
    unset, the page names the guide's file instead (``docs/going-live.md``)."""

    @field_validator("console_public_url", "console_docs_url")
    @classmethod
    def _check_console_public_url(cls, value: str | None) -> str | None:
        return _url_with_scheme(value, {"http", "https"}, "an http(s) URL")


class SmtpSettings(BaseSettings):
    """The mail server invitations are sent through (``switchboard.users.mail``); unset: no e-mail,
    the person inviting copies the link."""

    smtp_host: str | None = None
    """Host name of the SMTP server (string, default unset: invitations are not e-mailed)."""
    smtp_port: int = Field(587, ge=1, le=65535)
    """Port of the SMTP server (default 587, the submission port)."""
    smtp_username: str | None = None
    """User name to log in to the SMTP server with (default unset: no login)."""
    smtp_password: SecretStr | None = None
    """Password for ``smtp_username`` (default unset)."""
    smtp_from: str | None = None
    """Sender address of invitations, e.g. ``Switchboard <no-reply@example.com>`` (default unset:
    ``smtp_username``, else ``switchboard@`` the host name)."""
    smtp_starttls: bool = True
    """Upgrade the connection with STARTTLS before logging in (default true; false only for a server
    on this machine or a private network that offers no TLS)."""
    smtp_timeout_s: float = Field(10.0, gt=0, le=120)
    """How long one connection to the SMTP server may take, in seconds (default 10)."""

    @property
    def smtp_enabled(self) -> bool:
        """Whether invitations are e-mailed (an SMTP host is set)."""
        return bool(self.smtp_host)


class PrivacySettings(BaseSettings):
    """Customer data protection: exports and the platform's limit on retention."""

    customer_export_link_ttl_s: int = Field(86_400, ge=60, le=30 * 86_400)
    """How long the download link of a customer export stays valid, in seconds (default 86400, a day);
    the export file is deleted by the daily retention run once its link has expired."""
    retention_max_days: int = Field(0, ge=0)
    """The longest any tenant may keep messages, media, memory, traces, leads and event deliveries, in
    days (default 0: no platform maximum). A tenant's ``retention`` setting above it, or unset, is
    applied as this many days."""


class Settings(
    PrivacySettings,
    SmtpSettings,
    ConsoleSettings,
    GmailChannelSettings,
    KnowledgeBaseSettings,
    McpClientSettings,
    MediaSettings,
    EgressSettings,
    MediaStoreSettings,
    DeliverySettings,
    WebhookSettings,
    InboundSettings,
    WebChannelSettings,
    InstagramChannelSettings,
    WhatsAppChannelSettings,
    SecretSettings,
    ModelProviderSettings,
    LangfuseSettings,
    LogSettings,
    NetworkSettings,
    StateSettings,
):
    """All process-wide settings. Field names map to upper-case environment variables.

    Unset ``DATABASE_URL`` / ``REDIS_URL`` mean "start the embedded server under ``DATA_DIR``".
    Secrets that may be unset (encryption key, service tokens) are generated once into
    ``DATA_DIR/secrets/`` and reused, so a restart keeps reading what it wrote.
    """

    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", populate_by_name=True
    )

    def secret(self, name: SecretName) -> str:
        """The secret ``name``: its setting (environment, ``.env`` or keyword) when set and not empty,
        else the value generated once into ``DATA_DIR/secrets/<file>`` (mode 0600, see
        :data:`GENERATED_SECRETS`) and read back on every later call, by any process.

        The encryption key is returned as text, possibly several keys separated by commas, newest
        first; :class:`~switchboard.crypto.CredentialCipher` takes it as it is.

        Raises:
            SettingsError: ``GENERATE_SECRETS=false`` and the secret is unset or empty (names the variable).
        """
        value: SecretStr | None = getattr(self, name)
        if value is not None and value.get_secret_value():
            return value.get_secret_value()
        if not self.generate_secrets:
            raise SettingsError(name.upper(), _REQUIRED_SECRET)
        generated = GENERATED_SECRETS[name]
        return _read_or_create_secret(self.secrets_dir / generated.filename, generated.make)

    def require_secrets(self) -> None:
        """Fail fast at start-up when secrets are not generated (``GENERATE_SECRETS=false``) and one
        is unset or empty; with generation on, nothing to check.

        Raises:
            SettingsError: names the first missing variable, and lists every missing one.
        """
        if self.generate_secrets:
            return
        missing = [name.upper() for name in GENERATED_SECRETS if not _is_set(getattr(self, name))]
        if missing:
            raise SettingsError(missing[0], f"{_REQUIRED_SECRET} (unset or empty: {', '.join(missing)})")

    @property
    def egress_loopback_allowed(self) -> bool:
        """``EGRESS_ALLOW_LOOPBACK`` or its former name ``WEBHOOKS_ALLOW_LOOPBACK_HTTP``."""
        return self.egress_allow_loopback or self.webhooks_allow_loopback_http

    @property
    def resolved_whatsapp_graph_base_url(self) -> str:
        """Graph API base URL (no version) of numbers without their own: ``WHATSAPP_GRAPH_BASE_URL``
        or the real API."""
        return (self.whatsapp_graph_base_url or REAL_WHATSAPP_GRAPH_BASE_URL).rstrip("/")

    @property
    def whatsapp_sandbox_url(self) -> str:
        """The Graph sandbox mounted in the WhatsApp service (``WHATSAPP_URL`` or this machine's port)."""
        return (self.whatsapp_url_override or self.service_url(self.whatsapp_port)).rstrip(
            "/"
        ) + "/_sandbox/graph"

    @property
    def resolved_instagram_graph_base_url(self) -> str:
        """Instagram Graph base URL (no version) of accounts without their own: ``INSTAGRAM_GRAPH_BASE_URL``
        or the real Instagram Login API."""
        return (self.instagram_graph_base_url or REAL_INSTAGRAM_GRAPH_BASE_URL).rstrip("/")

    @property
    def instagram_sandbox_url(self) -> str:
        """The Instagram sandbox mounted in the Instagram service (``INSTAGRAM_URL`` or this machine's port)."""
        return (self.instagram_url_override or self.service_url(self.instagram_port)).rstrip(
            "/"
        ) + "/_sandbox/instagram"

    def channel_api_base_url(self, channel: str, account_base: str | None) -> str:
        """The provider API root one account talks to: its own ``api_base_url`` (``sandbox``: this
        deployment's sandbox of ``channel``), else the process default of ``channel``.

        Raises:
            ValueError: ``channel`` has no per-account API base (only ``whatsapp`` and ``instagram``).
        """
        if channel not in ("whatsapp", "instagram"):
            raise ValueError(f"channel {channel!r} has no per-account API base URL")
        if account_base == SANDBOX_API_BASE:
            return self.whatsapp_sandbox_url if channel == "whatsapp" else self.instagram_sandbox_url
        if account_base:
            return account_base.rstrip("/")
        if channel == "whatsapp":
            return self.resolved_whatsapp_graph_base_url
        return self.resolved_instagram_graph_base_url

    def account_on_sandbox(self, channel: str, account_base: str | None) -> bool:
        """Whether one account talks to this deployment's sandbox of ``channel`` (its own
        ``api_base_url`` ``sandbox``, or a process default that points there; Gmail: no
        ``GMAIL_API_BASE_URL``): such an account needs no access token."""
        if channel == "gmail":
            return self.gmail_uses_sandbox
        if channel not in ("whatsapp", "instagram"):
            return False
        sandbox = self.whatsapp_sandbox_url if channel == "whatsapp" else self.instagram_sandbox_url
        return self.channel_api_base_url(channel, account_base) == sandbox

    @property
    def gmail_uses_sandbox(self) -> bool:
        """Whether the Gmail channel talks to the local sandbox (``GMAIL_API_BASE_URL`` unset)."""
        return not self.gmail_api_base_url

    @property
    def resolved_gmail_api_base_url(self) -> str:
        """Gmail API root: ``GMAIL_API_BASE_URL`` or the sandbox in the Gmail service."""
        if self.gmail_api_base_url:
            return self.gmail_api_base_url.rstrip("/")
        return self.service_url(self.gmail_port) + "/_sandbox/gmail"

    @property
    def resolved_gmail_token_url(self) -> str:
        """OAuth token endpoint: ``GMAIL_OAUTH_TOKEN_URL``, Google's, or the sandbox's."""
        if self.gmail_oauth_token_url:
            return self.gmail_oauth_token_url
        if self.gmail_uses_sandbox:
            return self.resolved_gmail_api_base_url + "/token"
        return "https://oauth2.googleapis.com/token"

    @property
    def resolved_gmail_auth_url(self) -> str:
        """OAuth consent page: ``GMAIL_OAUTH_AUTH_URL``, Google's, or the sandbox's."""
        if self.gmail_oauth_auth_url:
            return self.gmail_oauth_auth_url
        if self.gmail_uses_sandbox:
            return self.resolved_gmail_api_base_url + "/o/oauth2/auth"
        return "https://accounts.google.com/o/oauth2/v2/auth"

    @property
    def resolved_gmail_certs_url(self) -> str:
        """Push OIDC signing certificates: ``GMAIL_OIDC_CERTS_URL``, Google's, or the sandbox's."""
        if self.gmail_oidc_certs_url:
            return self.gmail_oidc_certs_url
        if self.gmail_uses_sandbox:
            return self.resolved_gmail_api_base_url + "/oauth2/v1/certs"
        return "https://www.googleapis.com/oauth2/v1/certs"


_REQUIRED_SECRET = (
    "is required: secrets are generated only by `switchboard run` on one machine (GENERATE_SECRETS=false here); "
    "set it in the environment (infra/example.env says how to make one)"
)


def _is_set(value: SecretStr | None) -> bool:
    return value is not None and bool(value.get_secret_value())


def _read_or_create_secret(path: Path, make: Callable[[], str]) -> str:
    """Read a generated secret, creating it (mode 0600, atomically) on first use."""
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    value = make()
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(value)
    try:
        os.link(tmp, path)  # fails if another process created it first: keep theirs
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    return path.read_text().strip()


def load_settings(**overrides: object) -> Settings:
    """Read settings from the environment and ``.env``; keyword overrides win (tests use them).

    Raises:
        SettingsError: a value is malformed; ``.setting`` is the environment variable's name.
    """
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = str(first["loc"][0]).upper() if first.get("loc") else "?"
        secret = any(word in name for word in ("KEY", "TOKEN", "SECRET", "PASSWORD"))
        shown = "" if secret else f" (got {first.get('input')!r})"
        raise SettingsError(name, f"{first['msg']}{shown}") from None
