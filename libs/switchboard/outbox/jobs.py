"""ARQ job of the outbox: send everything due (the cron safety net behind the jobs that send at once)."""

from __future__ import annotations

import uuid
from dataclasses import asdict
from typing import Any

from switchboard.observability import get_logger
from switchboard.outbox.delivery import DeliveryDeps, DeliveryScope, deliver
from switchboard.queue.jobs import enqueue_deliver_outbox
from switchboard.queue.keys import deliver_request_job_id

__all__ = ["DELIVER_JOB_BUDGET_S", "deliver_outbox", "deliver_soon", "delivery_deps_from"]

log = get_logger(__name__)

DELIVER_JOB_BUDGET_S = 20.0
"""``deliver_outbox`` claims no new row after this long, so the worker's 30 s side-job timeout never
cancels a provider call halfway (such a row would wait for reconciliation)."""


def delivery_deps_from(ctx: dict[str, Any]) -> DeliveryDeps:
    """The :class:`DeliveryDeps` of a worker process, built once from ``ctx["deps"]`` (the worker's
    shared resources) and kept in ``ctx["delivery_deps"]``.

    Channels are the worker's own (:attr:`~switchboard.inbound.context.WorkerDeps.channels`).
    """
    cached = ctx.get("delivery_deps")
    if cached is not None:
        return cached
    worker = ctx["deps"]
    channels = worker.channels
    deps = DeliveryDeps(
        sessions=worker.resources.sessions, redis=worker.redis, channels=channels, settings=worker.settings
    )
    ctx["delivery_deps"] = deps
    return deps


async def deliver_outbox(
    ctx: dict[str, Any],
    inbound_message_id: str | None = None,
    conversation_id: str | None = None,
    plus_conversation_id: str | None = None,
) -> dict[str, Any]:
    """Send due outbox rows: one inbound message's or one conversation's, or both (``plus_conversation_id``,
    :class:`~switchboard.outbox.delivery.DeliveryScope`): a deferred retry the inbound job scheduled;
    or — as the cron job, without arguments — every tenant's (rows another worker holds are skipped).

    Returns:
        The :class:`~switchboard.outbox.delivery.DeliveryReport` as a dict.
    """
    scope = DeliveryScope(
        inbound_message_id=uuid.UUID(inbound_message_id) if inbound_message_id else None,
        conversation_id=uuid.UUID(conversation_id) if conversation_id else None,
        plus_conversation_id=uuid.UUID(plus_conversation_id) if plus_conversation_id else None,
    )
    report = await deliver(delivery_deps_from(ctx), scope, time_budget_s=DELIVER_JOB_BUDGET_S)
    if report.sent or report.failed:
        log.info("outbox_delivered", sent=report.sent, failed=report.failed, pending=report.pending)
    return asdict(report)


async def deliver_soon(redis: Any, conversation_id: uuid.UUID, *, source: str) -> bool:
    """Ask the chat worker to send ``conversation_id``'s due outbox rows now (a ``deliver_outbox`` job
    with a unique id); the cron sweep (``deliver_outbox_sweep``) sends them anyway, so a failed enqueue
    is logged, not raised.

    Args:
        redis: the ARQ pool (``None``: nothing is enqueued).
        source: who asks (``console``, ``retry``), part of the job id and the log line.

    Returns:
        Whether a job was enqueued.
    """
    if redis is None:
        return False
    try:
        await enqueue_deliver_outbox(
            redis, job_id=deliver_request_job_id(source), conversation_id=conversation_id
        )
    except Exception as exc:  # noqa: BLE001 (the rows are durable; the delivery sweep sends them)
        log.warning(
            "delivery_enqueue_failed",
            conversation_id=str(conversation_id),
            source=source,
            error=type(exc).__name__,
        )
        return False
    return True
