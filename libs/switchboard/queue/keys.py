"""Every Redis key and ARQ job id the queue uses, built in one place."""

from __future__ import annotations

import uuid

__all__ = [
    "inbound_job_id",
    "inbound_sweep_job_id",
    "customer_rate_key",
    "customer_slowdown_key",
    "tenant_rate_key",
    "conversation_lock_key",
    "whatsapp_throttle_key",
    "channel_throttle_key",
    "parked_status_key",
    "parked_status_index_key",
    "mark_read_key",
    "profile_cache_key",
    "contract_violation_counter_key",
    "inbound_failures_key",
    "burst_key",
    "deliver_job_id",
    "knowledge_progress_key",
]


def inbound_job_id(row_id: uuid.UUID | str) -> str:
    """Job id of ``process_inbound`` for one stored inbound row (1:1 with the provider message id)."""
    return f"inbound:{row_id}"


def inbound_sweep_job_id(row_id: uuid.UUID | str, attempt: int) -> str:
    """Job id the sweeper uses to re-enqueue a row after ``attempt`` processing attempts."""
    return f"inbound:{row_id}:sweep:{attempt}"


def customer_rate_key(tenant_id: uuid.UUID | str, customer_id: uuid.UUID | str) -> str:
    """Sorted set of one customer's recent message times (sliding window)."""
    return f"rl:customer:{tenant_id}:{customer_id}"


def customer_slowdown_key(tenant_id: uuid.UUID | str, customer_id: uuid.UUID | str) -> str:
    """Set (NX, window TTL) when the polite slow-down reply went out in the current window."""
    return f"rl:customer-notice:{tenant_id}:{customer_id}"


def tenant_rate_key(tenant_id: uuid.UUID | str) -> str:
    """Sorted set of one tenant's recently processed jobs (sliding window)."""
    return f"rl:tenant:{tenant_id}"


def conversation_lock_key(conversation_id: uuid.UUID | str) -> str:
    """One turn at a time per conversation."""
    return f"lock:conversation:{conversation_id}"


def channel_throttle_key(channel: str, account_id: str) -> str:
    """Set (with a TTL) after a provider reported a throughput limit for one sending account
    (``account_id``: the provider's id of the account, e.g. WhatsApp ``phone_number_id``); the
    delivery loop holds that account's sends until it expires."""
    return f"throttle:{channel}:{account_id}"


def whatsapp_throttle_key(phone_number_id: str) -> str:
    """:func:`channel_throttle_key` of a WhatsApp number (kept for callers that predate it)."""
    return channel_throttle_key("whatsapp", phone_number_id)


def parked_status_key(channel: str, account_id: str, external_id: str) -> str:
    """List of delivery statuses (JSON) for provider message ``external_id`` that arrived before we
    stored that id; applied when the delivery loop records the send (TTL-bounded)."""
    return f"outbox:parked:{channel}:{account_id}:{external_id}"


def parked_status_index_key(channel: str, account_id: str) -> str:
    """Sorted set (score: parking time) of the provider ids parked for one account; bounds how many
    an account may park."""
    return f"outbox:parked-index:{channel}:{account_id}"


def mark_read_key(inbound_message_id: uuid.UUID | str) -> str:
    """Set (NX) once the customer's message was marked read, so a re-run never marks it again."""
    return f"outbox:read:{inbound_message_id}"


def profile_cache_key(channel: str, account_id: uuid.UUID | str | None, sender: str) -> str:
    """A customer's profile from the provider (JSON; ``{}`` after a failed lookup), per channel account."""
    return f"profile:{channel}:{account_id}:{sender}"


def contract_violation_counter_key() -> str:
    """Counter of orchestrator answers that broke the ``TurnResult`` contract."""
    return "metrics:contract_violations"


def inbound_failures_key(row_id: uuid.UUID | str) -> str:
    """Counter of transient failures of one inbound row (orchestrator down, Graph 5xx...)."""
    return f"inbound:failures:{row_id}"


def burst_key(conversation_id: uuid.UUID | str) -> str:
    """Start time of the current burst of customer messages (coalescing gives up past ``INBOUND_MAX_WAIT_S``)."""
    return f"burst:{conversation_id}"


def deliver_job_id(scope_id: uuid.UUID | str | None, defer_s: float) -> str:
    """Job id of a deferred ``deliver_outbox`` run for one row or conversation (one per scope and delay)."""
    return f"deliver:{scope_id}:{round(defer_s, 1)}"


def knowledge_progress_key(source_id: uuid.UUID | str) -> str:
    """Progress of the running ingestion of one knowledge source (JSON ``{"stage", "done", "total"}``)."""
    return f"kb:progress:{source_id}"
