"""Every ARQ job, declared once: name, queue, timeout, tries and retry back-off, and how to enqueue it.

The workers (:mod:`switchboard.worker`) register each job with the options of its :class:`Job`; code that
queues a job calls one of the typed functions here (or builds its :class:`~switchboard.queue.enqueue.JobSpec`
with one), so a job's name is written nowhere else and its ids come from :mod:`switchboard.queue.keys`.

Retries wait with jitter and a cap (:class:`Backoff`): after an outage every job that failed at once would
otherwise come back at once, and fail together again ("Exponential Backoff And Jitter", AWS Architecture
Blog, 2015: the "equal jitter" variant keeps half of each wait, so no retry comes straight back).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from arq.connections import ArqRedis
from arq.worker import Retry

from switchboard.observability import tracing
from switchboard.queue import keys
from switchboard.queue.enqueue import JobSpec, enqueue_jobs
from switchboard.queue.queues import Queue

__all__ = [
    "ALL_JOBS",
    "Backoff",
    "Job",
    "JOB_QUEUES",
    "job_named",
    "enqueue_deliver_outbox",
    "enqueue_gmail_sync",
    "enqueue_ingest",
    "enqueue_history_summary",
    "enqueue_handoff_notice",
    "enqueue_lead_check",
    "enqueue_process_inbound",
    "export_pending",
    "process_inbound_spec",
    "copy_media_spec",
    "delivery_statuses_spec",
]


@dataclass(frozen=True)
class Backoff:
    """How long a job waits before its next try: ``base_s`` doubled per try, at most ``cap_s``, jittered.

    Wait before try ``n + 1`` (``n`` = tries so far, from 1): ``d = min(cap_s, base_s * 2 ** (n - 1))``,
    then half of ``d`` plus a random share of the other half, so the wait lies in ``[d / 2, d]`` seconds.
    """

    base_s: float
    cap_s: float

    def delay_s(self, attempt: int, *, rand: Callable[[], float] = random.random) -> float:
        """The wait in seconds after ``attempt`` tries (1 for the first); ``rand`` returns a float in [0, 1)."""
        step = min(self.cap_s, self.base_s * 2.0 ** max(0, min(attempt, 64) - 1))
        return step / 2 + step / 2 * rand()

    def retry(self, attempt: int) -> Retry:
        """ARQ's ``Retry`` with :meth:`delay_s` (raise it from a job)."""
        return Retry(defer=self.delay_s(attempt))


@dataclass(frozen=True)
class Job:
    """One ARQ job (or cron job): what the worker registers and the queue it runs on."""

    name: str
    queue: Queue
    timeout_s: float | None = None
    """Longest run, seconds; ``None``: :attr:`timeout_setting` alone decides."""
    timeout_setting: str | None = None
    """A :class:`~switchboard.settings.Settings` field in seconds that bounds the timeout too (the chat
    worker's longest timeout must not pass ``inbound_job_timeout_s``: ARQ holds a killed worker's job for
    the largest timeout of its worker)."""
    max_tries: int = 1
    backoff: Backoff = Backoff(1.0, 30.0)
    """Wait before a retry the job asks for (and after the database was unavailable, capped lower)."""
    keep_result_s: float | None = None
    """How long ARQ keeps the result (``None``: the worker's default; 0: none, so the id can be reused)."""
    cron: bool = False
    ahead_s: float = 0.0
    """Enqueued ahead of what was queued in the last ``ahead_s`` seconds (:attr:`JobSpec.ahead_s`)."""

    def timeout_for(self, settings: Any) -> float:
        """The job's timeout in seconds with ``settings`` (a :class:`~switchboard.settings.Settings`)."""
        bounds = [self.timeout_s] if self.timeout_s is not None else []
        if self.timeout_setting:
            bounds.append(float(getattr(settings, self.timeout_setting)))
        if not bounds:
            raise ValueError(f"job {self.name} has no timeout")
        return min(bounds)

    def arq_options(self, settings: Any) -> dict[str, Any]:
        """Keyword arguments of ``arq.worker.func`` for this job."""
        options: dict[str, Any] = {
            "name": self.name,
            "timeout": self.timeout_for(settings),
            "max_tries": self.max_tries,
        }
        if self.keep_result_s is not None:
            options["keep_result"] = self.keep_result_s
        return options


SIDE_JOB_TIMEOUT_S = 30.0
"""Timeout of the short jobs (statuses, handoff delivery, the sweeps), seconds."""
MEMORY_JOB_TIMEOUT_S = 300.0
"""Timeout of a memory job, seconds: ``memory_sweep`` summarizes every newly closed conversation, one
model call each (45 s per request at most)."""
INGEST_JOB_TIMEOUT_S = 900.0
"""Timeout of one knowledge ingestion (a large upload: parse, embed, graph), seconds."""


def _chat_side(name: str, **options: Any) -> Job:
    """A short chat-queue job: :data:`SIDE_JOB_TIMEOUT_S`, at most ``INBOUND_JOB_TIMEOUT_S``."""
    return Job(
        name, Queue.chat, timeout_s=SIDE_JOB_TIMEOUT_S, timeout_setting="inbound_job_timeout_s", **options
    )


PING = Job("ping", Queue.chat, timeout_s=5)
PROCESS_INBOUND = Job(
    "process_inbound",
    Queue.chat,
    timeout_setting="inbound_job_timeout_s",
    max_tries=100,
    backoff=Backoff(1.0, 30.0),
)
"""ARQ tries are high: lock and tenant-limit deferrals count as tries; real failures are bounded by
``INBOUND_MAX_TRIES`` (dead letter)."""
APPLY_DELIVERY_STATUSES = _chat_side("apply_delivery_statuses", max_tries=10)
"""Ten tries: the statuses live only in the job, so it outlasts a database outage of about half a minute."""
APPLY_WHATSAPP_STATUSES = _chat_side("apply_whatsapp_statuses", max_tries=10)
DELIVER_OUTBOX = _chat_side("deliver_outbox", max_tries=3)
COPY_INBOUND_MEDIA = _chat_side(
    "copy_inbound_media", max_tries=4, backoff=Backoff(2.0, 20.0), ahead_s=3_600.0
)
"""Ahead of an hour of queued chat turns: a story's link can die within minutes, a backlog must not
starve its copy (the copy itself takes a second)."""
DELIVER_OUTBOX_SWEEP = _chat_side("deliver_outbox_sweep", cron=True)
APPROVALS_SWEEP = _chat_side("approvals_sweep", cron=True)
HANDOFF_OPENINGS = _chat_side("handoff_openings", cron=True)
"""At the opening of a tenant's business hours, conversations that waited for it go to the online agents."""

INGEST_KNOWLEDGE_SOURCE = Job(
    "ingest_knowledge_source", Queue.background, timeout_s=INGEST_JOB_TIMEOUT_S, max_tries=2
)
SUMMARIZE_MEMORY = Job("summarize_memory", Queue.background, timeout_s=MEMORY_JOB_TIMEOUT_S, max_tries=3)
CHECK_LEAD_INTENT = Job("check_lead_intent", Queue.background, timeout_s=120.0, max_tries=1)
"""The model's lead-intent check after an answered turn: off the turn, so it never delays the reply. One
try: a failed check is logged and the next turn checks the conversation again. 120 s: one model call."""
SUMMARIZE_HISTORY = Job("summarize_history", Queue.background, timeout_s=120.0, max_tries=1)
"""A long conversation's history folded into a summary after the turn that asked for it: off the turn, so
it never delays the reply. One try: the next long turn asks again. 120 s: one model call."""
HANDOFF_NOTICE = Job("handoff_notice", Queue.background, timeout_s=120.0, max_tries=3)
"""The agent's notice of a conversation just given to them, with the model's summary
(:func:`switchboard.handoff.service.handoff_notice`): off the customer's turn, so the customer's reply
never waits for the summary. 120 s: one model call, bounded below that (the summary falls back to the
customer's messages quoted)."""
SYNC_GMAIL_MAILBOX = Job(
    "sync_gmail_mailbox",
    Queue.background,
    timeout_s=110.0,
    max_tries=30,
    keep_result_s=0,
    backoff=Backoff(2.0, 20.0),
)
"""110 s: below the sync lock's 120 s (``channels.gmail.jobs.SYNC_LOCK_S``)."""
SWEEP_INBOUND = Job("sweep_inbound", Queue.background, timeout_s=SIDE_JOB_TIMEOUT_S, cron=True)
MEMORY_SWEEP = Job("memory_sweep", Queue.background, timeout_s=MEMORY_JOB_TIMEOUT_S, cron=True)
POLL_GMAIL_MAILBOXES = Job("poll_gmail_mailboxes", Queue.background, timeout_s=SIDE_JOB_TIMEOUT_S, cron=True)
DELIVER_EVENTS = Job("deliver_events", Queue.background, timeout_s=SIDE_JOB_TIMEOUT_S, cron=True)
PRUNE_EVENTS = Job("prune_events", Queue.background, timeout_s=300.0, cron=True)
"""300 s: 20 batches of 500 events, one transaction each."""
RESUME_WAITING_TURNS = Job("resume_waiting_turns", Queue.background, timeout_s=120.0, cron=True)
"""Probes the tenants whose questions wait for the model and queues those questions again (120 s: probes
of 10 s, eight tenants at once)."""
KNOWLEDGE_VECTOR_INDEXES = Job(
    "knowledge_vector_indexes", Queue.background, timeout_s=INGEST_JOB_TIMEOUT_S, cron=True
)
ERASE_CUSTOMER = Job(
    "erase_customer",
    Queue.background,
    timeout_s=INGEST_JOB_TIMEOUT_S,
    max_tries=5,
    keep_result_s=0,
    backoff=Backoff(5.0, 60.0),
)
"""Erase one customer everywhere (:mod:`switchboard.privacy.erase`): resumable, so a worker that died
halfway leaves a job ARQ runs again and the run completes."""
APPLY_RETENTION = Job("apply_retention", Queue.background, timeout_s=600.0, cron=True)
"""Daily: delete what is older than each tenant's retention settings, in small batches
(:mod:`switchboard.privacy.retention`)."""
EXPORT_CUSTOMER = Job("export_customer", Queue.background, timeout_s=INGEST_JOB_TIMEOUT_S, max_tries=3)
"""Write one customer's export ZIP (:mod:`switchboard.privacy.export`)."""

ALL_JOBS: tuple[Job, ...] = (
    PING,
    PROCESS_INBOUND,
    APPLY_DELIVERY_STATUSES,
    APPLY_WHATSAPP_STATUSES,
    DELIVER_OUTBOX,
    COPY_INBOUND_MEDIA,
    DELIVER_OUTBOX_SWEEP,
    APPROVALS_SWEEP,
    INGEST_KNOWLEDGE_SOURCE,
    SUMMARIZE_MEMORY,
    SYNC_GMAIL_MAILBOX,
    SWEEP_INBOUND,
    MEMORY_SWEEP,
    POLL_GMAIL_MAILBOXES,
    DELIVER_EVENTS,
    PRUNE_EVENTS,
    KNOWLEDGE_VECTOR_INDEXES,
    CHECK_LEAD_INTENT,
    SUMMARIZE_HISTORY,
    HANDOFF_NOTICE,
    RESUME_WAITING_TURNS,
    ERASE_CUSTOMER,
    EXPORT_CUSTOMER,
    APPLY_RETENTION,
    HANDOFF_OPENINGS,
)
"""Every job and cron job of both workers."""

JOB_QUEUES: Mapping[str, Queue] = MappingProxyType({job.name: job.queue for job in ALL_JOBS})
"""Every job by name, and the queue (worker) it belongs to."""


def job_named(name: str) -> Job:
    """The :class:`Job` called ``name``.

    Raises:
        KeyError: no such job.
    """
    for job in ALL_JOBS:
        if job.name == name:
            return job
    raise KeyError(name)


def process_inbound_spec(
    row_id: uuid.UUID | str,
    *,
    defer_s: float = 0.0,
    job_id: str | None = None,
    trace: dict[str, str] | None = None,
) -> JobSpec:
    """``process_inbound(row_id)`` with its idempotent job id (:func:`~switchboard.queue.keys.inbound_job_id`
    unless ``job_id`` is given: the sweeper's)."""
    return JobSpec(
        PROCESS_INBOUND.name,
        job_id or keys.inbound_job_id(row_id),
        (str(row_id),),
        dict(trace or {}),
        defer_s,
    )


def copy_media_spec(row_id: uuid.UUID | str, *, trace: dict[str, str] | None = None) -> JobSpec:
    """``copy_inbound_media(row_id)``: copy one inbound message's media to our store."""
    return JobSpec(
        COPY_INBOUND_MEDIA.name,
        keys.copy_media_job_id(row_id),
        (str(row_id),),
        dict(trace or {}),
        ahead_s=COPY_INBOUND_MEDIA.ahead_s,
    )


def delivery_statuses_spec(
    channel: str, statuses: list[dict[str, Any]], digest: str, *, trace: dict[str, str] | None = None
) -> JobSpec:
    """``apply_delivery_statuses(channel, statuses)``; ``digest`` identifies the webhook delivery."""
    return JobSpec(
        APPLY_DELIVERY_STATUSES.name,
        keys.statuses_job_id(channel, digest),
        (channel, statuses),
        dict(trace or {}),
    )


def _job_kwargs(fields: Mapping[str, str]) -> dict[str, Any]:
    """``fields`` as the job's keyword arguments (typed loosely, as ``enqueue_job`` takes them)."""
    return dict(fields)


def _trace_kwargs() -> dict[str, Any]:
    """The current trace context as job keyword arguments (:func:`tracing.job_trace_kwargs`)."""
    return _job_kwargs(tracing.job_trace_kwargs())


async def enqueue_process_inbound(
    redis: ArqRedis, row_id: uuid.UUID | str, *, defer_s: float = 0.0, job_id: str | None = None
) -> bool:
    """Enqueue ``process_inbound(row_id)`` (with the current ``traceparent``). Returns ``False`` if its id
    exists already."""
    spec = process_inbound_spec(row_id, defer_s=defer_s, job_id=job_id, trace=tracing.job_trace_kwargs())
    [created] = await enqueue_jobs(redis, [spec])
    return created


async def enqueue_deliver_outbox(
    redis: ArqRedis,
    *,
    job_id: str,
    defer_s: float | None = None,
    inbound_message_id: uuid.UUID | None = None,
    conversation_id: uuid.UUID | None = None,
    plus_conversation_id: uuid.UUID | None = None,
) -> bool:
    """Enqueue ``deliver_outbox`` for one scope (a row, a conversation). Returns ``False`` if ``job_id``
    exists already."""
    scope = {
        "inbound_message_id": inbound_message_id,
        "conversation_id": conversation_id,
        "plus_conversation_id": plus_conversation_id,
    }
    job = await redis.enqueue_job(
        DELIVER_OUTBOX.name,
        _job_id=job_id,
        _defer_by=defer_s,
        **_job_kwargs({name: str(value) for name, value in scope.items() if value is not None}),
        **_trace_kwargs(),
    )
    return job is not None


async def enqueue_gmail_sync(redis: ArqRedis, account_id: uuid.UUID | str, reason: str, *, key: str) -> bool:
    """Enqueue a sync of one mailbox on the background queue; ``key`` makes it idempotent. Returns ``False``
    when that job exists already."""
    job = await redis.enqueue_job(
        SYNC_GMAIL_MAILBOX.name,
        str(account_id),
        reason,
        _job_id=keys.gmail_sync_job_id(account_id, key),
        _queue_name=SYNC_GMAIL_MAILBOX.queue.value,
        **_trace_kwargs(),
    )
    return job is not None


async def enqueue_ingest(
    redis: ArqRedis, tenant_id: uuid.UUID, source_id: uuid.UUID, content_hash: str, *, job_id: str
) -> None:
    """Enqueue ingestion of one knowledge source on the background queue under ``job_id``."""
    await redis.enqueue_job(
        INGEST_KNOWLEDGE_SOURCE.name,
        str(tenant_id),
        str(source_id),
        content_hash,
        _job_id=job_id,
        _queue_name=INGEST_KNOWLEDGE_SOURCE.queue.value,
        **_trace_kwargs(),
    )


async def enqueue_lead_check(
    redis: ArqRedis,
    *,
    tenant_id: uuid.UUID,
    conversation_id: uuid.UUID,
    customer_id: uuid.UUID,
    inbound_message_id: uuid.UUID,
    trace_id: str,
) -> bool:
    """Enqueue ``check_lead_intent`` on the background queue for the turn of ``inbound_message_id``.
    Returns ``False`` when that turn's check is queued already."""
    job = await redis.enqueue_job(
        CHECK_LEAD_INTENT.name,
        str(tenant_id),
        str(conversation_id),
        str(customer_id),
        trace_id,
        _job_id=keys.lead_check_job_id(inbound_message_id),
        _queue_name=CHECK_LEAD_INTENT.queue.value,
        **_trace_kwargs(),
    )
    return job is not None


async def enqueue_handoff_notice(
    redis: ArqRedis,
    *,
    tenant_id: uuid.UUID,
    conversation_id: uuid.UUID,
    agent_id: uuid.UUID,
    trace_id: str,
) -> bool:
    """Enqueue ``handoff_notice`` on the background queue: the notice telling ``agent_id`` that
    ``conversation_id`` is theirs. Returns ``False`` when that notice is queued already."""
    job = await redis.enqueue_job(
        HANDOFF_NOTICE.name,
        str(tenant_id),
        str(conversation_id),
        str(agent_id),
        trace_id,
        _job_id=keys.handoff_notice_job_id(conversation_id, agent_id, trace_id),
        _queue_name=HANDOFF_NOTICE.queue.value,
        **_trace_kwargs(),
    )
    return job is not None


async def enqueue_erase_customer(
    redis: ArqRedis, *, tenant_id: uuid.UUID, customer_id: uuid.UUID, actor: str
) -> bool:
    """Enqueue ``erase_customer`` on the background queue. Returns ``False`` when that customer's erase is
    queued or running already."""
    job = await redis.enqueue_job(
        ERASE_CUSTOMER.name,
        str(tenant_id),
        str(customer_id),
        actor,
        _job_id=keys.erase_customer_job_id(customer_id),
        _queue_name=ERASE_CUSTOMER.queue.value,
    )
    return job is not None


async def export_pending(redis: ArqRedis, export_id: str) -> bool:
    """Whether the export ``export_id`` is still queued or being written (its job waits or runs)."""
    from arq.jobs import Job as ArqJob
    from arq.jobs import JobStatus

    status = await ArqJob(
        keys.export_customer_job_id(export_id), redis, _queue_name=EXPORT_CUSTOMER.queue.value
    ).status()
    return status in (JobStatus.queued, JobStatus.deferred, JobStatus.in_progress)


async def enqueue_export_customer(
    redis: ArqRedis, *, tenant_id: uuid.UUID, customer_id: uuid.UUID, export_id: str, actor: str
) -> bool:
    """Enqueue ``export_customer`` on the background queue, writing the export ``export_id``."""
    job = await redis.enqueue_job(
        EXPORT_CUSTOMER.name,
        str(tenant_id),
        str(customer_id),
        export_id,
        actor,
        _job_id=keys.export_customer_job_id(export_id),
        _queue_name=EXPORT_CUSTOMER.queue.value,
    )
    return job is not None


async def enqueue_history_summary(
    redis: ArqRedis, *, tenant_id: uuid.UUID, conversation_id: uuid.UUID, turn_id: uuid.UUID, trace_id: str
) -> bool:
    """Enqueue ``summarize_history`` on the background queue for the turn ``turn_id`` that asked for it.
    Returns ``False`` when it is queued already."""
    job = await redis.enqueue_job(
        SUMMARIZE_HISTORY.name,
        str(tenant_id),
        str(conversation_id),
        str(turn_id),
        trace_id,
        _job_id=keys.history_summary_job_id(turn_id),
        _queue_name=SUMMARIZE_HISTORY.queue.value,
        **_trace_kwargs(),
    )
    return job is not None
