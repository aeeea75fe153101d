"""Every Redis key and ARQ job id the queue uses, built in one place."""

from __future__ import annotations

import uuid
from datetime import datetime

__all__ = [
    "history_summary_job_id",
    "lead_check_job_id",
    "handoff_notice_job_id",
    "inbound_handback_job_id",
    "inbound_resume_job_id",
    "inbound_job_id",
    "inbound_sweep_job_id",
    "inbound_retry_job_id",
    "customer_rate_key",
    "customer_slowdown_key",
    "tenant_rate_key",
    "conversation_lock_key",
    "whatsapp_throttle_key",
    "channel_throttle_count_key",
    "channel_throttle_key",
    "parked_status_key",
    "parked_status_index_key",
    "mark_read_key",
    "profile_cache_key",
    "contract_violation_counter_key",
    "inbound_failures_key",
    "burst_key",
    "deliver_job_id",
    "deliver_request_job_id",
    "copy_media_job_id",
    "statuses_job_id",
    "gmail_sync_job_id",
    "ingest_job_id",
    "sweep_job_id",
    "SWEEP_JOB_ID_PREFIX",
    "knowledge_progress_key",
    "erase_customer_job_id",
    "export_customer_job_id",
]


def inbound_job_id(row_id: uuid.UUID | str) -> str:
    """Job id of ``process_inbound`` for one stored inbound row (1:1 with the provider message id)."""
    return f"inbound:{row_id}"


def inbound_sweep_job_id(row_id: uuid.UUID | str, attempt: int) -> str:
    """Job id the sweeper uses to re-enqueue a row after ``attempt`` processing attempts."""
    return f"inbound:{row_id}:sweep:{attempt}"


def inbound_resume_job_id(row_id: uuid.UUID | str) -> str:
    """Job id of a row queued again after waiting for the model (unique: every resume runs)."""
    return f"inbound:{row_id}:resume:{uuid.uuid4().hex[:12]}"


def inbound_handback_job_id(row_id: uuid.UUID | str) -> str:
    """Job id of a row queued again when its conversation is handed back to the AI (unique: every
    hand-back runs)."""
    return f"inbound:{row_id}:handback:{uuid.uuid4().hex[:12]}"


def inbound_retry_job_id(row_id: uuid.UUID | str) -> str:
    """Job id of a retry an operator asked for (unique: every request runs)."""
    return f"inbound:{row_id}:retry:{uuid.uuid4().hex[:12]}"


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


def channel_throttle_count_key(channel: str, account_id: str) -> str:
    """Throughput limits one sending account hit in a row (expires some time after the last): the
    next hold grows with it."""
    return f"throttle:{channel}:{account_id}:count"


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


def deliver_request_job_id(source: str) -> str:
    """Job id of a ``deliver_outbox`` run someone asked for now (``source``: ``console``, ``retry``...):
    unique, so every request runs."""
    return f"deliver:{source}:{uuid.uuid4().hex}"


def copy_media_job_id(row_id: uuid.UUID | str) -> str:
    """Job id of ``copy_inbound_media`` for one stored inbound row."""
    return f"media-copy:{row_id}"


def handoff_notice_job_id(conversation_id: uuid.UUID | str, agent_id: uuid.UUID | str, trace_id: str) -> str:
    """Job id of ``handoff_notice``: one per conversation, agent and escalating message (``trace_id``), so
    a re-run of the same message's escalation writes no second notice."""
    return f"handoff-notice:{conversation_id}:{agent_id}:{trace_id}"


def lead_check_job_id(inbound_message_id: uuid.UUID | str) -> str:
    """Job id of ``check_lead_intent`` after the turn of one inbound message (one check per turn)."""
    return f"lead-check:{inbound_message_id}"


def history_summary_job_id(turn_id: uuid.UUID | str) -> str:
    """Job id of ``summarize_history`` after one turn (one summary per turn that asked for it)."""
    return f"history-summary:{turn_id}"


def statuses_job_id(channel: str, digest: str) -> str:
    """Job id of ``apply_delivery_statuses`` for one webhook delivery (``digest`` of its statuses)."""
    return f"statuses:{channel}:{digest}"


def gmail_sync_job_id(account_id: uuid.UUID | str, key: str) -> str:
    """Job id of one mailbox sync; ``key`` (a Pub/Sub message id, a poll tick) makes it idempotent."""
    return f"gmail-sync:{account_id}:{key}"


def ingest_job_id(source_id: uuid.UUID | str, content_hash: str, updated_at: datetime) -> str:
    """Job id of one knowledge ingestion request: a double submit of the same request enqueues once, a
    re-index (a newer ``updated_at``) enqueues again."""
    return f"kb-ingest:{source_id}:{content_hash[:16]}:{int(updated_at.timestamp() * 1000)}"


SWEEP_JOB_ID_PREFIX = "cron:"


def sweep_job_id(name: str) -> str:
    """The one ARQ job id every run of the cron job ``name`` gets (:func:`switchboard.queue.running.sweep_cron`)."""
    return f"{SWEEP_JOB_ID_PREFIX}{name}"


def erase_customer_job_id(customer_id: uuid.UUID | str) -> str:
    """Job id of one customer's erase (one queued or running at a time; a finished one may run again)."""
    return f"privacy-erase:{customer_id}"


def export_customer_job_id(export_id: str) -> str:
    """Job id of one requested export."""
    return f"privacy-export:{export_id}"
