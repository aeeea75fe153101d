"""Cost of one MCP tool call as the orchestrator makes it.

The ``mcp_tools`` service runs as its own process (``uvicorn services.mcp_tools.main:create_app``)
on a free loopback port; the orchestrator's :class:`~switchboard.tools.mcp_client.McpToolSource`
calls ``lookup_product`` on the seeded demo catalog. Each call includes what a turn pays: toolbox
check, limits from receipts, schema validation, the call over Streamable HTTP on a pooled MCP session
(not one of its own per call: initialize, call, close), the server's tenant/permission
checks and query, result validation, and the receipt.

Printed figures: discovery (``list_tools``) milliseconds; per-call p50/p95 milliseconds for
sequential calls; the HTTP requests the source sent during the sequential calls, by JSON-RPC method
(``initialize`` counts the MCP sessions opened: 0 when every call reused the pooled one) and
``DELETE`` (sessions closed); calls per second with 20 concurrent callers.

Run (from the repository root): ``.venv/bin/python loadtests/mcp_tools_bench.py [--calls 200]``
(``--quick``: 100 calls, well under 2 minutes).
Uses ``DATABASE_URL`` if set, else an embedded Postgres in a temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import secrets
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from switchboard.db.engine import create_engine, session_factory  # noqa: E402
from switchboard.db.migrate import upgrade  # noqa: E402
from switchboard.db.models import Conversation, Customer  # noqa: E402
from switchboard.observability import configure_logging  # noqa: E402
from switchboard.runtime.embedded import EmbeddedPostgres  # noqa: E402
from switchboard.seed import seed_demo_business  # noqa: E402
from switchboard.tenants import create_tenant  # noqa: E402
from switchboard.tools.context import ToolContext  # noqa: E402
from switchboard.tools.mcp_client import McpToolSource  # noqa: E402

CAPABILITY_KEY = secrets.token_urlsafe(32)
"""``TOOL_CAPABILITY_KEY`` of the server process and of the tool source (the turn capability's key)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def _start_server(database_url: str, port: int = 0) -> tuple[subprocess.Popen, str, str]:
    """Start the mcp_tools service; ``(process, MCP url, token)`` once ``/healthz`` answers 200."""
    token, port = secrets.token_urlsafe(24), port or _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "MCP_SERVICE_TOKEN": token,
        "LOG_LEVEL": "WARNING",
        "TOOL_CAPABILITY_KEY": CAPABILITY_KEY,
    }
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "services.mcp_tools.main:create_app",
            "--factory",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300  # a loaded 2-core machine imports the service slowly
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
        if time.monotonic() > deadline or server.poll() is not None:
            server.terminate()
            raise RuntimeError("the mcp_tools service did not become healthy")
    return server, f"http://127.0.0.1:{port}/mcp", token


async def _bench(database_url: str, url: str, token: str, calls: int, concurrency: int) -> None:
    engine = create_engine(database_url, pool_size=concurrency)
    sessions = session_factory(engine)
    async with sessions() as session, session.begin():
        tenant = await create_tenant(session, slug=f"bench-{uuid.uuid4().hex[:8]}", name="Bench")
        await seed_demo_business(session, tenant.id)
        customer = Customer(tenant_id=tenant.id, channel="whatsapp", external_user_id="bench")
        session.add(customer)
        await session.flush()
        conversation = Conversation(tenant_id=tenant.id, customer_id=customer.id, channel="whatsapp")
        session.add(conversation)

    try:
        source = McpToolSource(
            url=url, token=token, capability_key=CAPABILITY_KEY, sessions=sessions, discovery_timeout_s=60
        )

        def ctx() -> ToolContext:
            return ToolContext(
                tenant_id=tenant.id,
                customer_id=customer.id,
                conversation_id=conversation.id,
                trace_id=uuid.uuid4().hex,
                sessions=sessions,
            )

        started = time.perf_counter()
        tools = await source.discover(force=True)
        discovery_ms = (time.perf_counter() - started) * 1000
        assert "lookup_product" in tools, "discovery failed"

        for _ in range(10):  # warm-up
            await source.call("lookup_product", {"sku_or_name": "FVAM-2050-B"}, ctx())
        sent: collections.Counter[str] = collections.Counter()

        async def count(request: Any) -> None:  # an extra hook on the source's own HTTP client
            if request.method != "POST":
                sent[request.method] += 1
                return
            try:
                sent[json.loads(request.content).get("method", "?")] += 1
            except ValueError:
                sent["POST (not JSON)"] += 1

        source._http.event_hooks["request"].append(count)  # type: ignore[union-attr]
        durations = []
        for _ in range(calls):
            t0 = time.perf_counter()
            out = await source.call("lookup_product", {"sku_or_name": "FVAM-2050-B"}, ctx())
            durations.append((time.perf_counter() - t0) * 1000)
            assert out.content["products"][0]["sku"] == "FVAM-2050-B"
        by_method = ", ".join(f"{method} {n}" for method, n in sent.most_common()) or "none"

        async def worker(n: int) -> None:
            for _ in range(n):
                await source.call("lookup_product", {"sku_or_name": "FVAM-2050-B"}, ctx())

        per_worker = max(1, calls // concurrency)
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(per_worker) for _ in range(concurrency)))
        rate = per_worker * concurrency / (time.perf_counter() - t0)
        await source.aclose()

        print(f"discovery (list_tools, cold): {discovery_ms:.1f} ms")
        print(
            f"lookup_product via McpToolSource, {calls} sequential calls: "
            f"p50 {statistics.median(durations):.1f} ms, p95 {_percentile(durations, 95):.1f} ms"
        )
        print(f"HTTP requests during the {calls} sequential calls, by method: {by_method}")
        print(f"{concurrency} concurrent callers: {rate:.0f} calls/s")
    finally:
        await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="100 calls (under 2 minutes)")
    parser.add_argument(
        "--port", type=int, default=0, help="the mcp_tools service's loopback port (a free one)"
    )
    args = parser.parse_args()
    if args.quick:
        args.calls = 100
    configure_logging(service="bench", level="WARNING", fmt="console")
    database_url = os.environ.get("DATABASE_URL")
    pg = None
    if not database_url:
        folder = Path(tempfile.mkdtemp(prefix="switchboard-bench-"))
        folder.chmod(0o755)
        pg = EmbeddedPostgres(folder / "postgres")
        database_url = pg.start()
    server = None
    try:
        upgrade(database_url)
        server, url, token = _start_server(database_url, args.port)
        asyncio.run(_bench(database_url, url, token, args.calls, args.concurrency))
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
        if pg is not None:
            pg.stop()


if __name__ == "__main__":
    main()
