"""The ingestion ARQ job and its enqueue helper (status is ``knowledge_sources.status``), and the cron job
that keeps the tenants' HNSW indexes (:mod:`switchboard.knowledge.vector_index`)."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from arq.connections import ArqRedis

from switchboard.db.models import KnowledgeSource
from switchboard.knowledge.ingest import DocumentNotFound, ingest_source
from switchboard.knowledge.vector_index import sync_vector_indexes
from switchboard.observability import get_logger
from switchboard.queue import jobs
from switchboard.queue.keys import ingest_job_id, knowledge_progress_key
from switchboard.runtime.resources import Resources

__all__ = [
    "enqueue_ingest",
    "ingest_knowledge_source",
    "read_progress",
    "vector_index_sweep",
]

log = get_logger(__name__)


async def ingest_knowledge_source(
    ctx: dict[str, Any], tenant_id: str, source_id: str, content_hash: str | None = None
) -> dict[str, Any]:
    """ARQ job: ingest one uploaded document (see :func:`switchboard.knowledge.ingest.ingest_source`).

    Args:
        ctx: ARQ context; ``ctx["resources"]`` holds the worker's sessions and settings.
        tenant_id: owner of the document (UUID string).
        source_id: the ``knowledge_sources`` id (UUID string).
        content_hash: the upload this job is for; an older job for a replaced upload does nothing.

    Returns:
        ``{"status": "ready"|"failed"|"skipped", "chunks": int, "error": str | None}``.
    """
    resources: Resources = ctx["resources"]
    progress = _ProgressWriter(ctx.get("redis"), source_id)
    try:
        report = await ingest_source(
            resources.sessions,
            resources.settings,
            tenant_id=uuid.UUID(tenant_id),
            source_id=uuid.UUID(source_id),
            content_hash=content_hash,
            on_progress=progress,
            gateway=ctx.get("model_gateway"),  # a provider model extracts the graph (else deterministic)
        )
    except DocumentNotFound:
        log.info(
            "knowledge_ingest_source_gone", tenant_id=tenant_id, source_id=source_id, job_id=ctx.get("job_id")
        )
        return {"status": "skipped", "chunks": 0, "error": "document deleted"}
    finally:
        await progress.flush()
    return {"status": report.status, "chunks": report.chunk_count, "error": report.error}


async def vector_index_sweep(ctx: dict[str, Any]) -> dict[str, int]:
    """Cron job: :func:`~switchboard.knowledge.vector_index.sync_vector_indexes` for every tenant.

    Returns:
        ``{"created": n, "dropped": m, "failed": k}`` (all 0 when another sync held the lock).
    """
    resources: Resources = ctx["resources"]
    changes = await sync_vector_indexes(resources.engine, resources.settings) or []
    return {
        action: sum(change.action == action for change in changes)
        for action in ("created", "dropped", "failed")
    }


PROGRESS_TTL_S = 3600
"""How long the last progress of an ingestion stays readable (the row's status outlives it)."""


class _ProgressWriter:
    """``on_progress`` of the job: the latest ``(stage, done, total)`` into Redis
    (:func:`~switchboard.queue.keys.knowledge_progress_key`) for the console's progress bars.

    The ingest calls it synchronously; each write is a task awaited at the latest by :meth:`flush`.
    """

    def __init__(self, redis: Any, source_id: str) -> None:
        self.redis, self.key = redis, knowledge_progress_key(source_id)
        self._tasks: list[asyncio.Task[Any]] = []

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.redis is None:
            return
        value = json.dumps({"stage": stage, "done": done, "total": total})
        self._tasks.append(
            asyncio.get_running_loop().create_task(self.redis.set(self.key, value, ex=PROGRESS_TTL_S))
        )

    async def flush(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            try:
                await task
            except Exception as exc:  # progress is a nicety: the ingest itself already finished
                log.warning("knowledge_progress_not_written", key=self.key, error=type(exc).__name__)


async def read_progress(redis: Any, source_id: uuid.UUID | str) -> dict[str, Any] | None:
    """The last progress an ingestion of ``source_id`` wrote, or ``None``."""
    raw = await redis.get(knowledge_progress_key(source_id)) if redis is not None else None
    return json.loads(raw) if raw else None


async def enqueue_ingest(redis: ArqRedis, source: KnowledgeSource) -> str:
    """Queue ingestion of ``source`` on the background queue (after its row is committed); returns the
    ARQ job id.

    The job id is derived from the source, its content hash and its ``updated_at``, so a double
    submit of one request enqueues once while a re-index (a newer ``updated_at``) enqueues again.
    """
    job_id = ingest_job_id(source.id, source.content_hash, source.updated_at)
    await jobs.enqueue_ingest(redis, source.tenant_id, source.id, source.content_hash, job_id=job_id)
    log.info(
        "knowledge_ingest_enqueued", tenant_id=str(source.tenant_id), source_id=str(source.id), job_id=job_id
    )
    return job_id
