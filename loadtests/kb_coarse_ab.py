"""The exact scan's first pass, chunk table against narrow vector table, interleaved question by question.

Run (after ``kb_graph_benchmark.py --data-dir KB100K`` has loaded it once; ``KB100K`` / ``KB10K``: the folder
you chose for it)::

    .venv/bin/python loadtests/kb_coarse_ab.py --data-dir KB100K            # 100,000 chunks
    .venv/bin/python loadtests/kb_coarse_ab.py --data-dir KB10K --quick     # 10,000 chunks

For ``--questions`` of the benchmark's questions (each asked twice, tenants in turn), per mode
(``vector``, ``hybrid``): the search statement ``search_chunks`` runs, prepared by the real code
(its coarse pass reads ``knowledge_chunk_vectors``, migration ``0024_chunk_vectors``), and the same
statement with that pass reading ``knowledge_documents`` as before that
migration, both with the same parameters on the same connection in one transaction, in
alternating order. It prints p50 / p95 of PostgreSQL's execution time (``EXPLAIN ANALYZE``) for
each, the median of the per-question ratio (on a shared machine the figure to trust: both sides see
the same moment's load), and how many questions gave identical chunk ids in identical order.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadtests import kb_common  # noqa: E402
from tests.utils.graph_corpus import questions  # noqa: E402

_NARROW = """    SELECT v.id
    FROM knowledge_chunk_vectors v
    WHERE v.tenant_id = :tenant_id AND v.source_id = ANY(ARRAY({sources}))
    ORDER BY v.embedding_half <#> CAST(l2_normalize(CAST(:qvec AS vector)) AS halfvec), v.id"""
_WIDE = """    SELECT d.id
    FROM knowledge_documents d
    WHERE d.tenant_id = :tenant_id AND d.is_active AND d.source_id = ANY(ARRAY({sources}))
    ORDER BY d.embedding_half <#> CAST(l2_normalize(CAST(:qvec AS vector)) AS halfvec), d.id"""
"""The coarse pass before migration ``0024_chunk_vectors`` (``knowledge/retrieval.py`` at main ``78c7230``)."""


async def compare(args: argparse.Namespace, url: str) -> None:
    from sqlalchemy import text
    from switchboard.knowledge.retrieval import _MODEL_SOURCES, _prepare

    narrow, wide = _NARROW.format(sources=_MODEL_SOURCES), _WIDE.format(sources=_MODEL_SOURCES)
    state = kb_common.load_state(args, "graph")
    if state is None:
        raise SystemExit(f"nothing loaded in {args.data_dir}: run kb_graph_benchmark.py --data-dir first")
    bench = await kb_common.attach(url, state["tenant_ids"])
    print(f"{args.chunks} chunks over {args.tenants} tenants; {kb_common.machine_line()}", flush=True)
    asked = [q.text for q in questions()]
    random.Random(3).shuffle(asked)
    asked = asked[: args.questions] * 2
    for mode in ("vector", "hybrid"):
        timings: dict[str, list[float]] = {"wide": [], "narrow": []}
        identical = 0
        for number, question in enumerate(asked):
            found: dict[str, list[int]] = {}
            async with bench.sessions() as session, session.begin():
                prepared = await _prepare(
                    session,
                    tenant_id=bench.tenant_ids[number % len(bench.tenant_ids)],
                    query=question,
                    mode=mode,
                    limit=5,
                    settings=bench.settings,
                    embedding=None,
                    min_similarity=None,  # type: ignore[arg-type]
                )
                assert prepared is not None and prepared.strategy == "exact_scan" and narrow in prepared.sql
                statements = {"narrow": prepared.sql, "wide": prepared.sql.replace(narrow, wide)}
                for side in ("wide", "narrow") if number % 2 else ("narrow", "wide"):
                    report = (
                        await session.exec(
                            text("EXPLAIN (ANALYZE, FORMAT JSON) " + statements[side]), params=prepared.params
                        )
                    ).all()[0][0][0]
                    timings[side].append(report["Execution Time"])
                    rows = await session.exec(text(statements[side]), params=prepared.params)
                    found[side] = [row.id for row in rows.all()]
            identical += found["wide"] == found["narrow"]
        p50, p95, ratio = kb_common.paired_summary(timings, "wide", "narrow")
        print(
            f"  {mode:<7} statement execution p50 / p95 ms: knowledge_documents {p50['wide']:.1f} / "
            f"{p95['wide']:.1f}, knowledge_chunk_vectors {p50['narrow']:.1f} / {p95['narrow']:.1f}; "
            f"median ratio narrow/wide {ratio:.2f}; identical results {identical}/{len(asked)}; "
            f"{kb_common.machine_line()}",
            flush=True,
        )
    await bench.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    kb_common.add_common_arguments(parser, ingest_chunks=1000)
    parser.add_argument("--questions", type=int, default=60, help="distinct questions (each asked twice)")
    args = parser.parse_args()
    if not args.data_dir:
        parser.error("--data-dir is required (a folder loaded by kb_graph_benchmark.py --data-dir)")
    kb_common.resolve_sizes(args)
    kb_common.run_with_database(args, compare, service="kb-coarse-ab")


if __name__ == "__main__":
    main()
