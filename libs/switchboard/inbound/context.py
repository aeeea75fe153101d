"""What the inbound steps share: the worker's dependencies and one context per job run."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import httpx
from arq.connections import ArqRedis

from switchboard.channels.base import Channel
from switchboard.contracts import StoredInbound
from switchboard.conversations import channel_identities, reply_address
from switchboard.crypto import CredentialCipher
from switchboard.db.models import ChannelAccount, Conversation, Customer, Message
from switchboard.runtime.resources import Resources
from switchboard.settings import Settings

__all__ = ["COMMENT_MARK", "WorkerDeps", "InboundContext", "Outcome", "Dead"]


COMMENT_MARK = "csat_comment"
"""Key of an inbound row's ``raw`` naming the rated conversation the claim attached it to as the rating's
comment (the :func:`switchboard.inbound.steps.csat_comment` step keeps it)."""


class Outcome(StrEnum):
    """What one run of the inbound job did (the job's return value, logged as ``inbound_outcome``)."""

    missing_or_finished = "missing_or_finished"  # no such row, or a run before this one finished it
    recorded = "recorded"  # only stored: sticker, reaction, status-like events, echoes, system messages
    echo_of_ours = "echo_of_ours"  # the provider's echo of a message we sent: recorded on its outbox row
    suspended = "suspended"  # the tenant is suspended by a platform admin: stored, not answered
    rate_limited = "rate_limited"  # over the per-customer limit, the slow-down reply already went out
    slowdown_sent = "slowdown_sent"  # over the per-customer limit: the one polite reply of this window
    human_mode = "human_mode"  # the conversation is with a person: relayed or waiting, no model call
    agent_command = "agent_command"  # a human agent's slash command, answered
    agent_command_rejected = "agent_command_rejected"  # an unknown or malformed slash command
    relayed_to_customer = (
        "relayed_to_customer"  # a human agent's reply, relayed through the customer's channel
    )
    agent_no_conversation = "agent_no_conversation"  # an agent wrote with no conversation selected
    already_handled = "already_handled"  # a re-run of an agent message whose answer is in the outbox
    opted_out = "opted_out"  # an opt-out button: recorded, one confirmation
    csat_answered = "csat_answered"  # a tapped satisfaction rating: stored (the first time) and thanked
    csat_commented = "csat_commented"  # the text after a rating: kept as its comment and thanked
    button_handoff = "button_handoff"  # a "talk to a person" button: escalated without a model turn
    audio_not_understood = "audio_not_understood"  # a voice message no transcription could read: to a person
    out_of_hours = "out_of_hours"  # outside business hours with no AI answering: queued, told when we open
    reply_capped = "reply_capped"  # the channel's cap on automatic replies was reached: handed to a person
    coalesced = "coalesced"  # a newer message of the same customer answers this one too
    empty = "empty"  # nothing to answer (no text after media to text)
    silent = "silent"  # the agent chose not to answer (closed without a farewell, or handed over)
    replied = "replied"  # the reply was written to the outbox and its parts sent (or are being retried)
    not_sent = "not_sent"  # the reply was written but the channel refused it (code in ``last_error``)
    contract_violation = "contract_violation"  # the orchestrator kept answering outside the contract
    waiting_model = "waiting_model"  # every model failed: the question waits for the provider (resume job)
    dead = "dead"  # gave up after the bounded number of failures (dead letter, logged as an error)


class Dead(Exception):
    """Internal: the row went to the dead-letter state; the job ends normally with :attr:`Outcome.dead`."""


@dataclass
class WorkerDeps:
    """What jobs share, built in the worker's ``on_startup`` and kept in ``ctx["deps"]``."""

    resources: Resources
    settings: Settings
    channels: dict[str, Channel]
    """Every registered channel, by name (:func:`switchboard.channels.base.build_channels`)."""
    http: httpx.AsyncClient
    """Client for the orchestrator (and the transcription/vision endpoints)."""
    cipher: CredentialCipher
    gateway: Any = None
    """Model gateway for handoff summaries (``ModelGateway``; ``None``: summaries quote the customer)."""
    media_store: Any = None
    """:class:`~switchboard.media.MediaStore` shared by the jobs and the channels of this process."""

    @property
    def redis(self) -> ArqRedis:
        assert self.resources.redis is not None
        return self.resources.redis

    def channel(self, name: str) -> Channel:
        """The channel ``name``.

        Raises:
            LookupError: no channel of that name is registered in this process.
        """
        try:
            return self.channels[name]
        except KeyError:
            raise LookupError(f"no channel {name!r} is registered (known: {sorted(self.channels)})") from None


@dataclass
class InboundContext:
    """One run of the inbound job over one stored row; every step reads and fills it."""

    deps: WorkerDeps
    job: dict[str, Any]
    """ARQ's job context (``job_try``, ``job_id``)."""
    row: Message
    stored: StoredInbound
    customer: Customer
    conversation: Conversation
    account: ChannelAccount
    channel: Channel
    tenant_settings: Any = None
    """:class:`~switchboard.tenant_settings.TenantSettings` once loaded (the buttons step loads it)."""
    acted_payloads: frozenset[str] = frozenset()
    """Lower-cased button payloads acted on without a turn (never coalesced with text)."""
    lock_token: str | None = None
    """The conversation lock this run holds (released by the job, whatever happens)."""
    lock_lease: Any = None
    """The renewal of that lock (an ``AsyncExitStack`` around :func:`switchboard.queue.lease.lease`)."""
    burst_key: str = ""
    text: str = ""
    """The text the agent answers: the message, or its media turned into text."""
    notes: dict[str, Any] = field(default_factory=dict)
    claimed_at: float = field(default_factory=time.monotonic)
    """``time.monotonic()`` when this run claimed the row: the tenant's first-reply deadline counts from it."""

    @property
    def row_id(self) -> uuid.UUID:
        return self.row.id

    @property
    def settings(self) -> Settings:
        return self.deps.settings

    @property
    def reply_address(self) -> str:
        """Where replies to this message go: the identity the customer wrote from
        (:func:`switchboard.conversations.reply_address`)."""
        found = reply_address(
            channel_identities(self.row.channel, self.stored.identities), self.channel.reply_identity_kinds
        )
        return found or self.row.sender_external_id or self.customer.external_user_id
