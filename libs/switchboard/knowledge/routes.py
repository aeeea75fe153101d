"""Admin API of the knowledge base: ``/v1/admin/tenants/{slug}/knowledge/...`` (admin bearer token).

Uploads are stored and queued (``202 Accepted``); the ARQ worker parses and embeds them and the
document's ``status`` (``pending`` → ``processing`` → ``ready`` | ``failed``) says where it is.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Depends, HTTPException, Query, Request, Response, status
from pydantic import BaseModel, Field
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.api.deps import ResourcesDep, SessionDep, SettingsDep, TenantDep
from switchboard.api.routers import tenant_admin_router
from switchboard.body_limit import body_allowance
from switchboard.db.models import KnowledgeSource, Tenant
from switchboard.egress import EgressPolicy
from switchboard.knowledge.embeddings import (
    EmbeddingFailed,
    check_model_usable,
    resolve_embedding_config,
    set_tenant_embedding,
    switch_embedding_model,
)
from switchboard.knowledge.graph.explore import explore_entities
from switchboard.knowledge.ingest import (
    DocumentNotFound,
    delete_source,
    find_source,
    list_sources,
    mark_for_reindex,
    register_upload,
    set_source_active,
)
from switchboard.knowledge.jobs import enqueue_ingest
from switchboard.knowledge.parsers import DocumentRejected
from switchboard.knowledge.retrieval import search_chunks
from switchboard.knowledge.upload_form import read_files, upload_body_bytes
from switchboard.observability import get_logger
from switchboard.runtime.resources import Resources

__all__ = [
    "knowledge_admin_router",
    "accept_upload",
    "rejection_status",
    "DocumentPublic",
    "HitPublic",
    "UploadResult",
    "UPLOAD_BODY",
]

log = get_logger(__name__)

knowledge_admin_router = tenant_admin_router("/knowledge", tags=["knowledge"])

_REJECTION_STATUS = {
    "too_large": status.HTTP_413_CONTENT_TOO_LARGE,
    "unsupported": status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
}


class DocumentPublic(BaseModel):
    """A knowledge document as the API shows it."""

    id: uuid.UUID
    filename: str
    content_type: str | None
    size_bytes: int
    status: str = Field(description="pending | processing | ready | failed")
    error: str | None = Field(description="Why ingestion failed (status failed).")
    is_active: bool
    embedding_model: str | None
    chunk_count: int
    details: dict[str, Any] = Field(description="Parser report: pages, sheets, rows, skipped parts and why.")
    updated_at: datetime

    @classmethod
    def of(cls, source: KnowledgeSource) -> DocumentPublic:
        return cls.model_validate(source, from_attributes=True)


class UploadResult(BaseModel):
    document: DocumentPublic
    action: Literal["created", "replaced", "unchanged"] = Field(
        description="created; replaced (same filename, new bytes); unchanged (these bytes are already stored)."
    )
    job_id: str | None = Field(description="ARQ job id of the ingestion, when one was queued.")


class HitPublic(BaseModel):
    chunk_id: int
    source_id: uuid.UUID
    document: str
    page: int | None
    sheet: str | None
    score: float
    similarity: float | None
    text: str
    attributes: dict[str, Any] = Field(
        default_factory=dict,
        description='A table row\'s place and key columns, e.g. {"row": 3, "keys": {"SKU": "AB-100"}}; {} for prose.',
    )


class GraphEntityPublic(BaseModel):
    name: str
    kind: str = Field(description="product | family | material | fluid | standard | range")


class GraphRelationPublic(BaseModel):
    subject: str
    relation: str = Field(
        description="belongs_to_family | compatible_with | incompatible_with | rated_for | equivalent_of | "
        "replaces | made_of"
    )
    object: str
    document: str = Field(description="The document the relation was read from.")


class GraphPassagePublic(BaseModel):
    text: str
    document: str
    page: int | None
    score: float = Field(description="Graph score scaled to 0..1 (the best passage is 1).")


class GraphPublic(BaseModel):
    entities: list[GraphEntityPublic] = Field(description="The named entities found (empty: none known).")
    relations: list[GraphRelationPublic]
    passages: list[GraphPassagePublic]


class ReindexRequest(BaseModel):
    embedding_model: str | None = Field(
        default=None,
        description="Switch the tenant to this embedding model first (needs a provider key); "
        "omit to re-embed with the current one.",
    )


class EmbeddingSettingsIn(BaseModel):
    model: str | None = Field(default=None, description="e.g. text-embedding-3-small (1536 dimensions).")
    api_key: str | None = Field(
        default=None,
        description="Provider key for this base URL, stored encrypted; omitted: any stored key is removed. "
        "The platform's key goes only to OpenAI's own endpoint, never to another api_base.",
    )
    api_base: str | None = Field(default=None, description="OpenAI-compatible base URL, e.g. http://host/v1.")


class EmbeddingSettingsOut(BaseModel):
    model: str = Field(description="The model in effect (the offline lexical model when no key is set).")
    api_base: str | None
    has_api_key: bool


async def _document(session: AsyncSession, tenant: Tenant, document_id: uuid.UUID) -> KnowledgeSource:
    try:
        return await find_source(session, tenant_id=tenant.id, document=str(document_id))
    except DocumentNotFound:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no document {document_id}") from None


UPLOAD_BODY = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["file"],
                "properties": {"file": {"type": "string", "format": "binary"}},
            }
        }
    },
}
"""The upload's request body as OpenAPI shows it (the route reads the form itself, after auth)."""


@knowledge_admin_router.post(
    "/documents",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Upload a document (PDF, DOCX, XLSX, CSV, TXT, Markdown)",
    description="Stores the file (multipart form field `file`) and queues its ingestion. The type is "
    "sniffed from the bytes, not the declared content type. A file with an existing name replaces that "
    "document; bytes already stored are a no-op. The caller is checked before any of the body is read; "
    "413 as soon as the body passes the size limit (KB_MAX_UPLOAD_BYTES, counted while it arrives), "
    "415 unsupported type, 422 no file, empty, encrypted, corrupt or without text (the file is parsed "
    "before it is stored: a refused file stores nothing and leaves a document of the same name as it "
    "was). Poll GET /documents/{id} for status.",
    response_model=UploadResult,
    # after the router's caller check: only an authenticated caller's body is read past the default
    dependencies=[Depends(body_allowance(upload_body_bytes))],
    openapi_extra={"requestBody": UPLOAD_BODY},
)
async def upload_document(
    request: Request,
    tenant: TenantDep,
    session: SessionDep,
    settings: SettingsDep,
    resources: ResourcesDep,
) -> UploadResult:
    try:
        return await accept_upload(request, session, settings, resources, tenant_id=tenant.id)
    except DocumentRejected as exc:
        raise HTTPException(rejection_status(exc), {"reason": exc.reason, "message": str(exc)}) from None


def rejection_status(exc: DocumentRejected) -> int:
    """The HTTP status of a refused upload: 413 too large, 415 unsupported type, else 422."""
    return _REJECTION_STATUS.get(exc.reason, status.HTTP_422_UNPROCESSABLE_CONTENT)


async def accept_upload(
    request: Request, session: AsyncSession, settings: Any, resources: Resources, *, tenant_id: uuid.UUID
) -> UploadResult:
    """Read the request's multipart field ``file`` (at most ``KB_MAX_UPLOAD_BYTES``), store it and queue
    its ingestion; the admin API and the public API both upload through this. The caller was checked
    and allowed the body (:func:`~switchboard.body_limit.body_allowance`) before.

    Raises:
        DocumentRejected: no file, too large, unsupported, unreadable (nothing stored, rolled back).
    """
    limit = settings.kb_max_upload_bytes
    try:
        files = await read_files(request, "file", max_files=1)
        if not files:
            raise DocumentRejected(
                "upload", "no_file", "send the document as the multipart form field 'file'"
            )
        file = files[0]
        filename = file.filename or "upload"
        data = await file.read(limit + 1)
        if len(data) > limit:
            raise DocumentRejected(filename, "too_large", f"over the upload limit of {limit} bytes")
        outcome = await register_upload(session, settings, tenant_id=tenant_id, filename=filename, data=data)
        await session.commit()
    except DocumentRejected as exc:
        await session.rollback()
        log.warning("knowledge_upload_rejected", tenant_id=str(tenant_id), reason=exc.reason, error=str(exc))
        raise
    job_id = None
    if outcome.needs_ingest and resources.redis is not None:
        job_id = await enqueue_ingest(resources.redis, outcome.source)
    return UploadResult(document=DocumentPublic.of(outcome.source), action=outcome.action, job_id=job_id)


@knowledge_admin_router.get("/documents", summary="List documents", response_model=list[DocumentPublic])
async def list_documents(tenant: TenantDep, session: SessionDep) -> list[DocumentPublic]:
    return [DocumentPublic.of(source) for source in await list_sources(session, tenant_id=tenant.id)]


@knowledge_admin_router.get(
    "/documents/{document_id}", summary="One document and its ingestion status", response_model=DocumentPublic
)
async def get_document(document_id: uuid.UUID, tenant: TenantDep, session: SessionDep) -> DocumentPublic:
    return DocumentPublic.of(await _document(session, tenant, document_id))


async def _set_active(
    session: AsyncSession, tenant: Tenant, document_id: uuid.UUID, active: bool
) -> DocumentPublic:
    await _document(session, tenant, document_id)
    source = await set_source_active(session, tenant_id=tenant.id, source_id=document_id, is_active=active)
    await session.commit()
    return DocumentPublic.of(source)


@knowledge_admin_router.post(
    "/documents/{document_id}/deactivate",
    summary="Deactivate a document: its chunks stop matching at once",
    response_model=DocumentPublic,
)
async def deactivate_document(
    document_id: uuid.UUID, tenant: TenantDep, session: SessionDep
) -> DocumentPublic:
    return await _set_active(session, tenant, document_id, False)


@knowledge_admin_router.post(
    "/documents/{document_id}/activate", summary="Re-activate a document", response_model=DocumentPublic
)
async def activate_document(document_id: uuid.UUID, tenant: TenantDep, session: SessionDep) -> DocumentPublic:
    return await _set_active(session, tenant, document_id, True)


@knowledge_admin_router.delete(
    "/documents/{document_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a document, its chunks and its stored file",
)
async def delete_document(document_id: uuid.UUID, tenant: TenantDep, session: SessionDep) -> Response:
    await _document(session, tenant, document_id)
    await delete_source(session, tenant_id=tenant.id, source_id=document_id)
    await session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


async def _queue_reindex(
    resources: Resources, session: AsyncSession, tenant: Tenant, source_ids: list[uuid.UUID] | None
) -> list[DocumentPublic]:
    sources = await mark_for_reindex(session, tenant_id=tenant.id, source_ids=source_ids)
    await session.commit()
    if resources.redis is not None:
        for source in sources:
            await enqueue_ingest(resources.redis, source)
    return [DocumentPublic.of(source) for source in sources]


@knowledge_admin_router.post(
    "/documents/{document_id}/reindex",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Re-parse and re-embed one document with the tenant's current embedding model",
    response_model=list[DocumentPublic],
)
async def reindex_document(
    document_id: uuid.UUID, tenant: TenantDep, session: SessionDep, resources: ResourcesDep
) -> list[DocumentPublic]:
    await _document(session, tenant, document_id)
    return await _queue_reindex(resources, session, tenant, [document_id])


@knowledge_admin_router.post(
    "/reindex",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Re-index every document, optionally switching the embedding model first",
    response_model=list[DocumentPublic],
)
async def reindex_all(
    tenant: TenantDep, session: SessionDep, resources: ResourcesDep, body: ReindexRequest | None = None
) -> list[DocumentPublic]:
    """The body is optional: without one, every document is re-embedded with the current model."""
    if body is not None and body.embedding_model:
        try:
            check_model_usable(resources.settings, tenant, body.embedding_model)
            switch_embedding_model(resources.settings, tenant, body.embedding_model)
        except ValueError as exc:  # invalid section, or a provider model without a key
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
        session.add(tenant)
    return await _queue_reindex(resources, session, tenant, None)


@knowledge_admin_router.put(
    "/embedding",
    summary="Set the tenant's embedding model, key (stored encrypted) and base URL",
    description="Existing chunks keep their vectors until re-indexed (POST /reindex).",
    response_model=EmbeddingSettingsOut,
)
async def put_embedding(
    body: EmbeddingSettingsIn, tenant: TenantDep, session: SessionDep, settings: SettingsDep
) -> EmbeddingSettingsOut:
    try:
        if body.api_base:  # resolved too: the name must have public addresses only
            await EgressPolicy.for_models(settings).check(body.api_base)
        set_tenant_embedding(settings, tenant, model=body.model, api_key=body.api_key, api_base=body.api_base)
    except ValueError as exc:  # the knowledge section would be invalid: nothing changed
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    session.add(tenant)
    await session.commit()
    config = resolve_embedding_config(settings, tenant)
    return EmbeddingSettingsOut(
        model=config.model, api_base=config.api_base, has_api_key=config.api_key is not None
    )


@knowledge_admin_router.get(
    "/search",
    summary="Search the tenant's knowledge base",
    description="Modes: hybrid (default; vector rank, full-text rank and the knowledge-graph walk from "
    "the entities the question names, fused by reciprocal rank), vector (cosine, HNSW), exact (codes "
    "and part numbers must occur as whole tokens), graph (only the walk: chunks that relate the "
    "products, series, materials, fluids and standards the question names, across documents; nothing "
    "when it names none), neighborhood (the closest chunk and the chunks one relation away from its "
    "entities). Returns nothing when nothing passes the relevance threshold. Table rows (CSV, XLSX) are "
    "one chunk each; `attributes` holds the row number and its key columns.",
    response_model=list[HitPublic],
)
async def search(
    tenant: TenantDep,
    session: SessionDep,
    settings: SettingsDep,
    q: Annotated[str, Query(min_length=1, max_length=2000, description="The question or code.")],
    mode: Annotated[
        Literal["vector", "hybrid", "exact", "graph", "neighborhood"], Query(description="Search mode.")
    ] = "hybrid",
    limit: Annotated[int, Query(ge=1, le=50)] = 5,
) -> list[HitPublic]:
    try:
        hits = await search_chunks(
            session,
            tenant_id=tenant.id,
            query=q,
            mode=mode,
            limit=limit,
            settings=settings,
            embedding=resolve_embedding_config(settings, tenant),
        )
    except EmbeddingFailed as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(exc)) from None
    return [HitPublic(**hit.to_json_dict()) for hit in hits]


@knowledge_admin_router.get(
    "/graph",
    summary="Walk the tenant's knowledge graph from named entities",
    description="What the `explore_knowledge_graph` tool gives the model: the entities among `entity` "
    "(names as written: part numbers, series, materials, fluids, standards; `Teflon` finds PTFE), the "
    "relations within `hops` steps with the document each was read from, and the best chunks.",
    response_model=GraphPublic,
)
async def graph(
    tenant: TenantDep,
    session: SessionDep,
    entity: Annotated[list[str], Query(min_length=1, max_length=5, description="Entity names (1-5).")],
    hops: Annotated[int, Query(ge=0, le=2, description="Relations to follow (0-2).")] = 1,
    limit: Annotated[int, Query(ge=1, le=20, description="Most passages.")] = 5,
) -> GraphPublic:
    found = await explore_entities(session, tenant_id=tenant.id, names=entity, hops=hops, limit=limit)
    return GraphPublic.model_validate(
        {"entities": found.entities, "relations": found.relations, "passages": found.chunks}
    )
