"""Orchestrator harness overhead and throughput with a zero-latency offline model.

Each turn is "one tool call + one answer": the offline demo model calls the knowledge-search tool
with the customer's words, then quotes the passage. The model server runs as its own process
(``services.model_server``) on a free loopback port and answers instantly, so what is measured is
the orchestrator: Postgres reads/writes of the turn, prompt building, trimming/token counting, the
LiteLLM Router and HTTP client, and the tool loop.

Printed figures:
* per turn, measured inside the orchestrator (``turns.timings``): ``total_ms`` (whole turn) and
  ``harness_ms`` (total minus time spent inside model calls, the input guardrail's model call and tools),
  p50/p95, sequential turns;
* the whole ``handle_turn`` call timed by the caller, and its harness (the call minus the same model,
  guardrail-model and tool time): the stored ``total_ms`` ends before the turn is persisted and its
  lead checked, so the whole call is the figure of the "turn harness" target;
* CPU time of this process per sequential turn (the model server runs in another process): steadier
  than wall time on a loaded machine;
* turns per second with 50 concurrent turns (each on its own conversation);
* SQL statements (and ORM flushes) per sequential turn by kind (a ``before_cursor_execute`` listener: exact,
  load-independent) and, with ``--statements``, every statement of one turn, transaction by transaction
  (the claim first, then the persist), each as its first words and the tables it names.

Run (from the repository root): ``.venv/bin/python loadtests/orchestrator_overhead.py [--turns 200]``
(``--quick``: 100 turns, well under 2 minutes; ``--profile FILE``: cProfile of the sequential turns
written to FILE, read it with ``python -m pstats FILE``; ``--statements``: list one turn's statements).
For an A/B, run the other checkout's code with ``PYTHONPATH=OTHER/libs:OTHER`` interleaved.
Uses ``DATABASE_URL`` if set, else an embedded Postgres in a temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import functools
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import event
from sqlalchemy.orm import Session as OrmSession

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlmodel import col, select  # noqa: E402
from switchboard.agent import Orchestrator, ToolContext, ToolOutput  # noqa: E402
from switchboard.contracts import TurnRequest  # noqa: E402
from switchboard.crypto import CredentialCipher  # noqa: E402
from switchboard.db.engine import create_engine, session_factory  # noqa: E402
from switchboard.db.migrate import upgrade  # noqa: E402
from switchboard.db.models import Conversation, Customer, Turn  # noqa: E402
from switchboard.llm.router import ModelGateway  # noqa: E402
from switchboard.observability import configure_logging  # noqa: E402
from switchboard.runtime.embedded import EmbeddedPostgres  # noqa: E402
from switchboard.settings import load_settings  # noqa: E402
from switchboard.tenants import create_tenant  # noqa: E402

PASSAGE = "Orders ship within 2 business days; tracking is e-mailed when the parcel leaves."


class KnowledgeToolSet:
    """A fixed knowledge-search tool (no database), so the figure is the orchestrator's own cost."""

    async def definitions(self, ctx: ToolContext) -> list[dict[str, Any]]:
        return [
            {
                "type": "function",
                "function": {
                    "name": "search_knowledge",
                    "description": "Search the shop's documents.",
                    "parameters": {
                        "type": "object",
                        "properties": {"query": {"type": "string"}},
                        "required": ["query"],
                    },
                },
            }
        ]

    async def call(self, name: str, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput({"results": [{"text": PASSAGE, "score": 0.91}]})


class StatementLog:
    """Every SQL statement the engine sends, and where each transaction begins and ends (engine events:
    ``begin``, ``commit``, ``rollback``, ``savepoint``, ``before_cursor_execute``)."""

    def __init__(self, engine: Any) -> None:
        self.entries: list[str] = []
        self.kinds: collections.Counter[str] = collections.Counter()
        self.recording = False
        sync = engine.sync_engine
        event.listen(sync, "before_cursor_execute", self._statement)
        for name in ("begin", "commit", "rollback"):
            event.listen(sync, name, functools.partial(self._mark, name.upper()))
        self.flushes = 0
        event.listen(OrmSession, "after_flush", self._flushed)

    def _flushed(self, session: Any, flush_context: Any) -> None:
        if self.recording:
            self.flushes += 1
            self.entries.append("-- (ORM flush)")

    def _mark(self, name: str, conn: Any) -> None:
        if self.recording:
            self.entries.append(f"-- {name}")

    def _statement(self, conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        if not self.recording:
            return
        words = statement.split()
        kind = words[0].upper() if words else "?"
        self.kinds[kind] += 1
        tables = dict.fromkeys(re.findall(r"(?:FROM|JOIN|INTO|UPDATE)\s+([a-z_]+)", statement))
        self.entries.append(f"{kind} {' '.join(tables)}  [{context._get_cache_stats()}]")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def _conversations(sessions, tenant_id: uuid.UUID, count: int) -> list[tuple[uuid.UUID, uuid.UUID]]:  # type: ignore[no-untyped-def]
    pairs = []
    async with sessions() as session, session.begin():
        for index in range(count):
            customer = Customer(
                tenant_id=tenant_id, channel="whatsapp", external_user_id=f"load-{uuid.uuid4().hex}-{index}"
            )
            session.add(customer)
            await session.flush()
            conversation = Conversation(tenant_id=tenant_id, customer_id=customer.id, channel="whatsapp")
            session.add(conversation)
            pairs.append((customer.id, conversation.id))
    return pairs


def _request(tenant_id: uuid.UUID, pair: tuple[uuid.UUID, uuid.UUID]) -> TurnRequest:
    return TurnRequest(
        tenant_id=tenant_id,
        conversation_id=pair[1],
        inbound_message_id=uuid.uuid4(),
        channel="whatsapp",
        customer_id=pair[0],
        text="When will my order ship?",
    )


_TICK_S = 1 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


def _proc_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of one process and its reaped children, from ``/proc`` (Linux); 0.0 if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # after the command: state ppid ... utime(12) stime(13) cutime(14) cstime(15), 0-based from state
    return sum(int(f) for f in fields[11:15]) * _TICK_S


def _tree_cpu_s(root: int) -> float:
    """CPU seconds of ``root`` plus its live children (Postgres backends are the postmaster's children)."""
    total = _proc_cpu_s(root)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == root:
                total += _proc_cpu_s(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return total


def _postmaster_pid(data_dir: Path | None) -> int | None:
    """The embedded Postgres's postmaster pid (``postmaster.pid`` under its data dir), None when not ours."""
    if data_dir is None:
        return None
    try:
        return int((data_dir / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


async def run(
    database_url: str,
    model_url: str,
    turns: int,
    concurrency: int,
    profile: str | None = None,
    server_pid: int | None = None,
    pg_dir: Path | None = None,
    list_statements: bool = False,
) -> None:
    settings = load_settings(
        database_url=database_url,
        _env_file=None,
        data_dir=Path(tempfile.mkdtemp()),
        egress_allow_loopback=True,  # the tenant's deployment is the model server on this machine
    )
    engine = create_engine(database_url, pool_size=concurrency)
    statements = StatementLog(engine)
    sessions = session_factory(engine)
    async with sessions() as session, session.begin():
        tenant = await create_tenant(session, slug=f"load-{uuid.uuid4().hex[:8]}", name="Load test shop")
        tenant.settings_extensions = {
            "llm": {
                "deployments": [
                    {
                        "id": "offline-zero",
                        "provider": "offline",
                        "model": "offline-demo",
                        "api_base": model_url + "/v1",
                    }
                ]
            }
        }
    gateway = ModelGateway(
        settings=settings,
        cipher=CredentialCipher(settings.secret("encryption_key").encode()),
        max_concurrent_calls=50,
    )
    orchestrator = Orchestrator(sessions=sessions, gateway=gateway, toolsets=[KnowledgeToolSet()])

    warm = await _conversations(sessions, tenant.id, 10)
    for pair in warm:  # warm-up: imports, connection pool, HTTP keep-alive, token counter
        await orchestrator.handle_turn(_request(tenant.id, pair))

    pairs = await _conversations(sessions, tenant.id, turns)
    one_turn: list[str] = []
    if list_statements:  # one turn on its own, before the measured ones (the listener costs a little)
        statements.recording = True
        await orchestrator.handle_turn(_request(tenant.id, (await _conversations(sessions, tenant.id, 1))[0]))
        statements.recording = False
        one_turn, statements.entries = statements.entries, []
        statements.kinds.clear()
        statements.flushes = 0
    statements.recording = True
    seq_ids = []
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    walls: dict[uuid.UUID, float] = {}
    cpu_started = time.process_time()
    postmaster = _postmaster_pid(pg_dir)
    server_started = _tree_cpu_s(server_pid) if server_pid else 0.0
    pg_started = _tree_cpu_s(postmaster) if postmaster else 0.0
    for pair in pairs:
        request = _request(tenant.id, pair)
        wall_started = time.perf_counter()
        result = await orchestrator.handle_turn(request)
        walls[request.inbound_message_id] = (time.perf_counter() - wall_started) * 1000
        assert (
            result.reply
            and PASSAGE in result.reply
            and [c.name for c in result.tool_calls] == ["search_knowledge"]
        )
        seq_ids.append(request.inbound_message_id)
    cpu_ms = (time.process_time() - cpu_started) * 1000 / len(pairs)
    statements.recording = False
    kinds = {kind: n / len(pairs) for kind, n in statements.kinds.most_common()}
    flushes = statements.flushes / len(pairs)
    server_cpu_ms = ((_tree_cpu_s(server_pid) - server_started) * 1000 / len(pairs)) if server_pid else None
    pg_cpu_ms = ((_tree_cpu_s(postmaster) - pg_started) * 1000 / len(pairs)) if postmaster else None
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    async with sessions() as session:
        rows = (await session.exec(select(Turn).where(col(Turn.inbound_message_id).in_(seq_ids)))).all()
    totals = [row.timings["total_ms"] for row in rows]
    harness = [row.timings["harness_ms"] for row in rows]
    model = [row.timings["model_ms"] for row in rows]
    guard = [row.timings.get("guardrail_model_ms", 0.0) for row in rows]
    # the stored total ends before the turn is persisted and its lead checked: the whole call, timed
    # here, minus the same model, guardrail-model and tool time, is the harness of the whole turn
    whole = [walls[row.inbound_message_id] for row in rows]
    whole_harness = [
        max(
            0.0,
            walls[row.inbound_message_id]
            - row.timings["model_ms"]
            - row.timings.get("guardrail_model_ms", 0.0)
            - row.timings["tool_ms"],
        )
        for row in rows
    ]

    pairs = await _conversations(sessions, tenant.id, turns)
    semaphore = asyncio.Semaphore(concurrency)

    async def one(pair: tuple[uuid.UUID, uuid.UUID]) -> None:
        async with semaphore:
            result = await orchestrator.handle_turn(_request(tenant.id, pair))
            assert result.reply

    started = time.perf_counter()
    await asyncio.gather(*(one(pair) for pair in pairs))
    elapsed = time.perf_counter() - started
    await engine.dispose()

    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"turns measured sequentially: {len(rows)} (1 tool call + 1 answer each, 2 model calls per turn)")
    print(
        f"turn total inside orchestrator:   p50 {_percentile(totals, 0.5):7.1f} ms   p95 {_percentile(totals, 0.95):7.1f} ms"
    )
    print(
        f"  of which in model calls:        p50 {_percentile(model, 0.5):7.1f} ms   p95 {_percentile(model, 0.95):7.1f} ms"
        "  (LiteLLM Router + HTTP to a zero-latency server)"
    )
    print(
        f"  and in the input guardrail's model call: p50 {_percentile(guard, 0.5):7.1f} ms   p95 {_percentile(guard, 0.95):7.1f} ms"
    )
    print(
        f"harness overhead (total - model - guardrail model - tools): p50 {_percentile(harness, 0.5):7.1f} ms   p95 {_percentile(harness, 0.95):7.1f} ms"
    )
    print(
        f"whole handle_turn call (with persist + lead check): p50 {_percentile(whole, 0.5):7.1f} ms   p95 {_percentile(whole, 0.95):7.1f} ms"
    )
    print(
        f"harness of the whole call (call - model - guardrail model - tools): p50 {_percentile(whole_harness, 0.5):7.1f} ms   p95 {_percentile(whole_harness, 0.95):7.1f} ms"
    )
    print(f"CPU of this process per sequential turn: {cpu_ms:.1f} ms (the model server is another process)")
    split = [f"orchestrator {cpu_ms:.1f}"]
    if server_cpu_ms is not None:
        split.append(f"model server {server_cpu_ms:.1f}")
    if pg_cpu_ms is not None:
        split.append(f"Postgres {pg_cpu_ms:.1f}")
    print(
        f"CPU per sequential turn by process (ms): {', '.join(split)} (cProfile, if on, inflates the first)"
    )
    print(
        f"SQL statements per sequential turn: {sum(kinds.values()):.1f} ("
        + ", ".join(f"{kind} {n:.1f}" for kind, n in kinds.items())
        + f"); ORM flushes {flushes:.1f}"
    )
    if one_turn:
        print("statements of one turn (transaction by transaction):")
        for entry in one_turn:
            print(f"  {entry}")
    print(f"mean total {statistics.fmean(totals):.1f} ms")
    print(
        f"throughput at {concurrency} concurrent turns: {turns / elapsed:.1f} turns/s ({turns} turns in {elapsed:.2f} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="100 turns (under 2 minutes)")
    parser.add_argument("--port", type=int, default=0, help="the model server's loopback port (a free one)")
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of the sequential turns to FILE")
    parser.add_argument(
        "--statements", action="store_true", help="list every SQL statement of one turn, by transaction"
    )
    args = parser.parse_args()
    if args.quick:
        args.turns = 100
    configure_logging(service="loadtest", level="WARNING", fmt="console")

    port = args.port or _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "services.model_server.main:create_app",
            "--factory",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        cwd=Path(__file__).resolve().parents[1],
        env={**os.environ, "LOG_LEVEL": "WARNING"},
    )
    pg = None
    pg_dir = None  # only the embedded cluster's CPU is counted (DATABASE_URL may be shared)
    try:
        model_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(model_url + "/healthz", timeout=0.5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        database_url = os.environ.get("DATABASE_URL")
        if not database_url:
            pg_dir = Path(tempfile.mkdtemp(prefix="sb-load-")) / "postgres"
            pg = EmbeddedPostgres(pg_dir)
            database_url = pg.start()
        upgrade(database_url)
        asyncio.run(
            run(
                database_url,
                model_url,
                args.turns,
                args.concurrency,
                args.profile,
                server.pid,
                pg_dir,
                args.statements,
            )
        )
    finally:
        server.terminate()
        server.wait(10)
        if pg is not None:
            pg.stop()


if __name__ == "__main__":
    main()
