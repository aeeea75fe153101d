"""Setup shared by the knowledge-base benchmarks (``kb_benchmark.py``, ``kb_graph_benchmark.py``).

* the synthetic corpus (:func:`synthetic_chunk`, :func:`synthetic_question`): ~900-character chunks
  with two part codes each (``QX-1234-B``), words from a 6,000-word Zipf-distributed pseudo-word
  vocabulary; ``topics`` (default: each tenant writes about 8 product lines of 12 subtopics, a
  document of 40 chunks is about one line) or ``uniform`` (every word from the whole vocabulary);
* the database (:func:`database`): an embedded PostgreSQL + pgvector in a temporary folder, migrated,
  or ``--database-url``;
* tenants, ingestion through the real pipeline (:func:`ingest_file`, :func:`ingest_manuals`: register
  the upload, then ``ingest_source``: parse, split, embed, extract the graph, one transaction), and
  the bulk filler (:func:`bulk_fill`: embeddings in worker processes, binary ``COPY`` of the chunks,
  optionally their part codes as graph entities and mentions, then every tenant's partial HNSW index built);
* :func:`timed_search` (``search_chunks`` in its own transaction, wall-clock ms) and :func:`percentile`;
* the common command line (:func:`add_common_arguments`), whose ``--quick`` picks a run of under
  two minutes: 10,000 chunks over 2 tenants, i.e. the same ~5,000 chunks per tenant as the full
  100,000 over 20.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import itertools
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "libs"))
sys.path.insert(0, str(ROOT))

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
"""``topics`` corpus: product lines per tenant; each document (40 chunks) is about one of them."""
SUBTOPICS_PER_TOPIC = 12
TOPIC_WORDS = 150
SUBTOPIC_WORDS = 30
CHUNKS_PER_DOCUMENT = 40
_CUM_WEIGHTS = list(itertools.accumulate(_WEIGHTS))
_TOPIC_CUM_WEIGHTS = list(itertools.accumulate(1.0 / (rank + 1) ** 0.9 for rank in range(TOPIC_WORDS)))
CORPUS = "topics"
"""Which generator :func:`synthetic_chunk` uses (set with :func:`set_corpus` before worker processes fork)."""


def set_corpus(name: str) -> None:
    global CORPUS
    CORPUS = name


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
    """Deterministic chunk text number ``index`` of ``tenant``, and the two part codes in it.

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


def manual(tenant: int, document: int) -> bytes:
    """A synthetic manual (``CHUNKS_PER_DOCUMENT`` paragraphs of ~900 characters) for the real pipeline."""
    first = 10_000_000 + document * CHUNKS_PER_DOCUMENT
    return "\n\n".join(synthetic_chunk(tenant, first + i)[0] for i in range(CHUNKS_PER_DOCUMENT)).encode()


def percentile(values: list[float], pct: float) -> float:
    """Linear-interpolated percentile ``pct`` (0-100) of ``values``."""
    ordered = sorted(values)
    k = (len(ordered) - 1) * pct / 100
    low, high = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


def paired_summary(
    timings: dict[str, list[float]], before: str, after: str
) -> tuple[dict[str, float], dict[str, float], float]:
    """An interleaved per-question A/B: ``(p50 by side, p95 by side, median of after/before per question)``.

    ``timings[side][i]`` is question ``i``'s time on that side (ms); both lists have the same length.
    The p95 is the nearest-rank value (the A/B scripts' figures since ``kb_coarse_ab.py``).
    """
    p50 = {side: statistics.median(values) for side, values in timings.items()}
    p95 = {side: sorted(values)[int(len(values) * 0.95)] for side, values in timings.items()}
    ratio = statistics.median(a / b for a, b in zip(timings[after], timings[before], strict=True))
    return p50, p95, ratio


def _embed_rows(job: tuple[int, int, int]) -> list[tuple[int, int, str, bytes, list[str]]]:
    """Worker process: (tenant, start, count) -> rows (tenant, position, text, vector binary, codes)."""
    from pgvector import Vector
    from switchboard.llm.lexical import lexical_embedding

    tenant, start, count = job
    rows = []
    for index in range(start, start + count):
        text, codes = synthetic_chunk(tenant, index)
        rows.append((tenant, index, text, Vector(lexical_embedding(text)).to_binary(), codes))
    return rows


def add_common_arguments(parser: argparse.ArgumentParser, *, ingest_chunks: int) -> None:
    parser.add_argument("--quick", action="store_true", help="10,000 chunks over 2 tenants: under ~2 minutes")
    parser.add_argument("--chunks", type=int, default=None, help="total chunks in the table (100,000)")
    parser.add_argument("--tenants", type=int, default=None, help="tenants sharing them (20)")
    parser.add_argument(
        "--ingest-chunks", type=int, default=None, help=f"chunks through the real pipeline ({ingest_chunks})"
    )
    parser.add_argument("--workers", type=int, default=2, help="processes computing filler embeddings")
    parser.add_argument("--maintenance-work-mem", default="1GB", help="for the HNSW build")
    parser.add_argument("--database-url", help="use this server instead of an embedded one")
    parser.add_argument(
        "--data-dir",
        help="keep the embedded PostgreSQL in this folder; a later run with the same folder and sizes "
        "skips ingestion and filler and only measures (load 100,000 chunks once, measure many times)",
    )
    parser.set_defaults(_ingest_default=ingest_chunks)


def resolve_sizes(args: argparse.Namespace) -> None:
    """Fill ``--chunks``/``--tenants``/``--ingest-chunks`` from ``--quick`` or the full defaults."""
    quick = {"chunks": 10_000, "tenants": 2, "ingest_chunks": 200}
    full = {"chunks": 100_000, "tenants": 20, "ingest_chunks": args._ingest_default}
    for name, value in (quick if args.quick else full).items():
        if getattr(args, name) is None:
            setattr(args, name, value)


def run_with_database(
    args: argparse.Namespace, run: Callable[[argparse.Namespace, str], Awaitable[None]], *, service: str
) -> None:
    """Run ``run(args, url)`` against ``--database-url`` or a fresh embedded PostgreSQL (removed after)."""
    from switchboard.db.migrate import upgrade
    from switchboard.observability import configure_logging

    configure_logging(service=service, level="WARNING", fmt="console")
    with database(args.database_url, getattr(args, "data_dir", None)) as url:
        upgrade(url)
        asyncio.run(run(args, url))


@contextlib.contextmanager
def database(url: str | None, data_dir: str | None = None) -> Iterator[str]:
    """``url``, or an embedded server: in ``data_dir`` (kept) or in a temporary folder (removed)."""
    if url:
        yield url
        return
    from switchboard.runtime.embedded import EmbeddedPostgres

    with contextlib.ExitStack() as stack:
        folder = data_dir or stack.enter_context(tempfile.TemporaryDirectory(prefix="kb-bench-"))
        pg = EmbeddedPostgres(Path(folder) / "postgres")
        started = pg.start()
        try:
            yield started
        finally:
            pg.stop(only_if_started_here=True)  # a kept folder may be in use by another run


def state_path(args: argparse.Namespace, prefix: str) -> Path | None:
    """Where a ``--data-dir`` run records what it loaded (``None`` without ``--data-dir``)."""
    data_dir = getattr(args, "data_dir", None)
    return Path(data_dir) / f"{prefix}-state.json" if data_dir else None


def load_state(args: argparse.Namespace, prefix: str) -> dict[str, Any] | None:
    """The loaded run's state when ``--data-dir`` holds one of the same sizes, else ``None``."""
    path = state_path(args, prefix)
    if path is None or not path.exists():
        return None
    state = json.loads(path.read_text())
    sizes = {"chunks": args.chunks, "tenants": args.tenants, "ingest_chunks": args.ingest_chunks}
    if state.get("sizes") != sizes:
        raise SystemExit(f"{path} holds a run of {state.get('sizes')}, not {sizes}: use another --data-dir")
    return state


def save_state(args: argparse.Namespace, prefix: str, bench: Bench, **extra: Any) -> None:
    path = state_path(args, prefix)
    if path is None:
        return
    sizes = {"chunks": args.chunks, "tenants": args.tenants, "ingest_chunks": args.ingest_chunks}
    path.write_text(json.dumps({"sizes": sizes, "tenant_ids": [str(t) for t in bench.tenant_ids], **extra}))


async def attach(url: str, tenant_ids: list[str]) -> Bench:
    """A :class:`Bench` on an already loaded database (``--data-dir`` re-run)."""
    from switchboard.db.engine import create_engine, session_factory
    from switchboard.settings import load_settings

    settings = load_settings(database_url=url, _env_file=None, log_level="WARNING")
    engine = create_engine(url, pool_size=4)
    return Bench(
        settings=settings,
        engine=engine,
        sessions=session_factory(engine),
        conn=await connect(url),
        tenant_ids=[uuid.UUID(t) for t in tenant_ids],
        url=url,
    )


@dataclass
class Bench:
    """What the setup made: settings, sessions, tenants, and an asyncpg connection for raw SQL."""

    settings: Any
    engine: Any
    sessions: Any
    conn: Any
    tenant_ids: list[uuid.UUID]
    url: str
    filler_ids: dict[str, int] = field(default_factory=dict)
    """``content_hash`` (``"{tenant}:{position}"``) of each filler chunk -> its id."""

    async def close(self) -> None:
        await self.conn.close()
        await self.engine.dispose()


async def connect(url: str) -> Any:
    """An asyncpg connection to the same database; vectors in pgvector's binary format (bytes)."""
    import asyncpg
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    conn = await asyncpg.connect(
        user=parsed.username,
        password=parsed.password,
        database=parsed.database,
        host=parsed.query.get("host") or parsed.host,
        port=parsed.port,
        statement_cache_size=0,  # a custom plan for every query (no generic plan from a cache)
    )
    await conn.set_type_codec("vector", encoder=bytes, decoder=bytes, format="binary")
    return conn


async def setup(url: str, *, tenants: int, prefix: str) -> Bench:
    """Settings, engine, sessions and ``tenants`` new tenants (slugs ``{prefix}-{run}-{n}``)."""
    from switchboard.db.engine import create_engine, session_factory
    from switchboard.settings import load_settings
    from switchboard.tenants import create_tenant

    settings = load_settings(database_url=url, _env_file=None, log_level="WARNING")
    engine = create_engine(url, pool_size=4)
    sessions = session_factory(engine)
    run_id = uuid.uuid4().hex[:8]
    tenant_ids: list[uuid.UUID] = []
    async with sessions() as session, session.begin():
        for number in range(tenants):
            tenant = await create_tenant(session, slug=f"{prefix}-{run_id}-{number}", name=f"Bench {number}")
            tenant_ids.append(tenant.id)
    return Bench(
        settings=settings,
        engine=engine,
        sessions=sessions,
        conn=await connect(url),
        tenant_ids=tenant_ids,
        url=url,
    )


async def ingest_file(bench: Bench, tenant_id: uuid.UUID, name: str, data: bytes) -> int:
    """Register and ingest one file through the real pipeline; its chunk count."""
    from switchboard.knowledge import ingest_source, register_upload

    async with bench.sessions() as session, session.begin():
        outcome = await register_upload(
            session, bench.settings, tenant_id=tenant_id, filename=name, data=data
        )
    report = await ingest_source(
        bench.sessions,
        bench.settings,
        tenant_id=tenant_id,
        source_id=outcome.source.id,
        content_hash=outcome.source.content_hash,
    )
    assert report.status == "ready", report.error
    return report.chunk_count


def mixed_files(tenants: int, chunks: int) -> list[tuple[int, str, bytes]]:
    """A realistic upload mix of about ``chunks`` chunks, round-robin over ``tenants``: per group of
    five documents, three plain-text manuals, one PDF (a page per chunk), one DOCX (a paragraph per
    chunk), then one parts CSV per tenant (a row per chunk, ``SKU``/``Series``/``Description``/
    ``Price EUR``) with ``chunks // 5`` rows in all.

    Returns:
        ``(tenant index, filename, bytes)`` in upload order.
    """
    from tests.utils.documents import make_csv, make_docx, make_pdf

    files: list[tuple[int, str, bytes]] = []
    documents = max(1, (chunks * 4 // 5) // CHUNKS_PER_DOCUMENT)
    for document in range(documents):
        tenant = document % tenants
        paragraphs = [
            synthetic_chunk(tenant, 10_000_000 + document * CHUNKS_PER_DOCUMENT + i)[0]
            for i in range(CHUNKS_PER_DOCUMENT)
        ]
        kind = ("txt", "txt", "pdf", "txt", "docx")[document % 5]
        if kind == "pdf":
            files.append((tenant, f"manual-{document}.pdf", make_pdf(paragraphs)))
        elif kind == "docx":
            files.append((tenant, f"manual-{document}.docx", make_docx(paragraphs)))
        else:
            files.append((tenant, f"manual-{document}.txt", "\n\n".join(paragraphs).encode()))
    rows_per_tenant = max(2, chunks // 5 // tenants)
    for tenant in range(tenants):
        rng = random.Random(f"{SEED}:csv:{tenant}")
        rows = [["SKU", "Series", "Description", "Price EUR"]]
        for row in range(rows_per_tenant):
            code = _code(rng, tenant)
            words = " ".join(rng.choices(_VOCAB, cum_weights=_CUM_WEIGHTS, k=12))
            rows.append([f"{code}-{row}", f"S{row % 7}", words, f"{rng.randint(1, 900)}.{row % 100:02d}"])
        files.append((tenant, f"parts-{tenant}.csv", make_csv(rows)))
    return files


async def ingest_files(
    bench: Bench, files: list[tuple[int, str, bytes]]
) -> dict[str, tuple[int, int, float]]:
    """Ingest ``files`` (from :func:`mixed_files`) one after the other through the real pipeline.

    Returns:
        extension -> (documents, chunks, seconds), plus ``"all"``.
    """
    totals: dict[str, list[float]] = {}
    for tenant, name, data in files:
        started = time.perf_counter()
        chunks = await ingest_file(bench, bench.tenant_ids[tenant], name, data)
        elapsed = time.perf_counter() - started
        for key in (name.rsplit(".", 1)[-1], "all"):
            entry = totals.setdefault(key, [0, 0, 0.0])
            entry[0] += 1
            entry[1] += chunks
            entry[2] += elapsed
    return {key: (int(d), int(c), s) for key, (d, c, s) in totals.items()}


async def ingest_files_concurrently(
    bench: Bench, files: list[tuple[int, str, bytes]], *, concurrency: int, tenant_ids: list[uuid.UUID]
) -> tuple[int, int, float, float]:
    """Ingest ``files`` with up to ``concurrency`` documents in flight at once (as the background
    worker runs its ingestion jobs: ``max_jobs`` at a time in one process), in upload order.

    Args:
        tenant_ids: the tenants the files' tenant indexes name (fresh ones: bytes a tenant already
            stores would be a no-op).

    Returns:
        (documents, chunks, wall seconds, mean seconds per document from its upload to ready).
    """
    gate = asyncio.Semaphore(concurrency)
    latencies: list[float] = []

    async def one(tenant: int, name: str, data: bytes) -> int:
        async with gate:
            started = time.perf_counter()
            chunks = await ingest_file(bench, tenant_ids[tenant], name, data)
            latencies.append(time.perf_counter() - started)
            return chunks

    started = time.perf_counter()
    counts = await asyncio.gather(*(one(tenant, name, data) for tenant, name, data in files))
    wall = time.perf_counter() - started
    return len(files), sum(counts), wall, sum(latencies) / max(1, len(latencies))


async def ingest_manuals(bench: Bench, chunks: int) -> tuple[int, float]:
    """``chunks`` chunks of synthetic manuals through the real pipeline, round-robin over the tenants.

    Returns:
        (chunks stored, seconds).
    """
    # the synthetic text is generated before the clock starts: it is the benchmark's cost, not ingestion's
    files = [
        (
            document % len(bench.tenant_ids),
            f"manual-{document}.txt",
            manual(document % len(bench.tenant_ids), document),
        )
        for document in range(max(0, chunks // CHUNKS_PER_DOCUMENT))
    ]
    started, stored = time.perf_counter(), 0
    for tenant, name, data in files:
        stored += await ingest_file(bench, bench.tenant_ids[tenant], name, data)
    return stored, time.perf_counter() - started


@dataclass(frozen=True)
class FillReport:
    chunks: int
    per_tenant: int
    entities: int
    mentions: int
    load_s: float
    index_s: float


async def bulk_fill(
    bench: Bench,
    per_tenant: int,
    *,
    workers: int,
    entities: bool,
    maintenance_work_mem: str = "1GB",
) -> FillReport:
    """Add ``per_tenant`` synthetic chunks to every tenant by binary ``COPY``, then build every tenant's
    partial HNSW index (dropped first: ``COPY`` without their upkeep).

    Args:
        per_tenant: chunks per tenant (one ``knowledge_sources`` row each, ``ready``, lexical model).
        workers: processes computing the lexical embeddings.
        entities: also store each chunk's two part codes as ``product`` entities and mentions.

    Fills ``bench.filler_ids`` (content hash ``"{tenant}:{position}"`` -> chunk id).
    """
    from switchboard.db.models import KnowledgeSource
    from switchboard.knowledge.graph import entity_key
    from switchboard.knowledge.vector_index import (
        HNSW_EF_CONSTRUCTION,
        HNSW_M,
        hnsw_index_name,
        tenant_literal,
    )
    from switchboard.llm.lexical import LEXICAL_MODEL_NAME

    conn, tenant_ids = bench.conn, bench.tenant_ids
    source_ids: list[uuid.UUID] = []
    async with bench.sessions() as session, session.begin():
        for number, tenant_id in enumerate(tenant_ids):
            source = KnowledgeSource(
                tenant_id=tenant_id,
                filename=f"filler-{number}.txt",
                content_hash=uuid.uuid4().hex,
                status="ready",
                embedding_model=LEXICAL_MODEL_NAME,
                chunk_count=per_tenant,
            )
            session.add(source)
            await session.flush()
            source_ids.append(source.id)
    for name in await _tenant_hnsw_indexes(conn):  # rebuilt after the load (COPY without index upkeep)
        await conn.execute(f'DROP INDEX IF EXISTS "{name}"')
    jobs = [
        (t, s, min(500, per_tenant - s)) for t in range(len(tenant_ids)) for s in range(0, per_tenant, 500)
    ]
    codes: dict[tuple[int, str], list[int]] = {}
    started = time.perf_counter()
    loaded, next_report = 0, 20_000
    columns = ["tenant_id", "source_id", "position", "text", "embedding", "is_active", "content_hash"]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        for rows in pool.imap_unordered(_embed_rows, jobs):
            records = [
                (tenant_ids[t], source_ids[t], pos, text, vec, True, f"{t}:{pos}")
                for t, pos, text, vec, _ in rows
            ]
            await conn.copy_records_to_table("knowledge_documents", records=records, columns=columns)
            for t, pos, _, _, chunk_codes in rows:
                for code in chunk_codes:
                    codes.setdefault((t, code), []).append(pos)
            loaded += len(rows)
            if loaded >= next_report:
                next_report += 20_000
                print(
                    f"  filler: {loaded}/{per_tenant * len(tenant_ids)} ({time.perf_counter() - started:.0f} s)",
                    flush=True,
                )
    bench.filler_ids = {
        row["content_hash"]: row["id"]
        for row in await conn.fetch(
            "SELECT id, content_hash FROM knowledge_documents WHERE source_id = ANY($1::uuid[])", source_ids
        )
    }
    mention_count = 0
    if entities:
        await conn.copy_records_to_table(
            "kg_entities",
            records=[(tenant_ids[t], "product", code, entity_key(code)) for t, code in codes],
            columns=["tenant_id", "kind", "name", "norm_name"],
        )
        entity_ids = {
            (row["tenant_id"], row["norm_name"]): row["id"]
            for row in await conn.fetch(
                "SELECT id, tenant_id, norm_name FROM kg_entities WHERE kind = 'product' AND tenant_id = ANY($1)",
                tenant_ids,
            )
        }
        mentions = {
            (entity_ids[(tenant_ids[t], entity_key(code))], bench.filler_ids[f"{t}:{pos}"]): (
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
        mention_count = len(mentions)
    load_s = time.perf_counter() - started
    await conn.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
    await conn.execute("SET max_parallel_maintenance_workers = 1")
    started = time.perf_counter()
    for tenant_id in tenant_ids:
        # every tenant's own partial index, as the background job builds it above the threshold
        # (switchboard.knowledge.vector_index), so that HNSW forced (threshold 0) has one for each
        await conn.execute(
            f"CREATE INDEX {hnsw_index_name(tenant_id)} ON knowledge_documents "
            f"USING hnsw (embedding vector_cosine_ops) WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) "
            f"WHERE tenant_id = {tenant_literal(tenant_id)}"
        )
    index_s = time.perf_counter() - started
    for table in (
        "knowledge_documents",
        "knowledge_chunk_vectors",
        "knowledge_sources",
        "kg_entities",
        "kg_mentions",
        "kg_relations",
    ):
        await conn.execute(f"ANALYZE {table}")
    return FillReport(
        chunks=loaded,
        per_tenant=per_tenant,
        entities=len(codes) if entities else 0,
        mentions=mention_count,
        load_s=load_s,
        index_s=index_s,
    )


async def timed_search(
    bench: Bench, tenant: int, query: str, mode: str, *, settings: Any = None, **kwargs: Any
) -> tuple[float, list[int]]:
    """``search_chunks`` in its own transaction: (wall-clock ms, chunk ids best first)."""
    from switchboard.knowledge import search_chunks

    started = time.perf_counter()
    async with bench.sessions() as session, session.begin():
        hits = await search_chunks(
            session,
            tenant_id=bench.tenant_ids[tenant],
            query=query,
            mode=mode,  # type: ignore[arg-type]
            settings=settings or bench.settings,
            **kwargs,
        )
    return (time.perf_counter() - started) * 1000, [hit.chunk_id for hit in hits]


async def server_pid(bench: Bench) -> int:
    """The PostgreSQL postmaster's pid (parent of this connection's backend), for :func:`cpu_seconds`."""
    return _parent_pid(await bench.conn.fetchval("SELECT pg_backend_pid()"))


def _parent_pid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def cpu_seconds(postmaster: int | None) -> tuple[float, float]:
    """CPU seconds used so far by this process (all threads) and by the PostgreSQL server at
    ``postmaster`` (it and its live children: backends, WAL writer, checkpointer), from ``/proc``.

    On a shared machine the CPU time a run consumes moves far less with the load than its wall
    time (less ``time.process_time`` noise than throughput); a server on another host reads 0.
    """
    tick = os.sysconf("SC_CLK_TCK")
    server = 0.0
    if postmaster:
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                pid, rest = stat.parent.name, stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(pid) == postmaster or int(rest[1]) == postmaster:
                server += (int(rest[11]) + int(rest[12])) / tick
    return time.process_time(), server


def machine_line() -> str:
    """The load average, to print with the figures (the machine is shared)."""
    with contextlib.suppress(OSError):
        return "load average " + " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return "load average unknown"


async def _tenant_hnsw_indexes(conn: Any) -> list[str]:
    """Names of the tenants' partial HNSW indexes on ``knowledge_documents`` (asyncpg connection)."""
    from switchboard.db.models.knowledge import TENANT_HNSW_INDEX_PREFIX

    rows = await conn.fetch(
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE i.indrelid = 'knowledge_documents'::regclass AND starts_with(c.relname, $1)",
        TENANT_HNSW_INDEX_PREFIX,
    )
    return [row["relname"] for row in rows]
