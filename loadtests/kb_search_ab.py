"""``search_chunks`` of another checkout against this one, interleaved question by question.

Run (after ``kb_graph_benchmark.py --data-dir KB100K`` has loaded it once; ``BASE``: the checkout to compare
with, e.g. a git worktree of an earlier commit)::

    .venv/bin/python loadtests/kb_search_ab.py --data-dir KB100K --base BASE

``BASE/libs/switchboard/knowledge/retrieval.py`` is loaded as a module of its own next to this
checkout's (its imports resolve to this checkout's other modules, so only ``retrieval.py`` may differ
between the two: check with ``git diff BASE_COMMIT -- libs``). For ``--questions`` of the benchmark's
questions (each asked twice, tenants in turn), per mode (``vector``, ``hybrid``, ``neighborhood``):
both ``search_chunks`` end to end, each in its own transaction on the same pool, in alternating
order. It prints p50 / p95 of each, the median of the per-question ratio (on a shared machine the
figure to trust: both sides see the same moment's load) and how many questions gave identical chunk
ids in identical order.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadtests import kb_common  # noqa: E402
from tests.utils.graph_corpus import questions  # noqa: E402


def _load_base(base: Path):  # type: ignore[no-untyped-def]
    path = base / "libs" / "switchboard" / "knowledge" / "retrieval.py"
    spec = importlib.util.spec_from_file_location("kb_search_ab_base_retrieval", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


async def compare(args: argparse.Namespace, url: str) -> None:
    from switchboard.knowledge import retrieval

    sides = {"base": _load_base(Path(args.base)).search_chunks, "branch": retrieval.search_chunks}
    state = kb_common.load_state(args, "graph")
    if state is None:
        raise SystemExit(f"nothing loaded in {args.data_dir}: run kb_graph_benchmark.py --data-dir first")
    bench = await kb_common.attach(url, state["tenant_ids"])
    print(f"{args.chunks} chunks over {args.tenants} tenants; {kb_common.machine_line()}", flush=True)
    asked = [q.text for q in questions()]
    random.Random(3).shuffle(asked)
    asked = asked[: args.questions] * 2
    for mode in ("vector", "hybrid", "neighborhood"):
        timings: dict[str, list[float]] = {"base": [], "branch": []}
        identical = 0
        for number, question in enumerate(asked):
            tenant_id = bench.tenant_ids[number % len(bench.tenant_ids)]
            found: dict[str, list[int]] = {}
            for side in ("base", "branch") if number % 2 else ("branch", "base"):
                started = time.perf_counter()
                async with bench.sessions() as session, session.begin():
                    hits = await sides[side](
                        session, tenant_id=tenant_id, query=question, mode=mode, settings=bench.settings
                    )
                timings[side].append((time.perf_counter() - started) * 1000)
                found[side] = [hit.chunk_id for hit in hits]
            identical += found["base"] == found["branch"]
        p50, p95, ratio = kb_common.paired_summary(timings, "base", "branch")
        print(
            f"  {mode:<12} search_chunks p50 / p95 ms: base {p50['base']:.2f} / {p95['base']:.2f}, "
            f"branch {p50['branch']:.2f} / {p95['branch']:.2f}; median ratio branch/base {ratio:.3f}; "
            f"identical results {identical}/{len(asked)}; {kb_common.machine_line()}",
            flush=True,
        )
    await bench.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    kb_common.add_common_arguments(parser, ingest_chunks=1000)
    parser.add_argument(
        "--base", required=True, help="checkout whose libs/.../knowledge/retrieval.py is the base"
    )
    parser.add_argument("--questions", type=int, default=90, help="distinct questions (each asked twice)")
    args = parser.parse_args()
    if not args.data_dir:
        parser.error("--data-dir is required (a folder loaded by kb_graph_benchmark.py --data-dir)")
    kb_common.resolve_sizes(args)
    kb_common.run_with_database(args, compare, service="kb-search-ab")


if __name__ == "__main__":
    main()
