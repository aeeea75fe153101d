"""Knowledge-base benchmark: ingestion throughput, retrieval latency and recall@5 per mode and strategy.

Run (starts an embedded PostgreSQL + pgvector in a temporary folder, like the tests do)::

    .venv/bin/python loadtests/kb_benchmark.py --quick                  # 10,000 chunks, 2 tenants, < 2 min
    .venv/bin/python loadtests/kb_benchmark.py                          # 100,000 chunks, 20 tenants
    .venv/bin/python loadtests/kb_benchmark.py --corpus uniform --ef-search 40 100 200 400
    .venv/bin/python loadtests/kb_benchmark.py --database-url postgresql://...   # an existing server

What it measures (offline lexical embedding, no provider; setup shared with
``kb_graph_benchmark.py`` in :mod:`loadtests.kb_common`):

1. **Ingestion throughput**: ``--ingest-chunks`` chunks of synthetic manuals through the real
   pipeline (``register_upload`` + ``ingest_source``: parse, split, embed, extract the graph,
   one-transaction insert into the table with its GIN index; no HNSW index for a tenant at or below `KB_EXACT_SCAN_MAX_CHUNKS`), in chunks per second.
2. **Filler** to reach ``--chunks``, spread evenly over ``--tenants`` (binary ``COPY``, then each tenant's partial HNSW index built).
3. **Questions and ground truth**: ``--queries`` questions about random chunks of random tenants
   and, for each, the exact top 5 by cosine distance (a plain scan and sort, index scans disabled).
4. **search_chunks** (each call in its own transaction, question embedding included): p50/p95
   latency and recall@5 (share of the exact top 5 returned, threshold off) for ``vector`` (the
   default strategy, and HNSW forced at each ``--ef-search``), ``hybrid`` (threshold off for recall;
   found = the question's own chunk is among the hits) and ``exact`` (a part code of the chunk:
   recall@5 = that chunk returned).
5. **The SQL alone** (``EXPLAIN ANALYZE`` execution time of what search_chunks runs).

Corpora (``--corpus``): ``topics`` (default) or ``uniform``; see :mod:`loadtests.kb_common`.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadtests import kb_common  # noqa: E402
from loadtests.kb_common import percentile  # noqa: E402


async def run(args: argparse.Namespace, database_url: str) -> None:
    from switchboard.knowledge.retrieval import explain_search, keywords
    from switchboard.llm.lexical import lexical_embedding

    bench = await kb_common.setup(database_url, tenants=args.tenants, prefix="bench")
    print(
        f"{args.chunks} chunks over {args.tenants} tenants, corpus {args.corpus}; {kb_common.machine_line()}"
    )
    stored, seconds = await kb_common.ingest_manuals(bench, args.ingest_chunks)
    if stored:
        print(
            f"ingestion (real pipeline: parse+split+lexical embed+graph+insert, indexes maintained): {stored} chunks "
            f"in {seconds:.1f} s = {stored / seconds:.0f} chunks/s"
        )
    per_tenant = max(0, args.chunks - stored) // args.tenants
    fill = await kb_common.bulk_fill(
        bench,
        per_tenant,
        workers=args.workers,
        entities=False,
        maintenance_work_mem=args.maintenance_work_mem,
    )
    print(f"filler: {fill.chunks} chunks by COPY in {fill.load_s:.1f} s; HNSW build {fill.index_s:.1f} s")

    rng = random.Random(kb_common.SEED)
    samples: list[tuple[int, str, int, str]] = []  # (tenant, question, target chunk id, a code of it)
    for _ in range(args.queries):
        tenant, index = rng.randrange(args.tenants), rng.randrange(per_tenant or 1)
        question = kb_common.synthetic_question(tenant, index, rng)
        code = kb_common.synthetic_chunk(tenant, index)[1][0]
        samples.append((tenant, question, bench.filler_ids[f"{tenant}:{index}"], code))
    conn = bench.conn
    await conn.set_type_codec("vector", encoder=str, decoder=str, format="text")

    def qvec(query: str) -> str:  # what vector mode embeds with the lexical model: the keywords
        return "[" + ",".join(f"{v:.7g}" for v in lexical_embedding(" ".join(keywords(query)))) + "]"

    truth: list[list[int]] = []
    async with conn.transaction():  # a plain scan and sort: no index can change the answer
        for statement in ("enable_indexscan", "enable_bitmapscan"):
            await conn.execute(f"SET LOCAL {statement} = off")
        for tenant, query, _, _ in samples:
            rows = await conn.fetch(
                "SELECT id FROM knowledge_documents WHERE tenant_id = $1 AND is_active "
                "ORDER BY embedding <=> $2::vector, id LIMIT 5",
                bench.tenant_ids[tenant],
                qvec(query),
            )
            truth.append([row[0] for row in rows])
    ceiling = sum(target in top for (_, _, target, _), top in zip(samples, truth, strict=True)) / len(samples)
    print(f"questions: {len(samples)}; their own chunk is in the exact top 5 by cosine for {ceiling:.0%}")

    settings = bench.settings
    runs: list[tuple[str, str, Any, float | None]] = [("vector (default strategy)", "vector", settings, -1.0)]
    for ef in args.ef_search:
        forced = settings.model_copy(update={"kb_exact_scan_max_chunks": 0, "kb_hnsw_ef_search": ef})
        runs.append((f"vector, HNSW forced, ef_search={ef}", "vector", forced, -1.0))
    runs += [
        ("hybrid (threshold off)", "hybrid", settings, -1.0),
        ("hybrid (threshold on)", "hybrid", settings, None),
        ("exact (a part code)", "exact", settings, None),
    ]
    print(
        f"search_chunks, {len(samples)} questions, limit 5, one transaction each, question embedding included "
        "(recall@5: share of the exact cosine top 5 returned; exact mode: the coded chunk returned):"
    )
    print(f"  {'mode':<40}{'recall@5':>9}{'found':>7}{'p50 ms':>9}{'p95 ms':>9}")
    for label, mode, settings_, min_similarity in runs:
        for tenant, query, _, _ in samples[:5]:  # warm-up
            await kb_common.timed_search(
                bench, tenant, query, mode, settings=settings_, min_similarity=min_similarity
            )
        latencies, matched, found = [], 0, 0
        for (tenant, query, target, code), expected in zip(samples, truth, strict=True):
            ms, ids = await kb_common.timed_search(
                bench,
                tenant,
                code if mode == "exact" else query,
                mode,
                settings=settings_,
                min_similarity=min_similarity,
            )
            latencies.append(ms)
            matched += (target in ids) if mode == "exact" else len(set(ids) & set(expected))
            found += target in ids
        wanted = len(samples) if mode == "exact" else max(1, sum(map(len, truth)))
        print(
            f"  {label:<40}{matched / wanted:>9.3f}{found / len(samples):>7.0%}"
            f"{percentile(latencies, 50):>9.1f}{percentile(latencies, 95):>9.1f}"
        )

    for mode in ("vector", "hybrid"):
        executions = []
        for tenant, query, _, _ in samples[: min(30, len(samples))]:
            async with bench.sessions() as session, session.begin():
                _, plan = await explain_search(
                    session,
                    tenant_id=bench.tenant_ids[tenant],
                    query=query,
                    mode=mode,
                    settings=settings,
                    analyze=True,
                )  # type: ignore[arg-type]
            executions.append(float(plan[-1].split(":")[1].split()[0]))  # "Execution Time: x ms"
        print(
            f"  SQL alone ({mode}, EXPLAIN ANALYZE execution time): "
            f"p50 {percentile(executions, 50):.1f} ms, p95 {percentile(executions, 95):.1f} ms"
        )
    # the exact scan over full embeddings (before 0021_retrieval) against the half-precision scan +
    # exact re-rank, interleaved question by question so that a change in the machine's load hits both
    from switchboard.knowledge.retrieval import RERANK_CANDIDATES

    full_sql = (
        "WITH a AS MATERIALIZED (SELECT id, embedding <=> $2::vector AS distance FROM knowledge_documents "
        "WHERE tenant_id = $1 AND is_active) SELECT id FROM a ORDER BY distance, id LIMIT 5"
    )
    half_sql = (
        "WITH c AS MATERIALIZED (SELECT id FROM knowledge_documents WHERE tenant_id = $1 AND is_active "
        "ORDER BY embedding_half <#> l2_normalize($2::vector)::halfvec, id LIMIT $3) SELECT d.id FROM c "
        "JOIN knowledge_documents d ON d.id = c.id ORDER BY d.embedding <=> $2::vector, d.id LIMIT 5"
    )
    timings: dict[str, list[float]] = {"full": [], "half": []}
    same = 0
    for tenant, query, _, _ in samples:
        qv = qvec(query)
        results = {}
        for name, sql, params in (("full", full_sql, (qv,)), ("half", half_sql, (qv, RERANK_CANDIDATES))):
            started_ = time.perf_counter()
            results[name] = [r[0] for r in await conn.fetch(sql, bench.tenant_ids[tenant], *params)]
            timings[name].append((time.perf_counter() - started_) * 1000)
        same += len(set(results["full"]) & set(results["half"]))
    full50, half50 = percentile(timings["full"], 50), percentile(timings["half"], 50)
    print(
        f"  exact scan SQL, interleaved: full embeddings (before) p50 {full50:.1f} / p95 "
        f"{percentile(timings['full'], 95):.1f} ms; halfvec + re-rank of {RERANK_CANDIDATES} p50 {half50:.1f} / p95 "
        f"{percentile(timings['half'], 95):.1f} ms ({full50 / half50:.1f}x faster); same top 5: {same / (5 * len(samples)):.3f}"
    )
    print(f"done; {kb_common.machine_line()}")
    await bench.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    kb_common.add_common_arguments(parser, ingest_chunks=1000)
    parser.add_argument("--queries", type=int, default=None, help="questions per mode (100; quick: 40)")
    parser.add_argument(
        "--corpus",
        choices=["topics", "uniform"],
        default="topics",
        help="topics: tenants' documents about a few product lines; uniform: random Zipf words",
    )
    parser.add_argument(
        "--ef-search",
        type=int,
        nargs="*",
        default=[40, 400],
        help="hnsw.ef_search values to compare with HNSW forced",
    )
    args = parser.parse_args()
    kb_common.resolve_sizes(args)
    if args.queries is None:
        args.queries = 40 if args.quick else 100
    kb_common.set_corpus(args.corpus)
    started = time.perf_counter()
    kb_common.run_with_database(args, run, service="kb-benchmark")
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
