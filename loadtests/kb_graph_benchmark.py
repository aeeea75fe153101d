"""Graph-retrieval benchmark (issue 19): supporting-chunk recall@5 per mode and latency at 100,000 chunks.

Run (starts an embedded PostgreSQL + pgvector in a temporary folder, like the tests do)::

    .venv/bin/python loadtests/kb_graph_benchmark.py                       # 100,000 chunks, 20 tenants
    .venv/bin/python loadtests/kb_graph_benchmark.py --chunks 10000 --tenants 4   # quick
    .venv/bin/python loadtests/kb_graph_benchmark.py --database-url postgresql://...

What it does (offline lexical embedding and the deterministic extractor, no provider):

1. **Ingestion** through the real pipeline (``register_upload`` + ``ingest_source``: parse, split,
   embed, extract entities and relations, one-transaction insert of chunks and graph): the valve
   corpus of ``tests/utils/graph_corpus.py`` (62 chunks: material property sheets, a compatibility
   table, series specs, parts and replacements tables, an FAQ) into every tenant, then
   ``--ingest-chunks`` chunks of synthetic manuals; chunks/s for each.
2. **Filler** to reach ``--chunks``: synthetic chunks (``loadtests/kb_benchmark.py``'s ``topics``
   corpus, two part codes each) written with binary ``COPY``, with their part codes as entities and
   mentions (``COPY`` too), the HNSW index rebuilt afterwards.
3. **Questions** (90, each asked in every ``--question-tenants``-th tenant): 50 multi-hop (support in
   3 documents: "Can the V200 valve be used with chlorine at 180 °C?" needs the V200 spec, the
   PTFE/chlorine row and the PTFE sheet), 20 single-hop (15 about one entity, 5 FAQ questions naming
   none), 20 exact SKUs. recall@5 = supporting chunks among the 5 hits / supporting chunks.
4. Modes: ``vector``, ``hybrid`` without the graph walk (what search did before issue 19),
   ``hybrid`` (default), ``graph``, ``neighborhood``, ``exact``; p50/p95 latency of
   :func:`switchboard.knowledge.search_chunks` (each call in its own transaction, question
   embedding included) per mode over all questions.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "libs"))
sys.path.insert(0, str(ROOT))

import switchboard  # noqa: E402,F401

from loadtests import kb_benchmark  # noqa: E402  (synthetic filler chunks, percentile)
from tests.utils.graph_corpus import documents, questions  # noqa: E402

MODES: list[tuple[str, str, bool | None]] = [
    ("vector", "vector", None),
    ("hybrid before #19 (no graph)", "hybrid", False),
    ("hybrid", "hybrid", None),
    ("graph", "graph", None),
    ("neighborhood", "neighborhood", None),
    ("exact", "exact", None),
]


def _filler(job: tuple[int, int, int]) -> list[tuple[int, int, str, bytes, list[str]]]:
    """Worker process: (tenant, start, count) -> (tenant, position, text, vector binary, codes)."""
    from pgvector import Vector
    from switchboard.llm.lexical import lexical_embedding

    tenant, start, count = job
    rows = []
    for index in range(start, start + count):
        text, codes = kb_benchmark.synthetic_chunk(tenant, index)
        rows.append((tenant, index, text, Vector(lexical_embedding(text)).to_binary(), codes))
    return rows


async def run(args: argparse.Namespace, database_url: str) -> None:
    import asyncpg
    from sqlalchemy.engine import make_url
    from switchboard.db.engine import create_engine, session_factory
    from switchboard.db.models import KnowledgeSource
    from switchboard.knowledge import ingest_source, register_upload, search_chunks
    from switchboard.knowledge.graph import normalize_name
    from switchboard.llm.lexical import LEXICAL_MODEL_NAME
    from switchboard.settings import load_settings
    from switchboard.tenants import create_tenant

    settings = load_settings(database_url=database_url, _env_file=None, log_level="WARNING")
    engine = create_engine(database_url, pool_size=4)
    sessions = session_factory(engine)
    run_id = uuid.uuid4().hex[:8]
    tenant_ids: list[uuid.UUID] = []
    async with sessions() as session, session.begin():
        for number in range(args.tenants):
            tenant = await create_tenant(session, slug=f"graph-{run_id}-{number}", name=f"Graph {number}")
            tenant_ids.append(tenant.id)

    async def ingest(tenant_id: uuid.UUID, name: str, data: bytes) -> int:
        async with sessions() as session, session.begin():
            outcome = await register_upload(session, settings, tenant_id=tenant_id, filename=name, data=data)
        report = await ingest_source(
            sessions, settings, tenant_id=tenant_id, source_id=outcome.source.id,
            content_hash=outcome.source.content_hash,
        )  # fmt: skip
        assert report.status == "ready", report.error
        return report.chunk_count

    # --- 1. ingestion through the real pipeline -------------------------------------------------
    corpus = documents()
    started, corpus_chunks = time.perf_counter(), 0
    for tenant_id in tenant_ids:
        for name, data in corpus.items():
            corpus_chunks += await ingest(tenant_id, name, data)
    corpus_s = time.perf_counter() - started
    print(
        f"ingestion, valve corpus ({len(corpus)} documents x {args.tenants} tenants; parse+split+embed+"
        f"extract+insert): {corpus_chunks} chunks in {corpus_s:.1f} s = {corpus_chunks / corpus_s:.0f} chunks/s"
    )
    per_doc = kb_benchmark.CHUNKS_PER_DOCUMENT
    started, manual_chunks = time.perf_counter(), 0
    for doc in range(max(0, args.ingest_chunks // per_doc)):
        tenant = doc % args.tenants
        body = "\n\n".join(
            kb_benchmark.synthetic_chunk(tenant, 10_000_000 + doc * per_doc + i)[0] for i in range(per_doc)
        )
        manual_chunks += await ingest(tenant_ids[tenant], f"manual-{doc}.txt", body.encode())
    if manual_chunks:
        manual_s = time.perf_counter() - started
        print(
            f"ingestion, synthetic manuals (~900-character chunks, two part codes each): {manual_chunks} "
            f"chunks in {manual_s:.1f} s = {manual_chunks / manual_s:.0f} chunks/s"
        )

    # --- 2. filler by COPY, with its part codes as entities and mentions --------------------------
    remaining = max(0, args.chunks - corpus_chunks - manual_chunks)
    per_tenant = remaining // args.tenants
    source_ids: list[uuid.UUID] = []
    async with sessions() as session, session.begin():
        for number, tenant_id in enumerate(tenant_ids):
            source = KnowledgeSource(
                tenant_id=tenant_id, filename=f"filler-{number}.txt", content_hash=uuid.uuid4().hex,
                status="ready", embedding_model=LEXICAL_MODEL_NAME, chunk_count=per_tenant,
            )  # fmt: skip
            session.add(source)
            await session.flush()
            source_ids.append(source.id)
    url = make_url(database_url)
    conn = await asyncpg.connect(
        user=url.username, password=url.password, database=url.database,
        host=url.query.get("host") or url.host, port=url.port, statement_cache_size=0,
    )  # fmt: skip
    await conn.set_type_codec("vector", encoder=bytes, decoder=bytes, format="binary")
    await conn.execute("DROP INDEX IF EXISTS ix_knowledge_documents_embedding_hnsw")
    jobs = [(t, s, min(500, per_tenant - s)) for t in range(args.tenants) for s in range(0, per_tenant, 500)]
    codes: dict[tuple[int, str], list[int]] = {}
    started = time.perf_counter()
    loaded = 0
    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        for rows in pool.imap_unordered(_filler, jobs):
            await conn.copy_records_to_table(
                "knowledge_documents",
                records=[
                    (tenant_ids[t], source_ids[t], pos, text_, vec, True, f"f{t}:{pos}")
                    for t, pos, text_, vec, _ in rows
                ],  # fmt: skip
                columns=[
                    "tenant_id",
                    "source_id",
                    "position",
                    "text",
                    "embedding",
                    "is_active",
                    "content_hash",
                ],
            )
            for t, pos, _, _, chunk_codes in rows:
                for code in chunk_codes:
                    codes.setdefault((t, code), []).append(pos)
            loaded += len(rows)
    chunk_ids = {
        row["content_hash"]: row["id"]
        for row in await conn.fetch(
            "SELECT id, content_hash FROM knowledge_documents WHERE source_id = ANY($1::uuid[])", source_ids
        )
    }
    await conn.copy_records_to_table(
        "kg_entities",
        records=[(tenant_ids[t], "product", code, normalize_name(code)) for t, code in codes],
        columns=["tenant_id", "kind", "name", "norm_name"],
    )
    entity_ids = {
        (row["tenant_id"], row["norm_name"]): row["id"]
        for row in await conn.fetch("SELECT id, tenant_id, norm_name FROM kg_entities WHERE kind = 'product'")
    }
    mentions = {
        (entity_ids[(tenant_ids[t], normalize_name(code))], chunk_ids[f"f{t}:{pos}"]): (
            tenant_ids[t],
            source_ids[t],
        )
        for (t, code), positions in codes.items()
        for pos in positions
    }
    await conn.copy_records_to_table(
        "kg_mentions",
        records=[(e, c, tenant, source) for (e, c), (tenant, source) in mentions.items()],
        columns=["entity_id", "chunk_id", "tenant_id", "source_id"],
    )
    filler_s = time.perf_counter() - started
    await conn.execute("SET maintenance_work_mem = '1GB'")
    started = time.perf_counter()
    await conn.execute(
        "CREATE INDEX ix_knowledge_documents_embedding_hnsw ON knowledge_documents "
        "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
    )
    index_s = time.perf_counter() - started
    for table in ("knowledge_documents", "knowledge_sources", "kg_entities", "kg_mentions", "kg_relations"):
        await conn.execute(f"ANALYZE {table}")
    totals = await conn.fetchrow(
        "SELECT (SELECT count(*) FROM knowledge_documents) AS chunks, (SELECT count(*) FROM kg_entities) AS "
        "entities, (SELECT count(*) FROM kg_mentions) AS mentions, (SELECT count(*) FROM kg_relations) AS relations"
    )
    print(
        f"filler: {loaded} chunks + {len(codes)} entities + {len(mentions)} mentions by COPY in {filler_s:.1f} s "
        f"({args.workers} embedding processes); HNSW rebuild {index_s:.1f} s -> {totals['chunks']} chunks, "
        f"{totals['entities']} entities, {totals['mentions']} mentions, {totals['relations']} relations, "
        f"{args.tenants} tenants (~{totals['chunks'] // args.tenants} chunks each)"
    )

    # --- 3. questions and their supporting chunk ids, per tenant ------------------------------------
    support_rows = await conn.fetch(
        "SELECT d.id, d.tenant_id, s.filename, d.text FROM knowledge_documents d "
        "JOIN knowledge_sources s ON s.id = d.source_id WHERE s.filename = ANY($1::text[])",
        list(corpus),
    )
    await conn.close()
    asked: list[tuple[int, Any, set[int]]] = []
    rng = random.Random(20261201)
    for question in questions():
        for tenant in rng.sample(range(args.tenants), min(args.question_tenants, args.tenants)):
            wanted = set()
            for filename, marker in question.support:
                match = [
                    r["id"]
                    for r in support_rows
                    if r["tenant_id"] == tenant_ids[tenant]
                    and r["filename"] == filename
                    and marker in r["text"]
                ]
                assert len(match) == 1, (question.text, filename, marker, len(match))
                wanted.add(match[0])
            asked.append((tenant, question, wanted))

    # --- 4. every mode: recall@5 and latency ----------------------------------------------------------
    print(
        f"search_chunks, {len(asked)} questions ({len(questions())} x {args.question_tenants} tenants), "
        "limit 5, one transaction each, question embedding included:"
    )
    kinds = ("multi_hop", "single_hop", "exact_sku")
    header = f"  {'mode':<30}" + "".join(f"{k + ' r@5':>16}" for k in kinds) + f"{'p50 ms':>9}{'p95 ms':>9}"
    print(header)
    for label, mode, use_graph in MODES:
        for tenant, question, _ in asked[:5]:  # warm-up
            async with sessions() as session, session.begin():
                await search_chunks(session, tenant_id=tenant_ids[tenant], query=question.text, mode=mode,  # type: ignore[arg-type]
                                    settings=settings, use_graph=use_graph)  # fmt: skip
        latencies: list[float] = []
        found = dict.fromkeys(kinds, 0)
        wanted_total = dict.fromkeys(kinds, 0)
        for tenant, question, wanted in asked:
            started = time.perf_counter()
            async with sessions() as session, session.begin():
                hits = await search_chunks(session, tenant_id=tenant_ids[tenant], query=question.text, mode=mode,  # type: ignore[arg-type]
                                           settings=settings, use_graph=use_graph)  # fmt: skip
            latencies.append((time.perf_counter() - started) * 1000)
            found[question.kind] += len(wanted & {hit.chunk_id for hit in hits})
            wanted_total[question.kind] += len(wanted)
        print(
            f"  {label:<30}"
            + "".join(f"{found[k] / max(1, wanted_total[k]):>16.3f}" for k in kinds)
            + f"{kb_benchmark.percentile(latencies, 50):>9.1f}{kb_benchmark.percentile(latencies, 95):>9.1f}"
        )
    await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000, help="total chunks in the table")
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument(
        "--ingest-chunks", type=int, default=1000, help="synthetic chunks through the pipeline"
    )
    parser.add_argument("--question-tenants", type=int, default=3, help="tenants each question is asked in")
    parser.add_argument("--workers", type=int, default=2, help="processes computing filler embeddings")
    parser.add_argument("--database-url", help="use this server instead of an embedded one")
    args = parser.parse_args()

    from switchboard.db.migrate import upgrade
    from switchboard.observability import configure_logging
    from switchboard.runtime.embedded import EmbeddedPostgres

    configure_logging(service="kb-graph-benchmark", level="WARNING", fmt="console")
    if args.database_url:
        upgrade(args.database_url)
        asyncio.run(run(args, args.database_url))
        return
    with tempfile.TemporaryDirectory(prefix="kb-graph-bench-") as folder:
        pg = EmbeddedPostgres(Path(folder) / "postgres")
        url = pg.start()
        try:
            upgrade(url)
            asyncio.run(run(args, url))
        finally:
            pg.stop()


if __name__ == "__main__":
    main()
