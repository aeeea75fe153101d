"""The two ARQ queues, and which job runs on which (docs/architecture.md#services-and-queues).

Chat work and background work never share a worker:

* a customer waits on every **chat** job (a message to answer, a delivery status, an outbox part
  to send), so they must not queue behind an hour of ingestion;
* ARQ keeps a killed worker's job "in progress" for the *largest* timeout of any function registered
  on that worker, plus 10 s (arq issue #402): a 900 s ingestion job next to ``process_inbound`` made a
  killed chat job wait 15 minutes before it could run again. On its own worker, the chat queue's
  largest timeout is ``INBOUND_JOB_TIMEOUT_S``.

The chat queue keeps ARQ's default name, so a job enqueued without ``_queue_name`` (the channel
ingest's ``process_inbound`` and ``apply_delivery_statuses``, every pool opened by
:func:`~switchboard.runtime.resources.open_resources`) lands on it; background jobs are enqueued with
``_queue_name=Queue.background``.
"""

from __future__ import annotations

from enum import StrEnum

from arq.constants import default_queue_name, health_check_key_suffix

__all__ = ["Queue", "health_check_key"]


class Queue(StrEnum):
    """An ARQ queue: the Redis sorted set its jobs wait in."""

    chat = default_queue_name
    """Customer messages (``process_inbound``), delivery statuses, outbox delivery: someone is waiting."""
    background = f"{default_queue_name}:background"
    """Knowledge ingestion, memory summaries, the inbound sweeper, Gmail mailbox syncs and polls, event
    webhook deliveries (the tenant's own systems, never a customer)."""


def health_check_key(queue: Queue) -> str:
    """The Redis key a queue's worker refreshes with its heartbeat (ARQ's own naming)."""
    return queue.value + health_check_key_suffix
