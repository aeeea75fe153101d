"""The shapes that cross service boundaries (docs/architecture.md): inbound messages, turn requests and results.

* :class:`InboundMessage` is what a channel's ``normalize`` module makes of a provider payload;
  nothing past that module sees Meta's or Google's JSON.
* :class:`TurnRequest` / :class:`TurnResult` are the worker → orchestrator contract
  (``POST /v1/turns``). A result carries **either** a non-empty ``reply`` **or** ``silent: true``;
  anything else is a contract violation (rejected by validation here).
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from switchboard.replies.parts import StructuredPart

__all__ = [
    "MediaRef",
    "SenderIdentity",
    "SystemEvent",
    "InboundFacts",
    "InboundMessage",
    "StoredInbound",
    "TurnRequest",
    "TurnResult",
    "ToolCallRecord",
    "TokenUsage",
    "trace_id_for",
]


def _registered_channel(name: str) -> str:
    """``name`` when a channel is registered under it (:func:`switchboard.channels.base.channel_names`).

    Raises:
        ValueError: no such channel (pydantic reports it as a validation error: ``POST /v1/turns``
            answers 422).
    """
    # The registry sits above this module (it imports the channels, which import these contracts).
    from switchboard.channels.base import channel_names

    if name not in channel_names():
        raise ValueError(f"unknown channel {name!r}")
    return name


ChannelName = Annotated[str, AfterValidator(_registered_channel)]
"""The name of a registered channel (``whatsapp``)."""


def trace_id_for(conversation_id: str | uuid.UUID, message_id: str | uuid.UUID) -> str:
    """Deterministic 32-hex-char trace id (OpenTelemetry width) from ``conversation_id:message_id``.

    The same inbound message always maps to the same trace, across retries and processes.
    """
    return hashlib.sha256(f"{conversation_id}:{message_id}".encode()).hexdigest()[:32]


class MediaRef(BaseModel):
    """A media attachment by provider handle (never a long-lived URL)."""

    model_config = ConfigDict(extra="forbid")

    ref: str
    """Provider handle: WhatsApp media id, Instagram CDN URL, Gmail ``message_id/partId``."""
    mime: str | None = None
    """MIME type without parameters (``audio/ogg``, not ``audio/ogg; codecs=opus``)."""
    filename: str | None = None
    caption: str | None = None
    voice: bool = False
    size_bytes: int | None = None
    expiring: bool = False
    """``ref`` is a handle that stops working (an Instagram CDN URL, a WhatsApp media id): the bytes are
    copied into our media storage right after the insert (``copy_inbound_media``, through the channel's
    ``copy_media``) and ``ref`` becomes ``store:<key>``."""


class SenderIdentity(BaseModel):
    """One channel identity of the person who wrote (``wa_id``, ``bsuid``, ``igsid``, ``email``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str = Field(min_length=1, max_length=16)
    value: str = Field(min_length=1, max_length=255)


class SystemEvent(BaseModel):
    """A provider's system notice about the sender (WhatsApp ``user_changed_number``)."""

    model_config = ConfigDict(extra="forbid")

    type: str
    new_identities: list[SenderIdentity] = Field(default_factory=list)
    """The identities the sender moved to (a new phone number, a new BSUID)."""


class InboundFacts(BaseModel):
    """What the channel-neutral worker reads of a message: stored under ``messages.raw["normalized"]``
    by the channel service and read back as :class:`StoredInbound`."""

    sender_name: str | None = None
    payload: str | None = None
    """Button / list reply id or template button payload (drives actions, not the title)."""
    action: Literal["process", "record", "update_outbound", "ignore"] = "process"
    identities: list[SenderIdentity] = Field(default_factory=list)
    """The sender's channel identities, the one the message came from first (a reply goes there)."""
    echo: bool = False
    """A message the business sent from outside Switchboard (WhatsApp Business app, Instagram app)."""
    target_external_id: str | None = None
    """The earlier message an ``edit``, ``revoke`` or ``reaction`` is about."""
    referral: dict[str, Any] | None = None
    """Ad or link the conversation started from (click-to-WhatsApp ad, Instagram ad)."""
    system: SystemEvent | None = None
    context_line: str | None = None
    """A line the agent reads before the text: what the customer reacted to (an Instagram story
    mention or a reply to a story)."""
    thread_key: str | None = None
    """The provider's thread the message belongs to, on channels where a conversation is a thread
    (Gmail ``threadId``); ``None`` elsewhere (the conversation is the whole chat)."""
    review: list[str] = Field(default_factory=list)
    """Why a person should look at the conversation (``suspected_instructions``, ``hidden_text``):
    the worker adds each to ``conversations.review_flags``."""
    flags: dict[str, Any] = Field(default_factory=dict)
    """Extra facts for audits and the agent console (forwarded, username...); never read by the worker."""


class InboundMessage(InboundFacts):
    """One normalized event from a channel (the payload index's "NormalizedEvent")."""

    model_config = ConfigDict(extra="forbid")

    channel: ChannelName
    account_id: str
    """WhatsApp ``phone_number_id`` | Instagram account id | mailbox address."""
    kind: str
    """``text``, ``image``, ``audio``, ``video``, ``document``, ``sticker``, ``location``, ``contacts``,
    ``interactive``, ``button``, ``reaction``, ``edit``, ``revoke``, ``system``, ``unsupported``, ``status``..."""
    external_id: str
    """Provider message id: the de-duplication key within (channel, account_id)."""
    sender_id: str = Field(min_length=1)
    """Stable customer key; never empty."""
    sent_at: datetime
    """Provider timestamp in UTC."""
    text: str = ""
    media: list[MediaRef] = Field(default_factory=list)
    reply_to: str | None = None
    raw: dict[str, Any] = Field(default_factory=dict)

    def stored_view(self) -> dict[str, Any]:
        """What the channel service stores under ``messages.raw["normalized"]`` for the worker."""
        return self.model_dump(mode="json", exclude_none=True, include=set(InboundFacts.model_fields))


class StoredInbound(InboundFacts):
    """The typed facts of a stored inbound row (``messages.raw["normalized"]``), as the worker reads them."""

    model_config = ConfigDict(extra="ignore")

    @classmethod
    def of(cls, raw: dict[str, Any] | None) -> StoredInbound:
        """The stored view of a row's ``raw`` (defaults when the row has none)."""
        return cls.model_validate((raw or {}).get("normalized") or {})


class TurnRequest(BaseModel):
    """Worker → orchestrator: answer this one new message (history is loaded by the orchestrator)."""

    model_config = ConfigDict(extra="forbid")

    tenant_id: uuid.UUID
    conversation_id: uuid.UUID
    inbound_message_id: uuid.UUID
    channel: ChannelName
    customer_id: uuid.UUID
    text: str = Field(max_length=100_000)
    media_cost_usd: dict[Literal["transcription", "vision"], float] = Field(default_factory=dict)
    """USD the tenant's transcription and vision deployments spent reading this turn's media, per kind
    (added to the turn's cost)."""


class ToolCallRecord(BaseModel):
    """One tool call made during a turn."""

    name: str
    outcome: Literal["ok", "error", "rejected", "timeout"]
    error_type: str | None = None
    duration_ms: float


class TokenUsage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float = 0.0
    """Model spend in USD by LiteLLM's cost map (unpriced models count 0), guardrail calls and the
    media calls of ``media_cost_usd`` included."""
    media_cost_usd: dict[str, float] = Field(default_factory=dict)
    """Of ``cost_usd``: what reading the turn's media cost, per kind (``transcription``, ``vision``)."""


class TurnResult(BaseModel):
    """Orchestrator → worker. Exactly one of ``reply`` (non-empty text) or ``silent=True``."""

    reply: str | None = None
    silent: bool = False
    trace_id: str
    model: str | None = None
    """``model_info.id`` of the deployment that answered last."""
    fallback_used: bool = False
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    flags: list[str] = Field(default_factory=list)
    """What a person should know about the turn: ``input_blocked`` (the input guardrail stopped it),
    ``output_replaced`` (the output guardrail replaced the reply), ``budget_warning``,
    ``budget_exceeded`` (the tenant's monthly budget; see ``turns.guardrails`` / logs for details)."""
    parts: list[StructuredPart] = Field(default_factory=list, max_length=5)
    """Structured parts sent after ``reply`` (quick-reply buttons, a list of options, a product card),
    in order; each channel renders them within its limits (:mod:`switchboard.channels.render`). Only
    with a reply, never with ``silent``."""

    @model_validator(mode="after")
    def _reply_xor_silent(self) -> Self:
        has_reply = bool(self.reply and self.reply.strip())
        if has_reply == self.silent:
            raise ValueError("a TurnResult carries exactly one of a non-empty reply or silent=true")
        if self.silent and self.parts:
            raise ValueError("a silent TurnResult carries no structured parts")
        return self
