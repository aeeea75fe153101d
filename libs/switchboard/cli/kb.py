"""``switchboard kb ...``: manage and search a tenant's knowledge base from the command line.

The commands work on the database directly (``DATABASE_URL``, or the embedded server under
``DATA_DIR``) and run ingestion in this process, not through the worker queue, so they need no
running services and show progress as they go (logs at ``LOG_LEVEL`` on stderr).
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from switchboard.cli.output import Output, OutputOpt, QuietOpt, print_rows
from switchboard.cli.root import kb_app
from switchboard.cli.runner import TenantOpt, fail, friendly_errors, run_db, shorten

__all__ = [
    "kb_add",
    "kb_search",
    "kb_graph",
    "kb_list",
    "kb_deactivate",
    "kb_activate",
    "kb_delete",
    "kb_reindex",
    "kb_set_embedding",
]

T = TypeVar("T")

DocumentArg = Annotated[str, typer.Argument(help="Document id or filename (see `switchboard kb list`).")]


def _run(work: Callable[[Any, Any], Awaitable[T]]) -> T:
    """Run ``work(sessions, settings)`` against the configured (or embedded) database."""
    return run_db(work, log_at_log_level=True)


async def _tenant(sessions: Any, slug: str) -> Any:
    from switchboard.tenants import get_tenant

    async with sessions() as session:
        return await get_tenant(session, slug)


@kb_app.command("add")
@friendly_errors
def kb_add(
    files: Annotated[list[Path], typer.Argument(help="Files to add.")],
    tenant: TenantOpt,
) -> None:
    """Add (or replace) documents and ingest them now, in this process (not through the worker queue).

    A file whose name is already in the knowledge base replaces that document; a file whose bytes
    are already stored is skipped. Prints a progress bar per file (on a terminal), then one line per
    file (status, chunks, note) and the chunks stored and skipped.
    Exit status 1 when any file failed.
    """
    from switchboard.knowledge import DocumentRejected, ingest_source, register_upload

    for path in files:
        if not path.is_file():  # one line, not a usage box, and before touching the database
            raise fail(f"no such file: {path}")

    async def work(sessions: Any, settings: Any) -> list[tuple[str, str, int, str]]:
        row = await _tenant(sessions, tenant)
        results: list[tuple[str, str, int, str]] = []
        for path in files:
            data = path.read_bytes()
            try:
                async with sessions() as session, session.begin():
                    outcome = await register_upload(
                        session, settings, tenant_id=row.id, filename=path.name, data=data
                    )
            except DocumentRejected as exc:
                results.append((path.name, "failed", 0, str(exc)))
                continue
            if not outcome.needs_ingest:
                same = outcome.source.filename
                why = "unchanged" if same == path.name else f"same content as {same}"
                results.append((path.name, "skipped", outcome.source.chunk_count, why))
                continue
            # The bar only on a terminal: elsewhere click prints its label once, a stray file name line.
            bar_or_not = (
                typer.progressbar(length=1, label=f"{path.name:<30}", show_pos=True)
                if sys.stdout.isatty()
                else nullcontext(None)
            )
            with bar_or_not as bar:

                def progress(stage: str, done: int, total: int, bar: Any = bar) -> None:
                    if stage == "embed" and bar is not None:
                        bar.length = max(total, 1)
                        bar.update(done - bar.pos)

                report = await ingest_source(
                    sessions,
                    settings,
                    tenant_id=row.id,
                    source_id=outcome.source.id,
                    content_hash=outcome.source.content_hash,
                    on_progress=progress,
                )
            results.append((path.name, report.status, report.chunk_count, report.error or outcome.action))
        return results

    results = _run(work)
    stored = sum(chunks for _, status, chunks, _ in results if status == "ready")
    for name, status, chunks, note in results:
        color = {"ready": typer.colors.GREEN, "failed": typer.colors.RED}.get(status, typer.colors.YELLOW)
        typer.secho(f"{status:<8} {name:<30} {chunks:>5} chunks  {note}", fg=color)
    skipped = [r for r in results if r[1] != "ready"]
    typer.echo(
        f"{stored} chunks stored from {len(results) - len(skipped)} file(s); {len(skipped)} skipped or failed"
    )
    if any(status == "failed" for _, status, _, _ in results):
        raise typer.Exit(1)


@kb_app.command("search")
@friendly_errors
def kb_search(
    query: Annotated[str, typer.Argument(help="The question, or a code for --mode exact.")],
    tenant: TenantOpt,
    mode: Annotated[
        str,
        typer.Option(
            help="hybrid (vector + full text + graph walk, fused) | vector | exact (codes verbatim) | "
            "graph (only the walk from the entities the question names) | neighborhood (closest chunk "
            "and its one-hop neighbours)."
        ),
    ] = "hybrid",
    limit: Annotated[int, typer.Option(min=1, max=50, help="Most results.")] = 5,
) -> None:
    """Search; prints one JSON object per line: document, page, sheet, score, attributes, text. No match:
    nothing on stdout, "no results (mode MODE)" on stderr, exit 0. ``attributes`` holds a table row's
    number and key columns."""
    from switchboard.knowledge.retrieval import SEARCH_MODES

    if mode not in SEARCH_MODES:
        raise fail(f"unknown --mode {mode!r}: use {', '.join(SEARCH_MODES)}")
    from switchboard.knowledge import search_chunks

    async def work(sessions: Any, settings: Any) -> list[Any]:
        row = await _tenant(sessions, tenant)
        async with sessions() as session:
            return await search_chunks(
                session,
                tenant_id=row.id,
                query=query,
                mode=mode,
                limit=limit,
                settings=settings,  # type: ignore[arg-type]
            )

    hits = _run(work)
    if not hits:  # stdout stays empty (JSON lines only); a person sees why
        typer.echo(f"no results (mode {mode})", err=True)
    for hit in hits:
        line = {
            "document": hit.document,
            "page": hit.page,
            "sheet": hit.sheet,
            "score": hit.score,
            "attributes": hit.attributes,
            "text": hit.text,
        }
        typer.echo(json.dumps(line, ensure_ascii=False))


@kb_app.command("graph")
@friendly_errors
def kb_graph(
    entities: Annotated[
        list[str], typer.Argument(help="Entity names: part numbers, series, materials, fluids.")
    ],
    tenant: TenantOpt,
    hops: Annotated[int, typer.Option(min=0, max=2, help="Relations to follow from them.")] = 1,
    limit: Annotated[int, typer.Option(min=1, max=20, help="Most passages.")] = 5,
) -> None:
    """Walk the knowledge graph from named entities (what the explore_knowledge_graph tool returns).

    Prints the entities found, then one line per relation (``subject relation object  [document]``),
    then the passages as JSON lines. "no such entity" on stderr when none of the names is known.
    """
    from switchboard.knowledge.graph.explore import explore_entities

    if len(entities) > 5:
        raise fail("name at most 5 entities")

    async def work(sessions: Any, settings: Any) -> Any:
        row = await _tenant(sessions, tenant)
        async with sessions() as session:
            return await explore_entities(session, tenant_id=row.id, names=entities, hops=hops, limit=limit)

    found = _run(work)
    if not found.entities:
        typer.echo("no such entity in this tenant's knowledge graph", err=True)
        return
    typer.echo("entities: " + ", ".join(f"{e['name']} ({e['kind']})" for e in found.entities))
    for relation in found.relations:
        typer.echo(
            f"{relation['subject']} {relation['relation']} {relation['object']}  [{relation['document']}]"
        )
    for chunk in found.chunks:
        typer.echo(json.dumps(chunk, ensure_ascii=False))


@kb_app.command("list")
@friendly_errors
def kb_list(tenant: TenantOpt, output: OutputOpt = Output.table, quiet: QuietOpt = False) -> None:
    """List documents under a header line: id, status, active, chunks, embedding model, filename (and
    the error if failed).

    An empty knowledge base prints "no documents" on stderr (stdout stays empty).
    """
    from switchboard.knowledge import list_sources

    async def work(sessions: Any, settings: Any) -> list[Any]:
        row = await _tenant(sessions, tenant)
        async with sessions() as session:
            return await list_sources(session, tenant_id=row.id)

    sources = _run(work)
    if output != Output.table or quiet:
        columns = [
            "id",
            "filename",
            "status",
            "is_active",
            "chunk_count",
            "embedding_model",
            "error",
            "created_at",
        ]
        print_rows([s.model_dump() for s in sources], columns=columns, output=output, quiet=quiet)
        return
    if not sources:
        typer.echo("no documents (add some with `switchboard kb add FILE... --tenant ...`)", err=True)
        return
    typer.echo(
        f"{'ID':<36}  {'STATUS':<10} {'ACTIVE':<8} {'CHUNKS':>6}  {'EMBEDDING MODEL':<{MODEL_WIDTH}} FILENAME"
    )
    for source in sources:
        active = "active" if source.is_active else "inactive"
        typer.echo(
            f"{source.id}  {source.status:<10} {active:<8} {source.chunk_count:>6}  "
            f"{shorten(source.embedding_model or '-', MODEL_WIDTH):<{MODEL_WIDTH}} {source.filename}"
            + (f"  ({' '.join(source.error.split())})" if source.error else "")  # whole, on this line
        )


MODEL_WIDTH = 28
"""The embedding model column of ``kb list`` (characters); a longer name ends in "…"."""


def _set_active(tenant: str, document: str, active: bool) -> None:
    from switchboard.knowledge import find_source, set_source_active

    async def work(sessions: Any, settings: Any) -> str:
        row = await _tenant(sessions, tenant)
        async with sessions() as session, session.begin():
            source = await find_source(session, tenant_id=row.id, document=document)
            await set_source_active(session, tenant_id=row.id, source_id=source.id, is_active=active)
            return source.filename

    name = _run(work)
    typer.echo(f"{'activated' if active else 'deactivated'} {name}")


@kb_app.command("deactivate")
@friendly_errors
def kb_deactivate(document: DocumentArg, tenant: TenantOpt) -> None:
    """Deactivate a document: its chunks stop matching at once (kept, can be re-activated)."""
    _set_active(tenant, document, False)


@kb_app.command("activate")
@friendly_errors
def kb_activate(document: DocumentArg, tenant: TenantOpt) -> None:
    """Re-activate a deactivated document."""
    _set_active(tenant, document, True)


@kb_app.command("delete")
@friendly_errors
def kb_delete(document: DocumentArg, tenant: TenantOpt) -> None:
    """Delete a document, its chunks and its stored file."""
    from switchboard.knowledge import delete_source, find_source

    async def work(sessions: Any, settings: Any) -> str:
        row = await _tenant(sessions, tenant)
        async with sessions() as session, session.begin():
            source = await find_source(session, tenant_id=row.id, document=document)
            await delete_source(session, tenant_id=row.id, source_id=source.id)
            return source.filename

    typer.echo(f"deleted {_run(work)}")


@kb_app.command("reindex")
@friendly_errors
def kb_reindex(
    tenant: TenantOpt,
    documents: Annotated[list[str] | None, typer.Argument(help="Documents (default: all).")] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="Switch the tenant to this embedding model first; refused (nothing changed) without a "
            "provider key (OPENAI_API_KEY or the tenant's, `kb set-embedding --api-key`)."
        ),
    ] = None,
) -> None:
    """Re-parse and re-embed documents now, in this process, with the tenant's embedding model."""
    from switchboard.db.models import Tenant
    from switchboard.knowledge import (
        check_model_usable,
        find_source,
        ingest_source,
        mark_for_reindex,
        switch_embedding_model,
    )

    async def work(sessions: Any, settings: Any) -> list[Any]:
        row = await _tenant(sessions, tenant)
        async with sessions() as session, session.begin():
            if model:
                stored = await session.get(Tenant, row.id)
                check_model_usable(settings, stored, model)  # else it would record X and embed offline
                switch_embedding_model(settings, stored, model)
            ids: list[uuid.UUID] | None = None
            if documents:
                ids = [(await find_source(session, tenant_id=row.id, document=d)).id for d in documents]
            sources = await mark_for_reindex(session, tenant_id=row.id, source_ids=ids)
        return [
            await ingest_source(
                sessions, settings, tenant_id=row.id, source_id=s.id, content_hash=s.content_hash
            )
            for s in sources
        ]

    reports = _run(work)
    for report in reports:
        typer.echo(
            f"{report.status:<8} {report.filename:<30} {report.chunk_count:>5} chunks  {report.embedding_model}"
            + (f"  ({report.error})" if report.error else "")
        )
    if any(report.status == "failed" for report in reports):
        raise typer.Exit(1)


@kb_app.command("set-embedding")
@friendly_errors
def kb_set_embedding(
    tenant: TenantOpt,
    model: Annotated[str | None, typer.Option(help="Embedding model, e.g. text-embedding-3-small.")] = None,
    api_base: Annotated[str | None, typer.Option(help="OpenAI-compatible base URL (http://host/v1).")] = None,
    api_key: Annotated[
        str | None, typer.Option(envvar="KB_EMBEDDING_API_KEY", help="Provider key (stored encrypted).")
    ] = None,
) -> None:
    """Set the tenant's embedding model, base URL and key. Run `kb reindex` afterwards.

    The key is stored for this base URL and model provider: without --api-key, any stored key is
    removed. The platform's OPENAI_API_KEY goes only to OpenAI's own endpoint, for the default model
    (any model with TENANTS_MAY_USE_PLATFORM_KEYS=true); never to another --api-base.
    """
    from switchboard.db.models import Tenant
    from switchboard.knowledge import resolve_embedding_config, set_tenant_embedding

    async def work(sessions: Any, settings: Any) -> Any:
        row = await _tenant(sessions, tenant)
        async with sessions() as session, session.begin():
            stored = await session.get(Tenant, row.id)
            set_tenant_embedding(settings, stored, model=model, api_key=api_key, api_base=api_base)
            return resolve_embedding_config(settings, stored)

    config = _run(work)
    typer.echo(f"embedding model in effect: {config.model} (key: {'set' if config.api_key else 'none'})")
