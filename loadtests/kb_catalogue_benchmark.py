"""Catalogue benchmark: supporting-document recall@5 per search mode on catalogues of five domains.

Five small catalogues under ``loadtests/catalogues/``: ``valves`` (ball, gate, diaphragm and
butterfly valves), ``cables`` (control, power, robot and solar cables), ``gloves`` (chemical
protective gloves: permeation table of breakthrough minutes per material and chemical), ``foods``
(a food manufacturer's product ranges and ingredients: allergen and diet table, E-numbers) and
``hoses`` (industrial hoses: specifications naming tube, cover and reinforcement, a wide
chemical-resistance table with one column per material, A/B/C/X ratings and a legend line, a
glossary of ``=`` chains). Each is made of series or range specifications (Markdown) naming their
materials or ingredients, one data sheet or specification per material (some holding two), a table
of ratings and a parts or article list (CSV), a glossary of other names, and distractors that share
one entity with a question (a news item, an application note, a guide, near-identical series).
``gloves``, ``foods`` and ``hoses`` were written, questions included, before the extraction was
tuned on any of their documents. Every
catalogue has a ``questions.json``: a ``tuning`` half and a ``held_out`` half, each question with its
``kind`` (``multi-hop``, ``indirect``, ``alias``, ``single-hop``, ``exact-code``) and its supporting
documents (a filename, or ``[filename, marker]`` for one table row: the chunk of that file whose text
contains the marker).

Run (starts an embedded PostgreSQL + pgvector in a temporary folder, like the tests; about a minute)::

    .venv/bin/python loadtests/kb_catalogue_benchmark.py
    .venv/bin/python loadtests/kb_catalogue_benchmark.py --catalogue valves --modes hybrid,graph
    .venv/bin/python loadtests/kb_catalogue_benchmark.py --show tuning     # per-question hits, tuning half
    .venv/bin/python loadtests/kb_catalogue_benchmark.py --database-url postgresql://...
    .venv/bin/python loadtests/kb_catalogue_benchmark.py --data-dir DIR   # latency at 100,000 chunks

``--data-dir DIR`` runs on the embedded PostgreSQL kept in ``DIR`` by ``kb_graph_benchmark.py
--data-dir DIR`` (100,000 chunks of twenty other tenants in the same tables), so the p50/p95 columns
are the latency at that size; each run adds its catalogue tenants (about 150 chunks) to it.

What it does: one tenant per catalogue; every file is ingested through the real pipeline
(``register_upload`` + ``ingest_source``: parse, split, embed with the offline lexical embedding,
extract the graph with the offline extractor, one-transaction insert); then every question is asked
with :func:`switchboard.knowledge.search_chunks` (limit 5, one transaction each) in each mode.

Figures: recall@5 = supporting items (documents or rows) among the 5 hits / supporting items,
summed over the questions of a group: ``multi`` (multi-hop, indirect and alias questions) of the
tuning half and of the held-out half, ``single`` (single-hop) and ``exact`` (exact-code) over both
halves, and ``all@5`` the share of multi questions with every supporting item in the top 5; p50/p95
latency per mode over all questions. Add a catalogue by adding a folder with a ``questions.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadtests import kb_common  # noqa: E402
from loadtests.kb_common import percentile  # noqa: E402

CATALOGUES = Path(__file__).resolve().parent / "catalogues"
MODES: list[tuple[str, str, bool | None]] = [
    ("vector", "vector", None),
    ("hybrid-no-graph", "hybrid", False),
    ("hybrid", "hybrid", None),
    ("graph", "graph", None),
    ("neighborhood", "neighborhood", None),
    ("exact", "exact", None),
]
MULTI_KINDS = ("multi-hop", "indirect", "alias")


@dataclass(frozen=True)
class Question:
    catalogue: str
    half: str
    text: str
    kind: str
    support: tuple[tuple[str, str | None], ...]
    """``(filename, marker)``: a hit supports the item when it is from that file and (marker given)
    its text contains the marker."""


def load_questions(names: list[str]) -> list[Question]:
    """The questions of the named catalogues, both halves."""
    found = []
    for name in names:
        data = json.loads((CATALOGUES / name / "questions.json").read_text())
        for half in ("tuning", "held_out"):
            for item in data[half]:
                support = tuple(
                    (entry, None) if isinstance(entry, str) else (entry[0], entry[1])
                    for entry in item["support"]
                )
                found.append(Question(name, half, item["question"], item["kind"], support))
    return found


def supported(question: Question, hits: list[tuple[str, str]]) -> list[bool]:
    """For each supporting item, whether one of ``hits`` (``(document, text)``) is it."""
    return [
        any(document == filename and (marker is None or marker in text) for document, text in hits)
        for filename, marker in question.support
    ]


async def search(
    bench: kb_common.Bench, tenant: int, query: str, mode: str, use_graph: bool | None
) -> tuple[float, list[tuple[str, str]]]:
    from switchboard.knowledge import search_chunks

    started = time.perf_counter()
    async with bench.sessions() as session, session.begin():
        hits = await search_chunks(
            session,
            tenant_id=bench.tenant_ids[tenant],
            query=query,
            mode=mode,  # type: ignore[arg-type]
            settings=bench.settings,
            use_graph=use_graph,
            limit=5,
        )
    return (time.perf_counter() - started) * 1000, [(hit.document, hit.text) for hit in hits]


async def run(args: argparse.Namespace, database_url: str) -> None:
    names = args.catalogue or sorted(p.name for p in CATALOGUES.iterdir() if (p / "questions.json").exists())
    bench = await kb_common.setup(database_url, tenants=len(names), prefix="catalogue")
    print(f"catalogues {', '.join(names)}; {kb_common.machine_line()}")
    started, chunks, files = time.perf_counter(), 0, 0
    for tenant, name in enumerate(names):
        for path in sorted((CATALOGUES / name).iterdir()):
            if path.name == "questions.json":
                continue
            chunks += await kb_common.ingest_file(
                bench, bench.tenant_ids[tenant], path.name, path.read_bytes()
            )
            files += 1
    print(f"ingested {files} files, {chunks} chunks in {time.perf_counter() - started:.1f} s")
    entities = await bench.conn.fetchrow(
        "SELECT (SELECT count(*) FROM kg_entities WHERE tenant_id = ANY($1)) AS entities, "
        "(SELECT count(*) FROM kg_relations WHERE tenant_id = ANY($1)) AS relations",
        bench.tenant_ids,
    )
    print(f"graph: {entities['entities']} entities, {entities['relations']} relations")
    total = await bench.conn.fetchval("SELECT count(*) FROM knowledge_documents")
    print(f"chunks in the table, every tenant: {total}")
    questions = load_questions(names)
    groups = {
        "multi tuning": lambda q: q.kind in MULTI_KINDS and q.half == "tuning",
        "multi held-out": lambda q: q.kind in MULTI_KINDS and q.half == "held_out",
        "single": lambda q: q.kind == "single-hop",
        "exact": lambda q: q.kind == "exact-code",
    }
    counts = {group: sum(1 for q in questions if test(q)) for group, test in groups.items()}
    print(
        f"{len(questions)} questions: "
        + ", ".join(f"{group} {count}" for group, count in counts.items())
        + "; recall@5 of supporting items (all@5: share of multi questions with every item in the top 5)"
    )
    print(
        f"  {'mode':<18}"
        + "".join(f"{g:>16}" for g in groups)
        + f"{'all@5 tun':>11}{'all@5 held':>11}{'p50 ms':>9}{'p95 ms':>9}"
    )
    for label, mode, use_graph in MODES:
        if args.modes and label not in args.modes.split(","):
            continue
        found = dict.fromkeys(groups, 0)
        wanted = dict.fromkeys(groups, 0)
        complete = {"tuning": 0, "held_out": 0}
        latencies = []
        shown = []
        for question in questions:
            tenant = names.index(question.catalogue)
            ms, hits = await search(bench, tenant, question.text, mode, use_graph)
            latencies.append(ms)
            got = supported(question, hits)
            for group, test in groups.items():
                if test(question):
                    found[group] += sum(got)
                    wanted[group] += len(got)
            if question.kind in MULTI_KINDS and all(got):
                complete[question.half] += 1
            if (
                args.show
                and question.half == args.show.replace("-", "_")
                and label in (args.show_modes or label)
            ):
                shown.append((question, got, hits))
        multi_t = sum(1 for q in questions if q.kind in MULTI_KINDS and q.half == "tuning")
        multi_h = sum(1 for q in questions if q.kind in MULTI_KINDS and q.half == "held_out")
        print(
            f"  {label:<18}"
            + "".join(f"{found[g] / max(1, wanted[g]):>16.3f}" for g in groups)
            + f"{complete['tuning'] / max(1, multi_t):>11.2f}{complete['held_out'] / max(1, multi_h):>11.2f}"
            + f"{percentile(latencies, 50):>9.1f}{percentile(latencies, 95):>9.1f}"
        )
        for question, got, hits in shown:
            mark = "ok " if all(got) else "MISS"
            print(f"    {mark} [{question.catalogue} {question.kind}] {question.text}")
            for (filename, marker), ok in zip(question.support, got, strict=True):
                print(f"        {'+' if ok else '-'} {filename} {marker or ''}")
            for document, text in hits:
                print(f"          hit {document}: {' '.join(text.split())[:90]}")
    print(f"done; {kb_common.machine_line()}")
    await bench.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--catalogue", action="append", help="a folder of loadtests/catalogues (default: all)"
    )
    parser.add_argument(
        "--modes", help="comma-separated modes (default: all): " + ",".join(m[0] for m in MODES)
    )
    parser.add_argument(
        "--show", choices=("tuning", "held-out"), help="print each question of that half with its hits"
    )
    parser.add_argument("--show-modes", help="with --show: only these modes (comma-separated)")
    parser.add_argument("--database-url", help="use this server instead of an embedded one")
    parser.add_argument(
        "--data-dir",
        help="use the embedded PostgreSQL kept in this folder by kb_graph_benchmark.py --data-dir "
        "(latency at 100,000 chunks)",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    kb_common.run_with_database(args, run, service="kb-catalogue-benchmark")
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
