"""Ingestion: register an upload, then parse, split, embed and store it as one all-or-nothing step.

Identity of a document (so a re-upload replaces, never duplicates):

* one ``knowledge_sources`` row per (tenant, filename) (unique index). Uploading a file whose name
  exists replaces that document: its chunks are swapped for the new ones in one transaction when
  the new version is ready; until then the previous chunks keep answering.
* bytes already stored for the tenant (same SHA-256, under any name) are a no-op: the existing
  document is returned and nothing is parsed or embedded again.

Nothing is stored half-way. :func:`register_upload` parses the file before storing it, so a file
that cannot be read (corrupt, encrypted, image-only, empty, unsupported, or too complex: over the
parse timeout or memory cap, :mod:`switchboard.knowledge.isolation`) stores no row at all and a
document of the same name keeps its previous version. Uploads are always parsed in a child process
within those limits. :func:`ingest_source` is the body of the ARQ
job (and of ``switchboard kb add``). It parses and embeds everything before touching chunks, then
deletes the old chunks and inserts the new ones, with their knowledge-graph entities, mentions and
relations (:mod:`switchboard.knowledge.graph`), in a single transaction, so a failure there
(provider down mid-batch) leaves the previous chunks answering, with ``status='failed'`` and the
reason in ``error``.
"""

from __future__ import annotations

import array
import asyncio
import hashlib
import json
import struct
import sys
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import or_, update
from sqlalchemy import text as sql_text
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from switchboard.db.models import (
    EMBEDDING_DIMS,
    KnowledgeDocument,
    KnowledgeSource,
    KnowledgeSourceFile,
    SourceStatus,
    Tenant,
    utcnow,
)
from switchboard.db.tenant_scope import TenantScope
from switchboard.errors import SwitchboardError
from switchboard.knowledge.embeddings import (
    EmbeddingConfig,
    EmbeddingFailed,
    embed_texts,
    resolve_embedding_config,
)
from switchboard.knowledge.graph import extract_document, extract_for_ingest, prune_orphans, store_graph
from switchboard.knowledge.isolation import ParseLimits, parse_isolated
from switchboard.knowledge.parsers import (
    CONTENT_TYPES,
    DocumentRejected,
    ParsedDocument,
    parse_document,
    sniff_kind,
)
from switchboard.knowledge.splitter import split_text
from switchboard.observability import get_logger
from switchboard.settings import Settings
from switchboard.storable import clean_text
from switchboard.validation import check_text

FILENAME_MAX = 512
"""``knowledge_sources.filename`` column length: a longer name is refused (``bad_filename``)."""

__all__ = [
    "DocumentNotFound",
    "IngestReport",
    "UploadOutcome",
    "delete_source",
    "find_source",
    "ingest_in_session",
    "ingest_source",
    "list_sources",
    "mark_for_reindex",
    "register_upload",
    "set_source_active",
]

log = get_logger(__name__)

ProgressCallback = Callable[[str, int, int], None]
"""``(stage, done, total)``: stage is ``parse``, ``embed`` or ``store``."""


class DocumentNotFound(SwitchboardError):
    """No knowledge document with that id (or filename) for this tenant."""

    def __init__(self, tenant_id: uuid.UUID, document: str) -> None:
        self.tenant_id = tenant_id
        self.document = document
        super().__init__(f"no knowledge document {document!r} for this tenant")


@dataclass(frozen=True, kw_only=True)
class UploadOutcome:
    """What :func:`register_upload` did."""

    source: KnowledgeSource
    action: Literal["created", "replaced", "unchanged"]
    """``unchanged``: the same bytes are already stored (``source`` is that document)."""

    @property
    def needs_ingest(self) -> bool:
        """Whether an ingestion job must run (new bytes, or an earlier run did not finish)."""
        return self.action != "unchanged" or self.source.status != SourceStatus.ready


@dataclass(kw_only=True)
class IngestReport:
    """Result of one :func:`ingest_source` run."""

    source_id: uuid.UUID
    filename: str
    status: str
    """``ready``, ``failed`` or ``skipped`` (superseded by a newer upload, or already ingested)."""
    chunk_count: int = 0
    error: str | None = None
    embedding_model: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    duration_ms: int = 0


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def register_upload(
    session: AsyncSession,
    settings: Settings,
    *,
    tenant_id: uuid.UUID,
    filename: str,
    data: bytes,
) -> UploadOutcome:
    """Store an uploaded file as a pending document (the caller commits, then runs ingestion).

    Args:
        session: open session; the caller owns the transaction.
        settings: for ``kb_max_upload_bytes`` and the parse limits (``kb_parse_*``).
        tenant_id: the tenant established by authentication.
        filename: the file's base name (identity of the document within the tenant).
        data: the whole file.

    Raises:
        DocumentRejected: a file name with a NUL or over :data:`FILENAME_MAX` characters
            (``bad_filename``), too large, empty, of a type the sniffer refuses (images, archives,
            password-protected Office files), or unreadable by its parser (corrupt or encrypted PDF,
            image-only scan, no text; :class:`~switchboard.knowledge.parsers.DocumentTooComplex` past the parse limits): nothing is
            stored, and a document of the same name keeps its previous version as it was. The file
            is parsed here for that check (in a child process); an ingestion job in this process
            takes that parse (``kb add``), one in another process (the worker) parses again.
    """
    filename = filename.replace("\\", "/").rsplit("/", 1)[-1].strip() or "upload"
    try:
        filename = check_text(filename, field="file name", max_length=FILENAME_MAX)
    except ValueError as exc:
        shown = clean_text(filename)[:80] + ("…" if len(filename) > 80 else "")
        raise DocumentRejected(shown, "bad_filename", str(exc)) from None
    if len(data) > settings.kb_max_upload_bytes:
        raise DocumentRejected(
            filename, "too_large", f"{len(data)} bytes is over the limit of {settings.kb_max_upload_bytes}"
        )
    kind = sniff_kind(data, filename)
    content_hash = sha256_hex(data)
    scope = TenantScope(session, tenant_id)
    # one look-up for both identities (same bytes under any name, the same name): at most a few rows
    known = await scope.all(
        KnowledgeSource,
        or_(KnowledgeSource.content_hash == content_hash, KnowledgeSource.filename == filename),
    )
    same_bytes = next((row for row in known if row.content_hash == content_hash), None)
    if same_bytes is not None:
        if same_bytes.status == SourceStatus.failed:  # try again (a new request: a new job id)
            same_bytes.status = SourceStatus.pending.value
            same_bytes.error = None
            same_bytes.updated_at = utcnow()
            await session.flush()
        log.info("knowledge_upload_unchanged", tenant_id=str(tenant_id), source_id=str(same_bytes.id))
        return UploadOutcome(source=same_bytes, action="unchanged")
    # parse now (in a child process, within the limits) so a file that cannot be read stores
    # nothing, like an empty or unsupported one, and a bad replacement leaves the previous version
    try:
        parsed = await asyncio.to_thread(parse_isolated, data, filename, ParseLimits.from_settings(settings))
    except DocumentRejected as exc:
        log.warning(
            "knowledge_upload_unreadable", tenant_id=str(tenant_id), filename=filename, reason=exc.reason
        )
        raise
    source = next((row for row in known if row.filename == filename), None)
    action: Literal["created", "replaced"] = "replaced" if source is not None else "created"
    if source is None:
        source = scope.add(KnowledgeSource(tenant_id=tenant_id, filename=filename, content_hash=content_hash))
    source.content_hash = content_hash
    source.content_type = CONTENT_TYPES[kind]
    source.size_bytes = len(data)
    source.status = SourceStatus.pending.value
    source.error = None
    source.updated_at = utcnow()
    # a new source has no stored file yet: both rows go in one flush (the id is made client-side)
    blob = await session.get(KnowledgeSourceFile, source.id) if action == "replaced" else None
    if blob is None:
        scope.add(KnowledgeSourceFile(tenant_id=tenant_id, source_id=source.id, data=data))
    else:
        blob.data = data
    await session.flush()
    _remember_parse(content_hash, filename, parsed)
    log.info(
        "knowledge_upload_registered",
        tenant_id=str(tenant_id),
        source_id=str(source.id),
        action=action,
        kind=kind.value,
        size_bytes=len(data),
    )
    return UploadOutcome(source=source, action=action)


_PARSES_KEPT = 8
"""Parses :func:`register_upload` keeps for an ingestion in the same process (``kb add``, the seed)."""
_PARSE_CHARS_KEPT = 8_000_000
"""... as long as their text is at most this many characters in all."""
_parses: OrderedDict[tuple[str, str], ParsedDocument] = OrderedDict()


def _parsed_chars(parsed: ParsedDocument) -> int:
    return sum(len(section.text) for section in parsed.sections)


def _remember_parse(content_hash: str, filename: str, parsed: ParsedDocument) -> None:
    """Keep what the upload's check parsed, so an ingestion of the same bytes in this process
    (``switchboard kb add``: register, then ingest) does not fork a parse of them again."""
    if _parsed_chars(parsed) > _PARSE_CHARS_KEPT:
        return
    _parses[(content_hash, filename)] = parsed
    _parses.move_to_end((content_hash, filename))
    while len(_parses) > _PARSES_KEPT or sum(_parsed_chars(p) for p in _parses.values()) > _PARSE_CHARS_KEPT:
        _parses.popitem(last=False)


def _recall_parse(content_hash: str, filename: str, data: bytes) -> ParsedDocument | None:
    """The parse :func:`_remember_parse` kept for these bytes under this name (taken: used once), or ``None``.

    The parse depends only on the bytes and the name (the limits only decide whether it is refused),
    and ``content_hash`` is checked against ``data`` here, so a kept parse is what parsing again gives.
    """
    parsed = _parses.pop((content_hash, filename), None)
    if parsed is not None and sha256_hex(data) != content_hash:
        return None
    return parsed


async def _mark(
    sessions: async_sessionmaker[AsyncSession], source_id: uuid.UUID, *, durable: bool = True, **values: Any
) -> None:
    """Set ``values`` on the source row in a transaction of its own.

    ``durable=False`` commits without waiting for the WAL flush (``synchronous_commit = off`` for
    this transaction only: 2-6 ms less per document here). Only for the ``processing`` mark: a
    server crash can lose it, which leaves the row as it was committed before (``pending``), and
    the job's own final transaction, or its retry, writes the outcome anyway. A crash never
    corrupts: a lost asynchronous commit is as if the transaction had not run.
    """
    async with sessions() as session, session.begin():
        await _mark_in(session, source_id, durable=durable, **values)


async def _mark_in(session: AsyncSession, source_id: uuid.UUID, *, durable: bool, **values: Any) -> None:
    """:func:`_mark`'s statements in the caller's transaction (``durable=False`` makes its commit asynchronous)."""
    if not durable:
        await session.exec(sql_text("SET LOCAL synchronous_commit = off"))
    await session.exec(
        update(KnowledgeSource).where(KnowledgeSource.id == source_id).values(updated_at=utcnow(), **values)
    )


def chunking_of(settings: Settings, tenant: Tenant) -> tuple[int, int]:
    """``(chunk size, overlap)`` in characters for ``tenant``: its ``knowledge`` section's
    ``chunk_size_chars`` / ``chunk_overlap_chars``, else ``KB_CHUNK_SIZE_CHARS`` / ``KB_CHUNK_OVERLAP_CHARS``."""
    from switchboard.tenant_settings import tenant_settings_from

    block = tenant_settings_from(tenant.settings_extensions, tenant_id=str(tenant.id)).knowledge
    size = block.chunk_size_chars or settings.kb_chunk_size_chars
    overlap = (
        settings.kb_chunk_overlap_chars if block.chunk_overlap_chars is None else block.chunk_overlap_chars
    )
    return size, min(overlap, size - 1)


async def ingest_source(
    sessions: async_sessionmaker[AsyncSession],
    settings: Settings,
    *,
    tenant_id: uuid.UUID,
    source_id: uuid.UUID,
    content_hash: str | None = None,
    on_progress: ProgressCallback | None = None,
    gateway: Any | None = None,
) -> IngestReport:
    """Parse, split, embed and store one document; all or nothing (see the module docstring).

    Safe to run twice: a source already ``ready`` for ``content_hash``, or superseded by a newer
    upload (another hash), is skipped.

    Args:
        sessions: session factory (this function opens short transactions of its own).
        settings: splitter sizes, embedding policy.
        tenant_id: owner of the source (every read is filtered by it).
        source_id: the ``knowledge_sources`` row.
        content_hash: the upload this run is for; ``None`` ingests whatever is stored.
        on_progress: ``(stage, done, total)`` callback for progress bars.
        gateway: the worker's :class:`~switchboard.llm.router.ModelGateway`; with it, a tenant whose
            models include a provider model has its entities and relations extracted by that model
            (:func:`switchboard.knowledge.graph.extract_for_ingest`); without it, deterministically.

    Returns:
        The report; ``status`` is ``ready``, ``failed`` (``error`` says why) or ``skipped``.

    Raises:
        DocumentNotFound: no such source for this tenant (deleted meanwhile).
    """
    started = time.monotonic()
    bound = log.bind(tenant_id=str(tenant_id), source_id=str(source_id))
    # one transaction reads the source, its tenant and its file (one statement) and marks it
    # `processing` (not three reads and a transaction of its own for the mark)
    async with sessions() as session, session.begin():
        row = (
            await session.exec(
                select(KnowledgeSource, Tenant, KnowledgeSourceFile)
                .join(Tenant, Tenant.id == KnowledgeSource.tenant_id)
                .outerjoin(KnowledgeSourceFile, KnowledgeSourceFile.source_id == KnowledgeSource.id)
                .where(KnowledgeSource.tenant_id == tenant_id, KnowledgeSource.id == source_id)
            )
        ).first()
        if row is None:  # no such source, or deleted together with its tenant meanwhile
            raise DocumentNotFound(tenant_id, str(source_id))
        source, tenant, blob = row
        report = IngestReport(source_id=source_id, filename=source.filename, status="skipped")
        if content_hash is not None and content_hash != source.content_hash:
            bound.info("knowledge_ingest_superseded")
            report.error = "superseded by a newer upload"
            return report
        if source.status == SourceStatus.ready and content_hash is not None:
            bound.info("knowledge_ingest_already_done")
            report.status, report.chunk_count = "ready", source.chunk_count
            return report
        if blob is not None:
            await _mark_in(
                session, source_id, durable=False, status=SourceStatus.processing.value, error=None
            )
    if blob is None:
        return await _fail(sessions, report, bound, "the uploaded file is no longer stored: upload it again")

    config = resolve_embedding_config(settings, tenant)
    report.embedding_model = config.model
    parsed = _recall_parse(source.content_hash, source.filename, blob.data)
    if parsed is None:  # the usual case in the worker: the upload was parsed by the API's process
        try:
            parsed = await asyncio.to_thread(
                parse_isolated, blob.data, source.filename, ParseLimits.from_settings(settings)
            )
        except DocumentRejected as exc:
            return await _fail(sessions, report, bound, str(exc), reason=exc.reason)
    if on_progress:
        on_progress("parse", 1, 1)
    rows: list[dict[str, Any]] = []
    chunk_size, overlap = chunking_of(settings, tenant)
    for section in parsed.sections:
        for text in split_text(section.text, chunk_size=chunk_size, overlap=overlap):
            rows.append(
                {"page": section.page, "sheet": section.sheet, "text": text, "attributes": section.attributes}
            )
    details = dict(parsed.details)
    details.update(kind=parsed.kind.value, chunks=len(rows), sections=len(parsed.sections))
    embedding = asyncio.ensure_future(
        embed_texts(
            config,
            [row["text"] for row in rows],
            on_batch=(lambda done, total: on_progress("embed", done, total)) if on_progress else None,
        )
    )
    try:
        if config.is_lexical:
            # the offline embedding runs in its helper process (it cannot fail): let it start, then
            # extract on this thread meanwhile (the two overlap rather than run one after the other)
            await asyncio.sleep(0)
        else:  # a provider's can: no model extraction for a document that will not be stored
            await asyncio.wait([embedding])
            embedding.result()
        extractions, extractor = await extract_for_ingest(
            [(row["text"], row["attributes"]) for row in rows],
            settings=settings,
            tenant=tenant,
            gateway=gateway,
            trace_id=f"kb-ingest-{source_id.hex}",
        )
        vectors = await embedding
    except EmbeddingFailed as exc:
        return await _fail(sessions, report, bound, str(exc), reason="embedding_failed", details=details)
    finally:
        embedding.cancel()  # only when the extraction failed: it is done otherwise

    async with sessions() as session, session.begin():
        current = await TenantScope(session, tenant_id).get(KnowledgeSource, source_id)
        if current is None:
            raise DocumentNotFound(tenant_id, str(source_id))
        if content_hash is not None and current.content_hash != content_hash:
            bound.info("knowledge_ingest_superseded")
            report.error = "superseded by a newer upload"
            return report
        # delete the previous version's chunks (their mentions go with them) and read the entities
        # it mentioned, the only ones replacing it can orphan, in one statement: the SELECT sees the
        # snapshot from before the DELETE (a data-modifying CTE)
        old = await session.exec(
            sql_text(_DELETE_OLD_CHUNKS), params={"tenant_id": tenant_id, "source_id": source_id}
        )
        stale = list(old.scalars())
        chunk_ids = await insert_chunks(
            session,
            tenant_id=tenant_id,
            source_id=source_id,
            is_active=current.is_active,
            chunks=[(row["page"], row["sheet"], row["text"], row["attributes"]) for row in rows],
            vectors=vectors,
        )
        counts = await store_graph(
            session, tenant_id=tenant_id, source_id=source_id, chunk_ids=chunk_ids, extractions=extractions
        )
        await prune_orphans(session, tenant_id=tenant_id, among=stale)
        details["graph"] = {
            "extractor": extractor,
            "entities": counts.entities,
            "mentions": counts.mentions,
            "relations": counts.relations,
        }
        current.status = SourceStatus.ready.value
        current.error = None
        current.chunk_count = len(rows)
        current.embedding_model = config.model
        current.details = details
        current.updated_at = utcnow()
    if on_progress:
        on_progress("store", len(rows), len(rows))
    report.status, report.chunk_count, report.details = "ready", len(rows), details
    report.duration_ms = int((time.monotonic() - started) * 1000)
    bound.info(
        "knowledge_ingested",
        chunks=len(rows),
        embedding_model=config.model,
        duration_ms=report.duration_ms,
    )
    return report


_DELETE_OLD_CHUNKS = """
WITH deleted AS (
    DELETE FROM knowledge_documents WHERE tenant_id = :tenant_id AND source_id = :source_id
)
SELECT DISTINCT entity_id FROM kg_mentions WHERE tenant_id = :tenant_id AND source_id = :source_id
"""
"""Delete a document's chunks; the entity ids its mentions named before the delete (``bigint`` rows)."""

_INSERT_CHUNKS = """
INSERT INTO knowledge_documents
    (tenant_id, source_id, position, page, sheet, text, embedding, is_active, content_hash, attributes)
SELECT $1, $2, u.position, u.page, u.sheet, u.text, u.embedding, $3, u.content_hash, u.attributes::jsonb
FROM unnest($4::int[], $5::int[], $6::text[], $7::text[], $8::vector[], $9::text[], $10::text[])
    AS u(position, page, sheet, text, embedding, content_hash, attributes)
RETURNING id, position
"""
"""One statement for all of a document's chunks (``position`` is the chunk's index)."""
_VECTOR_HEADER = struct.Struct(">HH")


def _vector_binary(vector: Sequence[float]) -> bytes:
    """pgvector's binary form of ``vector``: dimensions and a zero (big-endian int16), then big-endian float4s."""
    values = array.array("f", vector)
    if sys.byteorder == "little":
        values.byteswap()
    return _VECTOR_HEADER.pack(len(values), 0) + values.tobytes()


_INSERT_STATEMENT_KEY = "switchboard.knowledge.insert_chunks"
"""Key of ``(asyncpg connection, prepared _INSERT_CHUNKS)`` in the pooled connection's ``info`` dict."""


async def _insert_statement(connection: Any) -> Any:
    """The connection's prepared :data:`_INSERT_CHUNKS`, with the binary ``vector`` codec (prepared on first use).

    Why once per connection: ``set_type_codec`` and ``reset_type_codec`` each look the type up
    (a round trip) and each empty asyncpg's statement cache, so toggling the codec around every
    document made the next statements of that connection (the graph's upserts, the type lookups)
    be prepared again for every document (PostgreSQL's CPU per chunk about halved without
    it). The statement lives in SQLAlchemy's ``Connection.info`` (the DBAPI
    connection's lifetime: emptied when the connection is invalidated); the codec is on the
    connection only while the statement is prepared (asyncpg binds a statement's codecs then).

    Args:
        connection: the session's ``AsyncConnection`` (its transaction is open).

    Returns:
        An ``asyncpg.prepared_stmt.PreparedStatement``; its vector parameter takes pgvector's
        binary form (:func:`_vector_binary`).

    Raises:
        asyncpg.PostgresError: the server refused the preparation; the connection is then
            invalidated (it may still have the codec) and the caller's transaction is lost.
    """
    raw = (await connection.get_raw_connection()).driver_connection
    cached = connection.info.get(_INSERT_STATEMENT_KEY)
    if cached is not None and cached[0] is raw:
        return cached[1]
    try:
        await raw.set_type_codec("vector", encoder=bytes, decoder=bytes, format="binary")
        statement = await raw.prepare(_INSERT_CHUNKS)
        await raw.reset_type_codec("vector")
    except BaseException:
        # the codec may still be set and cannot be removed in a lost transaction: not back to the pool
        await connection.invalidate()
        raise
    connection.info[_INSERT_STATEMENT_KEY] = (raw, statement)
    return statement


async def insert_chunks(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    source_id: uuid.UUID,
    is_active: bool,
    chunks: Sequence[tuple[int | None, str | None, str, dict[str, Any]]],
    vectors: Sequence[Sequence[float]],
) -> list[int]:
    """Insert a document's chunks in the session's transaction; their ids, in order.

    One ``INSERT .. SELECT FROM unnest(..)`` on the session's asyncpg connection with the
    embeddings in pgvector's binary format: SQLAlchemy's bulk insert sent each vector as pgvector's
    text form (``'[0.0123,...]'``: 1,536 floats printed in Python, then parsed by the server, about
    a third of a 40-chunk document's insert) through a statement compiled for every document; a
    ``real[]`` parameter instead cost asyncpg two ``isinstance`` checks per float. The statement is
    prepared once per connection (:func:`_insert_statement`) while a binary codec for ``vector``
    (bytes in, bytes out) is set, and the codec is removed right after: an asyncpg statement keeps
    the codecs it was prepared with, so this one sends bytes while every other statement on the
    connection sees vectors as before (text).

    Args:
        session: the ingestion transaction.
        tenant_id: owner (written on every row).
        source_id: the document.
        is_active: the document's flag, copied to each chunk.
        chunks: ``(page, sheet, text, attributes)`` per chunk, in order.
        vectors: one :data:`~switchboard.db.models.EMBEDDING_DIMS`-float vector per chunk.

    Raises:
        ValueError: a vector of another width, or not one per chunk.
        asyncpg.PostgresError: what the server refused; the caller's transaction is lost (the
            connection's prepared insert is dropped too, so the next document prepares it afresh).
    """
    if len(chunks) != len(vectors):
        raise ValueError(f"{len(vectors)} vectors for {len(chunks)} chunks")
    if not chunks:
        return []
    encoded = []
    for vector in vectors:
        if len(vector) != EMBEDDING_DIMS:
            raise ValueError(f"a vector of {len(vector)} dimensions; the column has {EMBEDDING_DIMS}")
        encoded.append(_vector_binary(vector))
    connection = await session.connection()
    statement = await _insert_statement(connection)
    try:
        records = await statement.fetch(
            tenant_id,
            source_id,
            is_active,
            list(range(len(chunks))),
            [page for page, _, _, _ in chunks],
            [sheet for _, sheet, _, _ in chunks],
            [text for _, _, text, _ in chunks],
            encoded,
            [sha256_hex(text.encode()) for _, _, text, _ in chunks],
            [json.dumps(attributes or {}) for _, _, _, attributes in chunks],
        )
    except BaseException:
        # the transaction is lost; prepare again next time rather than trust a statement that failed
        # (a migration may have changed the table under it: asyncpg's InvalidCachedStatementError)
        connection.info.pop(_INSERT_STATEMENT_KEY, None)
        raise
    ids = [0] * len(chunks)
    for record in records:
        ids[record["position"]] = int(record["id"])
    return ids


async def _fail(
    sessions: async_sessionmaker[AsyncSession],
    report: IngestReport,
    bound: Any,
    error: str,
    *,
    reason: str = "unavailable",
    details: dict[str, Any] | None = None,
) -> IngestReport:
    """Record a failed ingestion; existing chunks (an earlier version) are left untouched."""
    values: dict[str, Any] = {"status": SourceStatus.failed.value, "error": error}
    if details is not None:
        values["details"] = {**details, "failure": reason}
    await _mark(sessions, report.source_id, **values)
    bound.warning("knowledge_ingest_failed", reason=reason, error=error)
    report.status, report.error = "failed", error
    report.details = {"failure": reason}
    return report


async def ingest_in_session(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    filename: str,
    data: bytes,
    config: EmbeddingConfig,
    chunk_size: int,
    overlap: int,
) -> KnowledgeSource:
    """Parse, split, embed and store a new document inside the caller's transaction (seeding).

    The same parser, splitter and embedding as :func:`ingest_source`, but in one session the caller
    commits, so it can run in the transaction that created the tenant (``make run``'s demo seed).
    The file is parsed in this process, without the upload limits: only for files the project
    ships, never for a customer's upload.

    Args:
        session: open session; the caller owns the transaction.
        tenant_id: owner of the document.
        filename: document name (must not exist yet for this tenant).
        data: the whole file.
        config: how to embed (the seed passes the offline lexical model: no network).
        chunk_size: longest chunk, in characters.
        overlap: characters shared by neighbouring chunks.

    Returns:
        The ``ready`` source with its chunks flushed.

    Raises:
        DocumentRejected: the file cannot be parsed; nothing is stored.
        EmbeddingFailed: the embedding model failed; nothing is stored.
    """
    parsed = parse_document(data, filename)
    rows = [
        (section, text)
        for section in parsed.sections
        for text in split_text(section.text, chunk_size=chunk_size, overlap=overlap)
    ]
    vectors = await embed_texts(config, [text for _, text in rows])
    scope = TenantScope(session, tenant_id)
    source = scope.add(
        KnowledgeSource(
            tenant_id=tenant_id,
            filename=filename,
            content_hash=sha256_hex(data),
            content_type=CONTENT_TYPES[parsed.kind],
            size_bytes=len(data),
            status=SourceStatus.ready.value,
            embedding_model=config.model,
            chunk_count=len(rows),
            details={
                **parsed.details,
                "kind": parsed.kind.value,
                "chunks": len(rows),
                "sections": len(parsed.sections),
            },
        )
    )
    await session.flush()
    scope.add(KnowledgeSourceFile(tenant_id=tenant_id, source_id=source.id, data=data))
    chunk_ids = await insert_chunks(
        session,
        tenant_id=tenant_id,
        source_id=source.id,
        is_active=True,
        chunks=[(section.page, section.sheet, text, section.attributes) for section, text in rows],
        vectors=vectors,
    )
    counts = await store_graph(
        session,
        tenant_id=tenant_id,
        source_id=source.id,
        chunk_ids=chunk_ids,
        extractions=extract_document([(text, section.attributes) for section, text in rows]),
    )
    source.details = {
        **source.details,
        "graph": {
            "extractor": "deterministic",
            "entities": counts.entities,
            "mentions": counts.mentions,
            "relations": counts.relations,
        },
    }
    log.info(
        "knowledge_ingested",
        tenant_id=str(tenant_id),
        source_id=str(source.id),
        chunks=len(rows),
        embedding_model=config.model,
    )
    return source


async def list_sources(session: AsyncSession, *, tenant_id: uuid.UUID) -> list[KnowledgeSource]:
    """The tenant's documents, by filename."""
    scope = TenantScope(session, tenant_id)
    return list((await session.exec(scope.select(KnowledgeSource).order_by(KnowledgeSource.filename))).all())


async def find_source(session: AsyncSession, *, tenant_id: uuid.UUID, document: str) -> KnowledgeSource:
    """A document by id or filename.

    Raises:
        DocumentNotFound: neither matches within this tenant.
    """
    scope = TenantScope(session, tenant_id)
    try:
        source = await scope.get(KnowledgeSource, uuid.UUID(document))
    except ValueError:
        source = await scope.first(KnowledgeSource, KnowledgeSource.filename == document)
    if source is None:
        raise DocumentNotFound(tenant_id, document)
    return source


async def set_source_active(
    session: AsyncSession, *, tenant_id: uuid.UUID, source_id: uuid.UUID, is_active: bool
) -> KnowledgeSource:
    """Deactivate (chunks stop matching at once) or re-activate a document. The caller commits.

    Raises:
        DocumentNotFound: no such document for this tenant.
    """
    source = await TenantScope(session, tenant_id).get(KnowledgeSource, source_id)
    if source is None:
        raise DocumentNotFound(tenant_id, str(source_id))
    source.is_active = is_active
    source.updated_at = utcnow()
    await session.exec(
        update(KnowledgeDocument)
        .where(KnowledgeDocument.tenant_id == tenant_id, KnowledgeDocument.source_id == source_id)
        .values(is_active=is_active)
    )
    await session.flush()
    log.info(
        "knowledge_source_active_set", tenant_id=str(tenant_id), source_id=str(source_id), is_active=is_active
    )
    return source


async def delete_source(session: AsyncSession, *, tenant_id: uuid.UUID, source_id: uuid.UUID) -> None:
    """Delete a document, its chunks and its stored file. The caller commits.

    Raises:
        DocumentNotFound: no such document for this tenant.
    """
    source = await TenantScope(session, tenant_id).get(KnowledgeSource, source_id)
    if source is None:
        raise DocumentNotFound(tenant_id, str(source_id))
    await session.delete(source)
    await session.flush()
    log.info("knowledge_source_deleted", tenant_id=str(tenant_id), source_id=str(source_id))


async def mark_for_reindex(
    session: AsyncSession, *, tenant_id: uuid.UUID, source_ids: list[uuid.UUID] | None = None
) -> list[KnowledgeSource]:
    """Set documents back to ``pending`` so a job re-parses and re-embeds them with the tenant's
    current embedding model. Their chunks keep answering until the new ones replace them.

    Args:
        source_ids: the documents; ``None`` means all of the tenant's documents.

    Raises:
        DocumentNotFound: one of ``source_ids`` is not this tenant's.
    """
    scope = TenantScope(session, tenant_id)
    if source_ids is None:
        sources = await scope.all(KnowledgeSource)
    else:
        sources = []
        for source_id in source_ids:
            source = await scope.get(KnowledgeSource, source_id)
            if source is None:
                raise DocumentNotFound(tenant_id, str(source_id))
            sources.append(source)
    for source in sources:
        source.status = SourceStatus.pending.value
        source.updated_at = utcnow()
    await session.flush()
    return sources
