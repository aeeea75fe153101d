"""The ingestion ARQ job and its enqueue helper (status is ``knowledge_sources.status``)."""

from __future__ import annotations

import uuid
from typing import Any

from arq.connections import ArqRedis

from switchboard.db.models import KnowledgeSource
from switchboard.knowledge.ingest import DocumentNotFound, ingest_job_id, ingest_source
from switchboard.observability import get_logger, tracing
from switchboard.queue.queues import Queue
from switchboard.runtime.resources import Resources

__all__ = ["INGEST_JOB_NAME", "INGEST_JOB_TIMEOUT_S", "enqueue_ingest", "ingest_knowledge_source"]

log = get_logger(__name__)

INGEST_JOB_NAME = "ingest_knowledge_source"
INGEST_JOB_TIMEOUT_S = 900
"""Longest one ingestion may run (parsing a large PDF plus embedding a few thousand chunks)."""


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
    try:
        report = await ingest_source(
            resources.sessions,
            resources.settings,
            tenant_id=uuid.UUID(tenant_id),
            source_id=uuid.UUID(source_id),
            content_hash=content_hash,
        )
    except DocumentNotFound:
        log.info(
            "knowledge_ingest_source_gone", tenant_id=tenant_id, source_id=source_id, job_id=ctx.get("job_id")
        )
        return {"status": "skipped", "chunks": 0, "error": "document deleted"}
    return {"status": report.status, "chunks": report.chunk_count, "error": report.error}


async def enqueue_ingest(redis: ArqRedis, source: KnowledgeSource) -> str:
    """Queue ingestion of ``source`` on the background queue (after its row is committed); returns the
    ARQ job id.

    The job id is derived from the source, its content hash and its ``updated_at``, so a double
    submit of one request enqueues once while a re-index (a newer ``updated_at``) enqueues again.
    """
    job_id = ingest_job_id(source)
    await redis.enqueue_job(
        INGEST_JOB_NAME,
        str(source.tenant_id),
        str(source.id),
        source.content_hash,
        _job_id=job_id,
        _queue_name=Queue.background.value,
        **tracing.job_trace_kwargs(),
    )
    log.info(
        "knowledge_ingest_enqueued", tenant_id=str(source.tenant_id), source_id=str(source.id), job_id=job_id
    )
    return job_id
