"""Graph-retrieval benchmark (docs/knowledge-base.md#the-knowledge-graph): supporting-chunk recall@5 per mode and latency at 100,000 chunks.

Run (starts an embedded PostgreSQL + pgvector in a temporary folder, like the tests do)::

    .venv/bin/python loadtests/kb_graph_benchmark.py --quick      # 10,000 chunks, 2 tenants, < 2 min
    .venv/bin/python loadtests/kb_graph_benchmark.py              # 100,000 chunks, 20 tenants
    .venv/bin/python loadtests/kb_graph_benchmark.py --database-url postgresql://...
    # load 100,000 chunks once into a kept folder, then measure again without reloading:
    .venv/bin/python loadtests/kb_graph_benchmark.py --data-dir KB100K
    .venv/bin/python loadtests/kb_graph_benchmark.py --data-dir KB100K --modes vector,hybrid
    .venv/bin/python loadtests/kb_graph_benchmark.py --quick --ingest-only   # ingestion alone, < 1 min

``--ingest-only`` (the ingestion target, docs/benchmarks.md): the valve corpus, then ``--ingest-chunks`` (1,000)
chunks of text, PDF, DOCX and CSV uploads through the real pipeline (:func:`kb_common.mixed_files`);
chunks/s per kind and in all, and the CPU time of this process and of PostgreSQL per chunk;
``--profile FILE`` writes a cProfile of the ingestion; ``--concurrency N`` then ingests the same uploads
into fresh tenants with N documents in flight (the background worker runs up to ``max_jobs`` ingestion
jobs at once in one process) and prints that figure too.

What it does (offline lexical embedding and the deterministic extractor, no provider; setup shared
with ``kb_benchmark.py`` in :mod:`loadtests.kb_common`):

1. **Ingestion** through the real pipeline (``register_upload`` + ``ingest_source``: parse, split,
   embed, extract entities and relations, one-transaction insert of chunks and graph): the valve
   corpus of ``tests/utils/graph_corpus.py`` (62 chunks: material property sheets, a compatibility
   table, series specs, parts and replacements tables, an FAQ) into every tenant, then
   ``--ingest-chunks`` chunks of synthetic manuals; chunks/s for each.
2. **Filler** to reach ``--chunks``: synthetic chunks (the ``topics`` corpus, two part codes each)
   written with binary ``COPY``, with their part codes as entities and mentions, HNSW rebuilt.
3. **Questions** (90, each asked in ``--question-tenants`` tenants): 50 multi-hop (support in
   3 documents: "Can the V200 valve be used with chlorine at 180 °C?" needs the V200 spec, the
   PTFE/chlorine row and the PTFE sheet), 20 single-hop (15 about one entity, 5 FAQ questions naming
   none), 20 exact SKUs. recall@5 = supporting chunks among the 5 hits / supporting chunks.
4. Modes: ``vector``, ``hybrid`` without the graph walk (``KB_HYBRID_GRAPH=false``),
   ``hybrid`` (default), ``graph``, ``neighborhood``, ``exact``; p50/p95 latency of
   :func:`switchboard.knowledge.search_chunks` (each call in its own transaction, question
   embedding included) per mode over all questions.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadtests import kb_common  # noqa: E402
from loadtests.kb_common import percentile  # noqa: E402
from tests.utils.graph_corpus import documents, questions  # noqa: E402

MODES: list[tuple[str, str, bool | None]] = [
    ("vector", "vector", None),
    ("hybrid without the walk", "hybrid", False),
    ("hybrid", "hybrid", None),
    ("graph", "graph", None),
    ("neighborhood", "neighborhood", None),
    ("exact", "exact", None),
]


async def run_ingest_only(args: argparse.Namespace, database_url: str) -> None:
    """``--ingest-only``: the valve corpus, then a mix of text, PDF, DOCX and CSV uploads; chunks/s."""
    bench = await kb_common.setup(database_url, tenants=args.tenants, prefix="ingest")
    print(f"ingestion only, {args.tenants} tenants; {kb_common.machine_line()}")
    files = [(t, name, data) for t in range(args.tenants) for name, data in documents().items()]
    await kb_common.ingest_files(bench, files[:1])  # warm-up: the parse helper starts (not ingestion)
    mix = kb_common.mixed_files(args.tenants, args.ingest_chunks)
    postmaster = await kb_common.server_pid(bench) if not args.database_url else None
    cpu_before = kb_common.cpu_seconds(postmaster)
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    corpus = await kb_common.ingest_files(bench, files[1:])
    mixed = await kb_common.ingest_files(bench, mix)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    cpu_after = kb_common.cpu_seconds(postmaster)
    print("  what                              docs   chunks      s   chunks/s   ms/doc")
    for label, table in (("valve corpus", corpus), ("mix", mixed)):
        for key in sorted(table, key=lambda k: (k == "all", k)):
            docs, chunks, seconds = table[key]
            print(
                f"  {label + ' ' + key:<32}{docs:>6}{chunks:>9}{seconds:>7.1f}{chunks / seconds:>11.0f}"
                f"{1000 * seconds / docs:>9.1f}"
            )
    docs = corpus["all"][0] + mixed["all"][0]
    chunks = corpus["all"][1] + mixed["all"][1]
    seconds = corpus["all"][2] + mixed["all"][2]
    print(
        f"ingestion, all ({docs} documents): {chunks} chunks in {seconds:.1f} s = {chunks / seconds:.0f} chunks/s"
    )
    python_s, server_s = (cpu_after[0] - cpu_before[0]), (cpu_after[1] - cpu_before[1])
    print(
        f"CPU time: this process {python_s:.1f} s + PostgreSQL {server_s:.1f} s = "
        f"{1000 * (python_s + server_s) / chunks:.2f} ms per chunk (python {1000 * python_s / chunks:.2f}, "
        f"postgres {1000 * server_s / chunks:.2f}; the parse helper's children not counted)"
    )
    if args.concurrency > 1:
        await ingest_concurrently(args, bench, files[1:] + mix, postmaster)
    print(f"done; {kb_common.machine_line()}")
    await bench.close()


async def ingest_concurrently(
    args: argparse.Namespace,
    bench: kb_common.Bench,
    files: list[tuple[int, str, bytes]],
    postmaster: int | None,
) -> None:
    """``--concurrency N``: the same uploads again, into fresh tenants, ``N`` documents in flight."""
    from switchboard.tenants import create_tenant

    tenant_ids = []
    async with bench.sessions() as session, session.begin():
        for number in range(args.tenants):
            tenant = await create_tenant(
                session, slug=f"ingest-c-{uuid.uuid4().hex[:8]}-{number}", name="Bench c"
            )
            tenant_ids.append(tenant.id)
    cpu_before = kb_common.cpu_seconds(postmaster)
    docs, chunks, wall, latency = await kb_common.ingest_files_concurrently(
        bench, files, concurrency=args.concurrency, tenant_ids=tenant_ids
    )
    cpu_after = kb_common.cpu_seconds(postmaster)
    python_s, server_s = (cpu_after[0] - cpu_before[0]), (cpu_after[1] - cpu_before[1])
    print(
        f"ingestion, concurrency {args.concurrency} ({docs} documents, fresh tenants): {chunks} chunks in "
        f"{wall:.1f} s = {chunks / wall:.0f} chunks/s; {1000 * latency:.0f} ms per document upload to ready"
    )
    print(
        f"CPU time (concurrent): this process {python_s:.1f} s + PostgreSQL {server_s:.1f} s = "
        f"{1000 * (python_s + server_s) / chunks:.2f} ms per chunk (python {1000 * python_s / chunks:.2f}, "
        f"postgres {1000 * server_s / chunks:.2f})"
    )


async def load(args: argparse.Namespace, database_url: str) -> kb_common.Bench:
    """Ingest the valve corpus and the manuals, then fill to ``--chunks`` (printing the figures)."""
    report: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        report.append(line + "\n")

    bench = await kb_common.setup(database_url, tenants=args.tenants, prefix="graph")
    say(f"{args.chunks} chunks over {args.tenants} tenants; {kb_common.machine_line()}")
    corpus = documents()
    started, corpus_chunks = time.perf_counter(), 0
    for tenant_id in bench.tenant_ids:
        for name, data in corpus.items():
            corpus_chunks += await kb_common.ingest_file(bench, tenant_id, name, data)
    corpus_s = time.perf_counter() - started
    say(
        f"ingestion, valve corpus ({len(corpus)} documents x {args.tenants} tenants; parse+split+embed+"
        f"extract+insert): {corpus_chunks} chunks in {corpus_s:.1f} s = {corpus_chunks / corpus_s:.0f} chunks/s"
    )
    manual_chunks, manual_s = await kb_common.ingest_manuals(bench, args.ingest_chunks)
    if manual_chunks:
        say(
            f"ingestion, synthetic manuals (40 chunks of ~900 characters per document, two part codes each): "
            f"{manual_chunks} chunks in {manual_s:.1f} s = {manual_chunks / manual_s:.0f} chunks/s"
        )
    per_tenant = max(0, args.chunks - corpus_chunks - manual_chunks) // args.tenants
    fill = await kb_common.bulk_fill(
        bench, per_tenant, workers=args.workers, entities=True, maintenance_work_mem=args.maintenance_work_mem
    )
    totals = await bench.conn.fetchrow(
        "SELECT (SELECT count(*) FROM knowledge_documents) AS chunks, (SELECT count(*) FROM kg_entities) AS "
        "entities, (SELECT count(*) FROM kg_mentions) AS mentions, (SELECT count(*) FROM kg_relations) AS relations"
    )
    say(
        f"filler: {fill.chunks} chunks + {fill.entities} entities + {fill.mentions} mentions by COPY in "
        f"{fill.load_s:.1f} s; HNSW rebuild {fill.index_s:.1f} s -> {totals['chunks']} chunks, "
        f"{totals['entities']} entities, {totals['mentions']} mentions, {totals['relations']} relations"
    )

    kb_common.save_state(args, "graph", bench, load_report="".join(report[1:]))
    return bench


async def run(args: argparse.Namespace, database_url: str) -> None:
    state = kb_common.load_state(args, "graph")
    if state is not None:
        bench = await kb_common.attach(database_url, state["tenant_ids"])
        print(
            f"{args.chunks} chunks over {args.tenants} tenants, loaded by an earlier run in {args.data_dir}; "
            f"{kb_common.machine_line()}"
        )
        print(state["load_report"], end="")
        await bench.conn.execute(
            "ANALYZE knowledge_documents"
        )  # a migration since the load may have rewritten it
    else:
        bench = await load(args, database_url)
    corpus = documents()
    support_rows = await bench.conn.fetch(
        "SELECT d.id, d.tenant_id, s.filename, d.text FROM knowledge_documents d "
        "JOIN knowledge_sources s ON s.id = d.source_id WHERE s.filename = ANY($1::text[]) AND d.tenant_id = ANY($2)",
        list(corpus),
        bench.tenant_ids,
    )
    asked = []
    rng = random.Random(20261201)
    for question in questions():
        for tenant in rng.sample(range(args.tenants), min(args.question_tenants, args.tenants)):
            wanted = set()
            for filename, marker in question.support:
                match = [
                    r["id"]
                    for r in support_rows
                    if r["tenant_id"] == bench.tenant_ids[tenant]
                    and r["filename"] == filename
                    and marker in r["text"]
                ]
                assert len(match) == 1, (question.text, filename, marker, len(match))
                wanted.add(match[0])
            asked.append((tenant, question, wanted))

    print(
        f"search_chunks, {len(asked)} questions ({len(questions())} x {args.question_tenants} tenants), "
        "limit 5, one transaction each, question embedding included:"
    )
    kinds = ("multi_hop", "single_hop", "exact_sku")
    print(f"  {'mode':<30}" + "".join(f"{k + ' r@5':>16}" for k in kinds) + f"{'p50 ms':>9}{'p95 ms':>9}")
    for label, mode, use_graph in MODES:
        if args.modes and label.split(" ")[0] not in args.modes.split(","):
            continue
        for tenant, question, _ in asked[:5]:  # warm-up
            await kb_common.timed_search(bench, tenant, question.text, mode, use_graph=use_graph)
        latencies: list[float] = []
        found = dict.fromkeys(kinds, 0)
        wanted_total = dict.fromkeys(kinds, 0)
        for tenant, question, wanted in asked:
            ms, ids = await kb_common.timed_search(bench, tenant, question.text, mode, use_graph=use_graph)
            latencies.append(ms)
            found[question.kind] += len(wanted & set(ids))
            wanted_total[question.kind] += len(wanted)
        print(
            f"  {label:<30}"
            + "".join(f"{found[k] / max(1, wanted_total[k]):>16.3f}" for k in kinds)
            + f"{percentile(latencies, 50):>9.1f}{percentile(latencies, 95):>9.1f}"
        )
    print(f"done; {kb_common.machine_line()}")
    await bench.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    kb_common.add_common_arguments(parser, ingest_chunks=1000)
    parser.add_argument("--question-tenants", type=int, default=2, help="tenants each question is asked in")
    parser.add_argument("--modes", help="comma-separated modes to measure (default: all), e.g. vector,hybrid")
    parser.add_argument(
        "--ingest-only",
        action="store_true",
        help="only ingestion: the valve corpus, then --ingest-chunks chunks of text/PDF/DOCX/CSV uploads",
    )
    parser.add_argument(
        "--profile", help="with --ingest-only: write a cProfile of the ingestion to this file"
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help="with --ingest-only and N > 1: after the sequential pass, the same uploads into fresh tenants "
        "with N documents in flight (as the background worker runs its jobs); prints both figures",
    )
    args = parser.parse_args()
    if args.ingest_only and args.ingest_chunks is None:
        args.ingest_chunks = 1000  # about 30 uploads: enough to average over, well under two minutes
    kb_common.resolve_sizes(args)
    started = time.perf_counter()
    kb_common.run_with_database(
        args, run_ingest_only if args.ingest_only else run, service="kb-graph-benchmark"
    )
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
