"""Per-tenant settings: every section of ``tenants.settings_extensions``, typed, with one loader.

A tenant stores only what it overrides of the field defaults. Shape (every key
optional)::

    {"agent":     {"name": "Sam", "instructions": "...", "system_prompt": null, ...},
     "loop":      {"max_tool_iterations": 5, "turn_timeout_s": 120, ...},
     "llm":       {"deployments": [...], "cooldown_s": 30, ...},
     "handoff":   {"queue_reply": "...", "button_payloads": ["talk_to_human"], ...},
     "memory":    {"returning_customer_window_days": 90, ...},
     "tools":     {"mutation_budget": 1},
     "knowledge": {"embedding_model": "text-embedding-3-small", "min_similarity": 0.3, ...},
     "hours":     {"enabled": true, "schedule": [{"day": "mon", "opens": "09:00", "closes": "18:00"}], ...},
     "whatsapp":  {"opt_out_payloads": ["Unsubscribe", "STOP"], ...}}

* :func:`tenant_settings_from` is the one loader: a section that fails validation is logged
  (``tenant_settings_invalid``) and replaced by its defaults, so one bad value never stops a tenant's
  customers from being answered. :func:`load_tenant_settings` reads a tenant's row and calls it.
* :func:`set_section` is the one writer: it merges changes into one stored section and validates the
  result before anything is stored.

**Channel sections** belong to their channel: ``channels/whatsapp/settings.py`` declares
``WhatsAppSettings`` and calls ``register_section("whatsapp", WhatsAppSettings)`` when imported;
Instagram and Gmail add theirs the same way; so do the guardrails (``guardrails``) and budgets
(``budget``, ``feedback``), listed in :data:`SECTION_MODULES`. ``switchboard/channels/__init__.py`` imports every
channel's settings module, and this module imports ``switchboard.channels`` the first time it needs
the registered sections (:func:`channel_sections`). So every process (worker, orchestrator, tool
server, CLI) validates every channel's section whether or not it imported that channel itself, and
this module stays a leaf at import time (pydantic, :mod:`switchboard.llm.config`, observability):
any package may import it without a cycle. A registered section is an attribute of
:class:`TenantSettings` (``settings.whatsapp``) and, typed, ``settings.channel(WhatsAppSettings)``.
"""

from __future__ import annotations

import copy
import importlib
import re
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from datetime import date
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from switchboard.i18n import DEFAULT_LANGUAGE, N_, Language, gettext
from switchboard.llm.config import LLMSettings, ModelName
from switchboard.observability import get_logger

if TYPE_CHECKING:
    from sqlmodel.ext.asyncio.session import AsyncSession

__all__ = [
    "AgentSettings",
    "LoopLimits",
    "HandoffSettings",
    "HoursSettings",
    "CsatSettings",
    "OpeningPeriod",
    "WEEKDAYS",
    "MemorySettings",
    "ToolsSettings",
    "KnowledgeSettings",
    "LeadSettings",
    "LLMSettings",
    "LocaleSettings",
    "RateLimitSettings",
    "RetentionSettings",
    "TRANSLATABLE",
    "SettingText",
    "localized_defaults",
    "TenantSettings",
    "CORE_SECTIONS",
    "channel_sections",
    "register_section",
    "tenant_settings_from",
    "cached_tenant_settings",
    "load_tenant_settings",
    "set_section",
]

log = get_logger(__name__)

S = TypeVar("S", bound=BaseModel)

CHANNEL_PACKAGE = "switchboard.channels"
"""Imported before the first validation: its ``__init__`` imports each channel's settings module."""
SECTION_MODULES = (CHANNEL_PACKAGE, "switchboard.guardrails.settings", "switchboard.budgets.settings")
"""Every module that registers sections (:func:`register_section`), imported before the first
validation: the channels, the guardrails (``guardrails``) and budgets (``budget``, ``feedback``)."""


def _storable_setting(value: str) -> str:
    from switchboard.validation import has_unstorable_chars  # here: this module stays a leaf at import

    if has_unstorable_chars(value):
        raise PydanticCustomError(
            "unstorable_text", "contains a NUL or another character that cannot be stored; remove it"
        )
    return value


SettingText = Annotated[str, AfterValidator(_storable_setting)]


_CHANNEL_TEAM_CHANNELS = ("whatsapp", "instagram", "gmail", "web")
"""The channels a conversation can come from, as ``handoff.channel_teams`` names them."""


def _channel_team(value: str) -> str:
    channel, equals, team = value.partition("=")
    if not equals or channel.strip().lower() not in _CHANNEL_TEAM_CHANNELS or not team.strip():
        raise PydanticCustomError(
            "channel_team",
            "write a channel and a team's name, as whatsapp = Billing ({channels})",
            {"channels": ", ".join(_CHANNEL_TEAM_CHANNELS)},
        )
    return f"{channel.strip().lower()} = {' '.join(team.split())}"


ChannelTeam = Annotated[SettingText, Field(max_length=120), AfterValidator(_channel_team)]
"""One line of ``handoff.channel_teams``: ``channel = team name`` (stored as written, tidied)."""
"""The text of every tenant setting: a NUL or an unpaired surrogate (which Postgres cannot store) is
refused at save with a message naming the setting, never a database error."""

TRANSLATABLE = {"translatable": True}
"""``json_schema_extra`` of a fixed customer-facing text: its (English) default is a gettext msgid,
and a tenant that did not store its own text gets the default in its ``locale.language``
(:func:`localized_defaults`). Mark the default with :func:`switchboard.i18n.N_` so Babel extracts it."""


def _timezone_error(name: str) -> PydanticCustomError | None:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return PydanticCustomError(  # a template of switchboard.i18n.validation: translated
            "unknown_timezone",
            "unknown time zone '{timezone}' (use an IANA name such as Europe/Madrid)",
            {"timezone": name},
        )
    return None


class LocaleSettings(BaseModel):
    """The tenant's language and time zone: ``settings_extensions["locale"]``.

    ``language`` decides the fixed customer-facing texts a tenant did not write itself (slow down,
    handoff, queue, error, farewell, ...) and the console's language for users without a choice of
    their own; ``timezone`` decides what "per day" means in analytics.
    """

    model_config = ConfigDict(extra="forbid")

    language: Language = DEFAULT_LANGUAGE
    """``en`` or ``es`` (the catalogs in ``switchboard/i18n/locale``)."""
    timezone: SettingText = Field("UTC", min_length=1, max_length=64)
    """IANA time zone name (``Europe/Madrid``); days in analytics start at midnight there."""

    @model_validator(mode="after")
    def _known_timezone(self) -> LocaleSettings:
        if (problem := _timezone_error(self.timezone)) is not None:
            raise problem
        return self


class RateLimitSettings(BaseModel):
    """Per-customer and per-tenant inbound limits: ``settings_extensions["rate_limits"]``.

    ``None`` keeps the process value (``CUSTOMER_RATE_LIMIT``, ``TENANT_RATE_LIMIT``, ...; see
    :class:`switchboard.settings.InboundSettings`).
    """

    model_config = ConfigDict(extra="forbid")

    customer_rate_limit: int | None = Field(None, ge=1, le=10_000)
    """Messages one customer may send per ``customer_rate_window_s`` before the polite slow-down."""
    customer_rate_window_s: float | None = Field(None, gt=0, le=86_400)
    tenant_rate_limit: int | None = Field(None, ge=1, le=1_000_000)
    """Messages the tenant's jobs may process per ``tenant_rate_window_s`` (over: deferred, never told)."""
    tenant_rate_window_s: float | None = Field(None, gt=0, le=86_400)
    slowdown_reply: SettingText = Field(
        N_(
            "You're sending messages faster than we can answer them. Please slow down a little; "
            "we'll reply to your latest message shortly."
        ),
        min_length=1,
        max_length=1_000,
        json_schema_extra=TRANSLATABLE,
    )
    """The one polite reply a customer over the per-customer limit gets per window."""


class AgentSettings(BaseModel):
    """Who the agent is and what it says when the model cannot: ``settings_extensions["agent"]``."""

    model_config = ConfigDict(extra="forbid")

    name: SettingText = Field("Assistant", min_length=1, max_length=80)
    instructions: SettingText = Field(
        "You are a friendly, concise customer-support agent. Answer only from what you know from the "
        "tools and the conversation; when unsure, say so and offer a person.",
        max_length=20_000,
    )
    """Tenant instructions placed in the stable prefix of the system prompt."""
    system_prompt: SettingText | None = Field(None, max_length=50_000)
    """A complete system prompt replacing the built-in template (variable parts are still appended)."""
    typed_replies: bool = False
    """Offer the model the typed reply: it may answer with one JSON object ``{"text", "parts"}`` (buttons,
    lists, product cards) instead of calling ``offer_options`` / ``show_product``; validated, and an
    invalid object sends its text alone (:mod:`switchboard.replies.typed`)."""
    handoff_reply: SettingText = Field(
        N_("Thank you. A person from our team will take over this conversation shortly."),
        max_length=1_000,
        json_schema_extra=TRANSLATABLE,
    )
    """Sent after ``escalate_to_human`` when the model gives no words of its own."""
    unreadable_audio_reply: SettingText = Field(
        N_(
            "Sorry, I could not understand your voice message. A person from our team will listen to it and get back to you."
        ),
        max_length=1_000,
        json_schema_extra=TRANSLATABLE,
    )
    """Sent when a voice message could not be transcribed, even converted to WAV; the conversation
    then goes to a person (an online agent, or the waiting queue)."""
    farewell_reply: SettingText = Field(
        N_("Thank you for contacting us. Goodbye!"), max_length=1_000, json_schema_extra=TRANSLATABLE
    )
    """Sent after ``end_conversation(farewell=true)`` when the model gives no words of its own."""
    error_reply: SettingText = Field(
        N_("Sorry, I can't answer right now. Please try again in a few minutes."),
        max_length=1_000,
        json_schema_extra=TRANSLATABLE,
    )
    """Sent when every model failed or the turn ran out of time (the failure is logged and recorded)."""
    waiting_reply: SettingText = Field(
        N_(
            "Sorry, I can't answer right now. I'll reply here as soon as I can; you don't need to write again."
        ),
        min_length=1,
        max_length=1_000,
        json_schema_extra=TRANSLATABLE,
    )
    """Sent when every model failed: the question is kept and answered when a model answers again."""
    first_reply_deadline_s: float = Field(15.0, ge=3.0, le=120.0)
    """Seconds (3-120, default 15) from when the worker takes up a customer's message to the first thing
    the customer sees. When the answer is not ready by then, ``holding_reply`` is sent, once per
    message, and the answer follows as soon as it is ready."""
    holding_reply: SettingText = Field(
        N_("Thanks for your message. I'm looking into it and will answer in a moment."),
        min_length=1,
        max_length=1_000,
        json_schema_extra=TRANSLATABLE,
    )
    """The short message a customer gets when the answer is not ready by ``first_reply_deadline_s``."""


class LoopLimits(BaseModel):
    """Bounds of the tool loop (docs/architecture.md#the-tool-loop): ``settings_extensions["loop"]``."""

    model_config = ConfigDict(extra="forbid")

    max_tool_iterations: int = Field(5, ge=1, le=50)
    """Model calls that may return tool calls; then one final call with ``tools=[]``. At least 1: with 0
    every turn would skip its tools and answer from the words-only call (refused with the field's path)."""
    turn_timeout_s: float = Field(120.0, gt=0)
    tool_timeout_s: float = Field(60.0, gt=0)
    max_tool_result_chars: int = Field(4_000, ge=100)
    """Tool results are truncated to this many characters before the model sees them."""
    max_raw_tool_result_chars: int = Field(100_000, ge=1_000)
    """Hard ceiling applied to a tool's raw output before any processing."""
    per_tool_call_cap: int = Field(3, ge=1)
    """Calls of one tool per turn; a tool at its cap disappears from the list the model sees."""
    always_on_tools: list[Annotated[SettingText, Field(min_length=1, max_length=64)]] = Field(
        default_factory=lambda: ["escalate_to_human", "end_conversation"], max_length=50
    )
    """Tools exempt from the per-tool cap."""
    max_tool_calls_per_turn: int = Field(30, ge=1)


class HandoffSettings(BaseModel):
    """Human handoff (docs/human-agents.md): ``settings_extensions["handoff"]``."""

    model_config = ConfigDict(extra="forbid")

    queue_reply: SettingText = Field(
        N_(
            "Everyone on our team is busy right now. A person will answer here as soon as one is available; "
            "you don't need to write again."
        ),
        max_length=1_000,
        json_schema_extra=TRANSLATABLE,
    )
    """What the customer is told when no agent is online and the conversation waits in the queue."""
    agent_template_name: SettingText | None = Field(None, max_length=512)
    """Approved WhatsApp template used to notify an agent outside their 24-hour window (none: the
    notification is recorded as undeliverable)."""
    agent_template_language: SettingText = Field("en", max_length=16)
    summary_max_chars: int = Field(1_500, ge=100, le=10_000)
    """Bound of the LLM-written handoff summary sent to the agent."""
    approval_timeout_s: float = Field(3_600.0, ge=60, le=7 * 86_400)
    """A pending action nobody approved or rejected within this long expires; the customer is told
    ``approval_expired_reply``."""
    approval_expired_reply: SettingText = Field(
        N_(
            "We could not confirm your request in time, so nothing was done. Please write again if you "
            "still need it."
        ),
        max_length=1_000,
        json_schema_extra=TRANSLATABLE,
    )
    """What the customer is told when a pending action expires."""
    button_payloads: list[Annotated[SettingText, Field(min_length=1, max_length=256)]] = Field(
        default_factory=lambda: ["talk_to_human"], max_length=50
    )
    """Button ids (WhatsApp ``interactive.button_reply.id`` / ``list_reply.id`` or a template quick
    reply's ``button.payload``, compared case-insensitively) that hand the conversation to a person
    at once, without a model turn."""
    farewell: SettingText = Field("", max_length=1_000)
    """Sent to the customer when someone closes their conversation in the console (e.g. *Thanks for
    writing to us! Write again whenever you need us.*); empty: closing sends nothing."""
    channel_teams: list[ChannelTeam] = Field(default_factory=list, max_length=len(_CHANNEL_TEAM_CHANNELS))
    """Per channel, the team conversations from that channel go to when nobody gave them a team, one line
    each as ``whatsapp = Billing``; a channel not listed uses ``default_team``."""
    default_team: SettingText = Field("", max_length=100)
    """Name of the team (People page) a conversation handed to a person goes to when nobody gave it to a
    team: it is assigned among that team's online agents only. Empty, or no team of that name: any
    online agent."""


WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
"""Weekday keys of :class:`OpeningPeriod` in ``date.weekday()`` order (Monday first)."""
Weekday = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
_CLOCK_TYPED = re.compile(r"([0-9]{1,2}):([0-9]{2})")
CLOCK_TIME = N_("Write a time as 09:00 (hours 00 to 23, minutes 00 to 59).")
CLOSING_TIME = N_("Write a time as 18:00 (hours 00 to 23, minutes 00 to 59), or 24:00 for midnight.")


def _clock(*, midnight: bool) -> BeforeValidator:
    """A time of day as typed (``9:00``, ``09:00``, spaces around) → ``HH:MM``; ``24:00`` only when
    ``midnight`` (a closing time). Anything else: a ``clock_time`` / ``closing_time`` error in words."""

    def read(value: Any) -> str:
        found = _CLOCK_TYPED.fullmatch(value.strip()) if isinstance(value, str) else None
        if found is not None:
            hour, minute = int(found[1]), int(found[2])
            if (hour < 24 and minute < 60) or (midnight and (hour, minute) == (24, 0)):
                return f"{hour:02d}:{minute:02d}"
        if midnight:
            raise PydanticCustomError("closing_time", CLOSING_TIME)
        raise PydanticCustomError("clock_time", CLOCK_TIME)

    return BeforeValidator(read)


CLOSES_BEFORE_OPENING = N_(
    "It closes at {closes}, not after it opens at {opens}; split a night shift into two periods at midnight."
)

# the patterns state the stored shape; the validator before them already gives it or refuses in words
Clock = Annotated[str, _clock(midnight=False), Field(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")]
"""A time of day, ``HH:MM`` on the 24-hour clock (``9:00`` is read as ``09:00``)."""
ClosingClock = Annotated[
    str, _clock(midnight=True), Field(pattern=r"^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$")
]
"""A closing time: a :data:`Clock` or ``24:00`` (midnight at the end of the day)."""


class OpeningPeriod(BaseModel):
    """One stretch of a weekday when the team answers, in the tenant's local time (``09:00``-``18:00``)."""

    model_config = ConfigDict(extra="forbid")

    day: Weekday
    opens: Clock
    """``HH:MM``, 24-hour clock (``9:00`` is read as ``09:00``)."""
    closes: ClosingClock
    """``HH:MM`` after ``opens``; ``24:00`` is midnight at the end of the day. A night shift is two periods
    (``22:00``-``24:00`` and ``00:00``-``06:00`` of the next day)."""

    @model_validator(mode="after")
    def _closes_after_opening(self) -> OpeningPeriod:
        if self.closes <= self.opens:
            raise PydanticCustomError(
                "closes_before_opening",
                CLOSES_BEFORE_OPENING,
                {"opens": self.opens, "closes": self.closes},
            )
        return self


def _weekdays() -> list[OpeningPeriod]:
    return [OpeningPeriod(day=day, opens="09:00", closes="18:00") for day in WEEKDAYS[:5]]


class HoursSettings(BaseModel):
    """Business hours (docs/human-agents.md#business-hours): ``settings_extensions["hours"]``.

    Off by default: people are asked for at any time. On, a request for a person outside the hours waits
    in the queue for the next opening, and the customer is told when that is (``out_of_hours_reply``).
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    timezone: SettingText | None = Field(None, min_length=1, max_length=64)
    """IANA time zone of the schedule; ``None``: the tenant's ``locale.timezone``."""
    schedule: list[OpeningPeriod] = Field(default_factory=_weekdays, max_length=70)
    """When the team answers each week (default: Monday to Friday, 09:00-18:00)."""
    holidays: list[date] = Field(default_factory=list, max_length=366)
    """Whole days closed (``2026-12-25``), in the schedule's time zone."""
    outside_hours: Literal["ai", "person"] = "ai"
    """``ai``: outside the hours the AI keeps answering, and a request for a person waits for the next
    opening. ``person``: the AI does not answer outside the hours; the customer gets
    ``out_of_hours_reply`` and the conversation waits for a person at the next opening."""
    out_of_hours_reply: SettingText = Field(
        N_(
            "Our team is away right now. We are back {opening}, and a person will answer you here then; "
            "you don't need to write again."
        ),
        min_length=1,
        max_length=1_000,
        json_schema_extra=TRANSLATABLE,
    )
    """What the customer is told outside the hours; ``{opening}`` becomes the next opening in the
    customer's words (``on Monday 7 December at 09:00``)."""

    @model_validator(mode="after")
    def _usable(self) -> HoursSettings:
        if self.timezone is not None and (problem := _timezone_error(self.timezone)) is not None:
            raise problem
        if self.enabled and not self.schedule:
            raise PydanticCustomError(
                "no_opening_hours", "add at least one opening period, or turn business hours off"
            )
        return self


class CsatSettings(BaseModel):
    """Customer satisfaction (docs/human-agents.md#customer-satisfaction): ``settings_extensions["csat"]``.

    On by default: when a conversation closes, its customer is asked once how it went, with the
    channel's own buttons (an e-mail gets one link per answer); the answer counts in analytics.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Ask the customer of every conversation that closes, once (``false``: never ask)."""
    question: SettingText = Field(
        N_("How did we do? Please rate this conversation."),
        min_length=1,
        max_length=500,
        json_schema_extra=TRANSLATABLE,
    )
    """The question sent after a conversation closes, above the answers Good (5), OK (3) and Bad (1)."""
    thanks_reply: SettingText = Field(
        N_("Thank you for your rating!"),
        min_length=1,
        max_length=1_000,
        json_schema_extra=TRANSLATABLE,
    )
    """Sent when the customer answers (once: a second tap changes nothing)."""
    comment_question: SettingText = Field(
        N_("Anything you'd like to add? Just write it here, or skip this."),
        max_length=500,
        json_schema_extra=TRANSLATABLE,
    )
    """Sent after the thanks, inviting a comment: the customer's next text message within
    ``comment_window_s`` is kept with the rating (shown on the conversation page and in analytics)
    instead of starting a new conversation. Empty: no follow-up, the next message is a new conversation."""
    comment_window_s: float = Field(600.0, ge=60, le=86_400)  # le: csat.COMMENT_WINDOW_MAX_S
    """How long after the rating a text message counts as its comment, in seconds."""
    comment_thanks: SettingText = Field(
        N_("Thank you, we have passed it on."), min_length=1, max_length=1_000, json_schema_extra=TRANSLATABLE
    )
    """Sent when the customer's comment is kept."""


class MemorySettings(BaseModel):
    """Memory across conversations (docs/concepts.md#memory): ``settings_extensions["memory"]``."""

    model_config = ConfigDict(extra="forbid")

    returning_customer_window_days: int = Field(90, ge=1, le=3_650)
    """A customer with a conversation closed within this many days is a returning customer."""
    inactivity_close_s: float = Field(86_400.0, gt=0)
    """An AI-mode conversation without messages for this long is closed (and summarized into memory)."""
    max_chars: int = Field(2_000, ge=200, le=20_000)
    """Bound of ``user_memories.summary``."""


class ToolsSettings(BaseModel):
    """MCP tool calls (docs/tools.md): ``settings_extensions["tools"]``."""

    model_config = ConfigDict(extra="forbid")

    mutation_budget: StrictInt | None = Field(None, ge=0)
    """Successful writes allowed per turn; ``None``: the tool source's default (1). Past it the model is
    told a person must review the request."""


class KnowledgeSettings(BaseModel):
    """The tenant's knowledge base (docs/knowledge-base.md): ``settings_extensions["knowledge"]``.

    Set with :func:`set_section` (``switchboard kb set-embedding``, ``PUT .../knowledge/embedding``).
    """

    model_config = ConfigDict(extra="forbid")

    embedding_model: ModelName | None = None
    """Embedding model for chunks and questions; ``None``: ``KB_EMBEDDING_MODEL`` when a provider key is
    set, else the offline lexical embedding."""
    embedding_api_base: SettingText | None = Field(None, min_length=1, max_length=2_000)
    """OpenAI-compatible base URL (``http://host:port/v1``); ``None``: the provider's default."""
    embedding_api_key_encrypted: SettingText | None = Field(None, min_length=1)
    """:class:`~switchboard.crypto.CredentialCipher` token of ``{"api_key": ...}``; never the plain key.
    Given for ``embedding_api_base`` and the model's provider: a save that changes either drops it
    unless a new key comes (:meth:`key_address`)."""
    min_similarity: float | None = Field(None, ge=-1.0, le=1.0)
    """Cosine similarity a chunk needs to match; ``None``: ``KB_MIN_SIMILARITY`` (provider models) or
    ``KB_MIN_SIMILARITY_LEXICAL`` (the offline embedding)."""
    chunk_size_chars: int | None = Field(None, ge=100, le=20_000)
    """Longest chunk of this tenant's documents; ``None``: ``KB_CHUNK_SIZE_CHARS``. Every ingest and
    re-index splits with it (the demo tenant: 400, one FAQ answer per chunk)."""
    chunk_overlap_chars: int | None = Field(None, ge=0, le=5_000)
    """Characters repeated between chunks; ``None``: ``KB_CHUNK_OVERLAP_CHARS``."""

    @classmethod
    def key_address(cls, values: Mapping[str, Any]) -> tuple[str, str | None]:
        """``(provider of the embedding model, normalized embedding_api_base)`` of this section in stored
        or public shape: where its stored key may go (:func:`switchboard.llm.keys.key_address`)."""
        from switchboard.llm.keys import embedding_provider, key_address

        model, base = values.get("embedding_model"), values.get("embedding_api_base")
        provider = embedding_provider(
            model if isinstance(model, str) else None, base if isinstance(base, str) else None
        )
        return key_address(values, provider=provider, base_field="embedding_api_base")


class LeadSettings(BaseModel):
    """Lead capture (:mod:`switchboard.leads`): the after-turn intent check."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    intent_window_messages: int = Field(8, ge=2, le=50)
    """How many of the newest customer and assistant messages the intent check reads."""
    intent_check: Literal["auto", "model", "heuristic"] = "auto"
    """``auto``: a provider model when the tenant has one (one small call per turn until a lead exists),
    the offline heuristic otherwise; ``model`` / ``heuristic`` force one."""


class RetentionSettings(BaseModel):
    """How long the tenant's customer data is kept (:mod:`switchboard.privacy.retention`, daily): days
    counted from when a row was written; unset keeps it until the platform's ``RETENTION_MAX_DAYS`` (or
    for ever when the platform sets none)."""

    model_config = ConfigDict(extra="forbid")

    messages_days: int | None = Field(None, ge=1, le=36_500)
    """Messages older than this lose their text, media files, transcripts and provider payloads (the rows
    stay, so the analytics' counts stay)."""
    memory_days: int | None = Field(None, ge=1, le=36_500)
    """Memory notes and summaries not updated for this many days are deleted."""
    traces_days: int | None = Field(None, ge=1, le=36_500)
    """Turn records older than this lose their replies, summaries, errors and guardrail records; tool
    receipts their rejection reasons; security alerts are deleted."""
    leads_days: int | None = Field(None, ge=1, le=36_500)
    """Leads older than this are deleted."""
    event_deliveries_days: int | None = Field(None, ge=1, le=36_500)
    """Events and their webhook delivery logs older than this are deleted (one still waiting to be
    delivered stays)."""


CORE_SECTIONS: Mapping[str, type[BaseModel]] = MappingProxyType(
    {
        "agent": AgentSettings,
        "loop": LoopLimits,
        "llm": LLMSettings,
        "handoff": HandoffSettings,
        "memory": MemorySettings,
        "tools": ToolsSettings,
        "knowledge": KnowledgeSettings,
        "locale": LocaleSettings,
        "rate_limits": RateLimitSettings,
        "leads": LeadSettings,
        "retention": RetentionSettings,
        "hours": HoursSettings,
        "csat": CsatSettings,
    }
)
"""The sections every tenant has, by their key in ``settings_extensions``."""

_channel_sections: dict[str, type[BaseModel]] = {}
_channels_imported = False


def register_section(name: str, model: type[S]) -> type[S]:
    """Declare a channel's section (``register_section("whatsapp", WhatsAppSettings)``).

    Called at import of the channel's settings module; registering the same class again is a no-op.

    Raises:
        ValueError: ``name`` is a core section, or another class already holds it.
    """
    if name in CORE_SECTIONS:
        raise ValueError(f"{name!r} is a core tenant settings section")
    known = _channel_sections.get(name)
    if known is not None and (known.__module__, known.__qualname__) != (model.__module__, model.__qualname__):
        raise ValueError(f"tenant settings section {name!r} is already registered by {known.__qualname__}")
    _channel_sections[name] = model
    return model


def channel_sections() -> Mapping[str, type[BaseModel]]:
    """The registered channel sections by name, importing ``switchboard.channels`` on first use."""
    global _channels_imported
    if not _channels_imported:
        for module in SECTION_MODULES:
            importlib.import_module(module)  # registers its sections
        _channels_imported = True
    return MappingProxyType(_channel_sections)


class TenantSettings(BaseModel):
    """Everything a tenant may override. Build it with :func:`tenant_settings_from`.

    Registered channel sections are attributes too (``settings.whatsapp``); a missing one holds its
    defaults. :meth:`channel` is the typed way to read them.
    """

    model_config = ConfigDict(extra="allow")

    agent: AgentSettings = Field(default_factory=AgentSettings)
    loop: LoopLimits = Field(default_factory=LoopLimits)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    handoff: HandoffSettings = Field(default_factory=HandoffSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    tools: ToolsSettings = Field(default_factory=ToolsSettings)
    knowledge: KnowledgeSettings = Field(default_factory=KnowledgeSettings)
    locale: LocaleSettings = Field(default_factory=LocaleSettings)
    rate_limits: RateLimitSettings = Field(default_factory=RateLimitSettings)
    leads: LeadSettings = Field(default_factory=LeadSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    hours: HoursSettings = Field(default_factory=HoursSettings)
    csat: CsatSettings = Field(default_factory=CsatSettings)

    @model_validator(mode="after")
    def _channel_sections(self) -> TenantSettings:
        """Keep only registered channel sections as extras, each validated or at its defaults."""
        extra = self.__pydantic_extra__ if self.__pydantic_extra__ is not None else {}
        registered = channel_sections()
        for name in [key for key in extra if key not in registered]:
            del extra[name]
        for name, model in registered.items():
            value = extra.get(name)
            if not isinstance(value, model):
                extra[name] = model() if value is None else model.model_validate(value)
        return self

    def channel(self, model: type[S]) -> S:
        """The section registered for ``model`` (``settings.channel(WhatsAppSettings)``).

        Raises:
            KeyError: ``model`` is not a registered section.
        """
        for name, registered in channel_sections().items():
            if registered is model:
                value = getattr(self, name)
                assert isinstance(value, model)
                return value
        raise KeyError(f"{model.__qualname__} is not a registered tenant settings section")


def localized_defaults(model: type[BaseModel], language: str) -> dict[str, str]:
    """The translatable fields of ``model`` (marked :data:`TRANSLATABLE`) with their defaults in
    ``language`` (``{"handoff_reply": "Gracias. ..."}``); English returns the defaults as they are."""
    chosen: dict[str, str] = {}
    for name, field in model.model_fields.items():
        extra = field.json_schema_extra
        if isinstance(extra, dict) and extra.get("translatable") and isinstance(field.default, str):
            chosen[name] = gettext(language, field.default)
    return chosen


def _language_of(locale: Any, tenant_id: str | None) -> str:
    if locale is None:
        return DEFAULT_LANGUAGE
    try:
        return LocaleSettings.model_validate(locale).language
    except ValidationError:
        return DEFAULT_LANGUAGE  # logged with the section below


def tenant_settings_from(
    extensions: Mapping[str, Any] | None, *, tenant_id: str | None = None
) -> TenantSettings:
    """Parse a tenant's ``settings_extensions`` (unknown top-level keys are ignored).

    A section that fails validation is replaced by its defaults and logged as an error
    (``tenant_settings_invalid`` with the section and the first problem). Fixed customer-facing
    texts the tenant did not store come in the tenant's ``locale.language`` (:func:`localized_defaults`).
    """
    raw = dict(extensions or {})
    language = _language_of(raw.get("locale"), tenant_id)
    sections: dict[str, Any] = {}
    for name, model in {**CORE_SECTIONS, **channel_sections()}.items():
        value = raw.get(name)
        defaults = localized_defaults(model, language)
        if value is not None:
            try:
                merged = {**defaults, **value} if isinstance(value, Mapping) else value
                sections[name] = model.model_validate(merged)
                continue
            except ValidationError as exc:
                first = exc.errors()[0]
                log.error(
                    "tenant_settings_invalid",
                    tenant_id=tenant_id,
                    section=name,
                    location=".".join(str(p) for p in first.get("loc", ())),
                    problem=first.get("msg"),
                )
        if defaults:
            sections[name] = model.model_validate(defaults)
    return TenantSettings(**sections)


_PARSED_CACHE_SIZE = 1024
"""Tenants whose parsed settings :func:`cached_tenant_settings` keeps (least recently used dropped)."""
_parsed: OrderedDict[str, tuple[dict[str, Any], int, TenantSettings]] = OrderedDict()


def cached_tenant_settings(extensions: Mapping[str, Any] | None, *, tenant_id: str) -> TenantSettings:
    """:func:`tenant_settings_from`, parsed once per content of the tenant's ``settings_extensions``.

    The hot paths (every turn, every MCP call) read the tenant row anyway; parsing and validating every
    section again cost more than that read. The cache is invalidated by content: a stored copy of the
    raw settings is compared (``==``) with what was read, so any write (``tenant_config``, the console,
    the CLI, another process) is seen on the next read. The result is shared: treat it as read-only
    (``model_copy(update=...)`` for a variant).
    """
    raw = dict(extensions or {})
    sections = len(channel_sections())  # a channel registered later adds a section
    hit = _parsed.get(tenant_id)
    if hit is not None and hit[1] == sections and hit[0] == raw:
        _parsed.move_to_end(tenant_id)
        return hit[2]
    parsed = tenant_settings_from(raw, tenant_id=tenant_id)
    _parsed[tenant_id] = (copy.deepcopy(raw), sections, parsed)
    while len(_parsed) > _PARSED_CACHE_SIZE:
        _parsed.popitem(last=False)
    return parsed


async def load_tenant_settings(session: AsyncSession, tenant_id: uuid.UUID) -> TenantSettings:
    """The settings of tenant ``tenant_id`` read in ``session`` (defaults when there is no such tenant).

    Parsed through :func:`cached_tenant_settings`: the result is shared, read-only.
    """
    from switchboard.db.models import Tenant  # here: this module stays a leaf at import time

    tenant = await session.get(Tenant, tenant_id)
    return cached_tenant_settings(tenant.settings_extensions if tenant else None, tenant_id=str(tenant_id))


class HasSettingsExtensions(Protocol):
    """A tenant row (``switchboard.db.models.Tenant``), or anything holding ``settings_extensions``."""

    settings_extensions: dict[str, Any]


def set_section(tenant: HasSettingsExtensions, section: str, /, **changes: Any) -> BaseModel:
    """Update section ``section`` of ``tenant.settings_extensions`` in place; the caller adds and commits.

    ``changes`` are merged into what the section stores now; a value of ``None`` removes that key
    (it falls back to its default). The merged section is validated before anything is changed,
    and a new dict is assigned so SQLAlchemy sees the change.

    Returns:
        The section as the loader will now read it.

    Raises:
        KeyError: no such section.
        pydantic.ValidationError: the merged section is invalid (a ``ValueError``); nothing changed.
    """
    model = {**CORE_SECTIONS, **channel_sections()}.get(section)
    if model is None:
        raise KeyError(f"no tenant settings section {section!r}")
    extensions = dict(tenant.settings_extensions or {})
    stored = extensions.get(section)
    merged = {**(stored if isinstance(stored, dict) else {}), **changes}
    merged = {key: value for key, value in merged.items() if value is not None}
    validated = model.model_validate(merged)
    if merged:
        extensions[section] = merged
    else:
        extensions.pop(section, None)
    tenant.settings_extensions = extensions
    return validated
