"""Knowledge-base benchmark: ingestion throughput, retrieval latency per mode, HNSW recall@5.

Run (starts an embedded PostgreSQL + pgvector in a temporary folder, like the tests do)::

    .venv/bin/python loadtests/kb_benchmark.py --chunks 100000 --tenants 20
    .venv/bin/python loadtests/kb_benchmark.py --chunks 5000 --queries 50        # quick
    .venv/bin/python loadtests/kb_benchmark.py --database-url postgresql://...   # an existing server

What it measures (offline lexical embedding, no provider):

1. **Ingestion throughput**: ``--ingest-chunks`` chunks of synthetic documents through the real
   pipeline (``register_upload`` + ``ingest_source``: parse, split, embed, one-transaction insert
   into the table with its HNSW and GIN indexes), in chunks per second.
2. **Bulk load** of the remaining chunks to reach ``--chunks``, spread evenly over ``--tenants``:
   lexical embeddings computed in ``--workers`` processes, rows written with binary ``COPY``, then
   the HNSW index rebuilt (its build time is printed).
3. **Retrieval latency** p50/p95 of :func:`switchboard.knowledge.search_chunks` for ``vector``,
   ``hybrid`` and ``exact`` (question embedding + ``SET LOCAL`` + the one query), each in its own
   transaction, from random tenants; questions are 5 words of a random chunk of that tenant
   (``exact``: one of its part codes).
4. **Recall@5** of ``vector`` mode (HNSW, iterative scan) against an exact scan (index scans
   disabled) for the same questions, threshold off.

Synthetic text: Zipf-distributed pseudo-words (a 6,000-word vocabulary) in sentences, about 900
characters per chunk, each chunk carrying two part codes like ``QX-1234-B``.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "libs"))

import switchboard  # noqa: E402,F401  (sets LITELLM_LOCAL_MODEL_COST_MAP before litellm loads)

VOCABULARY_SIZE = 6000
SEED = 20261130
_SYLLABLES = [c + v for c in "bcdfghjklmnprstvz" for v in "aeiou"] + ["qu", "th", "sh", "ch"]


def _vocabulary() -> tuple[list[str], list[float]]:
    rng = random.Random(SEED)
    words: set[str] = set()
    while len(words) < VOCABULARY_SIZE:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    ordered = sorted(words)
    rng.shuffle(ordered)
    weights = [1.0 / (rank + 1) ** 0.9 for rank in range(len(ordered))]  # Zipf-like
    return ordered, weights


_VOCAB, _WEIGHTS = _vocabulary()


def _code(rng: random.Random, tenant: int) -> str:
    return (
        f"{chr(65 + tenant % 26)}{chr(65 + (tenant * 7) % 26)}-{rng.randint(1000, 9999)}-{rng.choice('ABCD')}"
    )


def synthetic_chunk(tenant: int, index: int, chars: int = 900) -> tuple[str, list[str]]:
    """Deterministic chunk text number ``index`` of ``tenant``, and the part codes in it."""
    rng = random.Random(f"{SEED}:{tenant}:{index}")
    codes = [_code(rng, tenant), _code(rng, tenant)]
    sentences: list[str] = []
    length = 0
    while length < chars:
        words = rng.choices(_VOCAB, _WEIGHTS, k=rng.randint(8, 18))
        if len(sentences) == 1:
            words.insert(rng.randint(0, len(words)), codes[0])
        if len(sentences) == 4:
            words.insert(rng.randint(0, len(words)), codes[1])
        sentence = " ".join(words).capitalize() + "."
        sentences.append(sentence)
        length += len(sentence) + 1
    return " ".join(sentences)[:chars].rsplit(" ", 1)[0] + ".", codes


def _embed_rows(job: tuple[int, int, int]) -> list[tuple[int, int, str, bytes]]:
    """Worker process: (tenant, start, count) -> rows (tenant, position, text, vector binary)."""
    from pgvector import Vector
    from switchboard.llm.lexical import lexical_embedding

    tenant, start, count = job
    rows = []
    for index in range(start, start + count):
        text, _ = synthetic_chunk(tenant, index)
        rows.append((tenant, index, text, Vector(lexical_embedding(text)).to_binary()))
    return rows


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * pct / 100
    low, high = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


async def run(args: argparse.Namespace, database_url: str) -> None:
    import asyncpg
    from sqlalchemy import text
    from sqlalchemy.engine import make_url
    from switchboard.db.engine import create_engine, session_factory
    from switchboard.db.models import KnowledgeSource
    from switchboard.knowledge import ingest_source, register_upload, search_chunks
    from switchboard.knowledge.retrieval import keywords
    from switchboard.llm.lexical import LEXICAL_MODEL_NAME, lexical_embedding
    from switchboard.settings import load_settings
    from switchboard.tenants import create_tenant

    settings = load_settings(database_url=database_url, _env_file=None, log_level="WARNING")
    engine = create_engine(database_url, pool_size=4)
    sessions = session_factory(engine)
    rng = random.Random(SEED)
    run_id = uuid.uuid4().hex[:8]

    # --- tenants ------------------------------------------------------------------------------
    tenant_ids: list[uuid.UUID] = []
    async with sessions() as session, session.begin():
        for number in range(args.tenants):
            tenant = await create_tenant(session, slug=f"bench-{run_id}-{number}", name=f"Bench {number}")
            tenant_ids.append(tenant.id)

    # --- 1. ingestion through the real pipeline -----------------------------------------------
    per_doc = 40  # chunks of ~900 chars per synthetic document
    docs = max(1, args.ingest_chunks // per_doc)
    ingest_chunks = 0
    started = time.perf_counter()
    for doc in range(docs):
        tenant_index = doc % args.tenants
        body = "\n\n".join(
            synthetic_chunk(tenant_index, 10_000_000 + doc * per_doc + i)[0] for i in range(per_doc)
        )
        async with sessions() as session, session.begin():
            outcome = await register_upload(
                session,
                settings,
                tenant_id=tenant_ids[tenant_index],
                filename=f"doc-{doc}.txt",
                data=body.encode(),
            )
        report = await ingest_source(
            sessions,
            settings,
            tenant_id=tenant_ids[tenant_index],
            source_id=outcome.source.id,
            content_hash=outcome.source.content_hash,
        )
        assert report.status == "ready", report.error
        ingest_chunks += report.chunk_count
    ingest_s = time.perf_counter() - started
    print(
        f"ingestion (parse+split+lexical embed+insert, HNSW maintained): {ingest_chunks} chunks "
        f"in {ingest_s:.1f} s = {ingest_chunks / ingest_s:.1f} chunks/s"
    )

    # --- 2. bulk load to --chunks -------------------------------------------------------------
    remaining = max(0, args.chunks - ingest_chunks)
    per_tenant = remaining // args.tenants
    source_ids: list[uuid.UUID] = []
    async with sessions() as session, session.begin():
        for number, tenant_id in enumerate(tenant_ids):
            source = KnowledgeSource(
                tenant_id=tenant_id,
                filename=f"bulk-{number}.txt",
                content_hash=uuid.uuid4().hex,
                status="ready",
                embedding_model=LEXICAL_MODEL_NAME,
                chunk_count=per_tenant,
            )
            session.add(source)
            await session.flush()
            source_ids.append(source.id)
    url = make_url(database_url)
    conn = await asyncpg.connect(
        user=url.username, password=url.password, database=url.database,
        host=url.query.get("host") or url.host, port=url.port,
        statement_cache_size=0,  # a custom plan for every query (no generic plan from a cache)
    )  # fmt: skip
    # vectors arrive pre-encoded in pgvector's binary format from the embedding processes
    await conn.set_type_codec("vector", encoder=bytes, decoder=bytes, format="binary")
    await conn.execute("DROP INDEX IF EXISTS ix_knowledge_documents_embedding_hnsw")
    batch = 500
    jobs = [
        (t, s, min(batch, per_tenant - s)) for t in range(args.tenants) for s in range(0, per_tenant, batch)
    ]
    embed_started = time.perf_counter()
    loaded = 0
    next_report = 10_000
    copy_s = 0.0
    context = multiprocessing.get_context("fork")
    with context.Pool(args.workers) as pool:
        for rows in pool.imap_unordered(_embed_rows, jobs):
            records = [
                (tenant_ids[t], source_ids[t], pos, text_, vec, True, f"{t}:{pos}")
                for t, pos, text_, vec in rows
            ]
            copy_started = time.perf_counter()
            await conn.copy_records_to_table(
                "knowledge_documents",
                records=records,
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
            copy_s += time.perf_counter() - copy_started
            loaded += len(records)
            if loaded >= next_report:
                next_report += 10_000
                print(
                    f"  bulk loaded {loaded}/{per_tenant * args.tenants} "
                    f"({time.perf_counter() - embed_started:.0f} s)",
                    flush=True,
                )
    bulk_s = time.perf_counter() - embed_started
    total = await conn.fetchval("SELECT count(*) FROM knowledge_documents")
    print(
        f"bulk load: {loaded} chunks in {bulk_s:.1f} s ({args.workers} embedding processes; COPY {copy_s:.1f} s)"
        f" -> {total} chunks in the table"
    )
    await conn.execute(f"SET maintenance_work_mem = '{args.maintenance_work_mem}'")
    await conn.execute("SET max_parallel_maintenance_workers = 1")
    index_started = time.perf_counter()
    await conn.execute(
        "CREATE INDEX ix_knowledge_documents_embedding_hnsw ON knowledge_documents "
        "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
    )
    print(f"HNSW index build (m=16, ef_construction=64): {time.perf_counter() - index_started:.1f} s")
    await conn.execute("ANALYZE knowledge_documents")
    await conn.execute("ANALYZE knowledge_sources")

    # --- 3. retrieval latency -----------------------------------------------------------------
    def question(mode: str) -> tuple[int, str]:
        tenant = rng.randrange(args.tenants)
        chunk_text, codes = synthetic_chunk(tenant, rng.randrange(per_tenant or 1))
        if mode == "exact":
            return tenant, rng.choice(codes)
        words = [w for w in chunk_text.rstrip(".").lower().split() if "-" not in w]
        return tenant, " ".join(rng.sample(words, 5))

    async def timed_search(
        tenant: int, query: str, mode: str, plan_cache_mode: str | None
    ) -> tuple[float, int]:
        started_ = time.perf_counter()
        async with sessions() as session, session.begin():
            if plan_cache_mode:
                await session.exec(text(f"SET LOCAL plan_cache_mode = {plan_cache_mode}"))
            hits = await search_chunks(
                session,
                tenant_id=tenant_ids[tenant],
                query=query,
                mode=mode,  # type: ignore[arg-type]
                settings=settings,
            )
        return (time.perf_counter() - started_) * 1000, len(hits)

    print(
        f"retrieval latency of search_chunks over {args.queries} queries per mode "
        f"({total} chunks, {args.tenants} tenants, limit 5, one transaction each, question embedding included):"
    )
    runs = [("vector", None), ("hybrid", None), ("exact", None)]
    runs += [("vector", "force_custom_plan"), ("hybrid", "force_custom_plan")]
    for mode, plan_cache_mode in runs:
        for _ in range(5):  # warm-up (also fills the prepared-statement cache)
            await timed_search(*question(mode), mode, plan_cache_mode)
        latencies, empty = [], 0
        for _ in range(args.queries):
            ms, count = await timed_search(*question(mode), mode, plan_cache_mode)
            latencies.append(ms)
            empty += count == 0
        label = mode + (f" ({plan_cache_mode})" if plan_cache_mode else "")
        print(
            f"  {label:<26}  p50 {percentile(latencies, 50):7.1f} ms  p95 {percentile(latencies, 95):7.1f} ms  "
            f"mean {statistics.fmean(latencies):7.1f} ms  (no result: {empty}/{args.queries})"
        )

    # --- 4. recall@5 of the ANN query vs an exact scan ----------------------------------------
    ann_sql = (
        "SELECT id FROM knowledge_documents WHERE tenant_id = $1 AND is_active "
        "ORDER BY embedding <=> $2::vector LIMIT 5"
    )
    await conn.set_type_codec("vector", encoder=str, decoder=str, format="text")
    samples = []
    for _ in range(args.queries):
        tenant, query = question("vector")
        vector = lexical_embedding(" ".join(keywords(query)))  # what vector mode embeds (lexical model)
        samples.append((tenant_ids[tenant], "[" + ",".join(f"{v:.7g}" for v in vector) + "]"))

    async def measure(setup: list[str]) -> tuple[list[list[int]], str, list[float]]:
        results: list[list[int]] = []
        timings: list[float] = []
        plan = ""
        for sample in samples:  # one transaction per query; DDL variants roll back
            try:
                async with conn.transaction():
                    for statement in setup:
                        await conn.execute(statement)
                    if not plan:
                        rows = await conn.fetch("EXPLAIN " + ann_sql, *sample)
                        plan = " / ".join(r[0].strip().lstrip("-> ") for r in rows if "Scan" in r[0])
                    started_ = time.perf_counter()
                    results.append([row[0] for row in await conn.fetch(ann_sql, *sample)])
                    timings.append((time.perf_counter() - started_) * 1000)
                    raise _Rollback
            except _Rollback:
                pass
        return results, plan, timings

    def hnsw(order: str, ef_search: int, forced: bool) -> list[str]:
        setup = [f"SET LOCAL hnsw.iterative_scan = '{order}'", f"SET LOCAL hnsw.ef_search = {ef_search}"]
        if forced:  # drop the tenant btree indexes inside the (rolled back) transaction
            setup += [
                "SET LOCAL enable_seqscan = off",
                "DROP INDEX ix_knowledge_documents_tenant_active",
                "DROP INDEX ix_knowledge_documents_tenant_id",
            ]
        return setup

    async with conn.transaction():
        await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        await conn.execute(f"SET LOCAL hnsw.ef_search = {settings.kb_hnsw_ef_search}")
        rows = await conn.fetch("EXPLAIN " + ann_sql, *samples[0])
        generic_plan = " / ".join(r[0].strip().lstrip("-> ") for r in rows if "Scan" in r[0])
    print(f"generic plan of the ANN query (what a cached prepared statement may switch to): [{generic_plan}]")
    exact, exact_plan, exact_ms = await measure(
        ["SET LOCAL enable_indexscan = off", "SET LOCAL enable_bitmapscan = off"]
    )
    ef = settings.kb_hnsw_ef_search
    variants = [
        (
            f"planner's choice (ef_search={ef}, relaxed_order; what vector mode runs)",
            hnsw("relaxed_order", ef, False),
        ),
        (f"HNSW forced, ef_search={ef}, relaxed_order", hnsw("relaxed_order", ef, True)),
        (f"HNSW forced, ef_search={ef}, strict_order", hnsw("strict_order", ef, True)),
        ("HNSW forced, ef_search=400, relaxed_order", hnsw("relaxed_order", 400, True)),
        (
            "exact via the tenant btree (index scans off: bitmap scan + sort)",
            ["SET LOCAL enable_indexscan = off"],
        ),
    ]
    print(
        f"recall of the tenant-filtered top-5 vector query vs an exact scan ({args.queries} queries, "
        "threshold off, custom plans); top-1 = the exact nearest chunk is among the 5:"
    )
    print(
        f"  exact scan: p50 {percentile(exact_ms, 50):.1f} ms, p95 {percentile(exact_ms, 95):.1f} ms  [{exact_plan}]"
    )
    for label, setup in variants:
        found, plan, timings = await measure(setup)
        recall5 = sum(len(set(e) & set(f)) for e, f in zip(exact, found, strict=True)) / max(
            1, sum(len(e) for e in exact)
        )
        top1 = sum(bool(e) and e[0] in f for e, f in zip(exact, found, strict=True)) / max(1, len(exact))
        print(
            f"  {label}: recall@5 {recall5:.3f}, top-1 found {top1:.3f}, p50 {percentile(timings, 50):.1f} ms, "
            f"p95 {percentile(timings, 95):.1f} ms  [{plan}]"
        )
    await conn.close()
    await engine.dispose()


class _Rollback(Exception):
    """Raised to roll back a measurement transaction."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000, help="total chunks in the table")
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--ingest-chunks", type=int, default=2000, help="chunks ingested via the pipeline")
    parser.add_argument("--queries", type=int, default=200, help="queries per mode (and for recall)")
    parser.add_argument("--workers", type=int, default=2, help="processes computing bulk embeddings")
    parser.add_argument("--maintenance-work-mem", default="2GB", help="for the HNSW build")
    parser.add_argument("--database-url", help="use this server instead of an embedded one")
    args = parser.parse_args()

    from switchboard.db.migrate import upgrade
    from switchboard.observability import configure_logging
    from switchboard.runtime.embedded import EmbeddedPostgres

    configure_logging(service="kb-benchmark", level="WARNING", fmt="console")
    if args.database_url:
        upgrade(args.database_url)
        asyncio.run(run(args, args.database_url))
        return
    with tempfile.TemporaryDirectory(prefix="kb-bench-") as folder:
        pg = EmbeddedPostgres(Path(folder) / "postgres")
        url = pg.start()
        try:
            upgrade(url)
            asyncio.run(run(args, url))
        finally:
            pg.stop()


if __name__ == "__main__":
    main()
