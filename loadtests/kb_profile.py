"""Where a search's time goes, on a database loaded by ``kb_graph_benchmark.py --data-dir``.

Run (after ``kb_graph_benchmark.py --data-dir DIR`` has loaded it once)::

    .venv/bin/python loadtests/kb_profile.py --data-dir KB100K            # 100,000 chunks
    .venv/bin/python loadtests/kb_profile.py --data-dir KB10K --quick     # 10,000 chunks

For 40 of the benchmark's questions, per mode (``vector``, ``hybrid``): p50 of

* ``search_chunks`` end to end (its own transaction, question embedding included),
* the search statement's planning and execution as PostgreSQL reports them (``EXPLAIN (ANALYZE,
  BUFFERS)`` of the same statement with the same parameters), with its shared-buffer hits and reads
  (reads: pages that were not in shared buffers),
* one round trip (``SELECT 1`` in a transaction),

and ``neighborhood`` end to end. Then the vector leg's agreement with brute force: for the same
questions and 60 synthetic ones, the share of the exact top 5 (every row of the tenant sorted by
cosine distance, no index) that the exact scan's top 5 contains. The benchmark's recall@5 counts only
the valve corpus's supporting chunks; this checks the ranking itself, so a cheaper first pass can
be judged before it is kept.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadtests import kb_common  # noqa: E402
from tests.utils.graph_corpus import questions  # noqa: E402

BRUTE_SQL = """
WITH t AS MATERIALIZED (SELECT d.id, d.embedding FROM knowledge_documents d WHERE d.tenant_id = $1 AND d.is_active)
SELECT id FROM t ORDER BY embedding <=> $2::text::vector, id LIMIT 5
"""


async def profile(args: argparse.Namespace, url: str) -> None:
    from sqlalchemy import text
    from switchboard.knowledge.retrieval import _prepare, _vector_literal, keywords
    from switchboard.llm.lexical import lexical_embedding

    state = kb_common.load_state(args, "graph")
    if state is None:
        raise SystemExit(f"nothing loaded in {args.data_dir}: run kb_graph_benchmark.py --data-dir first")
    bench = await kb_common.attach(url, state["tenant_ids"])
    print(f"{args.chunks} chunks over {args.tenants} tenants; {kb_common.machine_line()}")
    asked = [q.text for q in questions()]
    random.Random(3).shuffle(asked)
    asked = asked[:40]
    median = statistics.median
    for mode in ("vector", "hybrid", "neighborhood"):
        wall: list[float] = []
        execute: list[float] = []
        plan: list[float] = []
        hit: list[float] = []
        read: list[float] = []
        trip: list[float] = []
        for number, question in enumerate(asked):
            tenant = number % len(bench.tenant_ids)
            wall.append((await kb_common.timed_search(bench, tenant, question, mode))[0])
            if mode == "neighborhood":
                continue
            async with bench.sessions() as session, session.begin():
                started = time.perf_counter()
                await session.exec(text("SELECT 1"))
                trip.append((time.perf_counter() - started) * 1000)
                prepared = await _prepare(
                    session,
                    tenant_id=bench.tenant_ids[tenant],
                    query=question,
                    mode=mode,
                    limit=5,  # type: ignore[arg-type]
                    settings=bench.settings,
                    embedding=None,
                    min_similarity=None,
                )
                assert prepared is not None
                rows = await session.exec(
                    text("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + prepared.sql), params=prepared.params
                )
                report = rows.all()[0][0][0]
            execute.append(report["Execution Time"])
            plan.append(report["Planning Time"])
            hit.append(report["Plan"].get("Shared Hit Blocks", 0))
            read.append(report["Plan"].get("Shared Read Blocks", 0))
        line = f"  {mode:<13} search_chunks p50 {median(wall):6.1f} ms"
        if execute:
            line += (
                f" | statement: execution {median(execute):5.1f} ms, planning {median(plan):4.1f} ms, "
                f"buffers hit {median(hit):.0f} / read {median(read):.0f} | round trip {median(trip):.2f} ms"
            )
        print(line, flush=True)

    rng = random.Random(1)
    checks = list(asked)
    for _ in range(60):
        tenant = rng.randrange(len(bench.tenant_ids))
        checks.append(kb_common.synthetic_question(tenant, rng.randrange(1000), rng))
    agreement: list[float] = []
    for number, question in enumerate(checks):
        tenant_id = bench.tenant_ids[number % len(bench.tenant_ids)]
        vector = _vector_literal(lexical_embedding(" ".join(keywords(question)) or question))
        brute = {row["id"] for row in await bench.conn.fetch(BRUTE_SQL, tenant_id, vector)}
        _, found = await kb_common.timed_search(
            bench, number % len(bench.tenant_ids), question, "vector", min_similarity=-1.0
        )
        agreement.append(len(brute & set(found)) / max(1, len(brute)))
    print(
        f"  vector top 5 vs brute force over {len(checks)} questions: agreement {statistics.mean(agreement):.3f} "
        f"(lowest {min(agreement):.2f}); {kb_common.machine_line()}"
    )
    await bench.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    kb_common.add_common_arguments(parser, ingest_chunks=1000)
    args = parser.parse_args()
    if not args.data_dir:
        parser.error("--data-dir is required (a folder loaded by kb_graph_benchmark.py --data-dir)")
    kb_common.resolve_sizes(args)
    kb_common.run_with_database(args, profile, service="kb-profile")


if __name__ == "__main__":
    main()
