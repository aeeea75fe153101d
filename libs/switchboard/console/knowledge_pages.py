"""Console: the knowledge base (``/t/{slug}/knowledge``): upload several files, watch each ingest,
manage documents, try a question.

Every action is the admin API's (``/v1/admin/tenants/{slug}/knowledge/...``, mounted in the console
service too): the page's buttons call it with the session and its CSRF header (htmx). The upload form
posts here (several files at once, and it works without JavaScript); each file then shows a progress
bar fed by its ingestion job (:func:`switchboard.knowledge.jobs.read_progress`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from fastapi.responses import HTMLResponse, Response

from switchboard.api.access import ADMIN_ROLES
from switchboard.api.deps import ResourcesDep, SessionDep, SettingsDep
from switchboard.body_limit import allow_body
from switchboard.console.app import register_nav, render
from switchboard.console.deps import CurrentUserDep, PageContext, page_access
from switchboard.db.models import KnowledgeSource
from switchboard.i18n import N_
from switchboard.knowledge.embeddings import EmbeddingFailed, resolve_embedding_config
from switchboard.knowledge.ingest import list_sources, register_upload
from switchboard.knowledge.jobs import enqueue_ingest, read_progress
from switchboard.knowledge.parsers import DocumentRejected
from switchboard.knowledge.retrieval import SEARCH_MODES, search_chunks
from switchboard.knowledge.upload_form import MAX_FORM_FILES, read_files, upload_body_bytes
from switchboard.observability import get_logger

__all__ = ["knowledge_pages_router", "ingest_percent"]

log = get_logger(__name__)
knowledge_pages_router = APIRouter(include_in_schema=False)
AdminPage = Annotated[PageContext, Depends(page_access(ADMIN_ROLES))]
register_nav("knowledge", N_("Knowledge"), "/knowledge", ADMIN_ROLES)
_WORDS = (
    N_("pending"),
    N_("processing"),
    N_("ready"),
    N_("failed"),
    N_("created"),
    N_("replaced"),
    N_("unchanged"),
)
"""Document states and upload outcomes the templates translate."""

_BUSY = ("pending", "processing")


def ingest_percent(status: str, progress: dict[str, Any] | None) -> int:
    """0-100 for a document's bar: parse ≈ 5 %, embedding batches 10-90 %, storing 95 %, done 100 %."""
    if status in ("ready", "failed"):
        return 100
    if status == "pending" or not progress:
        return 0
    stage, done, total = progress.get("stage"), progress.get("done", 0), max(1, progress.get("total", 1))
    if stage == "parse":
        return 5
    if stage == "embed":
        return 10 + int(80 * min(done, total) / total)
    return 95


async def _rows(session: Any, resources: Any, page: PageContext) -> tuple[list[dict[str, Any]], bool]:
    sources: list[KnowledgeSource] = await list_sources(session, tenant_id=page.tenant.id)
    rows = []
    for source in sources:
        progress = await read_progress(resources.redis, source.id) if source.status in _BUSY else None
        rows.append(
            {"source": source, "percent": ingest_percent(source.status, progress), "progress": progress}
        )
    return rows, any(r["source"].status in _BUSY for r in rows)


@knowledge_pages_router.get("/t/{slug}/knowledge", response_class=HTMLResponse)
async def knowledge_page(
    request: Request, page: AdminPage, session: SessionDep, resources: ResourcesDep, settings: SettingsDep
) -> Response:
    rows, busy = await _rows(session, resources, page)
    return render(
        request,
        "knowledge.html",
        tenant=page.tenant,
        rows=rows,
        busy=busy,
        uploads=[],
        active="knowledge",
        max_upload_mb=_megabytes(settings.kb_max_upload_bytes),
    )


def _megabytes(size_bytes: int) -> str:
    """``20`` for 20 MiB, ``0.5`` for 512 KiB: the upload limit as the page states it."""
    return f"{size_bytes / (1024 * 1024):.3g}"


@knowledge_pages_router.get("/t/{slug}/knowledge/rows", response_class=HTMLResponse)
async def knowledge_rows(
    request: Request, page: AdminPage, session: SessionDep, resources: ResourcesDep
) -> Response:
    """The document table alone (htmx polls it every 2 s while a document is being ingested)."""
    rows, busy = await _rows(session, resources, page)
    return render(request, "_kb_rows.html", tenant=page.tenant, rows=rows, busy=busy)


async def _upload_allowance(request: Request, info: CurrentUserDep, settings: SettingsDep) -> None:
    """A signed-in user's upload form may carry up to the upload limit; without a session the request
    is refused (login) before a byte of its body is read. Role, tenant and CSRF are checked next, by
    the page's own dependency, before the form is read."""
    allow_body(request, upload_body_bytes(settings))


@knowledge_pages_router.post(
    "/t/{slug}/knowledge/upload",
    response_class=HTMLResponse,
    dependencies=[Depends(_upload_allowance)],
)
async def knowledge_upload(
    request: Request,
    page: AdminPage,
    session: SessionDep,
    settings: SettingsDep,
    resources: ResourcesDep,
) -> Response:
    """Store each file and queue its ingestion (the same steps as ``POST .../knowledge/documents``); a
    refused file is reported on its own line and the others go on. The form as a whole carries at
    most ``KB_MAX_UPLOAD_BYTES`` of files (413 past it, counted while it arrives)."""
    tenant_id = page.tenant.id
    limit = settings.kb_max_upload_bytes
    uploads: list[dict[str, Any]] = []
    try:
        files = await read_files(request, "files", max_files=MAX_FORM_FILES)
    except DocumentRejected as exc:
        log.warning("knowledge_upload_rejected", tenant_id=str(tenant_id), reason=exc.reason, error=str(exc))
        raise HTTPException(status.HTTP_413_CONTENT_TOO_LARGE, str(exc)) from None
    for upload in files:
        name = upload.filename or "upload"
        data = await upload.read(limit + 1)
        try:
            if len(data) > limit:
                raise DocumentRejected(name, "too_large", f"over the upload limit of {limit} bytes")
            outcome = await register_upload(session, settings, tenant_id=tenant_id, filename=name, data=data)
            await session.commit()
        except DocumentRejected as exc:
            await session.rollback()
            log.warning(
                "knowledge_upload_rejected", tenant_id=str(tenant_id), reason=exc.reason, error=str(exc)
            )
            uploads.append({"filename": name, "ok": False, "message": exc.plain_words})
            continue
        if outcome.needs_ingest and resources.redis is not None:
            await enqueue_ingest(resources.redis, outcome.source)
        uploads.append({"filename": name, "ok": True, "message": outcome.action})
    rows, busy = await _rows(session, resources, page)
    template = "_kb_rows.html" if request.headers.get("HX-Request") else "knowledge.html"
    return render(
        request,
        template,
        tenant=page.tenant,
        rows=rows,
        busy=busy,
        uploads=uploads,
        active="knowledge",
        max_upload_mb=_megabytes(limit),
    )


@knowledge_pages_router.get("/t/{slug}/knowledge/try", response_class=HTMLResponse)
async def knowledge_try(
    request: Request,
    page: AdminPage,
    session: SessionDep,
    settings: SettingsDep,
    q: Annotated[str, Query(min_length=1, max_length=2000)],
    mode: str = "hybrid",
) -> Response:
    """Which chunks the agent would be given for ``q``, with their scores (``GET .../knowledge/search``)."""
    chosen = mode if mode in SEARCH_MODES else "hybrid"
    error = None
    hits: list[Any] = []
    try:
        hits = await search_chunks(
            session,
            tenant_id=page.tenant.id,
            query=q,
            mode=chosen,
            limit=5,  # type: ignore[arg-type]
            settings=settings,
            embedding=resolve_embedding_config(settings, page.tenant),
        )
    except EmbeddingFailed as exc:
        error = str(exc)
    return render(request, "_kb_hits.html", tenant=page.tenant, hits=hits, q=q, error=error)
