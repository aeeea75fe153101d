"""Knowledge-base benchmark: ingestion throughput, retrieval latency and recall@5 per mode and strategy.

Run (starts an embedded PostgreSQL + pgvector in a temporary folder, like the tests do)::

    .venv/bin/python loadtests/kb_benchmark.py --chunks 100000 --tenants 20 --corpus topics
    .venv/bin/python loadtests/kb_benchmark.py --chunks 100000 --tenants 20 --corpus uniform
    .venv/bin/python loadtests/kb_benchmark.py --chunks 5000 --queries 50        # quick
    .venv/bin/python loadtests/kb_benchmark.py --database-url postgresql://...   # an existing server

What it measures (offline lexical embedding, no provider):

1. **Ingestion throughput**: ``--ingest-chunks`` chunks of synthetic documents through the real
   pipeline (``register_upload`` + ``ingest_source``: parse, split, embed, one-transaction insert
   into the table with its HNSW and GIN indexes), in chunks per second.
2. **Bulk load** of the remaining chunks to reach ``--chunks``, spread evenly over ``--tenants``:
   lexical embeddings computed in ``--workers`` processes, rows written with binary ``COPY``, then
   the HNSW index rebuilt (its build time is printed).
3. **Questions and ground truth**: ``--queries`` questions about random chunks of random tenants
   (see :func:`synthetic_question`) and, for each, the exact top 5 by cosine distance (a plain
   scan and sort, index scans disabled).
4. **search_chunks** (:func:`switchboard.knowledge.search_chunks`, each call in its own
   transaction, question embedding included), p50/p95 latency for ``vector`` with the exact tenant
   scan and with the HNSW index at each ``--ef-search`` value, ``hybrid`` both ways, ``exact``
   (a part code of the chunk); recall@5 against the ground truth (threshold off) and how often the
   question's own chunk is among the hits.
5. **The SQL alone** (``EXPLAIN ANALYZE`` execution time of the query search_chunks runs), to
   separate the query from the rest (round trips, embedding the question).
6. **Cost of an exact scan** by number of rows (1, 2, 4 and 8 tenants' chunks): what
   ``KB_EXACT_SCAN_MAX_CHUNKS`` trades against recall.

Synthetic text (``--corpus``), about 900 characters per chunk, two part codes like ``QX-1234-B``
each, words from a 6,000-word Zipf-distributed pseudo-word vocabulary:

* ``topics`` (default): each tenant has 8 product lines of 12 subtopics; a document (40 chunks)
  is about one product line, and 30% of a chunk's words come from its subtopic's 30 words and 25%
  from its product line's 150, so related chunks share words as in real manuals. Questions
  paraphrase a chunk: 4 of its words and 1 word of its subtopic that it may not contain.
* ``uniform``: every word drawn from the whole vocabulary (the previous corpus: nearly every chunk
  is equally far from a question, the hardest case for a graph index). Questions: 5 words of a chunk.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
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


TOPICS_PER_TENANT = 8
"""``--corpus topics``: product lines per tenant; each document (40 chunks) is about one of them."""
SUBTOPICS_PER_TOPIC = 12
TOPIC_WORDS = 150
SUBTOPIC_WORDS = 30
CHUNKS_PER_DOCUMENT = 40
_CUM_WEIGHTS = list(itertools.accumulate(_WEIGHTS))
_TOPIC_CUM_WEIGHTS = list(itertools.accumulate(1.0 / (rank + 1) ** 0.9 for rank in range(TOPIC_WORDS)))
CORPUS = "topics"
"""Which generator :func:`synthetic_chunk` uses (set from ``--corpus`` before worker processes fork)."""


@functools.cache
def _topic_words(tenant: int, topic: int, subtopic: int | None = None) -> list[str]:
    """A tenant's topic (or subtopic) vocabulary: words outside the 300 most frequent ones."""
    rng = random.Random(f"{SEED}:topic:{tenant}:{topic}:{subtopic}")
    return rng.sample(_VOCAB[300:], TOPIC_WORDS if subtopic is None else SUBTOPIC_WORDS)


def _chunk_topic(tenant: int, index: int) -> tuple[int, int]:
    """(topic, subtopic) of chunk ``index``: the topic is its document's, the subtopic its own."""
    document = index // CHUNKS_PER_DOCUMENT
    topic = random.Random(f"{SEED}:doc:{tenant}:{document}").randrange(TOPICS_PER_TENANT)
    return topic, random.Random(f"{SEED}:sub:{tenant}:{index}").randrange(SUBTOPICS_PER_TOPIC)


def synthetic_chunk(tenant: int, index: int, chars: int = 900) -> tuple[str, list[str]]:
    """Deterministic chunk text number ``index`` of ``tenant``, and the part codes in it.

    ``uniform``: every word drawn from the Zipf vocabulary, so chunks share only common words.
    ``topics``: 30% of the words from the chunk's subtopic (30 words), 25% from its topic (150
    words, Zipf within), the rest from the Zipf vocabulary: chunks of one subtopic are near each
    other, like sections of manuals about one product line.
    """
    rng = random.Random(f"{SEED}:{tenant}:{index}")
    codes = [_code(rng, tenant), _code(rng, tenant)]
    if CORPUS == "topics":
        topic, subtopic = _chunk_topic(tenant, index)
        topic_words, sub_words = _topic_words(tenant, topic), _topic_words(tenant, topic, subtopic)

    def word() -> str:
        if CORPUS == "topics":
            draw = rng.random()
            if draw < 0.30:
                return rng.choice(sub_words)
            if draw < 0.55:
                return rng.choices(topic_words, cum_weights=_TOPIC_CUM_WEIGHTS)[0]
        return rng.choices(_VOCAB, cum_weights=_CUM_WEIGHTS)[0]

    sentences: list[str] = []
    length = 0
    while length < chars:
        words = [word() for _ in range(rng.randint(8, 18))]
        if len(sentences) == 1:
            words.insert(rng.randint(0, len(words)), codes[0])
        if len(sentences) == 4:
            words.insert(rng.randint(0, len(words)), codes[1])
        sentence = " ".join(words).capitalize() + "."
        sentences.append(sentence)
        length += len(sentence) + 1
    return " ".join(sentences)[:chars].rsplit(" ", 1)[0] + ".", codes


def synthetic_question(tenant: int, index: int, rng: random.Random) -> str:
    """A 5-word question about chunk ``index`` of ``tenant``.

    ``uniform``: 5 words of the chunk. ``topics``: a paraphrase: 4 distinct words of the chunk
    and 1 word of its subtopic that the chunk may or may not contain.
    """
    chunk_text, _ = synthetic_chunk(tenant, index)
    words = sorted({w for w in chunk_text.rstrip(".").lower().split() if "-" not in w})
    if CORPUS == "topics":
        topic, subtopic = _chunk_topic(tenant, index)
        return " ".join(rng.sample(words, 4) + [rng.choice(_topic_words(tenant, topic, subtopic))])
    return " ".join(rng.sample(words, 5))


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

    # --- 3. questions, their target chunks and the exact top 5 (ground truth) -----------------
    samples: list[tuple[int, str, str]] = []  # (tenant, question, content_hash of the target chunk)
    for _ in range(args.queries):
        tenant, index = rng.randrange(args.tenants), rng.randrange(per_tenant or 1)
        samples.append((tenant, synthetic_question(tenant, index, rng), f"{tenant}:{index}"))
    target_ids = dict(
        await conn.fetch(
            "SELECT content_hash, id FROM knowledge_documents WHERE content_hash = ANY($1::text[])",
            [target for _, _, target in samples],
        )
    )
    await conn.set_type_codec("vector", encoder=str, decoder=str, format="text")

    def qvec(query: str) -> str:  # what vector mode embeds with the lexical model: the keywords
        return "[" + ",".join(f"{v:.7g}" for v in lexical_embedding(" ".join(keywords(query)))) + "]"

    exact_sql = (
        "SELECT id FROM knowledge_documents WHERE tenant_id = ANY($1::uuid[]) AND is_active "
        "ORDER BY embedding <=> $2::vector, id LIMIT 5"
    )
    truth: list[list[int]] = []
    async with conn.transaction():  # a plain scan and sort: no index can change the answer
        for statement in ("enable_indexscan", "enable_bitmapscan"):
            await conn.execute(f"SET LOCAL {statement} = off")
        for tenant, query, _ in samples:
            truth.append([row[0] for row in await conn.fetch(exact_sql, [tenant_ids[tenant]], qvec(query))])
    target_in_truth = sum(target_ids[t] in e for (_, _, t), e in zip(samples, truth, strict=True))
    print(
        f"questions ({args.corpus} corpus): {len(samples)}; their source chunk is among the exact "
        f"top 5 by cosine for {target_in_truth / len(samples):.0%} of them"
    )

    # --- 4. search_chunks: latency, recall@5 against the exact top 5, source chunk found --------
    async def timed_search(
        tenant: int, query: str, mode: str, settings_, min_similarity: float | None
    ) -> tuple[float, list[int]]:
        started_ = time.perf_counter()
        async with sessions() as session, session.begin():
            hits = await search_chunks(
                session,
                tenant_id=tenant_ids[tenant],
                query=query,
                mode=mode,  # type: ignore[arg-type]
                settings=settings_,
                min_similarity=min_similarity,
            )
        return (time.perf_counter() - started_) * 1000, [hit.chunk_id for hit in hits]

    exact_settings = settings.model_copy(update={"kb_exact_scan_max_chunks": 10**9})
    print(
        f"search_chunks over {args.queries} questions ({total} chunks, {args.tenants} tenants, "
        f"~{per_tenant + ingest_chunks // args.tenants} chunks each; limit 5; one transaction each, "
        "question embedding included). recall@5 = share of the exact top 5 returned (threshold off); "
        "found = the question's source chunk is among the hits:"
    )
    runs: list[tuple[str, str, Any, float | None]] = [
        ("vector, exact tenant scan", "vector", exact_settings, -1.0),
    ]
    for ef in args.ef_search:
        hnsw_settings = settings.model_copy(update={"kb_exact_scan_max_chunks": 0, "kb_hnsw_ef_search": ef})
        runs.append((f"vector, HNSW ef_search={ef}", "vector", hnsw_settings, -1.0))
    runs += [
        ("hybrid, exact tenant scan (threshold on)", "hybrid", exact_settings, None),
        (
            f"hybrid, HNSW ef_search={settings.kb_hnsw_ef_search} (threshold on)",
            "hybrid",
            settings.model_copy(update={"kb_exact_scan_max_chunks": 0}),
            None,
        ),
        ("exact (part codes)", "exact", settings, None),
    ]
    for label, mode, settings_, min_similarity in runs:
        for tenant, query, _ in samples[:5]:  # warm-up
            await timed_search(tenant, query, mode, settings_, min_similarity)
        latencies, recalls, found, empty = [], 0, 0, 0
        for (tenant, query, target), expected in zip(samples, truth, strict=True):
            if mode == "exact":
                _, codes = synthetic_chunk(*map(int, target.split(":")))
                query = codes[0]
            ms, ids = await timed_search(tenant, query, mode, settings_, min_similarity)
            latencies.append(ms)
            recalls += len(set(ids) & set(expected))
            found += target_ids[target] in ids
            empty += not ids
        quality = f"found {found / len(samples):.0%}"
        if mode == "vector":
            quality = f"recall@5 {recalls / max(1, sum(map(len, truth))):.3f}, " + quality
        print(
            f"  {label:<42} p50 {percentile(latencies, 50):6.1f} ms  p95 {percentile(latencies, 95):6.1f} ms  "
            f"{quality}  (no result: {empty})"
        )

    # --- 5. where the time goes: the search query alone (EXPLAIN ANALYZE) ------------------------
    from switchboard.knowledge.retrieval import explain_search

    default_hnsw = settings.model_copy(update={"kb_exact_scan_max_chunks": 0})
    for label, settings_ in (
        ("exact tenant scan", exact_settings),
        (f"HNSW ef_search={settings.kb_hnsw_ef_search}", default_hnsw),
    ):
        for mode in ("vector", "hybrid"):
            executions = []
            for tenant, query, _ in samples[: min(50, len(samples))]:
                async with sessions() as session, session.begin():
                    _, plan = await explain_search(
                        session,
                        tenant_id=tenant_ids[tenant],
                        query=query,
                        mode=mode,  # type: ignore[arg-type]
                        settings=settings_,
                        analyze=True,
                    )
                executions.append(float(plan[-1].split(":")[1].split()[0]))  # "Execution Time: x ms"
            print(
                f"  SQL alone ({mode}, {label}, EXPLAIN ANALYZE execution time): "
                f"p50 {percentile(executions, 50):.1f} ms, p95 {percentile(executions, 95):.1f} ms"
            )

    # --- 6. cost of an exact scan by tenant size ------------------------------------------------
    scan_sql = (
        "WITH rows AS MATERIALIZED (SELECT id, embedding <=> $2::vector AS distance FROM knowledge_documents "
        "WHERE tenant_id = ANY($1::uuid[]) AND is_active) SELECT id FROM rows ORDER BY distance, id LIMIT 5"
    )
    print("exact scan (tenant index, materialized, sorted) by number of rows scanned, SQL alone:")
    for group in (1, 2, 4, 8):
        if group > args.tenants:
            break
        timings = []
        for tenant, query, _ in samples[:30]:
            ids = [tenant_ids[(tenant + k) % args.tenants] for k in range(group)]
            started_ = time.perf_counter()
            await conn.fetch(scan_sql, ids, qvec(query))
            timings.append((time.perf_counter() - started_) * 1000)
        print(
            f"  {group * (per_tenant + ingest_chunks // args.tenants):>7} rows: "
            f"p50 {percentile(timings, 50):6.1f} ms  p95 {percentile(timings, 95):6.1f} ms"
        )
    await conn.close()
    await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000, help="total chunks in the table")
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--ingest-chunks", type=int, default=2000, help="chunks ingested via the pipeline")
    parser.add_argument("--queries", type=int, default=200, help="queries per mode (and for recall)")
    parser.add_argument("--workers", type=int, default=2, help="processes computing bulk embeddings")
    parser.add_argument("--maintenance-work-mem", default="2GB", help="for the HNSW build")
    parser.add_argument("--database-url", help="use this server instead of an embedded one")
    parser.add_argument(
        "--corpus",
        choices=["topics", "uniform"],
        default="topics",
        help="topics: tenants' documents about a few product lines; uniform: random Zipf words",
    )
    parser.add_argument(
        "--ef-search", type=int, nargs="+", default=[40, 100, 200], help="hnsw.ef_search values to compare"
    )
    args = parser.parse_args()
    global CORPUS
    CORPUS = args.corpus

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
